"""create_app: the Litestar application over a dishka container."""

from __future__ import annotations

from typing import Any

import msgspec
from dishka import AsyncContainer
from dishka.integrations.litestar import DishkaRouter, setup_dishka
from litestar import Litestar, Router
from litestar._openapi.plugin import OpenAPIPlugin
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme, Server

from entrypoints import features
from entrypoints.http import asgi
from entrypoints.http.envelope import EXCEPTION_HANDLERS
from entrypoints.http.pipeline import RequestPipeline
from entrypoints.http.routes import accounts, agents, meta
from entrypoints.settings import Settings

API_TITLE = "Parley Partner API"
MAX_BODY = 1024 * 1024
ROUTE_MODULES = [meta, agents, accounts]


class _NoSchemaRoutes(Router):
    """Keeps Litestar's own schema endpoints out: Parley serves /openapi.json itself."""

    def register(self, value: Any) -> list[Any]:  # type: ignore[override]
        return []


def _openapi_document(app: Litestar) -> bytes:
    schema = app.plugins.get(OpenAPIPlugin).provide_openapi().to_schema()
    paths = {}
    for path, item in schema.get("paths", {}).items():
        if path.startswith(asgi.API_PREFIX):
            paths[path[len(asgi.API_PREFIX):] or "/"] = item
    schema["paths"] = dict(sorted(paths.items()))
    schema["servers"] = [
        {"url": asgi.PRIMARY_PREFIX, "description": "Primary host ({base_url})"},
        {"url": asgi.API_PREFIX, "description": "Dashboard host ({dashboard_base_url})"},
    ]
    return msgspec.json.encode(schema)


def route_handlers() -> list[Any]:
    handlers: list[Any] = []
    for module in ROUTE_MODULES:
        handlers.extend(module.ROUTES)
    for feature in features.modules():
        handlers.extend(getattr(feature, "ROUTES", []))
    return handlers


def create_app(container: AsyncContainer, settings: Settings) -> Litestar:
    api = DishkaRouter(path=asgi.API_PREFIX, route_handlers=route_handlers())
    openapi = OpenAPIConfig(
        title=API_TITLE,
        version=meta.API_VERSION,
        description="Scoped Bearer API for voice AI agents, calls, scheduling and webhooks.",
        components=Components(security_schemes={
            "BearerAuth": SecurityScheme(type="http", scheme="bearer", bearer_format="parley_sk_..."),
        }),
        servers=[Server(url=asgi.PRIMARY_PREFIX), Server(url=asgi.API_PREFIX)],
        openapi_router=_NoSchemaRoutes(path="/_schema", route_handlers=[]),
        use_handler_docstrings=False,
        create_examples=False,
    )

    async def on_startup(app: Litestar) -> None:
        app.state["openapi_bytes"] = _openapi_document(app)

    async def on_shutdown(_: Litestar) -> None:
        await container.close()

    app = Litestar(
        route_handlers=[api],
        middleware=[RequestPipeline],
        exception_handlers=EXCEPTION_HANDLERS,
        openapi_config=openapi,
        request_max_body_size=MAX_BODY,
        on_startup=[on_startup],
        on_shutdown=[on_shutdown],
        debug=False,
        logging_config=None,
    )
    app.state["settings"] = settings
    setup_dishka(container, app)
    app.asgi_handler = asgi.wrap(app.asgi_handler)
    return app
