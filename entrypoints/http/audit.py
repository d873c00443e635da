"""The audit trail of a request, shared by the API's pipeline (``pipeline.py``) and the dashboard's gate
(``dashboard/gate.py``): every state-changing request (POST, PUT, PATCH, DELETE) whose credential was accepted, an
API key's or a signed-in user's, becomes one ``AuditEvent`` (``domain/audit.py``):

- carried out (an answer below 400): recorded in the handler's transaction, committed with the change it records,
  so a change is never kept without its event nor an event without its change;
- refused after authentication (the scope check, ``X-Sub-Org-Id``, or the handler's own 4xx): recorded in a short
  transaction of its own (a failure to record it is logged; the answer stands).

Not recorded: requests whose credential was refused (401, a session's CSRF or sudo refusal), the rate limit's
429, idempotent replays (nothing was done again), answers of 500 and above (nothing was done), widget tokens and
public routes. Bodies are never kept: of a PATCH or PUT carried out, only its top-level field names.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import msgspec
from litestar.types import HTTPScope, Receive, ReceiveMessage, Scope

from application.audit import RecordAuditEvent, RecordAuditEventCommand
from application.ports.platform import UnitOfWork
from application.principals import Principal
from domain.audit import AUDITED_METHODS, ActorType, AuditActor, field_names, label_of_key
from entrypoints.http.steps import transaction

log = logging.getLogger("parley.audit")
MAX_CAPTURED = 64 * 1024
"""A PATCH body larger than this is not read for its field names (none are kept)."""

Get = Callable[[type[Any]], Awaitable[Any]]


def actor_of(principal: Principal, email: str = "") -> AuditActor | None:
    """The key or the user a principal is; None for any other (a widget token, the public)."""
    key = principal.key
    if key is not None and key.id is not None:
        return AuditActor(ActorType.API_KEY, key.id, label_of_key(key.name, key.prefix, key.last_four))
    if principal.user_id is not None:
        return AuditActor(ActorType.USER, principal.user_id, email)
    return None


def client_address(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


@dataclass
class AuditTrail:
    """One audited request, gathered as it goes through the steps; ``record`` writes its event."""

    action: str
    actor: AuditActor
    organization_id: int
    scope: HTTPScope
    body: bytearray = field(default_factory=bytearray)
    body_complete: bool = False

    @classmethod
    def start(cls, scope: HTTPScope, action: str | None, principal: Principal, email: str = "") -> AuditTrail | None:
        """The trail of a request to audit, or None (a safe method, an operation not audited, a principal that
        is neither a key nor a user)."""
        if action is None or scope["method"] not in AUDITED_METHODS or principal.organization is None:
            return None
        actor = actor_of(principal, email)
        if actor is None or principal.organization.id is None:
            return None
        return cls(action, actor, principal.organization.id, scope)

    def acting_in(self, organization_id: int) -> None:
        """The organization the request acts in (``X-Sub-Org-Id``): its log holds the event."""
        self.organization_id = organization_id

    def watching(self, receive: Receive) -> Receive:
        """``receive`` that keeps a copy of a PATCH's or PUT's body (up to ``MAX_CAPTURED``) for its field names."""
        if self.scope["method"] not in ("PATCH", "PUT"):
            return receive

        async def watched() -> ReceiveMessage:
            message = await receive()
            if message["type"] == "http.request":
                chunk = message.get("body", b"")
                if len(self.body) + len(chunk) <= MAX_CAPTURED:
                    self.body += chunk
                    self.body_complete = not message.get("more_body", False)
                else:
                    self.body_complete, self.body = False, bytearray()
            return message

        return watched

    def _fields(self, status: int) -> tuple[str, ...]:
        if status >= 400 or not self.body_complete:
            return ()
        try:
            decoded = msgspec.json.decode(bytes(self.body))
        except msgspec.DecodeError:
            return ()
        return field_names(list(decoded)) if isinstance(decoded, dict) else ()

    def _resource_id(self, status: int, body: bytes, location: str | None) -> str | None:
        """A 201's created resource (its ``data.id``), a dashboard form's redirect to the resource it made,
        else the last id in the path."""
        if status == 201 and body:
            try:
                data = msgspec.json.decode(body).get("data")
            except (msgspec.DecodeError, AttributeError):
                data = None
            if isinstance(data, dict) and isinstance(data.get("id"), (int, str)):
                return str(data["id"])
        params = self.scope.get("path_params") or {}
        if params:
            return str(list(params.values())[-1])
        if location:
            last = urlsplit(location).path.rstrip("/").rsplit("/", 1)[-1]
            if last.isdigit():
                return last
        return None

    def command(self, status: int, body: bytes = b"", location: str | None = None) -> RecordAuditEventCommand:
        state = self.scope.get("state") or {}
        return RecordAuditEventCommand(
            self.organization_id, self.actor, self.action, self._resource_id(status, body, location),
            self.scope["method"], str(state.get("original_path") or self.scope["path"]), status,
            client_address(self.scope), str(state.get("request_id") or ""), self._fields(status))

    async def record(self, get: Get, status: int, body: bytes = b"", location: str | None = None) -> None:
        """The event, in the caller's transaction (the handler's)."""
        await (await get(RecordAuditEvent)).execute(self.command(status, body, location))

    async def record_refusal(self, get: Get, uow: UnitOfWork, status: int) -> None:
        """A refusal's event, in a short transaction of its own; a failure to write it is logged, never answered
        (the refusal stands)."""
        try:
            async with transaction(uow):
                await self.record(get, status)
        except Exception:
            log.warning("audit event of a refused %s %s not recorded", self.scope["method"], self.scope["path"],
                        exc_info=True)


def location_of(headers: list[tuple[bytes, bytes]]) -> str | None:
    for name, value in headers:
        if name.lower() == b"location":
            return value.decode("latin-1")
    return None
