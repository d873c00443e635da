"""The methods a path serves, as ``OPTIONS`` and ``405`` answers say them (``Allow``), and ``HEAD``.

Litestar 2 answers an automatic ``OPTIONS`` with the methods of the first handler registered on the path (a
path with GET and POST says ``GET, OPTIONS``; fixed only in Litestar 3), and serves ``HEAD`` only where a
``@head`` handler exists. So: the table of every route's methods is built once when the app is made
(``allowed_methods``, kept in ``app.state``), the routers' pipelines answer the automatic ``OPTIONS`` from it
(``options_messages``), and the outermost ASGI layer serves ``HEAD`` as ``GET`` without the body
(``entrypoints/http/asgi.py``), so ``HEAD`` is listed wherever ``GET`` is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from litestar.types import Message, Scope

from entrypoints.http.messages import response_messages

STATE_KEY = "allowed_methods"


def allow_header(methods: Iterable[str]) -> str:
    """``Allow``: the methods sorted, ``HEAD`` beside ``GET``, ``OPTIONS`` always."""
    served = {method.upper() for method in methods} | {"OPTIONS"}
    if "GET" in served:
        served.add("HEAD")
    return ", ".join(sorted(served))


def allowed_methods(routes: Iterable[Any]) -> dict[str, str]:
    """Each HTTP route's path template (as routing puts it in ``scope["path_template"]``) -> its ``Allow``."""
    return {route.path_format: allow_header(route.methods) for route in routes if hasattr(route, "methods")}


def is_automatic_options(handler: Any) -> bool:
    """Whether ``handler`` is the OPTIONS handler Litestar adds to every path by itself."""
    return set(handler.http_methods) == {"OPTIONS"} and getattr(handler, "handler_name", "") == "options_handler"


def options_messages(scope: Scope) -> list[Message]:
    """The answer to an automatic ``OPTIONS``: 204 with the path's ``Allow``."""
    table: dict[str, str] = scope["app"].state.get(STATE_KEY) or {}
    allow = table.get(scope.get("path_template", ""), "OPTIONS")
    return response_messages(204, [(b"allow", allow.encode("latin-1")), (b"content-length", b"0")], b"")
