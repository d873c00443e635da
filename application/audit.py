"""The audit log's use cases: recording one state-changing request (the HTTP pipeline and the dashboard's gate call
it, in the handler's transaction when the change was carried out, in one of its own when it was refused) and
listing an organization's events (``GET /audit-events``, the dashboard's audit page)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from application.context import Actor
from application.ports.accounts import UserRepository
from application.ports.audit import AuditFilter, AuditLog
from application.ports.platform import Clock, Page, PageRequest
from domain.audit import MAX_LABEL, RETENTION, ActorType, AuditActor, AuditEvent, resource_type_of
from domain.errors import ValidationFailed
from domain.rfc3339 import check_created_window

MAX_PATH = 500


@dataclass(frozen=True, slots=True)
class RecordAuditEventCommand:
    organization_id: int
    actor: AuditActor
    action: str
    resource_id: str | None
    method: str
    path: str
    status: int
    ip: str
    request_id: str
    fields: tuple[str, ...] = field(default=())


class RecordAuditEvent:
    """Appends one event in the caller's transaction. A user named without a label is labelled with its email."""

    def __init__(self, log: AuditLog, users: UserRepository, clock: Clock) -> None:
        self.log, self.users, self.clock = log, users, clock

    async def execute(self, command: RecordAuditEventCommand) -> AuditEvent:
        actor = command.actor
        if actor.type is ActorType.USER and not actor.label:
            found = await self.users.get(actor.id)
            actor = replace(actor, label=found[2] if found else "")
        return await self.log.add(AuditEvent(
            None, command.organization_id, replace(actor, label=actor.label[:MAX_LABEL]), command.action,
            resource_type_of(command.action), command.resource_id[:100] if command.resource_id else None,
            command.method, command.path[:MAX_PATH], command.status, command.ip[:64], command.request_id[:100],
            self.clock.now(), command.fields))


@dataclass(frozen=True, slots=True)
class ListAuditEventsCommand:
    actor: Actor
    filters: AuditFilter
    page: PageRequest


class ListAuditEvents:
    def __init__(self, log: AuditLog) -> None:
        self.log = log

    async def execute(self, command: ListAuditEventsCommand) -> Page[AuditEvent]:
        filters = command.filters
        if filters.actor_id is not None and filters.actor_type is None:
            raise ValidationFailed.field("actor_id", "needs actor_type (api_key or user)")
        check_created_window(filters.created_after, filters.created_before)
        return await self.log.list(command.actor.organization_id, filters, command.page)


@dataclass(frozen=True, slots=True)
class PurgeAuditEventsCommand:
    """Purge the events older than the retention (365 days) by now (the clock's)."""


class PurgeAuditEvents:
    def __init__(self, log: AuditLog, clock: Clock) -> None:
        self.log, self.clock = log, clock

    async def execute(self, command: PurgeAuditEventsCommand) -> int:
        return await self.log.purge(self.clock.now() - RETENTION)
