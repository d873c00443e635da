"""The outermost ASGI layer: request ids and the /v2 -> /api/v2 rewrite, before routing."""

from __future__ import annotations

import re
import uuid

import msgspec
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from entrypoints.http.envelope import ErrorBody, ErrorEnvelope
from entrypoints.runtime import request_id_var

API_PREFIX = "/api/v2"
PRIMARY_PREFIX = "/v2"
_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_NUL_IN_QUERY = re.compile(rb"%00|\x00")


def _nul_location(scope: Scope) -> str | None:
    """Where a NUL character was sent (path or query): no text column (PostgreSQL) can hold one."""
    if "\x00" in scope["path"]:
        return "path"
    if _NUL_IN_QUERY.search(scope.get("query_string", b"")):
        return "query"
    return None


async def _reject_nul(send: Send, location: str) -> None:
    body = msgspec.json.encode(ErrorEnvelope(ErrorBody(
        f"The {location} contains a NUL character", "bad_request",
        {"validation_errors": {location: "must not contain NUL (%00) characters"}})))
    await send({"type": "http.response.start", "status": 400,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


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
        header = (b"x-request-id", request_id.encode())

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", []) if h[0].lower() != b"x-request-id"]
                message = {**message, "headers": [*headers, header]}
            await send(message)

        try:
            nul = _nul_location(scope)
            if nul is not None:
                await _reject_nul(send_with_id, nul)
                return
            await app(scope, receive, send_with_id)
        finally:
            request_id_var.reset(token)

    return outer
