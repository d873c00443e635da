"""In-memory business-hours schedules."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from adapters.memory.store import InMemoryUnitOfWork
from application.ports.platform import Page, PageRequest
from domain.business_hours import Schedule
from domain.identity import persisted


class InMemoryScheduleRepository:
    """Table ``schedules``: id -> (Schedule, deleted_at)."""

    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def _live(self, organization_id: int, schedule_id: int) -> Schedule | None:
        entry = (await self.uow.tables())["schedules"].get(schedule_id)
        if entry is None or entry[1] is not None or entry[0].organization_id != organization_id:
            return None
        return entry[0]

    async def add(self, schedule: Schedule) -> Schedule:
        tables = await self.uow.tables()
        stored = replace(schedule, id=self.uow.store.next_id("schedules"))
        tables["schedules"][stored.id] = (stored, None)
        return stored

    async def get(self, organization_id: int, schedule_id: int) -> Schedule | None:
        return await self._live(organization_id, schedule_id)

    async def get_locked(self, organization_id: int, schedule_id: int, *, shared: bool) -> Schedule | None:
        return await self._live(organization_id, schedule_id)  # one task at a time: nothing to lock

    async def list(self, organization_id: int, page: PageRequest) -> Page[Schedule]:
        tables = await self.uow.tables()
        found = [s for s, deleted in sorted(tables["schedules"].values(), key=lambda e: e[0].id)
                 if s.organization_id == organization_id and deleted is None]
        return page.slice(found)

    async def update(self, schedule: Schedule) -> Schedule:
        current = await self._live(schedule.organization_id, persisted(schedule.id))
        if current is None:
            return schedule
        stored = replace(schedule, created_at=current.created_at)
        (await self.uow.tables())["schedules"][schedule.id] = (stored, None)
        return stored

    async def delete(self, organization_id: int, schedule_id: int, at: datetime) -> bool:
        current = await self._live(organization_id, schedule_id)
        if current is None:
            return False
        (await self.uow.tables())["schedules"][schedule_id] = (current, at)
        return True
