"""The schedules repository behaves the same on memory, SQLite and PostgreSQL; the holiday calendars answer
from the holidays package."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from adapters.holidays import PythonHolidayCalendars
from application.ports.business_hours import ScheduleRepository, ScheduleUsage
from application.ports.platform import PageRequest, UnitOfWork
from domain.business_hours import HolidayRegion, Schedule, build_schedule
from domain.errors import ValidationFailed
from tests.support.apps import new_organization

NOW = datetime(2026, 2, 2, 12, tzinfo=UTC)


def hours(org: int, name: str = "Support", **fields: Any) -> Schedule:
    values: dict[str, Any] = {
        "timezone": "Europe/Berlin",
        "weekly": [{"day": 0, "start": "09:00", "end": "17:00"}, {"day": 4, "start": "22:00", "end": "02:00"},
                   {"day": 5, "start": "00:00", "end": "24:00"}],
        "exceptions": [{"date": "2026-12-24", "intervals": [{"start": "09:00", "end": "12:00"}]},
                       {"date": "2026-12-31", "closed": True}],
        "holidays": {"country": "DE", "subdivision": "BE"},
        **fields,
    }
    return build_schedule(id=None, organization_id=org, name=name, created_at=NOW, updated_at=NOW, **values)


async def test_schedules_are_stored_whole_scoped_listed_updated_and_soft_deleted(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    async with container() as r:
        repo = await r.get(ScheduleRepository)
        first = await repo.add(hours(org))
        second = await repo.add(hours(org, "Sales", holidays=None, exceptions=[]))
        foreign = await repo.add(hours(other))
        await (await r.get(UnitOfWork)).commit()
    assert first.id is not None and second.id is not None and foreign.id is not None
    assert first == replace(hours(org), id=first.id)
    async with container() as r:
        repo = await r.get(ScheduleRepository)
        got = await repo.get(org, first.id)
        assert got == first and got.created_at == NOW and got.holidays == HolidayRegion("DE", "BE")
        assert got.weekly == first.weekly and got.exceptions == first.exceptions
        assert (await repo.get(org, second.id)).holidays is None  # type: ignore[union-attr]
        assert await repo.get(other, first.id) is None
        page = await repo.list(org, PageRequest(1, 0))
        assert page.total == 2 and [s.id for s in page.items] == [first.id]
        assert [s.id for s in (await repo.list(org, PageRequest(10, 1))).items] == [second.id]
        assert (await repo.list(org, PageRequest(10, 5))).total == 2
        later = NOW + timedelta(hours=1)
        changed = replace(first, name="Renamed", timezone="America/New_York", weekly=(), holidays=None,
                          updated_at=later)
        assert await repo.update(changed) == changed
        await repo.update(replace(foreign, organization_id=org, name="Hijack"))  # not the organization's
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        repo = await r.get(ScheduleRepository)
        assert await repo.get(org, first.id) == changed
        assert (await repo.get(other, foreign.id)).name == "Support"  # type: ignore[union-attr]
        assert not await repo.delete(other, first.id, NOW)
        assert await repo.delete(org, first.id, NOW)
        assert not await repo.delete(org, first.id, NOW)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        repo = await r.get(ScheduleRepository)
        assert await repo.get(org, first.id) is None
        assert [s.id for s in (await repo.list(org, PageRequest(10, 0))).items] == [second.id]
        await repo.update(replace(changed, name="Back from the dead"))
        assert await repo.get(org, first.id) is None
        third = await repo.add(hours(org, "Third"))
        assert third.id is not None and third.id > foreign.id  # ids are never reused
        await (await r.get(UnitOfWork)).rollback()


async def test_nothing_uses_a_schedule_until_campaigns_exist(container: Any) -> None:
    async with container() as r:
        assert await (await r.get(ScheduleUsage)).users_of(1, 1) == []


def test_holiday_calendars_know_countries_and_subdivisions() -> None:
    calendars = PythonHolidayCalendars()
    calendars.check(HolidayRegion("US"))
    calendars.check(HolidayRegion("US", "CA"))
    with pytest.raises(ValidationFailed) as country:
        calendars.check(HolidayRegion("XX"))
    assert list(country.value.details["validation_errors"]) == ["holidays.country"]
    with pytest.raises(ValidationFailed) as subdivision:
        calendars.check(HolidayRegion("US", "ZZ"))
    assert list(subdivision.value.details["validation_errors"]) == ["holidays.subdivision"]
    us = calendars.is_holiday(HolidayRegion("US"))
    assert us(date(2026, 7, 4)) and us(date(2026, 12, 25)) and not us(date(2026, 7, 6))
    berlin = calendars.is_holiday(HolidayRegion("DE", "BE"))
    assert berlin(date(2026, 3, 8)) and not calendars.is_holiday(HolidayRegion("DE", "BY"))(date(2026, 3, 8))
