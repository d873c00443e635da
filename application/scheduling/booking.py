"""Booking and the appointment lifecycle: book, book the next open slot, reschedule, approve, decline,
cancel, record an outcome, read.

Every booking path (HTTP, a voice agent mid-call) goes through the same checks: the calendar row is
locked first (``CalendarRepository.get_for_update``), the slot must be an open slot computed by the domain
(``require_open_slot``: rules, blackouts, buffers, notice, horizon, held slots), and the insert itself is
backed by a unique index over active appointments (``SlotUnavailable``). Use cases never commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from application.context import Actor
from application.ports.platform import Clock, Page, PageRequest, UnitOfWork
from application.ports.scheduling import AppointmentFilter, AppointmentRepository, CalendarRepository, ScheduleReader
from application.scheduling.availability import SlotFinder, aware_instant
from application.scheduling.calendars import load_calendar
from domain.errors import NotFound
from domain.events import EventType
from domain.identity import persisted
from domain.rfc3339 import format_utc
from domain.scheduling.model import (
    APPOINTMENT_MACHINE,
    TRIGGER_TARGET,
    Appointment,
    AppointmentStatus,
    BookingLimitReached,
    Calendar,
    Slot,
    validate_attendee,
)


def appointment_view(a: Appointment) -> dict[str, Any]:
    """The appointment as the API shows it (times in UTC with Z): the ``data`` of its events."""
    return {
        "id": a.id,
        "calendar_id": a.calendar_id,
        "status": a.status,
        "slot_start": format_utc(a.slot_start),
        "slot_end": format_utc(a.slot_end),
        "attendee_name": a.attendee_name,
        "attendee_email": a.attendee_email,
        "attendee_phone": a.attendee_phone,
        "notes": a.notes,
        "cancel_reason": a.cancel_reason,
        "rescheduled_from": a.rescheduled_from,
        "call_id": a.call_id,
        "sequence": a.sequence,
        "created_at": format_utc(a.created_at) if a.created_at else None,
        "updated_at": format_utc(a.updated_at) if a.updated_at else None,
    }


async def _appointment(appointments: AppointmentRepository, actor: Actor, appointment_id: int, *,
                       lock: bool = False) -> Appointment:
    getter = appointments.get_for_update if lock else appointments.get
    appointment = await getter(actor.organization_id, appointment_id)
    if appointment is None:
        raise NotFound("appointment", appointment_id)
    return appointment


async def _appointment_under_calendar_lock(calendars: CalendarRepository, appointments: AppointmentRepository,
                                           actor: Actor, appointment_id: int) -> Appointment:
    """The appointment, row-locked after its calendar's row: every writer of a calendar's appointments
    locks in this order (calendar, then appointment), so two of them never wait on each other in a
    cycle. A deleted calendar has no live row to lock; its appointments can still be moved."""
    current = await _appointment(appointments, actor, appointment_id)
    await calendars.get_for_update(actor.organization_id, current.calendar_id)
    return await _appointment(appointments, actor, appointment_id, lock=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class BookingDetails:
    """What every booking command carries besides where the slot is: the attendee and how to book."""

    attendee_name: str | None = None
    attendee_email: str | None = None
    attendee_phone: str | None = None
    require_approval: bool = False
    notes: str | None = None
    call_id: str | None = None
    """The call during which a voice agent booked, if any."""


@dataclass(frozen=True, slots=True)
class BookAppointmentCommand(BookingDetails):
    actor: Actor
    calendar_id: int
    slot_start: datetime


class _Booking:
    """What both booking use cases share: attendee validation, the calendar lock, and the fresh check of
    the slot right before the insert."""

    def __init__(self, uow: UnitOfWork, calendars: CalendarRepository, appointments: AppointmentRepository,
                 schedules: ScheduleReader, clock: Clock) -> None:
        self.uow, self.calendars, self.appointments, self.clock = uow, calendars, appointments, clock
        self.finder = SlotFinder(schedules)

    async def _locked(self, command: BookAppointmentCommand | BookNextOpenSlotCommand) -> tuple[
            tuple[str | None, str | None, str | None, str | None], Calendar, datetime]:
        """(the validated attendee, the calendar row-locked, now)."""
        attendee = validate_attendee(command.attendee_name, command.attendee_email, command.attendee_phone,
                                     command.notes)
        calendar = await load_calendar(self.calendars, command.actor, command.calendar_id, lock=True,
                                       field="calendar_id")
        return attendee, calendar, self.clock.now()

    async def _take(self, command: BookAppointmentCommand | BookNextOpenSlotCommand, calendar: Calendar,
                    slot_start: datetime, now: datetime,
                    attendee: tuple[str | None, str | None, str | None, str | None]) -> Appointment:
        slot = await self.finder.require(calendar, slot_start, now)
        await check_caps(self.appointments, calendar, slot.start, now, attendee[1], attendee[2])
        return await _book(self.uow, self.appointments, calendar, slot, now, attendee, command.require_approval,
                           command.call_id)


async def check_caps(appointments: AppointmentRepository, calendar: Calendar, slot_start: datetime, now: datetime,
                     email: str | None, phone: str | None, *, exclude_appointment_id: int | None = None) -> None:
    """The calendar's booking caps (409 booking_limit_reached): the attendee's upcoming appointments (same email or
    phone) and the bookings of the slot's local date. Counted under the calendar's row lock, which every booking
    takes first, so concurrent bookings are counted one after the other and never exceed a cap."""
    org, calendar_id = calendar.organization_id, persisted(calendar.id)
    cap = calendar.max_upcoming_per_attendee
    if cap is not None and await appointments.count_upcoming_of_attendee(
            org, calendar_id, now, email, phone, exclude_appointment_id) >= cap:
        raise BookingLimitReached.per_attendee(cap)
    daily = calendar.max_bookings_per_day
    if daily is not None:
        start, end = calendar.local_day(slot_start)
        if await appointments.count_starting_between(org, calendar_id, start, end, exclude_appointment_id) >= daily:
            raise BookingLimitReached.per_day(daily, slot_start.astimezone(calendar.zone).date().isoformat())


class BookAppointment(_Booking):
    """Book ``slot_start`` (confirmed, event appointment.booked) or request it (pending, the slot held).
    The one booking rule set: the HTTP API and voice agents mid-call both come here."""

    async def execute(self, command: BookAppointmentCommand) -> Appointment:
        slot_start = aware_instant(command.slot_start, "slot_start")
        attendee, calendar, now = await self._locked(command)
        return await self._take(command, calendar, slot_start, now, attendee)


async def _book(uow: UnitOfWork, appointments: AppointmentRepository, calendar: Calendar, slot: Slot,
                now: datetime, attendee: tuple[str | None, str | None, str | None, str | None],
                require_approval: bool, call_id: str | None) -> Appointment:
    name, email, phone, notes = attendee
    appointment = Appointment.new(
        organization_id=calendar.organization_id, calendar_id=persisted(calendar.id), slot=slot,
        require_approval=require_approval, attendee_name=name, attendee_email=email, attendee_phone=phone,
        notes=notes, now=now, call_id=call_id,
    )
    stored = await appointments.add(appointment)
    if stored.status == AppointmentStatus.CONFIRMED:
        uow.record(EventType.APPOINTMENT_BOOKED(stored.organization_id, appointment_view(stored)))
    return stored


async def bookable(appointments: AppointmentRepository, calendar: Calendar, slots: list[Slot]) -> list[Slot]:
    """``slots`` without those on a local date at the calendar's ``max_bookings_per_day`` (what a voice agent can
    offer: a booking there would be refused)."""
    cap = calendar.max_bookings_per_day
    if cap is None:
        return slots
    full: dict[datetime, bool] = {}
    kept = []
    for slot in slots:
        start, end = calendar.local_day(slot.start)
        if start not in full:
            full[start] = await appointments.count_starting_between(
                calendar.organization_id, persisted(calendar.id), start, end) >= cap
        if not full[start]:
            kept.append(slot)
    return kept


@dataclass(frozen=True, slots=True)
class BookNextOpenSlotCommand(BookingDetails):
    actor: Actor
    calendar_id: int
    after: datetime


class BookNextOpenSlot(_Booking):
    """Find the first open slot at or after ``after`` on a local date under the calendar's
    ``max_bookings_per_day`` and book it, under the calendar lock (no race between finding and booking). None when
    no slot is open before the horizon; 409 booking_limit_reached when the attendee has reached
    ``max_upcoming_per_attendee``."""

    async def execute(self, command: BookNextOpenSlotCommand) -> Appointment | None:
        after = aware_instant(command.after, "after")
        attendee, calendar, now = await self._locked(command)
        found = await self.finder.first(calendar, after, now)
        while found is not None and await self._day_full(calendar, found.start):  # the next local date, then
            found = await self.finder.first(calendar, calendar.local_day(found.start)[1], now)
        if found is None:
            return None
        return await self._take(command, calendar, found.start, now, attendee)

    async def _day_full(self, calendar: Calendar, slot_start: datetime) -> bool:
        """Whether the slot's local date has reached the calendar's ``max_bookings_per_day``."""
        if calendar.max_bookings_per_day is None:
            return False
        start, end = calendar.local_day(slot_start)
        return await self.appointments.count_starting_between(
            calendar.organization_id, persisted(calendar.id), start, end) >= calendar.max_bookings_per_day


@dataclass(frozen=True, slots=True)
class AppointmentRef:
    """One appointment of the actor's organization: what reading it or a status move (approve, decline,
    cancel) needs."""

    actor: Actor
    appointment_id: int


class GetAppointment:
    def __init__(self, appointments: AppointmentRepository) -> None:
        self.appointments = appointments

    async def execute(self, command: AppointmentRef) -> Appointment:
        return await _appointment(self.appointments, command.actor, command.appointment_id)


@dataclass(frozen=True, slots=True)
class ListAppointmentsCommand:
    actor: Actor
    filters: AppointmentFilter
    page: PageRequest


class ListAppointments:
    def __init__(self, appointments: AppointmentRepository) -> None:
        self.appointments = appointments

    async def execute(self, command: ListAppointmentsCommand) -> Page[Appointment]:
        return await self.appointments.list(command.actor.organization_id, command.filters, command.page)


@dataclass(frozen=True, slots=True)
class RescheduleAppointmentCommand:
    actor: Actor
    appointment_id: int
    slot_start: datetime


@dataclass(frozen=True, slots=True)
class Rescheduling:
    previous: Appointment
    """The old row, now cancelled with cancel_reason ``rescheduled``."""
    appointment: Appointment
    """The new row (new id, ``rescheduled_from`` = the old id), pending or confirmed as the old one was."""


class RescheduleAppointment:
    """Atomic: the new slot is taken and the old one released in the same transaction, or nothing changes."""

    def __init__(self, uow: UnitOfWork, calendars: CalendarRepository, appointments: AppointmentRepository,
                 schedules: ScheduleReader, clock: Clock) -> None:
        self.uow, self.calendars, self.appointments, self.clock = uow, calendars, appointments, clock
        self.finder = SlotFinder(schedules)

    async def execute(self, command: RescheduleAppointmentCommand) -> Rescheduling:
        slot_start = aware_instant(command.slot_start, "slot_start")
        actor = command.actor
        current = await _appointment(self.appointments, actor, command.appointment_id)
        calendar = await load_calendar(self.calendars, actor, current.calendar_id, lock=True)
        current = await _appointment(self.appointments, actor, command.appointment_id, lock=True)
        if not current.can("reschedule"):
            raise APPOINTMENT_MACHINE.refusal(current.status, "reschedule", target=TRIGGER_TARGET["reschedule"])
        now = self.clock.now()
        slot = await self.finder.require(calendar, slot_start, now, exclude_appointment_id=current.id)
        await check_caps(self.appointments, calendar, slot.start, now, current.attendee_email, current.attendee_phone,
                         exclude_appointment_id=current.id)
        previous = await self.appointments.update(current.mark_rescheduled(now))
        replacement = await self.appointments.add(current.replacement(slot, now))
        data = appointment_view(replacement)
        data["previous_appointment"] = appointment_view(previous)
        self.uow.record(EventType.APPOINTMENT_RESCHEDULED(actor.organization_id, data))
        return Rescheduling(previous, replacement)


class _Move:
    """A status move of one appointment under its row lock, with the event it causes."""

    event: EventType | None = None

    def __init__(self, uow: UnitOfWork, calendars: CalendarRepository, appointments: AppointmentRepository,
                 clock: Clock) -> None:
        self.uow, self.calendars, self.appointments, self.clock = uow, calendars, appointments, clock

    def apply(self, appointment: Appointment, now: datetime) -> Appointment:
        raise NotImplementedError

    async def execute(self, command: AppointmentRef) -> Appointment:
        actor = command.actor
        current = await _appointment_under_calendar_lock(self.calendars, self.appointments, actor,
                                                         command.appointment_id)
        moved = await self.appointments.update(self.apply(current, self.clock.now()))
        if self.event is not None:
            self.uow.record(self.event(actor.organization_id, appointment_view(moved)))
        return moved


class ApproveAppointment(_Move):
    """pending -> confirmed (event appointment.booked)."""

    event = EventType.APPOINTMENT_BOOKED

    def apply(self, appointment: Appointment, now: datetime) -> Appointment:
        return appointment.approve(now)


class DeclineAppointment(_Move):
    """pending -> cancelled, reason declined (event appointment.cancelled)."""

    event = EventType.APPOINTMENT_CANCELLED

    def apply(self, appointment: Appointment, now: datetime) -> Appointment:
        return appointment.decline(now)


class CancelAppointment(_Move):
    """pending or confirmed -> cancelled, reason cancelled (event appointment.cancelled)."""

    event = EventType.APPOINTMENT_CANCELLED

    def apply(self, appointment: Appointment, now: datetime) -> Appointment:
        return appointment.cancel(now)


@dataclass(frozen=True, slots=True)
class RecordAppointmentOutcomeCommand:
    actor: Actor
    appointment_id: int
    outcome: str
    """completed or no_show"""
    notes: str | None = None


class RecordAppointmentOutcome:
    """confirmed -> completed or no_show (no event: the catalogue has none for outcomes)."""

    def __init__(self, calendars: CalendarRepository, appointments: AppointmentRepository, clock: Clock) -> None:
        self.calendars, self.appointments, self.clock = calendars, appointments, clock

    async def execute(self, command: RecordAppointmentOutcomeCommand) -> Appointment:
        notes = validate_attendee(notes=command.notes)[3] if command.notes is not None else None
        current = await _appointment_under_calendar_lock(self.calendars, self.appointments, command.actor,
                                                         command.appointment_id)
        moved = current.record_outcome(command.outcome, self.clock.now(), notes=notes)
        return await self.appointments.update(moved)
