"""Scheduling use cases on every backend, as a voice agent calls them mid-call (no HTTP): the same
booking rules, events through the outbox, atomic reschedules."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from adapters.memory.clock import ManualClock
from adapters.memory.store import InMemoryStore
from adapters.sql.tables import outbox_events
from application.context import Actor
from application.ports.platform import UnitOfWork
from application.ports.scheduling import AppointmentRepository
from application.scheduling.availability import NextOpenSlot, NextOpenSlotCommand
from application.scheduling.booking import (
    AppointmentRef,
    BookAppointment,
    BookAppointmentCommand,
    BookNextOpenSlot,
    BookNextOpenSlotCommand,
    GetAppointment,
    RescheduleAppointment,
    RescheduleAppointmentCommand,
    appointment_view,
)
from application.scheduling.calendars import (
    AddAvailabilityRule,
    AddAvailabilityRuleCommand,
    AddBlackout,
    AddBlackoutCommand,
    CalendarRef,
    CreateCalendar,
    CreateCalendarCommand,
    GetCalendar,
    UpdateCalendar,
    UpdateCalendarCommand,
)
from domain.errors import NotFound, SlotUnavailable, ValidationFailed
from domain.scheduling.model import BookingLimitReached
from entrypoints.ioc import build_container
from entrypoints.overrides import ClockProvider
from entrypoints.settings import Settings
from tests.support.apps import new_organization

NOW = datetime(2026, 3, 2, 12, tzinfo=UTC)  # a Monday, 07:00 in New York
TUESDAY = datetime(2026, 3, 3, 5, tzinfo=UTC)  # 00:00 in New York


@pytest.fixture
async def clocked(database_url: str, tmp_root: Path) -> AsyncIterator[Any]:
    settings = Settings(database_url=database_url, var_dir=tmp_root / "var", secret_key="test-secret-key")
    built = build_container(settings, ClockProvider(ManualClock(NOW)))
    yield built
    await built.close()


async def run(container: Any, case: type, *args: Any) -> Any:
    """Execute a use case in its own unit of work and commit (as the HTTP pipeline or a worker job does)."""
    async with container() as r:
        result = await (await r.get(case)).execute(*args)
        await (await r.get(UnitOfWork)).commit()
    return result


async def events(container: Any, organization_id: int) -> list[tuple[str, dict[str, Any]]]:
    try:
        store = await container.get(InMemoryStore)
    except Exception:
        store = None
    if store is not None:
        return [(e.type, e.data) for _, e, _ in store.outbox if e.organization_id == organization_id]
    engine = await container.get(AsyncEngine)
    async with engine.connect() as conn:
        rows = await conn.execute(sa.select(outbox_events.c.type, outbox_events.c.data).where(
            outbox_events.c.organization_id == organization_id).order_by(outbox_events.c.id))
        return [(r.type, dict(r.data)) for r in rows]


async def calendar_with_hours(container: Any, actor: Actor, **fields: Any) -> int:
    cal = await run(container, CreateCalendar, CreateCalendarCommand(
        actor, **{"name": "Desk", "timezone": "America/New_York", **fields}))
    for weekday in range(5):
        await run(container, AddAvailabilityRule, AddAvailabilityRuleCommand(actor, cal.id, weekday, "09:00",
                                                                                  "12:00"))
    return cal.id  # type: ignore[no-any-return]


async def next_open(container: Any, actor: Actor, calendar_id: int, after: datetime) -> datetime | None:
    return await run(container, NextOpenSlot, NextOpenSlotCommand(actor, calendar_id, after))  # type: ignore[no-any-return]


def local(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


async def test_agent_books_mid_call_under_the_same_rules(clocked: Any) -> None:
    actor = Actor.system(await new_organization(clocked))
    cal = await calendar_with_hours(clocked, actor, buffer_minutes=15)
    await run(clocked, AddBlackout, AddBlackoutCommand(actor, cal, "2026-03-03T09:00:00-05:00",
                                                             "2026-03-03T10:00:00-05:00"))
    booked = await run(clocked, BookAppointment, BookAppointmentCommand(
        actor, cal, local("2026-03-03T10:00:00-05:00"), attendee_name="Caller", attendee_phone="+14155550100",
        call_id="call-123"))
    assert booked.status == "confirmed" and booked.call_id == "call-123"
    for refused in ("2026-03-03T09:30:00-05:00",  # blacked out
                    "2026-03-03T10:30:00-05:00",  # inside the buffer of the booking
                    "2026-03-07T10:00:00-05:00"):  # Saturday: no rule
        with pytest.raises(SlotUnavailable):
            await run(clocked, BookAppointment, BookAppointmentCommand(actor, cal, local(refused)))
    with pytest.raises(ValidationFailed):
        await run(clocked, BookAppointment, BookAppointmentCommand(actor, cal, datetime(2026, 3, 3, 15)))
    with pytest.raises(ValidationFailed):
        await run(clocked, BookAppointment, BookAppointmentCommand(
            actor, cal, local("2026-03-03T11:00:00-05:00"), attendee_email="nope"))
    other = Actor.system(await new_organization(clocked))
    with pytest.raises(NotFound):
        await run(clocked, BookAppointment, BookAppointmentCommand(other, cal,
                                                                         local("2026-03-03T11:00:00-05:00")))
    recorded = await events(clocked, actor.organization_id)
    assert recorded == [("appointment.booked", appointment_view(booked))]
    assert recorded[0][1]["call_id"] == "call-123" and recorded[0][1]["slot_start"] == "2026-03-03T15:00:00Z"


async def test_next_open_slot_and_booking_it(clocked: Any) -> None:
    actor = Actor.system(await new_organization(clocked))
    cal = await calendar_with_hours(clocked, actor, min_notice_minutes=24 * 60)
    # now is Monday 07:00 New York; a day of notice makes Tuesday 09:00 the first open slot
    first = await next_open(clocked, actor, cal, NOW)
    assert first == local("2026-03-03T09:00:00-05:00")
    later = await next_open(clocked, actor, cal, local("2026-03-03T11:45:00-05:00"))
    assert later == local("2026-03-04T09:00:00-05:00")
    friday_evening = await next_open(clocked, actor, cal, local("2026-03-06T12:00:00-05:00"))
    assert friday_evening == local("2026-03-09T09:00:00-04:00")  # Monday, after the DST switch
    booked = [await run(clocked, BookNextOpenSlot, BookNextOpenSlotCommand(actor, cal, NOW, call_id=f"c{i}"))
              for i in range(3)]
    assert [b.slot_start for b in booked] == [local("2026-03-03T09:00:00-05:00"), local("2026-03-03T09:30:00-05:00"),
                                             local("2026-03-03T10:00:00-05:00")]
    assert await next_open(clocked, actor, cal, NOW) == local("2026-03-03T10:30:00-05:00")
    # the same start booked through BookAppointment is refused: one rule set
    with pytest.raises(SlotUnavailable):
        await run(clocked, BookAppointment, BookAppointmentCommand(actor, cal, booked[0].slot_start))
    assert len(await events(clocked, actor.organization_id)) == 3

    empty = await run(clocked, CreateCalendar, CreateCalendarCommand(actor, name="E", timezone="UTC"))
    assert await next_open(clocked, actor, empty.id, NOW) is None
    assert await run(clocked, BookNextOpenSlot, BookNextOpenSlotCommand(actor, empty.id, NOW)) is None
    short = await calendar_with_hours(clocked, actor, horizon_days=1)
    assert await next_open(clocked, actor, short, local("2026-03-03T12:00:00-05:00")) is None


async def test_reschedule_is_all_or_nothing(clocked: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    actor = Actor.system(await new_organization(clocked))
    cal = await calendar_with_hours(clocked, actor)
    booked = await run(clocked, BookAppointment, BookAppointmentCommand(actor, cal,
                                                                              local("2026-03-03T09:00:00-05:00")))
    target = local("2026-03-03T11:00:00-05:00")

    async with clocked() as r:
        case = await r.get(RescheduleAppointment)
        repo = await r.get(AppointmentRepository)

        async def failing_add(appointment: Any) -> Any:
            raise SlotUnavailable("taken at the last moment")

        monkeypatch.setattr(repo, "add", failing_add)
        with pytest.raises(SlotUnavailable):
            await case.execute(RescheduleAppointmentCommand(actor, booked.id, target))
        await (await r.get(UnitOfWork)).rollback()  # what the pipeline does on an error
    monkeypatch.undo()
    assert await run(clocked, GetAppointment, AppointmentRef(actor, booked.id)) == booked
    assert await next_open(clocked, actor, cal, TUESDAY) == local("2026-03-03T09:30:00-05:00")
    assert await events(clocked, actor.organization_id) == [("appointment.booked", appointment_view(booked))]

    moved = await run(clocked, RescheduleAppointment, RescheduleAppointmentCommand(actor, booked.id, target))
    assert moved.previous.status == "cancelled" and moved.appointment.rescheduled_from == booked.id
    assert await next_open(clocked, actor, cal, TUESDAY) == local("2026-03-03T09:00:00-05:00")
    kinds = [kind for kind, _ in await events(clocked, actor.organization_id)]
    assert kinds == ["appointment.booked", "appointment.rescheduled"]


async def test_calendar_changes_apply_to_new_bookings_only(clocked: Any) -> None:
    actor = Actor.system(await new_organization(clocked))
    cal = await calendar_with_hours(clocked, actor)
    booked = await run(clocked, BookAppointment, BookAppointmentCommand(actor, cal,
                                                                              local("2026-03-03T09:00:00-05:00")))
    updated = await run(clocked, UpdateCalendar, UpdateCalendarCommand(actor, cal, {"slot_duration_minutes": 60}))
    assert updated.slot_duration_minutes == 60
    assert (await run(clocked, GetAppointment, AppointmentRef(actor, booked.id))).slot_end == booked.slot_end
    # 09:00-10:00 would overlap the existing 09:00-09:30 booking; 10:00 is the first hour slot left
    assert await next_open(clocked, actor, cal, TUESDAY) == local("2026-03-03T10:00:00-05:00")
    with pytest.raises(ValidationFailed):
        await run(clocked, UpdateCalendar, UpdateCalendarCommand(actor, cal, {"horizon_days": 0}))
    assert (await run(clocked, GetCalendar, CalendarRef(actor, cal))).horizon_days == 60


async def test_booking_caps_hold_for_voice_agents_on_every_backend(clocked: Any) -> None:
    """max_upcoming_per_attendee refuses a fourth upcoming appointment of one attendee (409 booking_limit_reached),
    the reschedule of one of them is not counted against itself, and BookNextOpenSlot skips a local date at its
    max_bookings_per_day for the next one with room."""
    actor = Actor.system(await new_organization(clocked))
    cal = await calendar_with_hours(clocked, actor, max_upcoming_per_attendee=2, max_bookings_per_day=2)
    first = await run(clocked, BookNextOpenSlot, BookNextOpenSlotCommand(actor, cal, NOW,
                                                                         attendee_phone="+14155550100"))
    second = await run(clocked, BookNextOpenSlot, BookNextOpenSlotCommand(
        actor, cal, NOW, attendee_phone="+14155550101", attendee_email="bo@example.com"))
    assert [first.slot_start, second.slot_start] == [local("2026-03-02T09:00:00-05:00"),
                                                     local("2026-03-02T09:30:00-05:00")]
    third = await run(clocked, BookNextOpenSlot, BookNextOpenSlotCommand(actor, cal, NOW,
                                                                         attendee_email="BO@example.com"))
    assert third.slot_start == local("2026-03-03T09:00:00-05:00")  # Monday holds its two bookings
    with pytest.raises(BookingLimitReached) as refused:
        await run(clocked, BookAppointment, BookAppointmentCommand(
            actor, cal, local("2026-03-04T09:00:00-05:00"), attendee_email="bo@EXAMPLE.com"))
    assert refused.value.code == "booking_limit_reached"
    assert refused.value.details == {"limit": "max_upcoming_per_attendee", "max": 2}
    moved = await run(clocked, RescheduleAppointment, RescheduleAppointmentCommand(
        actor, third.id, local("2026-03-04T09:00:00-05:00")))
    assert moved.appointment.slot_start == local("2026-03-04T09:00:00-05:00")
