"""The served OpenAPI document: Litestar's schema with paths relative to the two API prefixes.

Built on first request and kept for the life of the process (every app of a process serves the
same routes), so creating an app stays cheap.
"""

from __future__ import annotations

import msgspec
from litestar import Litestar
from litestar._openapi.plugin import OpenAPIPlugin

from entrypoints.http import asgi

_cache: dict[tuple[str, ...], bytes] = {}


def document(app: Litestar) -> bytes:
    key = tuple(sorted(route.path for route in app.routes))
    cached = _cache.get(key)
    if cached is None:
        cached = _cache[key] = _build(app)
    return cached


def _build(app: Litestar) -> bytes:
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
