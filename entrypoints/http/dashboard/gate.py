"""The dashboard's request pipeline (middleware of its router), the HTML counterpart of the API's:

0. an unsafe method (a form post) whose ``Origin`` names another site gets a 403 page: no other site can post a
   dashboard form, the sign-in form included (signing a victim in to the attacker's account);
1. pages marked ``public`` (the sign-in form) run without a session; every other page needs the
   ``parley_session`` cookie of a live session (``SessionAuthenticator.active``), else 303 to the sign-in page,
   and one of the scopes the page declares (``pages.page(scopes=...)``; the user holds its role's scopes,
   ``domain/roles.py``), else a 403 page; a user whose organization requires two-factor sign-in and who has not
   turned it on is sent to turn it on (303 to ``/dashboard/account/mfa``) from every other page; a ``sudo`` page
   (minting keys, changing billing, managing users) needs the user to have given the password (or a code) within
   5 minutes, else 303 to ``/dashboard/verify``, which sends back to the section once it is given;
2. a signed-in user's pages spend the API's rate limits in the user's bucket (the one the API spends for a
   session): over it, a 429 page with ``Retry-After``. A live view's event stream (a ``stream`` page,
   ``live.py``) spends a budget of its own instead (``LIVE_WINDOWS`` per user), counted once per connection, so
   watching a campaign run leaves the user's requests to the user, and a script cannot open streams without limit.
   A stream is admitted in a unit of work of its own (given back before it runs: an open page holds no database
   connection) and then runs outside the request's unit of work, sending as it goes;
   a partner's session switched into a client (``Session.acting_organization_id``) acts in that client, as an API
   key with ``X-Sub-Org-Id`` does, with the user's role; an ``own`` page (users, the account, the clients list)
   acts in the user's own organization whatever the session works in;
3. an unsafe method (a form post) needs the session's CSRF token: the ``csrf_token`` form field (or the
   ``X-CSRF-Token`` header), else a 403 page (``csrf_failed``); checked here, before any handler runs;
4. the handler runs in the request's unit of work, committed when the page answered below 400 (a form shown
   again with its errors changes nothing), and every page gets security headers and ``Cache-Control: no-store``;
5. a signed-in user's form post leaves an audit event (``entrypoints/http/audit.py``; its action from the
   operation the page declares, ``pages.page(operation=...)``): in the handler's transaction when the page
   answered below 400, in one of its own when the role's scopes or the handler refused it (4xx).

The steps are the API's (``entrypoints/http/steps.py``): the session, the page's count and the handler each run in
a transaction of their own; what differs is the answers (HTML pages, redirects) and the CSRF check.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, quote

from dishka import AsyncContainer
from litestar.enums import ScopeType
from litestar.types import ASGIApp, HTTPScope, Message, Receive, Scope, Send
from python_multipart.multipart import parse_options_header

from application import billing
from application import sessions as uc
from application.ports.accounts import RateLimiter
from application.ports.platform import Clock, UnitOfWork, Units
from application.principals import Principal
from domain.errors import ValidationFailed
from domain.identity import persisted
from domain.rate_limit import Window
from domain.sessions import same_token
from entrypoints.http.audit import AuditTrail, location_of
from entrypoints.http.authentication import Refused, SessionAuthenticator, header
from entrypoints.http.dashboard.errors import error_page_messages, outage_page_messages
from entrypoints.http.dashboard.navigation import PREFIX
from entrypoints.http.dashboard.view import CSRF_FIELD, STATE_KEY, SignedIn
from entrypoints.http.messages import response_messages
from entrypoints.http.methods import is_automatic_options, options_messages
from entrypoints.http.multipart import close_all, parse_form
from entrypoints.http.routing import CSRF_HEADER, SAFE_METHODS
from entrypoints.http.steps import Captured, count_request, replayed_body, run_handler, transaction
from entrypoints.observability import RATE_LIMIT_REFUSALS
from entrypoints.outages import is_database_outage
from entrypoints.runtime import RateLimitPolicy

log = logging.getLogger("parley.dashboard")
PUBLIC = "dashboard_public"
LIVE = "dashboard_live"
SCOPES = "dashboard_scopes"
SUDO = "dashboard_sudo"
ACTION = "dashboard_action"
"""A form's audit action (``domain/audit.py``), from the operation it declares."""
AUDIT = "audit_trail"
OWN = "dashboard_own"
"""A page that acts in the user's own organization even while the session works in a client (users, the
account, the clients list itself)."""
ENROL_PATHS = (f"{PREFIX}/account", f"{PREFIX}/account/mfa", f"{PREFIX}/logout")
"""What a user whose organization requires two-factor sign-in may open before turning it on."""
STREAM = "dashboard_stream"
UPLOAD = "dashboard_upload"
"""A page that takes a file (multipart/form-data): the most bytes its form may send (else ``MAX_FORM_BYTES``)."""
LIVE_WINDOWS: tuple[Window, ...] = (Window(60, 40),)
"""The budget of a user's live connections (event streams): each is counted once, when it opens."""
MAX_FORM_BYTES = 64 * 1024
SECURITY_HEADERS = [
    (b"cache-control", b"no-store"),
    (b"content-security-policy", b"default-src 'self'; img-src 'self' data:; media-src 'self' blob:; "
                                 b"style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'; "
                                 b"base-uri 'none'; connect-src 'self'"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
]


def _security_headers(scope: Scope) -> list[tuple[bytes, bytes]]:
    """The headers above; ``connect-src`` also names this host's own websocket origin (a web call's media stream,
    "Talk to this agent"), and nothing else."""
    host = (header(scope, b"host") or "").strip()
    if not host or any(c in host for c in " ;,'\"\r\n"):
        return SECURITY_HEADERS
    socket = "wss" if scope.get("scheme") == "https" else "ws"
    name, policy = SECURITY_HEADERS[1]
    return [SECURITY_HEADERS[0], (name, policy + f" {socket}://{host}".encode("latin-1")), *SECURITY_HEADERS[2:]]


def _with_headers(send: Send, scope: Scope) -> Send:
    headers = _security_headers(scope)

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *headers]}
        await send(message)

    return sending


def _redirect(location: str) -> list[Message]:
    return response_messages(303, [(b"location", location.encode("latin-1")), (b"content-length", b"0")], b"")


class DashboardGate:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        send = _with_headers(send, scope)
        started = False

        async def tracking(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self._gate(scope, receive, tracking)
        except Exception as error:
            if started or not is_database_outage(error):
                raise
            log.warning("database unreachable on %s %s: %s", scope["method"], scope["path"], type(error).__name__)
            for message in outage_page_messages():
                await send(message)

    async def _gate(self, scope: HTTPScope, receive: Receive, send: Send) -> None:
        if is_automatic_options(scope["route_handler"]):  # the methods the page serves, no session needed
            for message in options_messages(scope):
                await send(message)
            return
        container: AsyncContainer = scope["state"]["dishka_container"]
        if scope["method"] not in SAFE_METHODS and not _same_origin(scope):
            for message in error_page_messages(403, "csrf_failed", "This form was sent from another site."):
                await send(message)
            return
        if scope["route_handler"].opt.get(STREAM):
            # a live view's event stream: admitted (session, one live request) in a unit of its own, given back
            # at once, so the open connection holds no database connection; the stream runs its own units
            async with (await container.get(Units)).begin() as unit:
                admitted = await self._admit(scope, send, unit.get, await unit.get(UnitOfWork))
            if admitted:
                await self.app(scope, receive, send)
            return
        uow = await container.get(UnitOfWork)
        if scope["route_handler"].opt.get(PUBLIC):
            await self._handle(scope, receive, send, uow)
            return
        if not await self._admit(scope, send, container.get, uow):
            return
        if scope["method"] not in SAFE_METHODS:
            body = await _read(receive, scope["route_handler"].opt.get(UPLOAD) or MAX_FORM_BYTES)
            if body is None or not same_token(scope["state"][STATE_KEY].csrf_token, await _csrf(scope, body)):
                for message in error_page_messages(403, "csrf_failed", "This form expired or did not come from "
                                                   "this dashboard: reload the page and try again."):
                    await send(message)
                return
            receive = replayed_body(body, receive)
        await self._handle(scope, receive, send, uow)

    async def _admit(self, scope: HTTPScope, send: Send, get: Callable[[type[Any]], Awaitable[Any]],
                     uow: UnitOfWork) -> bool:
        """The session and the page's count, each in its own transaction; puts the signed-in user in the scope's
        state, or sends the answer (the sign-in page, a 429 page) and returns False."""
        # the session (its last use written), in its own transaction
        try:
            async with transaction(uow):
                active = await (await get(SessionAuthenticator)).active(scope)
                view = await (await get(uc.DescribeSession)).execute(
                    uc.DescribeSessionCommand(active.session, active.expires_at))
                working = active.organization if scope["route_handler"].opt.get(OWN) else active.working_in
                hold = await (await get(billing.GetServiceHold)).execute(
                    billing.GetServiceHoldCommand(persisted(working.id)))
        except (Refused, uc.SessionInvalid):
            target = scope["path"] if scope["method"] == "GET" else PREFIX
            for message in _redirect(f"{PREFIX}/login?next={quote(target, safe='/')}"):
                await send(message)
            return False
        # the signed-in user's budget, the API's rate limits, in its own transaction: pages and the API with a
        # session spend one bucket; a live refresh spends the user's live budget instead
        principal = Principal.session(active.session.user_id, active.organization, active.role)
        if scope["route_handler"].opt.get(LIVE):
            bucket, windows = f"live:{principal.rate_bucket}", LIVE_WINDOWS
        else:
            bucket, windows = principal.rate_bucket, (await get(RateLimitPolicy)).windows_for(principal)
        async with transaction(uow):
            decision, _ = await count_request(await get(RateLimiter), bucket, windows,
                                              (await get(Clock)).now())
        if not decision.allowed:
            RATE_LIMIT_REFUSALS.labels("rate_limit").inc()
            retry = decision.retry_after or 1
            messages = error_page_messages(429, "RATE_LIMIT_EXCEEDED",
                                           f"Too many pages in a short time: try again in {retry} s.",
                                           [(b"retry-after", str(retry).encode())])
            for message in messages:
                await send(message)
            return False
        if active.mfa_missing and scope["path"].rstrip("/") not in ENROL_PATHS:
            for message in _redirect(f"{PREFIX}/account/mfa"):
                await send(message)
            return False
        if scope["route_handler"].opt.get(SUDO) and not active.session.recently_verified((await get(Clock)).now()):
            back = scope["path"] if scope["method"] == "GET" else _section_of(scope)
            for message in _redirect(f"{PREFIX}/verify?next={quote(back, safe='/')}"):
                await send(message)
            return False
        trail = AuditTrail.start(scope, scope["route_handler"].opt.get(ACTION), principal, view.email)
        if trail is not None and working.id is not None:
            trail.acting_in(working.id)  # a session switched into a client: the client's log holds the event
        required = scope["route_handler"].opt.get(SCOPES) or ()
        if required and not principal.scopes.grants_any(required):
            if trail is not None:
                await trail.record_refusal(get, uow, 403)
            for message in error_page_messages(403, "INSUFFICIENT_SCOPE", f"Your role ({active.role}) does not "
                                               "allow this page; an owner or an admin of the organization can "
                                               "change your role."):
                await send(message)
            return False
        scope["state"][AUDIT] = trail
        # a session switched into a client acts in it, as a key with X-Sub-Org-Id (but on its own pages)
        scope["state"]["actor"] = principal.acting_in(working)
        acting = active.acting
        scope["state"][STATE_KEY] = SignedIn(view.user_id, view.email, view.organization_id,
                                             active.organization.name, view.csrf_token, hold, str(active.role),
                                             active.session.id_hash, active.organization.is_partner,
                                             acting.id if acting else None, acting.name if acting else "")
        return True

    async def _handle(self, scope: HTTPScope, receive: Receive, send: Send, uow: UnitOfWork) -> None:
        """The API's handler step (committed once below 400), with the dashboard's error pages."""
        trail: AuditTrail | None = scope["state"].get(AUDIT)
        get = scope["state"]["dishka_container"].get

        async def keep(captured: Captured) -> None:
            assert trail is not None
            await trail.record(get, captured.status, captured.body(), location_of(captured.headers()))

        try:
            captured = await run_handler(self.app, scope, receive, uow, None if trail is None else keep)
            held = captured.messages
            if trail is not None and 400 <= captured.status < 500:
                await trail.record_refusal(get, uow, captured.status)
        except Exception as error:
            if is_database_outage(error):
                log.warning("database unreachable on %s %s: %s", scope["method"], scope["path"],
                            type(error).__name__)
                held = outage_page_messages()
            else:
                log.exception("dashboard page failed")
                held = error_page_messages(500, "internal_error", "Something went wrong on our side.")
        for message in held:
            await send(message)


def _section_of(scope: HTTPScope) -> str:
    """Where a form that had to ask for the password again sends back to: its section's page."""
    section = str(scope["route_handler"].opt.get("section") or "")
    return f"{PREFIX}/{section.replace('_', '-')}" if section else PREFIX


def _same_origin(scope: Scope) -> bool:
    """Whether the request's ``Origin``, when the browser sent one, is this server's own (scheme and host)."""
    origin = header(scope, b"origin")
    if origin is None:
        return True  # not a browser's cross-site request (browsers send Origin with every POST)
    host = header(scope, b"host") or ""
    return origin.lower() == f"{scope.get('scheme', 'http')}://{host}".lower()


async def _csrf(scope: Scope, body: bytes) -> str | None:
    sent = header(scope, CSRF_HEADER.lower().encode())
    if sent:
        return sent
    raw_type = header(scope, b"content-type") or ""
    content_type = raw_type.split(";")[0].strip().lower()
    if content_type == "multipart/form-data" and scope["route_handler"].opt.get(UPLOAD):
        return await _multipart_csrf(raw_type, body)
    if content_type != "application/x-www-form-urlencoded":
        return None
    values = parse_qs(body.decode("latin-1"), keep_blank_values=True).get(CSRF_FIELD)
    return values[-1] if values else None


async def _multipart_csrf(raw_type: str, body: bytes) -> str | None:
    """The ``csrf_token`` text field of an upload form's multipart body (None when it has none or does not
    parse: the form is refused)."""
    _, raw_options = parse_options_header(raw_type)
    options = {key.decode("latin-1"): value.decode("latin-1") for key, value in raw_options.items()}

    async def chunks() -> AsyncIterator[bytes]:
        yield body

    try:
        fields = await parse_form(chunks(), options)
    except ValidationFailed:
        return None
    try:
        values = [v for v in fields.get(CSRF_FIELD, []) if isinstance(v, str)]
        return values[-1] if values else None
    finally:
        await close_all(fields)


async def _read(receive: Receive, limit: int = MAX_FORM_BYTES) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # http.disconnect
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
