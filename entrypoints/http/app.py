"""create_app: the Litestar application over a dishka container."""

from __future__ import annotations

import re
from typing import Any

from dishka import AsyncContainer
from dishka.integrations.litestar import DishkaRouter, setup_dishka
from litestar import Litestar, Request, Router
from litestar.datastructures import FormMultiDict
from litestar.exceptions import HTTPException, SerializationException
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme, Server

from domain.errors import ValidationFailed
from entrypoints.features.media import MediaSettings
from entrypoints.http import asgi, dashboard, media, methods, multipart, routes
from entrypoints.http.dashboard.errors import routing_error
from entrypoints.http.dashboard.templating import template_config
from entrypoints.http.envelope import EXCEPTION_HANDLERS, ROUTING_EXCEPTION_HANDLERS
from entrypoints.http.parameters import refuse_loose_integers
from entrypoints.http.pipeline import RequestPipeline
from entrypoints.http.routes import meta
from entrypoints.http.routing import SESSION_COOKIE, SESSION_SCHEME, WIDGET_SCHEME, access_of, is_stream
from entrypoints.observability import read_backlog
from entrypoints.settings import Settings

API_TITLE = "Parley Partner API"
MAX_BODY = 1024 * 1024


class _NoSchemaRoutes(Router):
    """Keeps Litestar's own schema endpoints out: Parley serves /openapi.json itself."""

    def register(self, value: Any) -> list[Any]:
        return []


def _nul_field(value: Any, path: str = "") -> str | None:
    """The field holding a string with a NUL character ("" for the body itself), if any."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            if "\x00" in str(key):
                return path
            found = _nul_field(item, f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _nul_field(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


BIGINT_MIN, BIGINT_MAX = -(2**63), 2**63 - 1  # what an integer column holds on both databases
_LONG_NUMBER = re.compile(rb"[0-9]{19}")


def _huge_integer_field(value: Any, path: str = "") -> str | None:
    """The field holding an integer no database integer column can hold ("" for the body itself), if any."""
    if isinstance(value, int) and not isinstance(value, bool):
        return path if not BIGINT_MIN <= value <= BIGINT_MAX else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _huge_integer_field(item, (f"{path}.{key}" if path else str(key)) if isinstance(key, str)
                                    else f"{path}[{key}]")
        if found is not None:
            return found
    return None


class JsonRequest(Request[Any, Any, Any]):
    """Checks a JSON body at the edge: its media type (415 unsupported_media_type), its encoding and depth,
    NUL characters, which no PostgreSQL text or JSONB column can hold, and integers beyond what an integer
    column holds (400 with the field named), so none of them reaches a database driver as a 500.
    A multipart body is read by ``entrypoints.http.multipart`` (400 naming the field for text that is not
    UTF-8, 400 for a body that is not well-formed multipart)."""

    _FORM = "parley_multipart_form"  # the parsed form, kept in the request's state: the body is read once

    async def form(self) -> FormMultiDict:
        media_type, options = self.content_type
        if media_type != "multipart/form-data":
            return await super().form()
        fields = self.state.get(self._FORM)
        if fields is None:
            fields = await multipart.parse_form(self.stream(), options)
            self.state[self._FORM] = fields
        return FormMultiDict([(name, value) for name, values in fields.items() for value in values])

    async def json(self) -> Any:
        body = await self.body()
        if body:
            media_type, _ = self.content_type
            if media_type and media_type != "application/json" and not media_type.endswith("+json"):
                raise HTTPException(status_code=415, detail="The request body must be JSON: "
                                                            "send Content-Type: application/json")
        try:
            value = await super().json()
        except SerializationException as exc:
            raise ValidationFailed("Request body is not valid JSON",
                                   details={"validation_errors": {"body": str(exc)}}) from None
        except UnicodeDecodeError:
            raise ValidationFailed("Request body is not UTF-8", details={"validation_errors": {
                "body": "must be JSON encoded as UTF-8"}}) from None
        except RecursionError:
            raise ValidationFailed("Request body is nested too deeply", details={"validation_errors": {
                "body": "must not nest arrays and objects this deeply"}}) from None
        if b"\\u0000" in body:
            try:
                field = _nul_field(value)
            except RecursionError:
                field = ""
            if field is not None:
                raise ValidationFailed.field(field or "body", "must not contain NUL (\\u0000) characters")
        if _LONG_NUMBER.search(body):  # an integer of 19 digits or more may not fit any integer column
            try:
                field = _huge_integer_field(value)
            except RecursionError:
                field = ""
            if field is not None:
                raise ValidationFailed.field(field or "body",
                                             f"must be a whole number from {BIGINT_MIN} to {BIGINT_MAX}")
        return value


def route_handlers() -> list[Any]:
    """The routes of the core and of every feature (the HTTP side of the composition root's registry, kept in
    ``entrypoints/http/routes``; a test checks both name the same features)."""
    return routes.route_handlers(sorted(name for name in routes.ROUTES if name != "core"))


class UndeclaredAccess(RuntimeError):
    """A route handler not built through ``endpoint()``: no authenticator would guard it."""


def require_declared_access(handlers: list[Any]) -> None:
    """Refuses (at start-up) any route whose access is not declared with ``endpoint(...)``."""
    for handler in handlers:
        if access_of(getattr(handler, "opt", None) or {}) is None:
            name = getattr(handler, "handler_name", None) or repr(handler)
            paths = ", ".join(sorted(getattr(handler, "paths", ()) or ()))
            raise UndeclaredAccess(
                f"route {name} ({paths}) declares no access: declare it with "
                "entrypoints.http.routing.endpoint(..., scopes=..., auth=...)")


def api_router(handlers: list[Any]) -> Router:
    """The JSON API: its routes, the request pipeline around each of them and the JSON error envelopes.
    Another surface (the dashboard's HTML) mounts as its own router with its own pipeline and handlers."""
    require_declared_access(handlers)
    return DishkaRouter(path=asgi.API_PREFIX, route_handlers=handlers, middleware=[RequestPipeline],
                        exception_handlers=EXCEPTION_HANDLERS, before_request=refuse_loose_integers)


def stream_router(handlers: list[Any]) -> Router:
    """The websocket routes (``stream_endpoint``: the media streams) under the API's prefix, without the HTTP
    request pipeline: each redeems its own credential before it reads a frame."""
    require_declared_access(handlers)
    return Router(path=asgi.API_PREFIX, route_handlers=handlers, include_in_schema=False)


def create_app(container: AsyncContainer, settings: Settings, handlers: list[Any] | None = None) -> Litestar:
    """``handlers``: the API's routes (default: ``route_handlers()``)."""
    every = route_handlers() if handlers is None else handlers
    api = api_router([handler for handler in every if not is_stream(handler)])
    streams = [handler for handler in every if is_stream(handler)]
    openapi = OpenAPIConfig(
        title=API_TITLE,
        version=meta.API_VERSION,
        description="Scoped Bearer API for voice AI agents, calls, scheduling and webhooks.",
        components=Components(security_schemes={
            "BearerAuth": SecurityScheme(type="http", scheme="bearer", bearer_format="parley_sk_..."),
            SESSION_SCHEME: SecurityScheme(type="apiKey", name=SESSION_COOKIE, security_scheme_in="cookie",
                                           description="A dashboard session (POST /auth/login); only the "
                                                       "routes that list it accept one"),
            WIDGET_SCHEME: SecurityScheme(type="http", scheme="widget",
                                          description="Authorization: Widget <token>: a widget token "
                                                      "(POST /widget/tokens), sent from one of its allowed origins; "
                                                      "only the /widget routes accept one"),
        }),
        servers=[Server(url=asgi.PRIMARY_PREFIX), Server(url=asgi.API_PREFIX)],
        openapi_router=_NoSchemaRoutes(path="/_schema", route_handlers=[]),
        use_handler_docstrings=False,
        create_examples=False,
    )

    async def on_shutdown(_: Litestar) -> None:
        await media.drain(settings.section(MediaSettings).media_drain_seconds)
        await container.close()

    surfaces = dashboard.routers()  # the back-office's HTML pages (the sessions feature)
    app = Litestar(
        route_handlers=[api, *([stream_router(streams)] if streams else []), *surfaces],
        # no route matched: 404 / 405 in the JSON envelope (an HTML page under /dashboard)
        exception_handlers={**ROUTING_EXCEPTION_HANDLERS, HTTPException: routing_error},
        template_config=template_config(),
        openapi_config=openapi,
        request_max_body_size=MAX_BODY,
        request_class=JsonRequest,
        on_shutdown=[on_shutdown],
        debug=False,
        logging_config=None,
    )
    app.state["settings"] = settings
    app.state[methods.STATE_KEY] = methods.allowed_methods(app.routes)
    setup_dishka(container, app)
    app.asgi_handler = asgi.wrap(app.asgi_handler, metrics_token=settings.metrics_token,
                                 snapshot=lambda scope: read_backlog(container, {Request: Request(scope)}))
    return app
