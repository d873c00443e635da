"""The request pipeline, once for every route of the API router: a short list of named steps, read top to bottom
in ``_Run.run``:

1. ``authenticate``         the route's authenticator (``Access.auth``)             its own transaction
1b. ``widget_origin``       a widget token only from its own pages
2. ``rate_limit``           the key's windows and the organization's ceiling        its own statements, each
                                                                                    committed alone
3. ``scopes``               the route's scopes
4. ``acting_organization``  ``X-Sub-Org-Id``                                       its own transaction (a read)
5. ``idempotency_claim``    the ``Idempotency-Key`` claimed before the handler      its own statements, each
                                                                                    committed alone
6. ``handle``               the handler                                             committed once, below 400,
                                                                                    with the idempotency record
                                                                                    and the audit event

A state-changing request made with a key or by a user leaves an audit event (``entrypoints/http/audit.py``):
in the handler's transaction when it was carried out, in a short one of its own when the scope check,
``X-Sub-Org-Id`` or the handler refused it.

The request id is given by the outermost layer (``entrypoints/http/asgi.py``) before any of these. Every
transaction is written where its step is (``async with transaction(uow)``, ``entrypoints/http/steps.py``; a step
whose work holds one statement at a time, ``async with statements_alone(uow)``, sends no ``BEGIN``/``COMMIT``); no
adapter commits the request's unit of work. The handler's response is held back until its transaction has
committed, so a client never sees a success for a change that was not kept.

Its collaborators come in one ``RequestGate`` resolved from the request's container; the authenticator's
``Principal`` becomes the use cases' ``Actor``.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import quote

import msgspec
from dishka import AsyncContainer
from litestar.enums import ScopeType
from litestar.types import (
    ASGIApp,
    HTTPResponseBodyEvent,
    HTTPResponseStartEvent,
    HTTPScope,
    Message,
    Receive,
    Scope,
    Send,
)

from application.accounts import ResolveActingOrganization, ResolveActingOrganizationCommand
from application.context import Actor
from application.ports.accounts import ApiKeyRepository, IdempotencyStore, RateLimiter
from application.ports.platform import Clock, Random, UnitOfWork
from application.ports.secrets import SecretBox, SecretUnreadable
from application.principals import Principal
from domain import idempotency as policy
from domain.errors import DomainError, SubOrgForbidden, ValidationFailed
from domain.idempotency import Decision, IdempotencyRecord, StoredResponse
from domain.identity import persisted
from domain.parsing import parse_id
from entrypoints.http.asgi import API_PREFIX, PRIMARY_PREFIX
from entrypoints.http.audit import AuditTrail, client_address
from entrypoints.http.authentication import Authenticators, CsrfRejected, Refused
from entrypoints.http.body_digest import body_digest
from entrypoints.http.envelope import auth_error_messages, outage_messages, router_error_messages, status_for
from entrypoints.http.messages import response_messages
from entrypoints.http.methods import is_automatic_options, options_messages
from entrypoints.http.routing import Access, AuthMode, access_of
from entrypoints.http.steps import (
    Captured,
    count_request,
    quietly_roll_back,
    replayed_body,
    run_handler,
    statements_alone,
    transaction,
)
from entrypoints.observability import RATE_LIMIT_REFUSALS
from entrypoints.outages import is_database_outage
from entrypoints.runtime import AuthFailurePolicy, RateLimitPolicy

log = logging.getLogger("parley.http")

LAST_USED_PRECISION = timedelta(minutes=1)
_REPLAYED_HEADERS = {"content-type", "location"}
SUB_ORG_HEADER = "X-Sub-Org-Id"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


def _headers(scope: Scope, name: bytes) -> list[str]:
    """Every value of a header the client sent (latin-1, as HTTP carries them)."""
    return [value.decode("latin-1") for key, value in scope["headers"] if key == name]


_NO_STORE = (b"cache-control", b"no-store")


async def _send_all(send: Send, messages: list[Message], extra_headers: list[tuple[bytes, bytes]],
                    *, private: bool = False) -> None:
    """``private``: the answer is someone's own data, kept out of every cache (``Cache-Control: no-store``)
    unless the route chose its own ``Cache-Control``."""
    for message in messages:
        if message["type"] == "http.response.start" and (extra_headers or private):
            headers = [*message.get("headers", []), *extra_headers]
            if private and not any(name.lower() == b"cache-control" for name, _ in headers):
                headers.append(_NO_STORE)
            message = {**message, "headers": headers}
        await send(message)


class _Disconnected(Exception):
    """The client went away before its request body arrived."""


_LOCATION_FIELD = re.compile(r"\{(path\.)?(\w+)\}")


def _location(template: str, scope: Scope, body: bytes) -> str | None:
    """The created resource's URL under the prefix the client used (None when the body names no such id)."""
    try:
        data = msgspec.json.decode(body).get("data")
    except (msgspec.DecodeError, AttributeError):
        return None
    path_params = scope.get("path_params") or {}

    def value(match: re.Match[str]) -> str:
        source = path_params if match[1] else data if isinstance(data, dict) else {}
        if source.get(match[2]) is None:
            raise KeyError(match[2])
        return quote(str(source[match[2]]), safe="")

    try:
        path = _LOCATION_FIELD.sub(value, template)
    except KeyError:
        return None
    original = str(scope.get("state", {}).get("original_path") or scope["path"])
    prefix = API_PREFIX if original.startswith(API_PREFIX + "/") else PRIMARY_PREFIX
    return prefix + path


def with_location(app: ASGIApp, template: str) -> ASGIApp:
    """Adds ``Location`` to the route's 201 responses (``Access.location``)."""

    async def located(scope: Scope, receive: Receive, send: Send) -> None:
        held: HTTPResponseStartEvent | None = None
        chunks: list[bytes] = []

        async def send_located(message: Message) -> None:
            nonlocal held
            if message["type"] == "http.response.start" and message["status"] == 201:
                held = message
                return
            if held is None or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = b"".join(chunks)
            location = _location(template, scope, body)
            headers = [(name, value) for name, value in held.get("headers", []) if name.lower() != b"location"]
            if location is not None:
                headers.append((b"location", location.encode()))
            start = held.copy()
            start["headers"] = headers
            end: HTTPResponseBodyEvent = {"type": "http.response.body", "body": body, "more_body": False}
            await send(start)
            await send(end)
            held = None

        await app(scope, receive, send_located)

    return located


@dataclass(frozen=True, slots=True)
class RequestGate:
    """What the pipeline works with: what every request needs, resolved once per request from the request's
    container; what only some requests need (the other authenticators, the key store for ``last_used_at``,
    sub-organizations, idempotency, the secret box), resolved from that container when first needed."""

    uow: UnitOfWork
    clock: Clock
    authenticators: Authenticators
    limiter: RateLimiter
    limits: RateLimitPolicy
    container: AsyncContainer

    async def failure_budget(self) -> AuthFailurePolicy:
        return await self.container.get(AuthFailurePolicy)

    async def keys(self) -> ApiKeyRepository:
        return await self.container.get(ApiKeyRepository)

    async def acting(self) -> ResolveActingOrganization:
        return await self.container.get(ResolveActingOrganization)

    async def idempotency(self) -> IdempotencyStore:
        return await self.container.get(IdempotencyStore)

    async def random(self) -> Random:
        return await self.container.get(Random)

    async def secrets(self) -> SecretBox:
        return await self.container.get(SecretBox)


class RequestPipeline:
    """Litestar middleware of the API router (runs for every route handler of it)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        handler = scope["route_handler"]
        access = access_of(handler.opt)
        if access is None:
            if is_automatic_options(handler):  # the methods the path serves (entrypoints/http/methods.py)
                await _send_all(send, options_messages(scope), [])
                return
            # unreachable through create_app (it refuses such a route); fail closed all the same
            log.error("route %s has no declared access", scope["path"])
            await _send_all(send, router_error_messages(500, "internal_error", "Internal server error"), [])
            return
        container: AsyncContainer = scope["state"]["dishka_container"]
        gate = await container.get(RequestGate)
        app = self.app if access.location is None else with_location(self.app, access.location)
        run = _Run(app, scope, receive, send, gate, access)
        try:
            await run.run()
        except Exception as error:
            if not is_database_outage(error) or run.replied:
                raise
            await quietly_roll_back(gate.uow)
            log.warning("database unreachable on %s %s: %s", scope["method"], scope["path"], type(error).__name__)
            await run.reply(outage_messages())


def _failure_messages(error: Exception) -> list[Message]:
    """A failure's answer: 503 when the database cannot be reached, else 500 (logged with its traceback)."""
    if is_database_outage(error):
        log.warning("database unreachable: %s", type(error).__name__)
        return outage_messages()
    log.exception("request failed")
    return router_error_messages(500, "internal_error", "Internal server error")


@dataclass
class _Claim:
    """An ``Idempotency-Key`` this request holds: claimed before the handler runs, completed with the handler's
    answer or released. The store works in its caller's transaction."""

    store: IdempotencyStore
    organization_id: int
    lineage_id: int
    key: str
    token: str
    body: bytes

    async def attempt(self, fingerprint: str, now: datetime) -> bool | StoredResponse | Decision | None:
        """One try at claiming the key: True when claimed, the stored response to replay, ``Decision.IN_FLIGHT``
        or ``Decision.MISMATCH``; None when another request changed the record meanwhile (look again)."""
        store = self.store
        mine = IdempotencyRecord(self.organization_id, self.lineage_id, self.key, fingerprint, now, now,
                                 self.token, None)
        # the usual case, a key not seen before (decide(None) is PROCEED): claimed in one statement
        if await store.insert_if_absent(mine):
            return True
        existing = await store.get(self.organization_id, self.lineage_id, self.key)
        decision = policy.decide(existing, fingerprint, now)
        if decision is Decision.PROCEED:
            return await store.insert_if_absent(mine) or None
        if decision is Decision.TAKE_OVER:
            return bool(existing and await store.take_over(existing, mine)) or None
        if decision is Decision.REPLAY:
            return existing.response if existing and existing.response else None
        return decision if decision in (Decision.IN_FLIGHT, Decision.MISMATCH) else None

    async def complete(self, response: StoredResponse) -> None:
        await self.store.complete(self.organization_id, self.lineage_id, self.key, self.token, response)

    async def release(self) -> None:
        await self.store.release(self.organization_id, self.lineage_id, self.key, self.token)


class _Run:
    """One request through the steps, top to bottom (``run``). Each step either lets the request go on or answers
    it (``reply``); each step that touches the database has its own transaction, visible in it."""

    def __init__(self, app: ASGIApp, scope: HTTPScope, receive: Receive, send: Send, gate: RequestGate,
                 access: Access) -> None:
        self.app, self.scope, self.receive, self.send = app, scope, receive, send
        self.gate, self.access = gate, access
        # a response that can carry a secret is kept out of every cache, and so is every answer to an authenticated
        # request (``private``, set once the credential is accepted), errors included
        self.extra_headers: list[tuple[bytes, bytes]] = [_NO_STORE] if access.secret else []
        self.private = False
        self.trail: AuditTrail | None = None  # a state-changing request by a key or a user (its audit event)
        if access.auth is AuthMode.WIDGET:  # the answer depends on the caller's Origin (CORS, docs/widget.md)
            self.extra_headers.append((b"vary", b"Origin"))

    replied = False

    async def reply(self, messages: list[Message]) -> None:
        self.replied = True
        await _send_all(self.send, messages, self.extra_headers, private=self.private and not self.access.secret)

    async def run(self) -> None:
        principal = await self.authenticate()
        if principal is None:
            return
        if not principal.authenticated:  # a public route: straight to the handler
            await self.handle(None)
            return
        self.private = True
        self.trail = AuditTrail.start(self.scope, self.access.action, principal)
        if not await self.widget_origin(principal):
            return
        if not await self.rate_limit(principal):
            return
        if not await self.scopes(principal):
            return
        actor = await self.acting_organization(principal)
        if actor is None:
            return
        claim = await self.idempotency_claim(principal, actor)
        if self.replied:
            return
        await self.handle(claim)

    # --- the steps, in the order ``run`` takes them ---------------------------------------------------------

    async def authenticate(self) -> Principal | None:
        """1. The route's authenticator, in its own transaction (a session's last use is written there). A refused
        credential is counted against the client's address (``_failure_allowed``) and answered 401."""
        uow = self.gate.uow
        try:
            async with transaction(uow):
                return await (await self.gate.authenticators.for_mode(self.access.auth)).authenticate(self.scope)
        except CsrfRejected as rejected:
            await self.reply(router_error_messages(403, rejected.code, rejected.message))
        except Refused as refused:
            if refused.presented and not await self._failure_allowed():
                return None
            challenge = [(b"www-authenticate", refused.challenge)] if refused.challenge else []
            await self.reply(auth_error_messages(401, refused.code, refused.message, headers=challenge))
        return None

    async def widget_origin(self, principal: Principal) -> bool:
        """1b. A widget token works only from its own origins (the outermost layer lets the page read every
        answer)."""
        if principal.widget is None:
            return True
        origin = _header(self.scope, b"origin")
        if not principal.widget.allows_origin(origin):
            await self.reply(router_error_messages(
                403, "origin_not_allowed", "This widget token is not valid from this page's origin"
                if origin else "A widget request must carry the Origin header of an allowed page"))
            return False
        self.scope["state"]["widget_grant"] = principal.widget
        return True

    async def rate_limit(self, principal: Principal) -> bool:
        """2. The request counted, each statement committed alone (``statements_alone``): per principal (a rotated
        key shares its predecessor's counters, a widget token has its own) and against the organization's ceiling
        over all its keys, in one statement; with the key's last use when the request is allowed. A refused request
        consumes nothing and is answered 429."""
        gate, key, organization = self.gate, principal.key, principal.organization
        assert organization is not None
        now = gate.clock.now()
        windows = gate.limits.windows_for(principal)
        ceiling = (f"org:{organization.id}", gate.limits.organization) \
            if key is not None and gate.limits.organization else None
        async with statements_alone(gate.uow):
            decision, by_ceiling = await count_request(gate.limiter, principal.rate_bucket, windows, now, ceiling)
            if decision.allowed and key is not None and (
                    key.last_used_at is None or now - key.last_used_at >= LAST_USED_PRECISION):
                await (await gate.keys()).touch(persisted(key.id), now)
        self.extra_headers += [
            (b"x-ratelimit-limit", str(decision.limit).encode()),
            (b"x-ratelimit-remaining", str(decision.remaining).encode()),
            (b"x-ratelimit-reset", str(decision.reset_at).encode()),
        ]
        notice = key.expiry_notice(now) if key is not None else None
        if notice is not None:
            expires_at, days = notice
            self.extra_headers += [
                (b"x-api-key-expires-at", expires_at.isoformat().replace("+00:00", "Z").encode()),
                (b"x-api-key-expires-in-days", str(days).encode()),
            ]
        if decision.allowed:
            return True
        RATE_LIMIT_REFUSALS.labels("organization" if by_ceiling else "rate_limit").inc()
        retry = decision.retry_after or 1
        await self.reply(auth_error_messages(429, "RATE_LIMIT_EXCEEDED", "Rate limit exceeded", retry,
                                             [(b"retry-after", str(retry).encode())]))
        return False

    async def scopes(self, principal: Principal) -> bool:
        """3. The route's scopes (a widget token holds none: its routes ask for none, and serve only its campaign;
        a session-only route asks for none either)."""
        if not self.access.scopes or principal.widget is not None or principal.scopes.grants_any(self.access.scopes):
            return True
        message = f"This key lacks a scope for this operation: one of {', '.join(self.access.scopes)}"
        await self._refused(403)
        await self.reply(auth_error_messages(403, "INSUFFICIENT_SCOPE", message))
        return False

    async def acting_organization(self, principal: Principal) -> Actor | None:
        """4. ``X-Sub-Org-Id``: the organization the request acts in (read in its own transaction); the actor goes to
        the handler through ``scope["state"]``."""
        assert principal.organization is not None
        acting = principal.organization
        sub_orgs = _headers(self.scope, b"x-sub-org-id") if principal.widget is None else []  # a token has one org
        if sub_orgs:
            try:
                if len(sub_orgs) > 1 or "," in sub_orgs[0]:  # repeated, or repeated and joined by a proxy
                    raise ValidationFailed.field(SUB_ORG_HEADER, "must be sent once")
                sub_org_id = parse_id(sub_orgs[0], SUB_ORG_HEADER)
            except ValidationFailed as exc:
                await self._refused(400)
                await self.reply(router_error_messages(400, exc.code, exc.message, exc.details))
                return None
            try:
                async with transaction(self.gate.uow):
                    acting = await (await self.gate.acting()).execute(
                        ResolveActingOrganizationCommand(principal.organization, sub_org_id))
            except SubOrgForbidden as exc:
                await self._refused(403)
                await self.reply(router_error_messages(403, exc.code, exc.message))
                return None
        actor = principal.acting_in(acting)
        if self.trail is not None:
            self.trail.acting_in(actor.organization_id)
        self.scope["state"]["actor"] = actor
        return actor

    async def idempotency_claim(self, principal: Principal, actor: Actor) -> _Claim | None:
        """5. An ``Idempotency-Key`` on a route that honours it: the key claimed before the handler runs, each
        statement committed alone (one in the usual case; every later one checks what it changes). None: no key,
        the handler runs as it is. A key already answered is replayed; one in flight is 409, one used with another
        request 422 (``replied``: the step answered).

        Records are scoped to (acting organization, key lineage, key): no other key of the organization sees them,
        a rotated successor does (a widget token's requests have a scope of their own)."""
        raw_key = _header(self.scope, b"idempotency-key")
        if not self.access.idempotent or raw_key is None:
            return None
        try:
            key = policy.parse_key(raw_key)
        except DomainError as exc:
            await self.reply(router_error_messages(400, exc.code, exc.message, exc.details))
            return None
        try:
            body = await self._read_body()
        except _Disconnected:
            return None  # the client is gone: nothing was claimed, nothing to answer
        if body is None and self.access.large_body:
            await self.reply(router_error_messages(
                400, "idempotency_unsupported",
                f"Idempotency-Key covers request bodies up to {policy.MAX_BODY_BYTES} bytes; "
                "send a larger one without it"))
            return None
        if body is None:
            await self.reply(router_error_messages(413, "payload_too_large", "Request body too large"))
            return None
        lineage_id = principal.replay_scope
        fingerprint = policy.digest_fingerprint(self.scope["method"], self.scope["path"],
                                                body_digest(_header(self.scope, b"content-type"), body))
        claim = _Claim(await self.gate.idempotency(), actor.organization_id, lineage_id, key,
                       (await self.gate.random()).hex(16), body)
        for _ in range(3):  # a lost race looks again
            async with statements_alone(self.gate.uow):
                now = self.gate.clock.now()
                outcome = await claim.attempt(fingerprint, now)
            if outcome is True:
                return claim  # committed: the claim is visible to every other request from here on
            if isinstance(outcome, StoredResponse):
                await self._replay(outcome)
                return None
            if outcome is Decision.IN_FLIGHT:
                break
            if outcome is Decision.MISMATCH:
                await self.reply(router_error_messages(422, "idempotency_key_mismatch",
                                                       "This Idempotency-Key was used with a different request"))
                return None
        await self.reply(router_error_messages(409, "idempotency_key_in_use",
                                               "A request with this Idempotency-Key is still in progress"))
        return None

    async def handle(self, claim: _Claim | None) -> None:
        """6. The handler, in the request's main transaction, committed once when it answered below 400 together
        with the idempotency record; then the answer. A claimed key whose handler answered otherwise is settled in
        a transaction of its own: the answer stored when it is a replayable one (a domain 4xx), else the key
        released so a retry runs again."""
        receive = self.receive if claim is None else replayed_body(claim.body, self.receive)
        trail = self.trail
        if trail is not None:
            receive = trail.watching(receive)

        async def keep(captured: Captured) -> None:
            if claim is not None:
                await claim.complete(await self._stored(captured))
            if trail is not None:
                await trail.record(self.gate.container.get, captured.status, captured.body())

        try:
            captured = await run_handler(self.app, self.scope, receive, self.gate.uow,
                                         None if claim is None and trail is None else keep)
        except Exception as error:
            if claim is not None:
                await self._release_after_failure(claim, error)
            await self.reply(_failure_messages(error))
            return
        if trail is not None and 400 <= captured.status < 500:
            await trail.record_refusal(self.gate.container.get, self.gate.uow, captured.status)
        if claim is not None and captured.status >= 400:
            async with transaction(self.gate.uow):
                if policy.is_replayable(captured.status):
                    await claim.complete(await self._stored(captured))
                else:
                    await claim.release()
        await self.reply(captured.messages)

    # --- what the steps share ------------------------------------------------------------------------------

    async def _refused(self, status: int) -> None:
        """A step after authentication refused the request: its audit event, when it has one."""
        if self.trail is not None:
            await self.trail.record_refusal(self.gate.container.get, self.gate.uow, status)

    async def _failure_allowed(self) -> bool:
        """Count a failed authentication against the client's address, in its own transaction; False (and 429
        sent) once the address is over its budget. Credentials that authenticate never touch this bucket."""
        gate = self.gate
        budget = await gate.failure_budget()
        async with transaction(gate.uow):
            decision = await gate.limiter.hit(f"authfail:{client_address(self.scope)}", budget.windows,
                                              gate.clock.now())
        if decision.allowed:
            return True
        RATE_LIMIT_REFUSALS.labels("auth_failures").inc()
        retry = decision.retry_after or 1
        await self.reply(auth_error_messages(
            429, "RATE_LIMIT_EXCEEDED", "Too many failed authentications from this address", retry,
            [(b"retry-after", str(retry).encode()), (b"x-ratelimit-limit", str(decision.limit).encode()),
             (b"x-ratelimit-remaining", b"0"), (b"x-ratelimit-reset", str(decision.reset_at).encode())]))
        return False

    async def _release_after_failure(self, claim: _Claim, error: Exception) -> None:
        """The handler failed: the key released, in its own transaction, so a retry runs again. When the database
        is gone the claim stays until it is stale (60 s), when a retry takes it over."""
        try:
            async with transaction(self.gate.uow):
                await claim.release()
        except Exception:
            if not is_database_outage(error):
                raise

    async def _read_body(self) -> bytes | None:
        """The whole body, or None when it exceeds what a key covers; raises _Disconnected."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self.receive()
            if message["type"] != "http.request":  # an HTTP request's only other message: http.disconnect
                raise _Disconnected
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > policy.MAX_BODY_BYTES:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _stored(self, captured: Captured) -> StoredResponse:
        """The response as kept for replays: the body sealed when the route's response carries a secret
        (latin-1 maps every byte to one character, so the replay is byte-for-byte)."""
        headers = tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in captured.headers()
                        if k.decode("latin-1").lower() in _REPLAYED_HEADERS)
        body = captured.body()
        if not self.access.secret:
            return StoredResponse(captured.status, headers, body)
        box = await self.gate.secrets()
        return StoredResponse(captured.status, headers, box.seal(body.decode("latin-1")).encode("ascii"), sealed=True)

    async def _replay(self, response: StoredResponse) -> None:
        body = response.body
        if response.sealed:
            box = await self.gate.secrets()
            try:
                body = box.open(body.decode("ascii")).encode("latin-1")
            except (SecretUnreadable, UnicodeError):
                # sealed under a key neither PARLEY_SECRET_KEY nor PARLEY_PREVIOUS_SECRET_KEYS holds: the
                # response cannot be given again, and acting again would break the key's promise
                log.warning("a stored idempotent response cannot be opened (PARLEY_SECRET_KEY changed without "
                            "PARLEY_PREVIOUS_SECRET_KEYS?)")
                await self.reply(router_error_messages(
                    409, "idempotency_replay_unavailable",
                    "The stored response of this Idempotency-Key can no longer be read; it was not acted on "
                    "again. Use a new key"))
                return
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers]
        headers += [(b"content-length", str(len(body)).encode()), (b"idempotency-replayed", b"true")]
        await self.reply(response_messages(response.status, headers, body))


__all__ = ["RequestPipeline", "status_for"]
