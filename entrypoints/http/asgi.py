"""The outermost ASGI layer: request ids, headers every response carries, and the /v2 -> /api/v2
rewrite, before routing."""

from __future__ import annotations

import re
import uuid

from litestar.types import ASGIApp, Message, Receive, Scope, Send

from entrypoints.http.envelope import router_error_messages
from entrypoints.runtime import request_id_var

API_PREFIX = "/api/v2"
PRIMARY_PREFIX = "/v2"
_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_NUL_IN_QUERY = re.compile(rb"%00|\x00")
# on every response, whoever answers (routes, the pipeline, routing errors, 500s)
_NOSNIFF = (b"x-content-type-options", b"nosniff")
_SET_HERE = {b"x-request-id", _NOSNIFF[0]}


def _nul_location(scope: Scope) -> str | None:
    """Where a NUL character was sent (path or query): no text column (PostgreSQL) can hold one."""
    if "\x00" in scope["path"]:
        return "path"
    if _NUL_IN_QUERY.search(scope.get("query_string", b"")):
        return "query"
    return None


async def _reject(send: Send, messages: list[Message]) -> None:
    for message in messages:
        await send(message)


_CONTENT_LENGTH = re.compile(rb"[0-9]{1,18}")


def _framing_problem(scope: Scope) -> tuple[int, str, str, str] | None:
    """What the URL or the framing headers carry that no route can take, as (status, message, field, rule):
    an unusable Content-Length (400), or non-ASCII digits in the path, which Python's int() would read
    as an id (``/agents/١٢`` as agent 12): no resource has such a path (404)."""
    lengths = {value.strip() for key, value in scope["headers"] if key == b"content-length"}
    if len(lengths) > 1:
        return 400, "Content-Length was sent more than once", "Content-Length", "must be sent once"
    if lengths and not _CONTENT_LENGTH.fullmatch(next(iter(lengths))):
        return 400, "Content-Length is not a number", "Content-Length", "must be the body's size in bytes (digits)"
    if any(char.isdecimal() and not char.isascii() for char in scope["path"]):
        return 404, "No such resource or route", "path", "ids are written in ASCII digits"
    return None


def rewrite_path(path: str) -> str:
    if path == PRIMARY_PREFIX or path.startswith(PRIMARY_PREFIX + "/"):
        return API_PREFIX + path[len(PRIMARY_PREFIX):]
    return path


_HOST_RE = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?$")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def request_api_base(scope: Scope) -> str:
    """The base URL the client used to reach the API, prefix included: scheme, the Host header
    (or the server's address when the header is missing or malformed) and ``/v2`` or ``/api/v2``,
    whichever the request came in on."""
    scheme = scope.get("scheme", "http")
    host = next((value.decode("latin-1") for key, value in scope.get("headers", []) if key == b"host"), "")
    if not _HOST_RE.match(host):
        server = scope.get("server") or ("127.0.0.1", _DEFAULT_PORTS.get(scheme, 80))
        name, port = str(server[0]), server[1]
        name = f"[{name}]" if ":" in name else name
        host = name if port in (None, _DEFAULT_PORTS.get(scheme)) else f"{name}:{port}"
    original = scope.get("state", {}).get("original_path", scope.get("path", ""))
    prefix = PRIMARY_PREFIX if original == PRIMARY_PREFIX or original.startswith(PRIMARY_PREFIX + "/") \
        else API_PREFIX
    return f"{scheme}://{host}{prefix}"


def wrap(app: ASGIApp) -> ASGIApp:
    async def outer(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        incoming = None
        for key, value in scope["headers"]:
            if key == b"x-request-id":
                incoming = value.decode("latin-1")
                break
        request_id = incoming if incoming and _REQUEST_ID_RE.match(incoming) else uuid.uuid4().hex
        token = request_id_var.set(request_id)
        original = scope["path"]
        path = rewrite_path(original)
        if path != scope["path"]:
            scope = {**scope, "path": path, "raw_path": path.encode()}
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        state["original_path"] = original
        own = [(b"x-request-id", request_id.encode()), _NOSNIFF]

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", []) if h[0].lower() not in _SET_HERE]
                message = {**message, "headers": [*headers, *own]}
            await send(message)

        try:
            nul = _nul_location(scope)
            if nul is not None:
                await _reject(send_with_id, router_error_messages(
                    400, "bad_request", f"The {nul} contains a NUL character",
                    {"validation_errors": {nul: "must not contain NUL (%00) characters"}}))
                return
            problem = _framing_problem(scope)
            if problem is not None:
                status, message, field, rule = problem
                await _reject(send_with_id, router_error_messages(
                    status, "bad_request" if status == 400 else "not_found", message,
                    {"validation_errors": {field: rule}} if status == 400 else None))
                return
            await app(scope, receive, send_with_id)
        finally:
            request_id_var.reset(token)

    return outer
