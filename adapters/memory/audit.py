"""In-memory audit log (one transaction at a time)."""

from __future__ import annotations

import builtins
from dataclasses import replace
from datetime import datetime

from adapters.memory.store import InMemoryUnitOfWork
from application.ports.audit import AuditFilter
from application.ports.platform import Page, PageRequest
from domain.audit import AuditEvent

TABLE = "audit_events"


def _matches(event: AuditEvent, organization_id: int, f: AuditFilter) -> bool:
    return (event.organization_id == organization_id
            and (f.actor_type is None or event.actor.type == f.actor_type)
            and (f.actor_id is None or event.actor.id == f.actor_id)
            and (f.action is None or event.action == f.action)
            and (f.resource_type is None or event.resource_type == f.resource_type)
            and (f.resource_id is None or event.resource_id == f.resource_id)
            and (f.created_after is None or event.created_at >= f.created_after)
            and (f.created_before is None or event.created_at < f.created_before))


class InMemoryAuditLog:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def add(self, event: AuditEvent) -> AuditEvent:
        tables = await self.uow.tables()
        stored = replace(event, id=self.uow.store.next_id(TABLE))
        tables[TABLE][stored.id] = stored
        return stored

    async def list(self, organization_id: int, filters: AuditFilter, page: PageRequest) -> Page[AuditEvent]:
        tables = await self.uow.tables()
        found = [e for e in tables[TABLE].values() if _matches(e, organization_id, filters)]
        found.sort(key=lambda e: (e.created_at, e.id or 0), reverse=True)
        return page.slice(found)

    async def purge(self, before: datetime) -> int:
        tables = await self.uow.tables()
        old: builtins.list[int] = [key for key, e in tables[TABLE].items() if e.created_at < before]
        for key in old:
            del tables[TABLE][key]
        return len(old)
