"""SQL audit log (``audit_events``): appended in the caller's transaction, listed newest first."""

from __future__ import annotations

import builtins
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from adapters.sql.audit_tables import audit_events
from adapters.sql.paging import fetch_page
from adapters.sql.uow import SqlUnitOfWork
from application.ports.audit import AuditFilter
from application.ports.platform import Page, PageRequest
from domain.audit import ActorType, AuditActor, AuditEvent

t = audit_events


def _event(row: Any) -> AuditEvent:
    return AuditEvent(row.id, row.organization_id, AuditActor(ActorType(row.actor_type), row.actor_id,
                                                              row.actor_label or ""),
                      row.action, row.resource_type, row.resource_id, row.method, row.path, row.status, row.ip,
                      row.request_id, row.created_at, tuple(row.fields or ()))


def conditions(organization_id: int, filters: AuditFilter) -> builtins.list[Any]:
    where: builtins.list[Any] = [t.c.organization_id == organization_id]
    if filters.actor_type is not None:
        where.append(t.c.actor_type == filters.actor_type.value)
    if filters.actor_id is not None:
        where.append(t.c.actor_id == filters.actor_id)
    if filters.action is not None:
        where.append(t.c.action == filters.action)
    if filters.resource_type is not None:
        where.append(t.c.resource_type == filters.resource_type)
    if filters.resource_id is not None:
        where.append(t.c.resource_id == filters.resource_id)
    if filters.created_after is not None:
        where.append(t.c.created_at >= filters.created_after)
    if filters.created_before is not None:
        where.append(t.c.created_at < filters.created_before)
    return where


# built once: every audited request appends one row (SQLAlchemy builds no statement or cache key per request)
_INSERT = t.insert().returning(t.c.id)


class SqlAuditLog:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def add(self, event: AuditEvent) -> AuditEvent:
        conn = await self.uow.connection()
        new_id = (await conn.execute(_INSERT, {
            "organization_id": event.organization_id, "actor_type": event.actor.type.value,
            "actor_id": event.actor.id, "actor_label": event.actor.label, "action": event.action,
            "resource_type": event.resource_type, "resource_id": event.resource_id, "method": event.method,
            "path": event.path, "status": event.status, "ip": event.ip, "request_id": event.request_id,
            "fields": list(event.fields) or None, "created_at": event.created_at,
        })).scalar_one()
        return AuditEvent(new_id, event.organization_id, event.actor, event.action, event.resource_type,
                          event.resource_id, event.method, event.path, event.status, event.ip, event.request_id,
                          event.created_at, event.fields)

    async def list(self, organization_id: int, filters: AuditFilter, page: PageRequest) -> Page[AuditEvent]:
        conn = await self.uow.connection()
        rows, total = await fetch_page(conn, builtins.list(t.c), sa.and_(*conditions(organization_id, filters)),
                                       [t.c.created_at.desc(), t.c.id.desc()], page)
        return Page([_event(r) for r in rows], total, page.limit, page.offset)

    async def purge(self, before: datetime) -> int:
        conn = await self.uow.connection()
        result = await conn.execute(t.delete().where(t.c.created_at < before))
        return int(result.rowcount or 0)
