"""Open slots: a calendar's availability over a window, and the next open slot after an instant."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from application.context import Actor
from application.ports.platform import Clock
from application.ports.scheduling import CalendarRepository, ScheduleReader
from application.scheduling.calendars import load_calendar
from domain.errors import ValidationFailed
from domain.identity import persisted
from domain.scheduling.model import Calendar, Slot
from domain.scheduling.rules import availability_range, require_supported
from domain.scheduling.slots import next_open_slot_windows, open_slots, require_open_slot
from domain.timezones import validate_timezone


def aware_instant(value: datetime, field: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise ValidationFailed.field(field, "must carry an explicit UTC offset or Z")
    return require_supported(value.astimezone(UTC), field)


class SlotFinder:
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
        schedule = await self.schedules.schedule(calendar.organization_id, persisted(calendar.id), start - buffer,
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
        schedule = await self.schedules.schedule(calendar.organization_id, persisted(calendar.id), slot_start - buffer,
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


@dataclass(frozen=True, slots=True)
class GetAvailabilityCommand:
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
        self.finder = SlotFinder(schedules)

    async def execute(self, command: GetAvailabilityCommand) -> Availability:
        tz = validate_timezone(command.timezone) if command.timezone is not None else None
        calendar = await load_calendar(self.calendars, command.actor, command.calendar_id)
        tz = tz or calendar.timezone
        now = self.clock.now()
        start, end = availability_range(command.start, command.end, tz, now)
        slots = await self.finder.open_slots(calendar, start, end, now)
        return Availability(calendar, tz, start, end, slots)


@dataclass(frozen=True, slots=True)
class NextOpenSlotCommand:
    actor: Actor
    calendar_id: int
    after: datetime


class NextOpenSlot:
    """The start of the first open slot at or after ``after`` (None when there is none before the horizon).
    The call simulator offers this to a voice agent mid-call; book it with BookAppointment (or use
    BookNextOpenSlot to find and book under one lock)."""

    def __init__(self, calendars: CalendarRepository, schedules: ScheduleReader, clock: Clock) -> None:
        self.calendars, self.clock = calendars, clock
        self.finder = SlotFinder(schedules)

    async def execute(self, command: NextOpenSlotCommand) -> datetime | None:
        after = aware_instant(command.after, "after")
        calendar = await load_calendar(self.calendars, command.actor, command.calendar_id)
        slot = await self.finder.first(calendar, after, self.clock.now())
        return slot.start if slot else None
