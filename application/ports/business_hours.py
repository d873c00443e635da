"""Ports of business-hours schedules: their storage, the public-holiday calendars they may follow, and who
uses a schedule (campaigns), which decides whether it may be deleted."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from application.ports.platform import Page, PageRequest
from domain.business_hours import HolidayRegion, IsHoliday, Schedule


class ScheduleRepository(Protocol):
    """Schedules of an organization. Every method is scoped to the organization; a deleted schedule is
    never returned again (soft delete: ``deleted_at`` is kept, its id is never reused)."""

    async def add(self, schedule: Schedule) -> Schedule: ...

    async def get(self, organization_id: int, schedule_id: int) -> Schedule | None: ...

    async def get_locked(self, organization_id: int, schedule_id: int, *, shared: bool) -> Schedule | None:
        """``get``, the live row locked to the end of the transaction (PostgreSQL: ``FOR SHARE`` when ``shared``, by
        what must find it still there, a campaign that follows it; ``FOR UPDATE`` by its delete), so a delete and a
        campaign starting to follow the schedule cannot both succeed. SQLite's one writer needs no lock."""
        ...

    async def list(self, organization_id: int, page: PageRequest) -> Page[Schedule]:
        """Live schedules by id."""
        ...

    async def update(self, schedule: Schedule) -> Schedule:
        """Store name, timezone, weekly, exceptions, holidays and updated_at (not organization_id or created_at)."""
        ...

    async def delete(self, organization_id: int, schedule_id: int, at: datetime) -> bool:
        """Soft delete; False when there was no such live schedule."""
        ...


class HolidayCalendars(Protocol):
    """Public holidays by region (a country, optionally a subdivision)."""

    def check(self, region: HolidayRegion) -> None:
        """ValidationFailed on ``holidays.country`` or ``holidays.subdivision`` for a region it does not know."""
        ...

    def is_holiday(self, region: HolidayRegion) -> IsHoliday:
        """A predicate over local dates: whether that date is a public holiday of the region."""
        ...


class ScheduleUsage(Protocol):
    """Who uses a schedule. Campaigns implement it (a running or paused campaign with this ``schedule_id``
    keeps the schedule from being deleted); until they exist the default answers that nothing uses it."""

    async def users_of(self, organization_id: int, schedule_id: int) -> list[int]:
        """Ids of the running or paused campaigns that use the schedule."""
        ...

    async def schedule_changed(self, organization_id: int, schedule_id: int, at: datetime) -> None:
        """The schedule's hours changed at ``at`` (in the unit of work that changed them): its running and paused
        campaigns re-plan the contacts that waited for its old hours."""
        ...
