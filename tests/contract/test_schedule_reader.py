"""ScheduleReader: what availability reads, the same on every backend, and, on SQL, served from a
per-process cache that never shows another process's change late (the calendar revision triggers)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from adapters.sql.schedule_cache import ScheduleCache
from application.ports.platform import UnitOfWork
from application.ports.scheduling import AppointmentRepository, CalendarRepository, ScheduleReader
from domain.scheduling.model import Appointment, AvailabilityRule, Blackout, Calendar, HeldIntervals, Schedule
from domain.timezones import to_epoch_us
from entrypoints.ioc import build_container
from entrypoints.settings import Settings
from tests.support.apps import new_organization

NOW = datetime(2026, 2, 2, 12, tzinfo=UTC)


def at(hour: int, minute: int = 0, day: int = 3) -> datetime:
    return datetime(2026, 2, day, hour, minute, tzinfo=UTC)


def appt(org: int, calendar_id: int, start: datetime, status: str = "confirmed", minutes: int = 30) -> Appointment:
    return Appointment(None, org, calendar_id, status, start, start + timedelta(minutes=minutes), created_at=NOW,
                       updated_at=NOW)


async def _calendar(container: Any, org: int) -> Calendar:
    async with container() as r:
        calendar = await (await r.get(CalendarRepository)).add(
            Calendar(None, org, "Front desk", "Europe/Berlin", created_at=NOW, updated_at=NOW))
        await (await r.get(UnitOfWork)).commit()
    return calendar


async def _read(container: Any, org: int, calendar_id: int, start: datetime = at(0),
                end: datetime = at(0, day=5)) -> Schedule:
    async with container() as r:
        return await (await r.get(ScheduleReader)).schedule(org, calendar_id, start, end)


def _held(schedule: Schedule) -> list[tuple[int | None, datetime, datetime]]:
    held = schedule.held
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return [(i, epoch + timedelta(microseconds=s), epoch + timedelta(microseconds=e))
            for i, s, e in zip(held.ids, held.starts, held.ends, strict=True)]


async def test_schedule_holds_rules_and_what_overlaps_the_window(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    cal = await _calendar(container, org)
    async with container() as r:
        calendars, appointments = await r.get(CalendarRepository), await r.get(AppointmentRepository)
        late = await calendars.add_rule(org, AvailabilityRule(None, cal.id, 1, time(13), time(17)))
        early = await calendars.add_rule(org, AvailabilityRule(None, cal.id, 1, time(8), time(12)))
        lunch = await calendars.add_blackout(org, Blackout(None, cal.id, at(11), at(13), "Lunch"))
        await calendars.add_blackout(org, Blackout(None, cal.id, at(9, day=6), at(10, day=6)))
        long = await appointments.add(appt(org, cal.id, at(1), minutes=480))  # 01:00-09:00
        a = await appointments.add(appt(org, cal.id, at(9)))
        b = await appointments.add(appt(org, cal.id, at(10), status="pending"))
        await appointments.add(appt(org, cal.id, at(9, 30), status="cancelled"))
        await appointments.add(appt(org, cal.id, at(15)))  # after the window below
        await (await r.get(UnitOfWork)).commit()

    schedule = await _read(container, org, cal.id, at(8, 30), at(12))
    assert [x.id for x in schedule.rules] == [early.id, late.id]
    assert [x.id for x in schedule.blackouts] == [lunch.id]
    assert _held(schedule) == [(long.id, at(1), at(9)), (a.id, at(9), at(9, 30)), (b.id, at(10), at(10, 30))]
    # touching is not overlapping, at either end
    assert _held(await _read(container, org, cal.id, at(9, 30), at(10))) == []
    # a wide window first (a cache on SQL), then a narrower one inside it: the same as read directly
    await _read(container, org, cal.id, at(0), at(0, day=5))
    assert _held(await _read(container, org, cal.id, at(8, 59), at(9, 1))) == [
        (long.id, at(1), at(9)), (a.id, at(9), at(9, 30))]
    assert [x.id for x in (await _read(container, org, cal.id, at(12, 59), at(14))).blackouts] == [lunch.id]

    assert await _read(container, other, cal.id) == Schedule.empty()
    assert await _read(container, org, cal.id + 1000) == Schedule.empty()
    async with container() as r:
        await (await r.get(CalendarRepository)).delete(org, cal.id, NOW)
        await (await r.get(UnitOfWork)).commit()
    assert await _read(container, org, cal.id) == Schedule.empty()


# --------------------------------------------------------------------------- the SQL cache


@pytest.fixture
async def two_processes(sql_url: str, tmp_root: Path) -> AsyncIterator[tuple[Any, Any]]:
    """Two containers on one database, each with its own engine and cache: two API processes."""
    built = []
    for name in ("a", "b"):
        settings = Settings(database_url=sql_url, var_dir=tmp_root / f"var-{name}", secret_key="test-secret-key")
        built.append(build_container(settings))
    yield built[0], built[1]
    for container in built:
        await container.close()


class _Statements:
    def __init__(self, engine: AsyncEngine) -> None:
        self.count = 0
        self.engine = engine.sync_engine
        sa.event.listen(self.engine, "before_cursor_execute", self._seen)

    def _seen(self, *_: Any) -> None:
        self.count += 1

    def close(self) -> None:
        sa.event.remove(self.engine, "before_cursor_execute", self._seen)


async def test_an_unchanged_calendar_is_read_with_one_statement(two_processes: tuple[Any, Any]) -> None:
    a, _ = two_processes
    org = await new_organization(a)
    cal = await _calendar(a, org)
    async with a() as r:
        await (await r.get(CalendarRepository)).add_rule(org, AvailabilityRule(None, cal.id, 1, time(8), time(12)))
        await (await r.get(AppointmentRepository)).add(appt(org, cal.id, at(9)))
        await (await r.get(UnitOfWork)).commit()
    statements = _Statements(await a.get(AsyncEngine))
    try:
        first = await _read(a, org, cal.id)
        loaded = statements.count
        again = await _read(a, org, cal.id, at(1), at(0, day=4))  # inside what was loaded
        assert loaded >= 4 and statements.count - loaded <= 2  # the revision (and BEGIN/COMMIT at most)
    finally:
        statements.close()
    assert _held(again) == _held(first) and len(first.held) == 1


async def test_another_process_change_is_seen_by_the_next_read(two_processes: tuple[Any, Any]) -> None:
    a, b = two_processes
    org = await new_organization(a)
    cal = await _calendar(a, org)
    async with b() as r:
        rule = await (await r.get(CalendarRepository)).add_rule(org, AvailabilityRule(None, cal.id, 1, time(8),
                                                                                          time(12)))
        first = await (await r.get(AppointmentRepository)).add(appt(org, cal.id, at(9)))
        await (await r.get(UnitOfWork)).commit()
    assert [h[0] for h in _held(await _read(a, org, cal.id))] == [first.id]  # now cached in a

    async with b() as r:  # a booking
        second = await (await r.get(AppointmentRepository)).add(appt(org, cal.id, at(10)))
        await (await r.get(UnitOfWork)).commit()
    assert [h[0] for h in _held(await _read(a, org, cal.id))] == [first.id, second.id]

    async with b() as r:  # a cancellation
        await (await r.get(AppointmentRepository)).update(replace(first, status="cancelled", cancel_reason="cancelled"))
        await (await r.get(UnitOfWork)).commit()
    assert [h[0] for h in _held(await _read(a, org, cal.id))] == [second.id]

    async with b() as r:  # rules and blackouts
        calendars = await r.get(CalendarRepository)
        blackout = await calendars.add_blackout(org, Blackout(None, cal.id, at(14), at(15)))
        await calendars.delete_rule(org, cal.id, rule.id)
        await (await r.get(UnitOfWork)).commit()
    seen = await _read(a, org, cal.id)
    assert [x.id for x in seen.blackouts] == [blackout.id] and list(seen.rules) == []

    async with b() as r:  # by hand, outside the application: the triggers still move the revision
        conn = await (await r.get(UnitOfWork)).connection()  # type: ignore[attr-defined]
        await conn.execute(sa.text("UPDATE appointments SET status = 'cancelled' WHERE id = :id"), {"id": second.id})
        await conn.execute(sa.text("DELETE FROM blackouts WHERE id = :id"), {"id": blackout.id})
        await (await r.get(UnitOfWork)).commit()
    seen = await _read(a, org, cal.id)
    assert _held(seen) == [] and list(seen.blackouts) == []


async def test_a_rolled_back_change_leaves_nothing_to_match(two_processes: tuple[Any, Any]) -> None:
    """A transaction reads its own uncommitted booking (and caches what it saw), then rolls back. The
    next committed change gets a revision never used before, so that stale view is never served."""
    a, b = two_processes
    org = await new_organization(a)
    cal = await _calendar(a, org)
    assert _held(await _read(a, org, cal.id)) == []
    async with a() as r:
        ghost = await (await r.get(AppointmentRepository)).add(appt(org, cal.id, at(9)))
        inside = await (await r.get(ScheduleReader)).schedule(org, cal.id, at(0), at(0, day=5))
        assert [h[0] for h in _held(inside)] == [ghost.id]
        await (await r.get(UnitOfWork)).rollback()
    assert _held(await _read(b, org, cal.id)) == []
    async with b() as r:
        real = await (await r.get(AppointmentRepository)).add(appt(org, cal.id, at(11)))
        await (await r.get(UnitOfWork)).commit()
    assert _held(await _read(a, org, cal.id)) == [(real.id, at(11), at(11, 30))]


def test_the_cache_keeps_the_most_recently_used_calendars() -> None:
    from adapters.sql.schedule_cache import CachedSchedule

    cache = ScheduleCache(max_calendars=2)
    held = HeldIntervals([7], [to_epoch_us(at(9))], [to_epoch_us(at(10))])
    for calendar_id in (1, 2):
        cache.put((1, calendar_id), CachedSchedule(calendar_id, at(0), at(23), (), (), held))
    assert cache.get((1, 1), 1, at(1), at(2)) is not None  # 1 is now the most recent
    cache.put((1, 3), CachedSchedule(3, at(0), at(23), (), (), held))
    assert len(cache) == 2
    assert cache.get((1, 2), 2, at(1), at(2)) is None
    assert cache.get((1, 1), 1, at(1), at(2)) is not None
    assert cache.get((1, 1), 99, at(1), at(2)) is None  # another revision
    assert cache.get((1, 1), 1, at(0, day=2), at(2)) is None  # not inside what was loaded
    assert len(cache.get((1, 3), 3, at(9, 30), at(11)).held) == 1  # type: ignore[union-attr]


async def test_booking_checks_never_trust_the_cache(sql_url: str, tmp_root: Path) -> None:
    """Even a wrong cache (here: forged, as if a bug had lost a held slot) cannot let a booking overlap
    another: the check under the calendar lock reads the tables."""
    from adapters.memory.clock import ManualClock
    from application.context import Actor
    from application.scheduling.availability import GetAvailability, GetAvailabilityCommand
    from application.scheduling.booking import (
        BookAppointment,
        BookAppointmentCommand,
        BookNextOpenSlot,
        BookNextOpenSlotCommand,
    )
    from domain.errors import SlotUnavailable
    from entrypoints.overrides import ClockProvider

    settings = Settings(database_url=sql_url, var_dir=tmp_root / "var", secret_key="test-secret-key")
    container = build_container(settings, ClockProvider(ManualClock(NOW)))
    try:
        org = await new_organization(container)
        actor = Actor.system(org)
        async with container() as r:
            cal = await (await r.get(CalendarRepository)).add(Calendar(
                None, org, "Desk", "UTC", slot_duration_minutes=30, buffer_minutes=30, created_at=NOW,
                updated_at=NOW))
            await (await r.get(CalendarRepository)).add_rule(org, AvailabilityRule(None, cal.id, 1, time(9), time(11)))
            held = await (await r.get(AppointmentRepository)).add(appt(org, cal.id, at(9)))
            await (await r.get(UnitOfWork)).commit()
        query = GetAvailabilityCommand(actor, cal.id, at(0), at(0, day=4))
        async with container() as r:
            open_before = [s.start for s in (await (await r.get(GetAvailability)).execute(query)).slots]
        assert open_before == [at(10), at(10, 30)]  # 09:00 held, 09:30 within its 30-minute buffer

        cache = await container.get(ScheduleCache)
        (key, entry), = cache._entries.items()
        cache.put(key, replace(entry, high=at(0, day=28), held=HeldIntervals((), (), ())))  # the forgery
        async with container() as r:
            forged = [s.start for s in (await (await r.get(GetAvailability)).execute(query)).slots]
        assert at(9, 30) in forged  # the cache is wrong now...

        for command in (BookAppointmentCommand(actor, cal.id, at(9, 30)),
                        BookNextOpenSlotCommand(actor, cal.id, at(9, 30))):
            async with container() as r:
                use_case = await r.get(BookAppointment if isinstance(command, BookAppointmentCommand)
                                       else BookNextOpenSlot)
                with pytest.raises(SlotUnavailable):  # ...but no booking believes it
                    await use_case.execute(command)  # type: ignore[arg-type]
        async with container() as r:
            listed = await (await r.get(AppointmentRepository)).held_slots(org, cal.id, at(0), at(23))
        assert [h.id for h in listed] == [held.id]
    finally:
        await container.close()


def test_the_cache_is_bounded_by_held_slots_too() -> None:
    from adapters.sql.schedule_cache import CachedSchedule

    def entry(revision: int, count: int) -> CachedSchedule:
        held = HeldIntervals(list(range(count)), [to_epoch_us(at(9)) + i for i in range(count)],
                             [to_epoch_us(at(10)) + i for i in range(count)])
        return CachedSchedule(revision, at(0), at(23), (), (), held)

    cache = ScheduleCache(max_calendars=10, max_held=100)
    cache.put((1, 1), entry(1, 60))
    cache.put((1, 2), entry(2, 30))
    assert len(cache) == 2
    cache.put((1, 3), entry(3, 30))  # 120 held in all: the least recently used goes
    assert len(cache) == 2 and cache.get((1, 1), 1, at(1), at(2)) is None
    cache.put((1, 4), entry(4, 101))  # bigger than the whole budget: not kept, nothing evicted for it
    assert len(cache) == 2 and cache.get((1, 4), 4, at(1), at(2)) is None
    cache.put((1, 2), entry(5, 70))  # replacing an entry gives its slots back first
    assert len(cache) == 2 and cache.get((1, 2), 5, at(1), at(2)) is not None
