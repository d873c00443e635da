"""The scheduling ports behave the same on memory, SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, time, timedelta
from typing import Any

import icalendar
import pytest

from application.ports.platform import PageRequest, UnitOfWork
from application.ports.scheduling import (
    AppointmentFilter,
    AppointmentRepository,
    CalendarRepository,
    IcsRenderer,
    ScheduleReader,
)
from domain.errors import SlotUnavailable
from domain.scheduling.model import Appointment, AvailabilityRule, Blackout, Calendar, HeldSlot, Slot
from tests.support.apps import new_organization

NOW = datetime(2026, 2, 2, 12, tzinfo=UTC)


def at(hour: int, minute: int = 0, day: int = 3) -> datetime:
    return datetime(2026, 2, day, hour, minute, tzinfo=UTC)


def appt(org: int, calendar_id: int, start: datetime, status: str = "confirmed", minutes: int = 30,
         **fields: Any) -> Appointment:
    return Appointment(None, org, calendar_id, status, start, start + timedelta(minutes=minutes), created_at=NOW,
                       updated_at=NOW, **fields)


async def _calendar(container: Any, org: int, **fields: Any) -> Calendar:
    async with container() as r:
        calendar = await (await r.get(CalendarRepository)).add(
            Calendar(None, org, "Front desk", "Europe/Berlin", created_at=NOW, updated_at=NOW, **fields))
        await (await r.get(UnitOfWork)).commit()
    return calendar


async def test_calendars_are_stored_scoped_listed_and_soft_deleted(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    cal = await _calendar(container, org, slot_duration_minutes=45, buffer_minutes=10, horizon_days=30)
    await _calendar(container, org)
    await _calendar(container, other)
    async with container() as r:
        repo = await r.get(CalendarRepository)
        got = await repo.get(org, cal.id)
        assert got == cal and got.created_at == NOW and got.feed_token is None
        assert (got.slot_duration_minutes, got.buffer_minutes, got.horizon_days) == (45, 10, 30)
        assert await repo.get(other, cal.id) is None
        assert await repo.get_for_update(org, cal.id) == cal
        page = await repo.list(org, PageRequest(1, 0))
        assert page.total == 2 and [c.id for c in page.items] == [cal.id]
        assert (await repo.list(org, PageRequest(10, 5))).total == 2
        await repo.update(replace(cal, name="Renamed", timezone="America/New_York", agent_id=None))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        repo = await r.get(CalendarRepository)
        assert (await repo.get(org, cal.id)).name == "Renamed"  # type: ignore[union-attr]
        await repo.update(replace(cal, organization_id=other, name="Hijack"))
        await (await r.get(UnitOfWork)).commit()
        assert (await repo.get(org, cal.id)).name == "Renamed"  # type: ignore[union-attr]
        await repo.add_rule(org, AvailabilityRule(None, cal.id, 0, time(9), time(17)))
        await repo.set_feed_token(org, cal.id, "a" * 64)
        await repo.delete(org, cal.id, NOW)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        repo = await r.get(CalendarRepository)
        assert await repo.get(org, cal.id) is None
        assert (await repo.list(org, PageRequest(10, 0))).total == 1
        assert await repo.find_by_feed_token("a" * 64) is None
        assert await repo.list_rules(org, cal.id) == []


async def test_rules_and_blackouts(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    cal = await _calendar(container, org)
    async with container() as r:
        repo = await r.get(CalendarRepository)
        late = await repo.add_rule(org, AvailabilityRule(None, cal.id, 1, time(13), time(17, 30)))
        early = await repo.add_rule(org, AvailabilityRule(None, cal.id, 1, time(8, 15), time(12)))
        monday = await repo.add_rule(org, AvailabilityRule(None, cal.id, 0, time(10), time(11)))
        assert late.id is not None and late.start_time == time(13) and late.end_time == time(17, 30)
        b1 = await repo.add_blackout(org, Blackout(None, cal.id, at(10), at(12), "Lunch"))
        b2 = await repo.add_blackout(org, Blackout(None, cal.id, at(9), at(10)))
        await repo.add_blackout(org, Blackout(None, cal.id, at(9, day=5), at(10, day=5)))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        repo = await r.get(CalendarRepository)
        assert [x.id for x in await repo.list_rules(org, cal.id)] == [monday.id, early.id, late.id]
        assert await repo.list_rules(other, cal.id) == []
        assert not await repo.delete_rule(other, cal.id, late.id)
        assert await repo.delete_rule(org, cal.id, late.id)
        assert not await repo.delete_rule(org, cal.id, late.id)
        overlapping = await repo.blackouts_overlapping(org, cal.id, at(11), at(11, 30))
        assert [(b.id, b.reason, b.start, b.end) for b in overlapping] == [(b1.id, "Lunch", at(10), at(12))]
        assert await repo.blackouts_overlapping(org, cal.id, at(12), at(13)) == []  # touching is not overlapping
        assert [b.id for b in await repo.blackouts_overlapping(org, cal.id, at(0), at(23))] == [b2.id, b1.id]
        page = await repo.list_blackouts(org, cal.id, PageRequest(2, 0))
        assert page.total == 3 and [b.id for b in page.items] == [b2.id, b1.id]
        assert (await repo.list_blackouts(org, cal.id, PageRequest(10, 0), start=at(0, day=4))).total == 1
        assert (await repo.list_blackouts(org, cal.id, PageRequest(10, 0), end=at(9, 30))).total == 1
        assert (await repo.list_blackouts(other, cal.id, PageRequest(10, 0))).total == 0
        assert not await repo.delete_blackout(other, cal.id, b1.id)
        assert await repo.delete_blackout(org, cal.id, b1.id)
        await (await r.get(UnitOfWork)).commit()


async def test_feed_tokens(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    cal = await _calendar(container, org)
    digest = f"{org:064x}"
    async with container() as r:
        repo = await r.get(CalendarRepository)
        await repo.set_feed_token(other, cal.id, digest)  # another organization's: no effect
        await (await r.get(UnitOfWork)).commit()
        assert await repo.find_by_feed_token(digest) is None
        await repo.set_feed_token(org, cal.id, digest)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        repo = await r.get(CalendarRepository)
        found = await repo.find_by_feed_token(digest)
        assert found is not None and found.id == cal.id and found.feed_token == digest
        await repo.update(replace(found, name="Renamed"))  # keeps the token
        await (await r.get(UnitOfWork)).commit()
        assert (await repo.get(org, cal.id)).feed_token == digest  # type: ignore[union-attr]
        await repo.set_feed_token(org, cal.id, None)
        await (await r.get(UnitOfWork)).commit()
        assert await repo.find_by_feed_token(digest) is None


async def test_one_active_appointment_per_calendar_and_start(container: Any) -> None:
    """The unique index over active appointments (and its in-memory twin) backs the use-case check."""
    org = await new_organization(container)
    cal = await _calendar(container, org)
    second_cal = await _calendar(container, org)
    async with container() as r:
        repo = await r.get(AppointmentRepository)
        first = await repo.add(appt(org, cal.id, at(9), attendee_name="Ann", call_id="call-1"))
        await (await r.get(UnitOfWork)).commit()
    assert first.id is not None and first.attendee_name == "Ann" and first.call_id == "call-1"
    for status in ("confirmed", "pending"):
        async with container() as r:
            with pytest.raises(SlotUnavailable):
                await (await r.get(AppointmentRepository)).add(appt(org, cal.id, at(9), status=status))
            await (await r.get(UnitOfWork)).rollback()
    async with container() as r:
        repo = await r.get(AppointmentRepository)
        await repo.add(appt(org, second_cal.id, at(9)))  # another calendar
        await repo.add(appt(org, cal.id, at(9), status="cancelled", cancel_reason="cancelled"))  # not active
        await repo.update(first.cancel(NOW))  # releasing the slot...
        again = await repo.add(appt(org, cal.id, at(9), status="pending"))  # ...lets a new booking in
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        repo = await r.get(AppointmentRepository)
        revived = replace(first.cancel(NOW), status="confirmed")
        with pytest.raises(SlotUnavailable):
            await repo.update(revived)
        await (await r.get(UnitOfWork)).rollback()
        assert (await repo.get(org, again.id)).status == "pending"  # type: ignore[union-attr]


async def test_appointments_are_scoped_filtered_and_found_by_time(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    cal = await _calendar(container, org)
    async with container() as r:
        repo = await r.get(AppointmentRepository)
        a = await repo.add(appt(org, cal.id, at(9)))
        b = await repo.add(appt(org, cal.id, at(11), status="pending"))
        c = await repo.add(appt(org, cal.id, at(8), status="cancelled", cancel_reason="declined"))
        d = await repo.add(appt(org, cal.id, at(9, day=4), status="completed"))
        long = await repo.add(appt(org, cal.id, at(1), minutes=480))  # 01:00-09:00
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        repo = await r.get(AppointmentRepository)
        assert await repo.get(other, a.id) is None and await repo.get_for_update(org, a.id) == a
        everything = await repo.list(org, AppointmentFilter(), PageRequest(10, 0))
        assert [x.id for x in everything.items] == [long.id, c.id, a.id, b.id, d.id] and everything.total == 5
        assert [x.id for x in (await repo.list(org, AppointmentFilter(status="pending"), PageRequest(10, 0))).items] \
            == [b.id]
        window = AppointmentFilter(calendar_id=cal.id, start=at(8), end=at(11))
        assert [x.id for x in (await repo.list(org, window, PageRequest(10, 0))).items] == [c.id, a.id]
        assert (await repo.list(org, AppointmentFilter(calendar_id=cal.id + 1000), PageRequest(10, 0))).total == 0
        assert (await repo.list(other, AppointmentFilter(), PageRequest(10, 0))).total == 0
        assert (await repo.list(org, AppointmentFilter(), PageRequest(2, 4))).items == [d]

        held = await repo.held_slots(org, cal.id, at(8, 30), at(11))
        assert held == [HeldSlot(long.id, at(1), at(9)), HeldSlot(a.id, at(9), at(9, 30))]  # b touches, c cancelled
        assert [(x.id, x.status) for x in await repo.held_slots(org, cal.id, at(9, 30), at(11, 1))] == [
            (b.id, "pending")]
        assert await repo.held_slots(other, cal.id, at(0), at(23)) == []
        assert await repo.count_holding_after(org, cal.id, at(9, 15)) == 2
        assert await repo.count_holding_after(org, cal.id, at(12)) == 0
        feed = await repo.for_feed(org, cal.id, at(8, 45), limit=10)
        assert [x.id for x in feed] == [long.id, a.id, b.id, d.id]  # c ended at 08:30
        assert [x.id for x in await repo.for_feed(org, cal.id, at(9, 15), limit=2)] == [a.id, b.id]

        moved = await repo.update(replace(a.approve(NOW) if a.status == "pending" else a.cancel(NOW),
                                          notes="moved away", updated_at=NOW + timedelta(hours=1)))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        stored = await (await r.get(AppointmentRepository)).get(org, a.id)
        assert stored == moved and stored.sequence == 1 and stored.cancel_reason == "cancelled"  # type: ignore


async def test_ics_renderer_round_trips(container: Any) -> None:
    async with container() as r:
        renderer = await r.get(IcsRenderer)
    cal = Calendar(7, 1, "Clinic", "Europe/Berlin")
    start = at(9)
    booked = Appointment.new(organization_id=1, calendar_id=7, slot=Slot(start, start + timedelta(minutes=30)),
                             attendee_name="Zoë, \"Q\"; test", notes="line1\nline2", now=NOW, id=5)
    cancelled = booked.cancel(NOW + timedelta(minutes=5))
    pending = replace(Appointment.new(organization_id=1, calendar_id=7, slot=Slot(at(10), at(10, 30)),
                                      require_approval=True, now=NOW, id=6))
    body = renderer.render(cal, [cancelled, pending])
    parsed = icalendar.Calendar.from_ical(body)
    events = {str(e["uid"]): e for e in parsed.walk("VEVENT")}
    assert set(events) == {"appointment-5@parley", "appointment-6@parley"}
    first = events["appointment-5@parley"]
    assert (str(first["status"]), int(first["sequence"])) == ("CANCELLED", 1)
    assert first.decoded("dtstart") == at(9) and first.decoded("dtend") == at(9, 30)
    assert first.decoded("dtstamp") == NOW + timedelta(minutes=5)
    assert "Zoë" in str(first["summary"]) and "line2" in str(first["description"])
    assert str(events["appointment-6@parley"]["status"]) == "TENTATIVE"
    assert body == renderer.render(cal, [cancelled, pending])
    assert b"\r\n" in body and body.startswith(b"BEGIN:VCALENDAR")


async def test_an_outcome_keeps_its_time_busy(container: Any) -> None:
    """completed and no_show appointments are held slots (busy time) like confirmed ones; cancelled are not."""
    org = await new_organization(container)
    cal = await _calendar(container, org)
    async with container() as r:
        repo = await r.get(AppointmentRepository)
        done = await repo.add(appt(org, cal.id, at(9), status="completed"))
        missed = await repo.add(appt(org, cal.id, at(10), status="no_show"))
        confirmed = await repo.add(appt(org, cal.id, at(11)))
        await repo.add(appt(org, cal.id, at(12), status="cancelled", cancel_reason="cancelled"))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        repo = await r.get(AppointmentRepository)
        held = await repo.held_slots(org, cal.id, at(8), at(13))
        assert [(x.id, x.status) for x in held] == [(done.id, "completed"), (missed.id, "no_show"),
                                                    (confirmed.id, "confirmed")]
        assert await repo.count_holding_after(org, cal.id, at(8)) == 1  # upcoming active ones only
        schedule = await (await r.get(ScheduleReader)).schedule(org, cal.id, at(8), at(13))
        assert list(schedule.held.ids) == [done.id, missed.id, confirmed.id]
        fresh = await (await r.get(ScheduleReader)).schedule(org, cal.id, at(8), at(13), fresh=True)
        assert list(fresh.held.ids) == [done.id, missed.id, confirmed.id]
