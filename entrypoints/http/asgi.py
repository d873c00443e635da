"""The outermost ASGI layer: request ids, headers every response carries, and the /v2 -> /api/v2
rewrite, before routing."""

from __future__ import annotations

import logging
import os
import random
import re
import secrets
import time
from collections.abc import Awaitable, Callable

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from entrypoints.http.envelope import auth_error_messages, router_error_messages
from entrypoints.http.messages import response_messages
from entrypoints.observability import count_request, outcome_of, render
from entrypoints.runtime import request_id_var

request_log = logging.getLogger("parley.http.request")
METRICS_PATH = "/metrics"
_METRICS_CHALLENGE = b'Bearer realm="parley-metrics"'
Snapshot = Callable[[Scope], Awaitable[dict[str, float]]]

API_PREFIX = "/api/v2"
PRIMARY_PREFIX = "/v2"
_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_NUL_IN_QUERY = re.compile(rb"%00|\x00")
# on every response, whoever answers (routes, the pipeline, routing errors, 500s)
_NOSNIFF = (b"x-content-type-options", b"nosniff")
_SET_HERE = {b"x-request-id", _NOSNIFF[0]}


class _RequestIds:
    """Ids for requests that bring none: 32 hex digits shaped like a UUID4's, from a generator seeded once per
    process from the system's randomness (and again in a forked child). A request id correlates log lines and is
    no secret; ``uuid.uuid4()`` asked the kernel for 16 random bytes on every request, a system call that cost
    more than the rest of this layer (8 % of a read in process, bench/profile_pipeline.py)."""

    _VERSION_4 = (0x4 << 76) | (0x2 << 62)  # the version nibble 4 and the RFC 4122 variant, as uuid4 sets them
    _CLEAR = ~((0xF << 76) | (0x3 << 62))

    def __init__(self) -> None:
        self._random = random.Random(os.urandom(32))
        os.register_at_fork(after_in_child=self._reseed)

    def _reseed(self) -> None:
        self._random.seed(os.urandom(32))

    def next(self) -> str:
        return f"{(self._random.getrandbits(128) & self._CLEAR) | self._VERSION_4:032x}"


_REQUEST_IDS = _RequestIds()


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
# a Bearer or Widget credential holds no comma: one there is two headers a client or a proxy joined into one
_JOINED_CREDENTIALS = re.compile(rb"(?i)\s*(bearer|widget)\s[^,]*,")


def _framing_problem(scope: Scope) -> tuple[int, str, str, str] | None:
    """What the URL or the framing headers carry that no route can take, as (status, message, field, rule):
    an unusable Content-Length or a repeated Authorization (400), or non-ASCII digits in the path, which
    Python's int() would read as an id (``/agents/١٢`` as agent 12): an invalid path parameter (400)."""
    lengths = {value.strip() for key, value in scope["headers"] if key == b"content-length"}
    if len(lengths) > 1:
        return 400, "Content-Length was sent more than once", "Content-Length", "must be sent once"
    authorizations = [value for key, value in scope["headers"] if key == b"authorization"]
    if len(authorizations) > 1 or (authorizations and _JOINED_CREDENTIALS.match(authorizations[0])):
        # which credential would count is the server's guess (a proxy and the origin may guess differently)
        return 400, "Authorization was sent more than once", "Authorization", "must be sent once"
    if lengths and not _CONTENT_LENGTH.fullmatch(next(iter(lengths))):
        return 400, "Content-Length is not a number", "Content-Length", "must be the body's size in bytes (digits)"
    if any(char.isdecimal() and not char.isascii() for char in scope["path"]):
        return 400, "Invalid path parameter", "path", "ids are written in ASCII digits"
    return None


WIDGET_SCRIPT_PATH = "/widget.js"
WIDGET_PATHS = API_PREFIX + "/widget/"
"""CORS is answered here, and nowhere else (docs/widget.md)."""
_PREFLIGHT_HEADERS = [
    (b"access-control-allow-methods", b"GET, POST"),
    # every request header a widget route reads: the token, the body's type, a retry's key, a caller's request id
    (b"access-control-allow-headers", b"Authorization, Content-Type, Idempotency-Key, X-Request-ID"),
    (b"access-control-max-age", b"600"),
    (b"vary", b"Origin"),
    (b"content-length", b"0"),
]


_WIDGET_CORS = {b"access-control-allow-origin", b"access-control-expose-headers", b"vary"}
_EXPOSED = (b"Location, Retry-After, X-Request-ID, Idempotency-Replayed, X-RateLimit-Limit, X-RateLimit-Remaining, "
            b"X-RateLimit-Reset")
"""What a page may read of a widget answer besides the CORS-safelisted headers: a created contact's address, when to
retry, the request's id, a replay's mark and the rate limit."""


def _widget_cors(origin: bytes) -> list[tuple[bytes, bytes]]:
    return [(b"access-control-allow-origin", origin), (b"access-control-expose-headers", _EXPOSED),
            (b"vary", b"Origin")]


def rewrite_path(path: str) -> str:
    """``/v2/*`` is served as ``/api/v2/*``; the widget's script is also served at the root (``/widget.js``)."""
    if path == PRIMARY_PREFIX or path.startswith(PRIMARY_PREFIX + "/"):
        return API_PREFIX + path[len(PRIMARY_PREFIX):]
    if path == WIDGET_SCRIPT_PATH:
        return API_PREFIX + WIDGET_SCRIPT_PATH
    return path


async def _widget_preflight(scope: Scope, send: Send) -> None:
    """A CORS preflight on ``/widget/*``, for any origin: the widget's requests may carry Authorization and
    Content-Type; never credentials (cookies). Whether the real request is allowed is the token's to say."""
    origin = next((value for key, value in scope["headers"] if key == b"origin"), None)
    headers = list(_PREFLIGHT_HEADERS)
    if origin is not None:
        headers.insert(0, (b"access-control-allow-origin", origin))
    for message in response_messages(204, headers, b""):
        await send(message)


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


async def _metrics(scope: Scope, send: Send, token: str, snapshot: Snapshot | None) -> None:
    """GET /metrics: only with ``Authorization: Bearer <PARLEY_METRICS_TOKEN>``; not there without a token."""
    if not token:
        await _reject(send, router_error_messages(404, "not_found", "No such resource or route"))
        return
    given = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), "")
    if not secrets.compare_digest(given.encode("latin-1"), f"Bearer {token}".encode()):
        # the auth envelope and challenge of every other 401 (the outermost layer adds X-Request-ID and the rest)
        code = "INVALID_METRICS_TOKEN" if given else "MISSING_AUTH"
        await _reject(send, auth_error_messages(401, code, "Authorization: Bearer <metrics token> is required",
                                                headers=[(b"www-authenticate", _METRICS_CHALLENGE),
                                                         (b"cache-control", b"no-store")]))
        return
    values = await snapshot(scope) if snapshot is not None else None
    body = render(values)
    for message in response_messages(200, [
            (b"content-type", b"text/plain; version=0.0.4; charset=utf-8"),
            (b"content-length", str(len(body)).encode()), (b"cache-control", b"no-store")], body):
        await send(message)


def client_route(template: str, original_path: str) -> str:
    """The route template as the client addressed it: ``/v2/agents/{id}`` for a request to ``/v2/agents/7``
    (the app serves it as ``/api/v2/agents/{id}``), ``/widget.js`` for the script at the root."""
    if original_path == WIDGET_SCRIPT_PATH and template == API_PREFIX + WIDGET_SCRIPT_PATH:
        return WIDGET_SCRIPT_PATH
    if template.startswith(API_PREFIX) and (original_path == PRIMARY_PREFIX
                                            or original_path.startswith(PRIMARY_PREFIX + "/")):
        return PRIMARY_PREFIX + template[len(API_PREFIX):]
    return template


def _log_request(scope: Scope, method: str, status: int, seconds: float) -> str:
    state = scope.get("state", {})
    template = scope.get("path_template") or state.get("route") or "unmatched"
    actor = state.get("actor")
    outcome = outcome_of(status)
    count_request(template, method, status, seconds)  # one series per route, whichever prefix was used
    route = client_route(template, state.get("original_path", ""))
    request_log.info("%s %s %d", method, route, status, extra={
        "organization_id": getattr(actor, "organization_id", None), "route": route, "method": method,
        "status": status, "duration_ms": round(seconds * 1000, 3), "outcome": outcome})
    return outcome


def wrap(app: ASGIApp, *, metrics_token: str = "", snapshot: Snapshot | None = None) -> ASGIApp:
    """``metrics_token``: GET /metrics answers that bearer token (404 without one); ``snapshot``: the gauges
    read at scrape time."""

    async def outer(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == ScopeType.WEBSOCKET:  # the media streams: served under both prefixes, as HTTP is
            path = rewrite_path(scope["path"])
            if path != scope["path"]:
                scope = scope.copy()
                scope["path"], scope["raw_path"] = path, path.encode()
            await app(scope, receive, send)
            return
        if scope["type"] != ScopeType.HTTP:
            await app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        incoming = None
        for key, value in scope["headers"]:
            if key == b"x-request-id":
                incoming = value.decode("latin-1")
                break
        request_id = incoming if incoming and _REQUEST_ID_RE.match(incoming) else _REQUEST_IDS.next()
        token = request_id_var.set(request_id)
        original = scope["path"]
        path = rewrite_path(original)
        if path != scope["path"]:
            scope = scope.copy()
            scope["path"], scope["raw_path"] = path, path.encode()
        method = scope["method"]
        head = method == "HEAD"  # answered as GET, without the body (entrypoints/http/methods.py)
        if head:
            scope = scope.copy()
            scope["method"] = "GET"
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        state["original_path"] = original
        own = [(b"x-request-id", request_id.encode()), _NOSNIFF]
        set_here = _SET_HERE
        if path.startswith(WIDGET_PATHS):
            # every answer on /widget/* lets the calling page read it, its errors included (an expired token, a
            # refused origin, a rate limit): they say only why; what succeeds needs one of the token's origins
            origin = next((value for key, value in scope["headers"] if key == b"origin"), None)
            if origin is not None:
                own += _widget_cors(origin)
                set_here = _SET_HERE | _WIDGET_CORS

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [h for h in message.get("headers", []) if h[0].lower() not in set_here]
                message = message.copy()
                message["headers"] = [*headers, *own]
            elif head and message["type"] == "http.response.body" and message.get("body"):
                message = message.copy()
                message["body"] = b""
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
            if original == METRICS_PATH and scope["method"] == "GET":  # HEAD is GET here (above)
                state["route"] = METRICS_PATH
                await _metrics(scope, send_with_id, metrics_token, snapshot)
                return
            if scope["method"] == "OPTIONS" and scope["path"].startswith(WIDGET_PATHS):
                await _widget_preflight(scope, send_with_id)
                return
            await app(scope, receive, send_with_id)
        finally:
            _log_request(scope, method, status, time.perf_counter() - started)
            request_id_var.reset(token)

    return outer
