"""Scheduling use cases: calendars, rules, blackouts, open slots, the appointment lifecycle and ICS feeds.

Every booking path (HTTP, a voice agent mid-call) goes through the same checks: the calendar row is
locked first (``CalendarRepository.get_for_update``), the slot must be an open slot computed by the domain
(``require_open_slot``: rules, blackouts, buffers, notice, horizon, held slots), and the insert itself is
backed by a unique index over active appointments (``SlotUnavailable``). Use cases never commit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

from application.context import Actor
from application.ports.agents import AgentRepository
from application.ports.platform import Clock, Page, PageRequest, Random, UnitOfWork
from application.ports.scheduling import (
    AppointmentFilter,
    AppointmentRepository,
    CalendarRepository,
    IcsRenderer,
    ScheduleReader,
)
from domain.errors import Conflict, NotFound, ValidationFailed
from domain.events import EventType
from domain.patching import apply_patch
from domain.scheduling import (
    APPOINTMENT_MACHINE,
    FEED_LOOKBACK_DAYS,
    FEED_MAX_EVENTS,
    MAX_RULES_PER_CALENDAR,
    TRIGGER_TARGET,
    Appointment,
    AvailabilityRule,
    Blackout,
    Calendar,
    Slot,
    availability_range,
    build_blackout,
    build_rule,
    feed_token_digest,
    format_utc,
    is_feed_token_shaped,
    next_open_slot_windows,
    open_slots,
    require_open_slot,
    require_supported,
    validate_attendee,
    validate_blackout_reason,
    validate_timezone,
)

FEED_TOKEN_BYTES = 24

CALENDAR_FIELDS = frozenset({"name", "timezone", "slot_duration_minutes", "buffer_minutes", "min_notice_minutes",
                             "horizon_days", "agent_id"})


# --------------------------------------------------------------------------- shared views and helpers


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


def _aware(value: datetime, field: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise ValidationFailed.field(field, "must carry an explicit UTC offset or Z")
    return require_supported(value.astimezone(UTC), field)


async def _calendar(calendars: CalendarRepository, actor: Actor, calendar_id: int, *, lock: bool = False) -> Calendar:
    getter = calendars.get_for_update if lock else calendars.get
    calendar = await getter(actor.organization_id, calendar_id)
    if calendar is None:
        raise NotFound("calendar", calendar_id)
    return calendar


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


async def _check_agent(agents: AgentRepository, organization_id: int, agent_id: int | None) -> None:
    if agent_id is not None and await agents.get(organization_id, agent_id) is None:
        raise NotFound("agent", agent_id)


class CalendarsForAgents:
    """AgentCalendars over the calendar repository: the organization's live (not deleted) calendars."""

    def __init__(self, calendars: CalendarRepository) -> None:
        self.calendars = calendars

    async def exists(self, organization_id: int, calendar_id: int) -> bool:
        return await self.calendars.get(organization_id, calendar_id) is not None


class _SlotFinder:
    """Reads what slot generation needs for one calendar and a window, and asks the domain."""

    def __init__(self, schedules: ScheduleReader) -> None:
        self.schedules = schedules

    async def open_slots(self, calendar: Calendar, start: datetime, end: datetime, now: datetime) -> list[Slot]:
        """Open slots starting in ``[start, end)``."""
        return (await self._open_slots(calendar, start, end, now))[1]

    async def _open_slots(self, calendar: Calendar, start: datetime, end: datetime,
                          now: datetime) -> tuple[bool, list[Slot]]:
        """(whether the calendar has rules at all, the open slots starting in ``[start, end)``)."""
        buffer = timedelta(minutes=calendar.buffer_minutes)
        reach = end + calendar.slot_duration  # the last slot starting before ``end`` ends by then
        schedule = await self.schedules.schedule(calendar.organization_id, calendar.id or 0, start - buffer,
                                                 reach + buffer)
        if not schedule.rules:
            return False, []
        return True, open_slots(calendar, schedule.rules, schedule.blackouts, schedule.held, start, end, now)

    async def require(self, calendar: Calendar, slot_start: datetime, now: datetime, *,
                      exclude_appointment_id: int | None = None) -> Slot:
        """The slot starting at ``slot_start``, or SlotUnavailable; read fresh from the tables (callers hold
        the calendar lock: this check, with the unique index, is what prevents double booking)."""
        buffer = timedelta(minutes=calendar.buffer_minutes)
        slot_end = slot_start + calendar.slot_duration
        schedule = await self.schedules.schedule(calendar.organization_id, calendar.id or 0, slot_start - buffer,
                                                 slot_end + buffer, fresh=True)
        return require_open_slot(calendar, schedule.rules, schedule.blackouts, schedule.held, slot_start, now,
                                 exclude_appointment_id=exclude_appointment_id)

    async def first(self, calendar: Calendar, after: datetime, now: datetime) -> Slot | None:
        """The first open slot starting at or after ``after`` (within the booking horizon)."""
        for start, end in next_open_slot_windows(after, now, calendar):
            has_rules, found = await self._open_slots(calendar, start, end, now)
            if found:
                return found[0]
            if not has_rules:
                return None
        return None


# --------------------------------------------------------------------------- calendars


@dataclass(frozen=True, slots=True)
class CreateCalendarCommand:
    actor: Actor
    fields: dict[str, Any]
    """name, timezone and optionally slot_duration_minutes, buffer_minutes, min_notice_minutes,
    horizon_days, agent_id."""


class CreateCalendar:
    def __init__(self, uow: UnitOfWork, calendars: CalendarRepository, agents: AgentRepository, clock: Clock) -> None:
        self.uow, self.calendars, self.agents, self.clock = uow, calendars, agents, clock

    async def execute(self, command: CreateCalendarCommand) -> Calendar:
        fields = {k: v for k, v in command.fields.items() if k in CALENDAR_FIELDS}
        now = self.clock.now()
        calendar = Calendar(id=None, organization_id=command.actor.organization_id, created_at=now, updated_at=now,
                            **fields).validated()
        await _check_agent(self.agents, calendar.organization_id, calendar.agent_id)
        return await self.calendars.add(calendar)


class GetCalendar:
    def __init__(self, calendars: CalendarRepository) -> None:
        self.calendars = calendars

    async def execute(self, actor: Actor, calendar_id: int) -> Calendar:
        return await _calendar(self.calendars, actor, calendar_id)


class ListCalendars:
    def __init__(self, calendars: CalendarRepository) -> None:
        self.calendars = calendars

    async def execute(self, actor: Actor, page: PageRequest, agent_id: int | None = None) -> Page[Calendar]:
        return await self.calendars.list(actor.organization_id, page, agent_id)


@dataclass(frozen=True, slots=True)
class UpdateCalendarCommand:
    actor: Actor
    calendar_id: int
    changes: dict[str, Any]


class UpdateCalendar:
    def __init__(self, uow: UnitOfWork, calendars: CalendarRepository, agents: AgentRepository, clock: Clock) -> None:
        self.uow, self.calendars, self.agents, self.clock = uow, calendars, agents, clock

    async def execute(self, command: UpdateCalendarCommand) -> Calendar:
        calendar = await _calendar(self.calendars, command.actor, command.calendar_id, lock=True)
        changes = {k: v for k, v in command.changes.items() if k in CALENDAR_FIELDS}
        if changes.get("agent_id") is not None and changes["agent_id"] != calendar.agent_id:
            await _check_agent(self.agents, calendar.organization_id, changes["agent_id"])
        updated = apply_patch(calendar, changes).validated()
        if updated == calendar:  # a PATCH that changes nothing leaves updated_at alone
            return calendar
        return await self.calendars.update(replace(updated, updated_at=self.clock.now()))


class DeleteCalendar:
    """Refused (409 conflict) while the calendar has pending or confirmed appointments that have not ended."""

    def __init__(self, uow: UnitOfWork, calendars: CalendarRepository, appointments: AppointmentRepository,
                 clock: Clock) -> None:
        self.uow, self.calendars, self.appointments, self.clock = uow, calendars, appointments, clock

    async def execute(self, actor: Actor, calendar_id: int) -> None:
        await _calendar(self.calendars, actor, calendar_id, lock=True)
        now = self.clock.now()
        active = await self.appointments.count_holding_after(actor.organization_id, calendar_id, now)
        if active:
            raise Conflict(
                f"the calendar has {active} upcoming pending or confirmed appointment(s); cancel them first",
                details={"active_appointments": active},
            )
        await self.calendars.delete(actor.organization_id, calendar_id, now)


# --------------------------------------------------------------------------- rules and blackouts


@dataclass(frozen=True, slots=True)
class AddAvailabilityRuleCommand:
    actor: Actor
    calendar_id: int
    weekday: int
    start_time: Any
    """``"HH:MM"`` or a ``datetime.time``, local to the calendar."""
    end_time: Any


class AddAvailabilityRule:
    def __init__(self, uow: UnitOfWork, calendars: CalendarRepository) -> None:
        self.uow, self.calendars = uow, calendars

    async def execute(self, command: AddAvailabilityRuleCommand) -> AvailabilityRule:
        rule = build_rule(id=None, calendar_id=command.calendar_id, weekday=command.weekday,
                          start_time=command.start_time, end_time=command.end_time)
        await _calendar(self.calendars, command.actor, command.calendar_id, lock=True)
        existing = await self.calendars.list_rules(command.actor.organization_id, command.calendar_id)
        if len(existing) >= MAX_RULES_PER_CALENDAR:
            raise ValidationFailed.field("rules", f"a calendar holds at most {MAX_RULES_PER_CALENDAR} rules")
        return await self.calendars.add_rule(command.actor.organization_id, rule)


class ListAvailabilityRules:
    def __init__(self, calendars: CalendarRepository) -> None:
        self.calendars = calendars

    async def execute(self, actor: Actor, calendar_id: int, page: PageRequest) -> Page[AvailabilityRule]:
        await _calendar(self.calendars, actor, calendar_id)
        rules = await self.calendars.list_rules(actor.organization_id, calendar_id)
        return Page(rules[page.offset: page.offset + page.limit], len(rules), page.limit, page.offset)


class DeleteAvailabilityRule:
    def __init__(self, uow: UnitOfWork, calendars: CalendarRepository) -> None:
        self.uow, self.calendars = uow, calendars

    async def execute(self, actor: Actor, calendar_id: int, rule_id: int) -> None:
        await _calendar(self.calendars, actor, calendar_id, lock=True)
        if not await self.calendars.delete_rule(actor.organization_id, calendar_id, rule_id):
            raise NotFound("availability rule", rule_id)


@dataclass(frozen=True, slots=True)
class AddBlackoutCommand:
    actor: Actor
    calendar_id: int
    start: Any
    """RFC 3339 text with an offset, or an aware datetime."""
    end: Any
    reason: str | None = None


class AddBlackout:
    """Existing appointments inside a new blackout are kept; the blackout only stops new bookings."""

    def __init__(self, uow: UnitOfWork, calendars: CalendarRepository, clock: Clock) -> None:
        self.uow, self.calendars, self.clock = uow, calendars, clock

    async def execute(self, command: AddBlackoutCommand) -> Blackout:
        blackout = build_blackout(id=None, calendar_id=command.calendar_id, start=command.start, end=command.end,
                                  reason=validate_blackout_reason(command.reason))
        await _calendar(self.calendars, command.actor, command.calendar_id, lock=True)
        return await self.calendars.add_blackout(command.actor.organization_id, blackout)


class ListBlackouts:
    def __init__(self, calendars: CalendarRepository) -> None:
        self.calendars = calendars

    async def execute(self, actor: Actor, calendar_id: int, page: PageRequest, start: datetime | None = None,
                      end: datetime | None = None) -> Page[Blackout]:
        await _calendar(self.calendars, actor, calendar_id)
        return await self.calendars.list_blackouts(actor.organization_id, calendar_id, page, start, end)


class DeleteBlackout:
    def __init__(self, uow: UnitOfWork, calendars: CalendarRepository) -> None:
        self.uow, self.calendars = uow, calendars

    async def execute(self, actor: Actor, calendar_id: int, blackout_id: int) -> None:
        await _calendar(self.calendars, actor, calendar_id, lock=True)
        if not await self.calendars.delete_blackout(actor.organization_id, calendar_id, blackout_id):
            raise NotFound("blackout", blackout_id)


# --------------------------------------------------------------------------- availability


@dataclass(frozen=True, slots=True)
class AvailabilityQuery:
    actor: Actor
    calendar_id: int
    start: datetime | date | None = None
    """An instant, or a date meaning the start of that local date in the display zone; default now."""
    end: datetime | date | None = None
    """Default start + 7 days; the range is at most 62 days."""
    timezone: str | None = None
    """The display zone (IANA); default the calendar's."""


@dataclass(frozen=True, slots=True)
class Availability:
    calendar: Calendar
    timezone: str
    start: datetime
    end: datetime
    slots: list[Slot]


class GetAvailability:
    def __init__(self, calendars: CalendarRepository, schedules: ScheduleReader, clock: Clock) -> None:
        self.calendars, self.clock = calendars, clock
        self.finder = _SlotFinder(schedules)

    async def execute(self, query: AvailabilityQuery) -> Availability:
        tz = validate_timezone(query.timezone) if query.timezone is not None else None
        calendar = await _calendar(self.calendars, query.actor, query.calendar_id)
        tz = tz or calendar.timezone
        now = self.clock.now()
        start, end = availability_range(query.start, query.end, tz, now)
        slots = await self.finder.open_slots(calendar, start, end, now)
        return Availability(calendar, tz, start, end, slots)


class NextOpenSlot:
    """The start of the first open slot at or after ``after`` (None when there is none before the horizon).
    The call simulator offers this to a voice agent mid-call; book it with BookAppointment (or use
    BookNextOpenSlot to find and book under one lock)."""

    def __init__(self, calendars: CalendarRepository, schedules: ScheduleReader, clock: Clock) -> None:
        self.calendars, self.clock = calendars, clock
        self.finder = _SlotFinder(schedules)

    async def execute(self, actor: Actor, calendar_id: int, after: datetime) -> datetime | None:
        after = _aware(after, "after")
        calendar = await _calendar(self.calendars, actor, calendar_id)
        slot = await self.finder.first(calendar, after, self.clock.now())
        return slot.start if slot else None


# --------------------------------------------------------------------------- booking


@dataclass(frozen=True, slots=True)
class BookAppointmentCommand:
    actor: Actor
    calendar_id: int
    slot_start: datetime
    attendee_name: str | None = None
    attendee_email: str | None = None
    attendee_phone: str | None = None
    require_approval: bool = False
    notes: str | None = None
    call_id: str | None = None
    """The call during which a voice agent booked, if any."""


class _Booking:
    """What both booking use cases share: attendee validation, the calendar lock, and the fresh check of
    the slot right before the insert."""

    def __init__(self, uow: UnitOfWork, calendars: CalendarRepository, appointments: AppointmentRepository,
                 schedules: ScheduleReader, clock: Clock) -> None:
        self.uow, self.calendars, self.appointments, self.clock = uow, calendars, appointments, clock
        self.finder = _SlotFinder(schedules)

    async def _locked(self, command: BookAppointmentCommand | BookNextOpenSlotCommand) -> tuple[
            tuple[str | None, str | None, str | None, str | None], Calendar, datetime]:
        """(the validated attendee, the calendar row-locked, now)."""
        attendee = validate_attendee(command.attendee_name, command.attendee_email, command.attendee_phone,
                                     command.notes)
        calendar = await _calendar(self.calendars, command.actor, command.calendar_id, lock=True)
        return attendee, calendar, self.clock.now()

    async def _take(self, command: BookAppointmentCommand | BookNextOpenSlotCommand, calendar: Calendar,
                    slot_start: datetime, now: datetime,
                    attendee: tuple[str | None, str | None, str | None, str | None]) -> Appointment:
        slot = await self.finder.require(calendar, slot_start, now)
        return await _book(self.uow, self.appointments, calendar, slot, now, attendee, command.require_approval,
                           command.call_id)


class BookAppointment(_Booking):
    """Book ``slot_start`` (confirmed, event appointment.booked) or request it (pending, the slot held).
    The one booking rule set: the HTTP API and voice agents mid-call both come here."""

    async def execute(self, command: BookAppointmentCommand) -> Appointment:
        slot_start = _aware(command.slot_start, "slot_start")
        attendee, calendar, now = await self._locked(command)
        return await self._take(command, calendar, slot_start, now, attendee)


async def _book(uow: UnitOfWork, appointments: AppointmentRepository, calendar: Calendar, slot: Slot,
                now: datetime, attendee: tuple[str | None, str | None, str | None, str | None],
                require_approval: bool, call_id: str | None) -> Appointment:
    name, email, phone, notes = attendee
    appointment = Appointment.new(
        organization_id=calendar.organization_id, calendar_id=calendar.id or 0, slot=slot,
        require_approval=require_approval, attendee_name=name, attendee_email=email, attendee_phone=phone,
        notes=notes, now=now, call_id=call_id,
    )
    stored = await appointments.add(appointment)
    if stored.status == "confirmed":
        uow.record(EventType.APPOINTMENT_BOOKED(stored.organization_id, appointment_view(stored)))
    return stored


@dataclass(frozen=True, slots=True)
class BookNextOpenSlotCommand:
    actor: Actor
    calendar_id: int
    after: datetime
    attendee_name: str | None = None
    attendee_email: str | None = None
    attendee_phone: str | None = None
    require_approval: bool = False
    notes: str | None = None
    call_id: str | None = None


class BookNextOpenSlot(_Booking):
    """Find the first open slot at or after ``after`` and book it, under the calendar lock (no race
    between finding and booking). None when no slot is open before the horizon."""

    async def execute(self, command: BookNextOpenSlotCommand) -> Appointment | None:
        after = _aware(command.after, "after")
        attendee, calendar, now = await self._locked(command)
        found = await self.finder.first(calendar, after, now)
        if found is None:
            return None
        return await self._take(command, calendar, found.start, now, attendee)


# --------------------------------------------------------------------------- appointments


class GetAppointment:
    def __init__(self, appointments: AppointmentRepository) -> None:
        self.appointments = appointments

    async def execute(self, actor: Actor, appointment_id: int) -> Appointment:
        return await _appointment(self.appointments, actor, appointment_id)


class ListAppointments:
    def __init__(self, appointments: AppointmentRepository) -> None:
        self.appointments = appointments

    async def execute(self, actor: Actor, filters: AppointmentFilter, page: PageRequest) -> Page[Appointment]:
        return await self.appointments.list(actor.organization_id, filters, page)


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
        self.finder = _SlotFinder(schedules)

    async def execute(self, command: RescheduleAppointmentCommand) -> Rescheduling:
        slot_start = _aware(command.slot_start, "slot_start")
        actor = command.actor
        current = await _appointment(self.appointments, actor, command.appointment_id)
        calendar = await _calendar(self.calendars, actor, current.calendar_id, lock=True)
        current = await _appointment(self.appointments, actor, command.appointment_id, lock=True)
        if not current.can("reschedule"):
            raise APPOINTMENT_MACHINE.refusal(current.status, "reschedule", target=TRIGGER_TARGET["reschedule"])
        now = self.clock.now()
        slot = await self.finder.require(calendar, slot_start, now, exclude_appointment_id=current.id)
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

    async def execute(self, actor: Actor, appointment_id: int) -> Appointment:
        current = await _appointment_under_calendar_lock(self.calendars, self.appointments, actor, appointment_id)
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
class RecordOutcomeCommand:
    actor: Actor
    appointment_id: int
    outcome: str
    """completed or no_show"""
    notes: str | None = None


class RecordAppointmentOutcome:
    """confirmed -> completed or no_show (no event: the catalogue has none for outcomes)."""

    def __init__(self, uow: UnitOfWork, calendars: CalendarRepository, appointments: AppointmentRepository,
                 clock: Clock) -> None:
        self.uow, self.calendars, self.appointments, self.clock = uow, calendars, appointments, clock

    async def execute(self, command: RecordOutcomeCommand) -> Appointment:
        notes = validate_attendee(notes=command.notes)[3] if command.notes is not None else None
        current = await _appointment_under_calendar_lock(self.calendars, self.appointments, command.actor,
                                                         command.appointment_id)
        moved = current.record_outcome(command.outcome, self.clock.now(), notes=notes)
        return await self.appointments.update(moved)


# --------------------------------------------------------------------------- ICS feed


class IssueFeedToken:
    """Create or rotate the calendar's secret feed token; the previous token stops working at once.
    Only its SHA-256 is stored: the token is shown once, in the result."""

    def __init__(self, uow: UnitOfWork, calendars: CalendarRepository, random: Random) -> None:
        self.uow, self.calendars, self.random = uow, calendars, random

    async def execute(self, actor: Actor, calendar_id: int) -> str:
        await _calendar(self.calendars, actor, calendar_id, lock=True)
        token = self.random.token(FEED_TOKEN_BYTES)
        await self.calendars.set_feed_token(actor.organization_id, calendar_id, feed_token_digest(token))
        return token


class RevokeFeedToken:
    def __init__(self, uow: UnitOfWork, calendars: CalendarRepository) -> None:
        self.uow, self.calendars = uow, calendars

    async def execute(self, actor: Actor, calendar_id: int) -> None:
        await _calendar(self.calendars, actor, calendar_id, lock=True)
        await self.calendars.set_feed_token(actor.organization_id, calendar_id, None)


class _Feed:
    def __init__(self, calendars: CalendarRepository, appointments: AppointmentRepository, renderer: IcsRenderer,
                 clock: Clock) -> None:
        self.calendars, self.appointments, self.renderer, self.clock = calendars, appointments, renderer, clock

    async def _render(self, calendar: Calendar) -> bytes:
        since = self.clock.now() - timedelta(days=FEED_LOOKBACK_DAYS)
        items = await self.appointments.for_feed(calendar.organization_id, calendar.id or 0, since, FEED_MAX_EVENTS)
        return self.renderer.render(calendar, items)


class RenderCalendarFeed(_Feed):
    """The calendar's appointments (every status, ending in the last 90 days or later) as ICS."""

    async def execute(self, actor: Actor, calendar_id: int) -> bytes:
        return await self._render(await _calendar(self.calendars, actor, calendar_id))


class RenderFeedByToken(_Feed):
    """The feed of the calendar whose secret token this is; NotFound for any other text."""

    async def execute(self, token: str) -> bytes:
        calendar = await self.calendars.find_by_feed_token(feed_token_digest(token)) if is_feed_token_shaped(
            token) else None
        if calendar is None:
            raise NotFound("calendar feed", "for this token")
        return await self._render(calendar)
