"""The request pipeline: authentication, rate limits, scopes, sub-organizations, idempotency
and the request's transaction, in that order, once for every route of the API router.

Its collaborators come in one ``RequestGate`` resolved from the request's container; the route's
``Access.auth`` picks the authenticator, whose ``Principal`` becomes the use cases' ``Actor``.

The handler runs inside the request's unit of work. Its response is held back until the
transaction has committed (with the idempotency record, when there is one), so a client never
sees a success for a change that was not kept.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from datetime import timedelta
from urllib.parse import quote

import msgspec
from dishka import AsyncContainer
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from application.accounts import ResolveActingOrganization, ResolveActingOrganizationCommand
from application.ports.accounts import ApiKeyRepository, IdempotencyStore, RateLimiter
from application.ports.platform import Clock, Random, UnitOfWork
from application.ports.secrets import SecretBox, SecretUnreadable
from domain import idempotency as policy
from domain.errors import DomainError, SubOrgForbidden, ValidationFailed
from domain.idempotency import Decision, IdempotencyRecord, StoredResponse
from domain.parsing import parse_id
from domain.rate_limit import tightest
from domain.widget import replay_scope
from entrypoints.http.asgi import API_PREFIX, PRIMARY_PREFIX
from entrypoints.http.authentication import Authenticators, CsrfRejected, Refused
from entrypoints.http.body_digest import body_digest
from entrypoints.http.envelope import auth_error_messages, outage_messages, router_error_messages, status_for
from entrypoints.http.methods import is_automatic_options, options_messages
from entrypoints.http.routing import Access, AuthMode, access_of
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


def client_address(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


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


@dataclass
class _Captured:
    messages: list[Message] = field(default_factory=list)
    status: int = 500

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        self.messages.append(message)

    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages if m["type"] == "http.response.body")

    def headers(self) -> list[tuple[bytes, bytes]]:
        for m in self.messages:
            if m["type"] == "http.response.start":
                return list(m.get("headers", []))
        return []


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
        held: Message | None = None
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
            headers = [h for h in held.get("headers", []) if h[0].lower() != b"location"]
            if location is not None:
                headers.append((b"location", location.encode()))
            await send({**held, "headers": headers})
            await send({"type": "http.response.body", "body": body})
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
        if scope["type"] != "http":
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
            await _quietly_roll_back(gate.uow)
            log.warning("database unreachable on %s %s: %s", scope["method"], scope["path"], type(error).__name__)
            await run.reply(outage_messages())


async def _quietly_roll_back(uow: UnitOfWork) -> None:
    """Roll back what can be (the connection may be gone with the database)."""
    try:
        await uow.rollback()
    except Exception:  # the outage already decides the answer
        log.debug("rollback failed during a database outage", exc_info=True)


def _failure_messages(error: Exception) -> list[Message]:
    """A failure's answer: 503 when the database cannot be reached, else 500 (logged with its traceback)."""
    if is_database_outage(error):
        log.warning("database unreachable: %s", type(error).__name__)
        return outage_messages()
    log.exception("request failed")
    return router_error_messages(500, "internal_error", "Internal server error")


class _Run:
    def __init__(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send, gate: RequestGate,
                 access: Access) -> None:
        self.app, self.scope, self.receive, self.send = app, scope, receive, send
        self.gate, self.access = gate, access
        # a response that can carry a secret is kept out of every cache, and so is every answer to an authenticated
        # request (``private``, set once the credential is accepted), errors included
        self.extra_headers: list[tuple[bytes, bytes]] = [_NO_STORE] if access.secret else []
        self.private = False
        if access.auth is AuthMode.WIDGET:  # the answer depends on the caller's Origin (CORS, docs/widget.md)
            self.extra_headers.append((b"vary", b"Origin"))

    replied = False

    async def reply(self, messages: list[Message]) -> None:
        self.replied = True
        await _send_all(self.send, messages, self.extra_headers, private=self.private and not self.access.secret)

    async def run(self) -> None:
        scope, gate = self.scope, self.gate
        uow = gate.uow

        # 1. authentication (the route's authenticator)
        try:
            principal = await (await gate.authenticators.for_mode(self.access.auth)).authenticate(scope)
        except CsrfRejected as rejected:
            await uow.rollback()
            await self.reply(router_error_messages(403, rejected.code, rejected.message))
            return
        except Refused as refused:
            await uow.rollback()
            if refused.presented and not await self._failure_allowed():
                return
            challenge = [(b"www-authenticate", refused.challenge)] if refused.challenge else []
            await self.reply(auth_error_messages(401, refused.code, refused.message, headers=challenge))
            return
        await uow.commit()
        if not principal.authenticated:  # a public route: straight to the handler, in the unit of work
            await self._handle(uow)
            return
        assert principal.organization is not None
        self.private = True
        key, organization = principal.key, principal.organization
        now = gate.clock.now()

        # 1b. a widget token works only from its own origins (the outermost layer lets the page read every answer)
        if principal.widget is not None:
            origin = _header(scope, b"origin")
            if not principal.widget.allows_origin(origin):
                await self.reply(router_error_messages(
                    403, "origin_not_allowed", "This widget token is not valid from this page's origin"
                    if origin else "A widget request must carry the Origin header of an allowed page"))
                return
            scope["state"]["widget_grant"] = principal.widget

        # 2. rate limit (per principal: a rotated key shares its predecessor's counters, a widget token has its own),
        # and the organization's ceiling over all its keys together
        windows = gate.limits.windows_for(principal)
        decision = await gate.limiter.hit(principal.rate_bucket, windows, now)
        refusal = "rate_limit"
        if decision.allowed and key is not None and gate.limits.organization:
            ceiling = await gate.limiter.hit(f"org:{organization.id}", gate.limits.organization, now)
            if not ceiling.allowed:  # refused: the key's own count is given back
                await gate.limiter.release(principal.rate_bucket, windows, now)
                refusal = "organization"
            decision = tightest(decision, ceiling)
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
        if not decision.allowed:
            RATE_LIMIT_REFUSALS.labels(refusal).inc()
            retry = decision.retry_after or 1
            await self.reply(auth_error_messages(429, "RATE_LIMIT_EXCEEDED", "Rate limit exceeded", retry,
                                                 [(b"retry-after", str(retry).encode())]))
            return
        if key is not None and (key.last_used_at is None or now - key.last_used_at >= LAST_USED_PRECISION):
            await (await gate.keys()).touch(key.id or 0, now)
            await uow.commit()

        # 3. scopes (a widget token holds none: its routes ask for none, and serve only its campaign; a
        # session-only route asks for none either)
        if self.access.scopes and principal.widget is None and not principal.scopes.grants_any(self.access.scopes):
            message = f"This key lacks a scope for this operation: one of {', '.join(self.access.scopes)}"
            await self.reply(auth_error_messages(403, "INSUFFICIENT_SCOPE", message))
            return

        # 4. sub-organization
        acting = organization
        sub_orgs = _headers(scope, b"x-sub-org-id") if principal.widget is None else []  # a token has one org
        if sub_orgs:
            try:
                if len(sub_orgs) > 1 or "," in sub_orgs[0]:  # repeated, or repeated and joined by a proxy
                    raise ValidationFailed.field(SUB_ORG_HEADER, "must be sent once")
                sub_org_id = parse_id(sub_orgs[0], SUB_ORG_HEADER)
            except ValidationFailed as exc:
                await self.reply(router_error_messages(400, exc.code, exc.message, exc.details))
                return
            try:
                acting = await (await gate.acting()).execute(ResolveActingOrganizationCommand(organization, sub_org_id))
            except SubOrgForbidden as exc:
                await uow.rollback()
                await self.reply(router_error_messages(403, exc.code, exc.message))
                return
            await uow.commit()
        actor = principal.acting_in(acting)
        scope["state"]["actor"] = actor
        # stored responses are scoped to the key's lineage, or to the widget token itself
        lineage_id = replay_scope(principal.widget.token_id) if principal.widget else actor.key_lineage_id or 0

        # 5. idempotency, then the handler
        raw_key = _header(scope, b"idempotency-key")
        if self.access.idempotent and raw_key is not None:
            await self._idempotent(uow, gate.clock, actor.organization_id, lineage_id, raw_key)
        else:
            await self._handle(uow)

    async def _failure_allowed(self) -> bool:
        """Count a failed authentication against the client's address; False (and 429 sent) once the
        address is over its budget. Credentials that authenticate never touch this bucket."""
        gate = self.gate
        budget = await gate.failure_budget()
        decision = await gate.limiter.hit(f"authfail:{client_address(self.scope)}", budget.windows, gate.clock.now())
        await gate.uow.commit()
        if decision.allowed:
            return True
        RATE_LIMIT_REFUSALS.labels("auth_failures").inc()
        retry = decision.retry_after or 1
        await self.reply(auth_error_messages(
            429, "RATE_LIMIT_EXCEEDED", "Too many failed authentications from this address", retry,
            [(b"retry-after", str(retry).encode()), (b"x-ratelimit-limit", str(decision.limit).encode()),
             (b"x-ratelimit-remaining", b"0"), (b"x-ratelimit-reset", str(decision.reset_at).encode())]))
        return False

    async def _handle(self, uow: UnitOfWork) -> None:
        captured = _Captured()
        try:
            await self.app(self.scope, self.receive, captured.send)
            if captured.status < 400:
                await uow.commit()
            else:
                await uow.rollback()
        except Exception as error:
            await _quietly_roll_back(uow)
            await self.reply(_failure_messages(error))
            return
        await self.reply(captured.messages)

    async def _read_body(self) -> bytes | None:
        """The whole body, or None when it exceeds what a key covers; raises _Disconnected."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                raise _Disconnected
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > policy.MAX_BODY_BYTES:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _idempotent(self, uow: UnitOfWork, clock: Clock, organization_id: int, lineage_id: int,
                          raw_key: str) -> None:
        """Records are scoped to (acting organization, key lineage, key): no other key of the organization
        sees them, a rotated successor does (a widget token's requests have a scope of their own)."""
        try:
            key = policy.parse_key(raw_key)
        except DomainError as exc:
            await self.reply(router_error_messages(400, exc.code, exc.message, exc.details))
            return
        try:
            body = await self._read_body()
        except _Disconnected:
            return  # the client is gone: nothing was claimed, nothing to answer
        if body is None and self.access.large_body:
            await self.reply(router_error_messages(
                400, "idempotency_unsupported",
                f"Idempotency-Key covers request bodies up to {policy.MAX_BODY_BYTES} bytes; "
                "send a larger one without it"))
            return
        if body is None:
            await self.reply(router_error_messages(413, "payload_too_large", "Request body too large"))
            return
        fingerprint = policy.digest_fingerprint(self.scope["method"], self.scope["path"],
                                                body_digest(_header(self.scope, b"content-type"), body))
        store = await self.gate.idempotency()
        token = (await self.gate.random()).hex(16)

        for _ in range(3):
            now = clock.now()
            mine = IdempotencyRecord(organization_id, lineage_id, key, fingerprint, now, now, token, None)
            # the usual case, a key not seen before (decide(None) is PROCEED): claimed in one statement
            if await store.insert_if_absent(mine):
                break
            existing = await store.get(organization_id, lineage_id, key)
            decision = policy.decide(existing, fingerprint, now)
            if decision is Decision.PROCEED and await store.insert_if_absent(mine):
                break
            if decision is Decision.TAKE_OVER and existing and await store.take_over(existing, mine):
                break
            if decision is Decision.REPLAY and existing and existing.response:
                await uow.rollback()
                await self._replay(existing.response)
                return
            if decision is Decision.IN_FLIGHT:
                await uow.rollback()
                await self.reply(router_error_messages(409, "idempotency_key_in_use",
                                               "A request with this Idempotency-Key is still in progress"))
                return
            if decision is Decision.MISMATCH:
                await uow.rollback()
                await self.reply(router_error_messages(422, "idempotency_key_mismatch",
                                               "This Idempotency-Key was used with a different request"))
                return
            await uow.rollback()  # lost a race: look again
        else:
            await self.reply(router_error_messages(409, "idempotency_key_in_use",
                                           "A request with this Idempotency-Key is still in progress"))
            return
        await uow.commit()  # the claim is visible to every other request from here on

        delivered = False

        async def replay_receive() -> Message:
            nonlocal delivered
            if delivered:
                return await self.receive()
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        captured = _Captured()
        try:
            await self.app(self.scope, replay_receive, captured.send)
            if captured.status < 400:
                await store.complete(organization_id, lineage_id, key, token, await self._stored(captured))
                await uow.commit()
            else:
                await uow.rollback()
                if policy.is_replayable(captured.status):
                    await store.complete(organization_id, lineage_id, key, token, await self._stored(captured))
                else:
                    await store.release(organization_id, lineage_id, key, token)
                await uow.commit()
        except Exception as error:
            await _quietly_roll_back(uow)
            try:
                await store.release(organization_id, lineage_id, key, token)
                await uow.commit()
            except Exception:
                if not is_database_outage(error):
                    raise
                # the claim stays until it is stale (60 s), when a retry takes it over
                await _quietly_roll_back(uow)
            await self.reply(_failure_messages(error))
            return
        await self.reply(captured.messages)

    async def _stored(self, captured: _Captured) -> StoredResponse:
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
        await self.reply([
            {"type": "http.response.start", "status": response.status, "headers": headers},
            {"type": "http.response.body", "body": body},
        ])


__all__ = ["RequestPipeline", "status_for"]
