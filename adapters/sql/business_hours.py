"""SQL repository for business-hours schedules (soft delete: ``deleted_at``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from adapters.sql.business_hours_tables import schedules
from adapters.sql.paging import fetch_page
from adapters.sql.uow import SqlUnitOfWork
from application.ports.platform import Page, PageRequest
from domain.business_hours import Schedule, build_schedule, schedule_document

_COLUMNS = [c for c in schedules.c if c.name != "deleted_at"]


def _row_to_schedule(row: Any) -> Schedule:
    return build_schedule(id=row.id, organization_id=row.organization_id, name=row.name, timezone=row.timezone,
                          weekly=list(row.weekly), exceptions=list(row.exceptions),
                          holidays=dict(row.holidays) if row.holidays is not None else None,
                          created_at=row.created_at, updated_at=row.updated_at)


def _values(schedule: Schedule) -> dict[str, Any]:
    return {**schedule_document(schedule), "organization_id": schedule.organization_id,
            "created_at": schedule.created_at, "updated_at": schedule.updated_at}


class SqlScheduleRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    @staticmethod
    def _live(organization_id: int) -> Any:
        return sa.and_(schedules.c.organization_id == organization_id, schedules.c.deleted_at.is_(None))

    async def add(self, schedule: Schedule) -> Schedule:
        conn = await self.uow.connection()
        row = (await conn.execute(schedules.insert().returning(*_COLUMNS), _values(schedule))).one()
        return _row_to_schedule(row)

    async def get(self, organization_id: int, schedule_id: int) -> Schedule | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(*_COLUMNS).where(self._live(organization_id),
                                                             schedules.c.id == schedule_id))).first()
        return _row_to_schedule(row) if row else None

    async def get_locked(self, organization_id: int, schedule_id: int, *, shared: bool) -> Schedule | None:
        conn = await self.uow.connection()
        query = sa.select(*_COLUMNS).where(self._live(organization_id), schedules.c.id == schedule_id)
        row = (await conn.execute(query.with_for_update(read=shared))).first()
        return _row_to_schedule(row) if row else None

    async def list(self, organization_id: int, page: PageRequest) -> Page[Schedule]:
        conn = await self.uow.connection()
        rows, total = await fetch_page(conn, _COLUMNS, self._live(organization_id), [schedules.c.id], page)
        return Page([_row_to_schedule(r) for r in rows], total, page.limit, page.offset)

    async def update(self, schedule: Schedule) -> Schedule:
        conn = await self.uow.connection()
        values = _values(schedule)
        values.pop("organization_id")
        values.pop("created_at")
        row = (await conn.execute(schedules.update().where(self._live(schedule.organization_id),
                                                           schedules.c.id == schedule.id)
                                  .values(**values).returning(*_COLUMNS))).first()
        return _row_to_schedule(row) if row else schedule

    async def delete(self, organization_id: int, schedule_id: int, at: datetime) -> bool:
        conn = await self.uow.connection()
        result = await conn.execute(schedules.update().where(self._live(organization_id),
                                                             schedules.c.id == schedule_id).values(deleted_at=at))
        return bool(result.rowcount)
