"""Calendars, availability rules, blackouts, slots and appointments, with the appointment machine and
the validation of their fields.

Appointment machine
-------------------
``none --book--> confirmed``, ``none --request--> pending``, ``pending --approve--> confirmed``,
``pending --decline--> cancelled (declined)``, ``pending|confirmed --cancel--> cancelled (cancelled)``,
``pending|confirmed --reschedule--> cancelled (rescheduled)``,
``confirmed --complete--> completed``, ``confirmed --no_show--> no_show``.
A PENDING appointment may be rescheduled: the old row is cancelled (reason ``rescheduled``) and the
replacement (``Appointment.replacement``) keeps the pending status, so it still awaits approval.
``cancelled``, ``completed`` and ``no_show`` are terminal.  Every change bumps ``sequence`` (ICS SEQUENCE).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, time, timedelta
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo

from domain.errors import Conflict, InvalidTransition, ValidationFailed
from domain.rfc3339 import format_utc, parse_instant
from domain.state_machine import TransitionTable
from domain.timezones import US_PER_MINUTE, local_day_start, to_epoch_us, validate_timezone, zone_of

SLOT_DURATION_RANGE = (5, 480)
BUFFER_RANGE = (0, 240)
MIN_NOTICE_RANGE = (0, 43_200)
HORIZON_RANGE = (1, 365)
NAME_MAX_LENGTH = 200
MINUTES_PER_DAY = 1440
DEFAULT_MAX_UPCOMING_PER_ATTENDEE = 3
MAX_UPCOMING_PER_ATTENDEE_RANGE = (1, 1000)
MAX_BOOKINGS_PER_DAY_RANGE = (1, 10_000)
REMINDER_MINUTES_RANGE = (5, 10_080)
"""A reminder goes out between 5 minutes and 7 days before the appointment."""
REMINDER_CHANNELS = ("email", "sms")

INITIAL = "none"  # the state before an appointment exists


class AppointmentStatus(StrEnum):
    """The status of an appointment; the values are the API's."""

    PENDING = "pending"
    CONFIRMED = "confirmed"
    CANCELLED = "cancelled"
    COMPLETED = "completed"
    NO_SHOW = "no_show"


STATUSES = tuple(AppointmentStatus)
SLOT_HOLDING_STATUSES = frozenset({AppointmentStatus.PENDING, AppointmentStatus.CONFIRMED})
# busy time for availability: every status but cancelled. An outcome (completed, no_show) never frees the
# appointment's time, whatever the clock says; only a cancel (decline, reschedule) does.
BUSY_STATUSES = frozenset(set(AppointmentStatus) - {AppointmentStatus.CANCELLED})
TERMINAL_STATUSES = frozenset({AppointmentStatus.CANCELLED, AppointmentStatus.COMPLETED, AppointmentStatus.NO_SHOW})
CANCEL_REASONS = ("declined", "cancelled", "rescheduled")
OUTCOMES = ("completed", "no_show")

APPOINTMENT_MACHINE = TransitionTable.of(
    "appointment",
    [
        (INITIAL, "book", "confirmed"),
        (INITIAL, "request", "pending"),
        ("pending", "approve", "confirmed"),
        ("pending", "decline", "cancelled"),
        ("pending", "cancel", "cancelled"),
        ("confirmed", "cancel", "cancelled"),
        ("pending", "reschedule", "cancelled"),
        ("confirmed", "reschedule", "cancelled"),
        ("confirmed", "complete", "completed"),
        ("confirmed", "no_show", "no_show"),
    ],
)

# the status a trigger leads to, used to word InvalidTransition
TRIGGER_TARGET = {
    "book": "confirmed",
    "request": "pending",
    "approve": "confirmed",
    "decline": "cancelled",
    "cancel": "cancelled",
    "reschedule": "cancelled",
    "complete": "completed",
    "no_show": "no_show",
}
CANCEL_REASON_OF = {"decline": "declined", "cancel": "cancelled", "reschedule": "rescheduled"}
OUTCOME_TRIGGER = {"completed": "complete", "no_show": "no_show"}

_MAX_APPOINTMENT_US = SLOT_DURATION_RANGE[1] * US_PER_MINUTE


class BookingLimitReached(Conflict):
    """A calendar's booking cap is reached (409): the attendee's upcoming appointments, or the day's bookings."""

    code = "booking_limit_reached"

    @classmethod
    def per_attendee(cls, cap: int) -> BookingLimitReached:
        return cls(f"this attendee already has {cap} upcoming appointments on this calendar "
                   "(max_upcoming_per_attendee)", details={"limit": "max_upcoming_per_attendee", "max": cap})

    @classmethod
    def per_day(cls, cap: int, day: str) -> BookingLimitReached:
        return cls(f"this calendar takes at most {cap} bookings on {day} (max_bookings_per_day)",
                   details={"limit": "max_bookings_per_day", "max": cap, "date": day})


@dataclass(frozen=True, slots=True)
class Calendar:
    id: int | None
    organization_id: int
    name: str
    timezone: str
    slot_duration_minutes: int = 30
    buffer_minutes: int = 0
    min_notice_minutes: int = 0
    horizon_days: int = 60
    agent_id: int | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    feed_token: str | None = None
    max_upcoming_per_attendee: int | None = DEFAULT_MAX_UPCOMING_PER_ATTENDEE
    """At most this many pending and confirmed future appointments per attendee (same email or phone); None: no
    cap."""
    max_bookings_per_day: int | None = None
    """At most this many appointments (not cancelled) starting on one local date of the calendar; None: no cap."""
    reminder_minutes: int | None = None
    """The attendee is reminded this long before a confirmed appointment; None: no reminder."""
    reminder_channel: str = "email"
    """How the reminder goes out: ``email`` (the attendee's email) or ``sms`` (the attendee's phone)."""

    @property
    def zone(self) -> ZoneInfo:
        return zone_of(self.timezone)

    @property
    def slot_duration(self) -> timedelta:
        return timedelta(minutes=self.slot_duration_minutes)

    def validated(self) -> Calendar:
        """Self, once every setting is checked; raises ValidationFailed naming the first bad field."""
        validate_calendar_name(self.name)
        validate_timezone(self.timezone)
        validate_slot_duration(self.slot_duration_minutes)
        validate_buffer(self.buffer_minutes)
        validate_min_notice(self.min_notice_minutes)
        validate_horizon(self.horizon_days)
        if self.max_upcoming_per_attendee is not None:
            _bounded_int("max_upcoming_per_attendee", self.max_upcoming_per_attendee, MAX_UPCOMING_PER_ATTENDEE_RANGE)
        if self.max_bookings_per_day is not None:
            _bounded_int("max_bookings_per_day", self.max_bookings_per_day, MAX_BOOKINGS_PER_DAY_RANGE)
        if self.reminder_minutes is not None:
            _bounded_int("reminder_minutes", self.reminder_minutes, REMINDER_MINUTES_RANGE)
        if self.reminder_channel not in REMINDER_CHANNELS:
            raise ValidationFailed.field("reminder_channel", "must be email or sms")
        return self

    def local_day(self, instant: datetime) -> tuple[datetime, datetime]:
        """The local date of the calendar that ``instant`` falls on, as ``[start, end)`` in UTC."""
        day = instant.astimezone(self.zone).date()
        return local_day_start(day, self.timezone), local_day_start(day + timedelta(days=1), self.timezone)


@dataclass(frozen=True, slots=True)
class AvailabilityRule:
    id: int | None
    calendar_id: int | None
    weekday: int  # 0-6, Monday = 0, of the calendar-local date
    start_time: time  # calendar-local wall time
    end_time: time  # calendar-local wall time, > start_time; 00:00 stands for 24:00 (the end of the day)

    @property
    def start_minute(self) -> int:
        """Minutes from the local midnight to the start (0-1439)."""
        return self.start_time.hour * 60 + self.start_time.minute

    @property
    def end_minute(self) -> int:
        """Minutes from the local midnight to the end (1-1440: 1440 is "24:00", the end of the day)."""
        return self.end_time.hour * 60 + self.end_time.minute or MINUTES_PER_DAY


@dataclass(frozen=True, slots=True)
class Blackout:
    id: int | None
    calendar_id: int | None
    start: datetime
    end: datetime
    reason: str | None = None


@dataclass(frozen=True, slots=True, order=True)
class Slot:
    start: datetime
    end: datetime


@dataclass(frozen=True, slots=True)
class HeldSlot:
    """The part of a pending or confirmed appointment that slot generation needs (``HeldIntervals`` is
    the bulk form availability reads)."""

    id: int | None
    slot_start: datetime
    slot_end: datetime
    status: str = "confirmed"


@dataclass(frozen=True, slots=True)
class HeldIntervals:
    """Held slots in bulk, as parallel sequences sorted by start, instants as UTC microseconds since the
    Unix epoch: what availability over thousands of appointments reads, without a datetime per value.
    Appointments in BUSY_STATUSES (all but cancelled) belong here."""

    ids: Sequence[int | None]
    starts: Sequence[int]
    ends: Sequence[int]

    @staticmethod
    def of(held: Iterable[Appointment | HeldSlot]) -> HeldIntervals:
        rows = sorted(((to_epoch_us(h.slot_start), to_epoch_us(h.slot_end), h.id) for h in held
                       if h.status in BUSY_STATUSES), key=lambda row: (row[0], row[1]))
        return HeldIntervals([r[2] for r in rows], [r[0] for r in rows], [r[1] for r in rows])

    def __len__(self) -> int:
        return len(self.starts)

    def overlapping(self, start: datetime, end: datetime) -> HeldIntervals:
        """Those overlapping ``[start, end)`` (no held slot is longer than MAX_APPOINTMENT_LENGTH)."""
        low, high = to_epoch_us(start), to_epoch_us(end)
        starts, ends = self.starts, self.ends
        first = bisect_left(starts, low - _MAX_APPOINTMENT_US)
        last = bisect_left(starts, high)
        middle = bisect_left(starts, low, first, last)
        # those starting before ``start`` overlap only if they end after it; the rest all do
        head = [i for i in range(first, middle) if ends[i] > low]
        if len(head) == middle - first:
            return HeldIntervals(self.ids[first:last], starts[first:last], ends[first:last])
        keep = [*head, *range(middle, last)]
        return HeldIntervals([self.ids[i] for i in keep], [starts[i] for i in keep], [ends[i] for i in keep])


@dataclass(frozen=True, slots=True)
class Schedule:
    """What slot generation needs of one calendar over a window: all its rules, and its blackouts and
    held slots (appointments in BUSY_STATUSES: all but cancelled) that overlap the window."""

    rules: Sequence[AvailabilityRule]
    blackouts: Sequence[Blackout]
    """By start."""
    held: HeldIntervals

    @staticmethod
    def empty() -> Schedule:
        return Schedule((), (), HeldIntervals((), (), ()))


@dataclass(frozen=True, slots=True)
class Appointment:
    id: int | None
    organization_id: int
    calendar_id: int
    status: str
    slot_start: datetime
    slot_end: datetime
    attendee_name: str | None = None
    attendee_email: str | None = None
    attendee_phone: str | None = None
    notes: str | None = None
    cancel_reason: str | None = None
    rescheduled_from: int | None = None
    sequence: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None
    call_id: str | None = None

    @classmethod
    def new(
        cls,
        *,
        organization_id: int,
        calendar_id: int,
        slot: Slot,
        require_approval: bool = False,
        attendee_name: str | None = None,
        attendee_email: str | None = None,
        attendee_phone: str | None = None,
        notes: str | None = None,
        now: datetime | None = None,
        call_id: str | None = None,
        rescheduled_from: int | None = None,
        id: int | None = None,
    ) -> Appointment:
        """A fresh booking (``book`` -> confirmed) or request (``request`` -> pending), sequence 0."""
        trigger = "request" if require_approval else "book"
        return cls(
            id=id,
            organization_id=organization_id,
            calendar_id=calendar_id,
            status=APPOINTMENT_MACHINE.next(INITIAL, trigger, target=TRIGGER_TARGET[trigger]),
            slot_start=slot.start,
            slot_end=slot.end,
            attendee_name=attendee_name,
            attendee_email=attendee_email,
            attendee_phone=attendee_phone,
            notes=notes,
            rescheduled_from=rescheduled_from,
            sequence=0,
            created_at=now,
            updated_at=now,
            call_id=call_id,
        )

    @property
    def holds_slot(self) -> bool:
        return self.status in SLOT_HOLDING_STATUSES

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def can(self, trigger: str) -> bool:
        return APPOINTMENT_MACHINE.can(self.status, trigger)

    def _move(self, trigger: str, now: datetime | None, **changes: Any) -> Appointment:
        status = APPOINTMENT_MACHINE.next(self.status, trigger, target=TRIGGER_TARGET.get(trigger))
        if trigger in CANCEL_REASON_OF:
            changes["cancel_reason"] = CANCEL_REASON_OF[trigger]
        if now is not None:
            changes["updated_at"] = now
        return replace(self, status=status, sequence=self.sequence + 1, **changes)

    def approve(self, now: datetime | None = None) -> Appointment:
        return self._move("approve", now)

    def decline(self, now: datetime | None = None) -> Appointment:
        return self._move("decline", now)

    def cancel(self, now: datetime | None = None) -> Appointment:
        return self._move("cancel", now)

    def mark_rescheduled(self, now: datetime | None = None) -> Appointment:
        """The old row of a reschedule: cancelled with reason ``rescheduled``."""
        return self._move("reschedule", now)

    def record_outcome(self, outcome: str, now: datetime | None = None, notes: str | None = None) -> Appointment:
        """completed or no_show, once the appointment has started (``now`` at or after ``slot_start``): an
        outcome recorded earlier would claim what has not happened (InvalidTransition)."""
        trigger = OUTCOME_TRIGGER.get(outcome) if isinstance(outcome, str) else None
        if trigger is None:
            raise ValidationFailed.field("outcome", f"must be one of {', '.join(OUTCOMES)}")
        if now is not None and now < self.slot_start and self.can(trigger):
            raise InvalidTransition("appointment", self.status, TRIGGER_TARGET[trigger],
                                    reason="an outcome can be recorded once the appointment has started",
                                    details={"slot_start": format_utc(self.slot_start)})
        changes: dict[str, object] = {} if notes is None else {"notes": notes}
        return self._move(trigger, now, **changes)

    def replacement(self, slot: Slot, now: datetime | None = None, id: int | None = None) -> Appointment:
        """The new row of a reschedule: same attendee and status (pending stays pending), new slot,
        ``rescheduled_from`` = this id, sequence 0 (a new ICS UID). Raises InvalidTransition when this
        appointment cannot be rescheduled."""
        if not self.can("reschedule"):
            raise APPOINTMENT_MACHINE.refusal(self.status, "reschedule", target=TRIGGER_TARGET["reschedule"])
        return replace(
            self,
            id=id,
            slot_start=slot.start,
            slot_end=slot.end,
            cancel_reason=None,
            rescheduled_from=self.id,
            sequence=0,
            created_at=now,
            updated_at=now,
        )


def _bounded_int(field: str, value: object, bounds: tuple[int, int]) -> int:
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationFailed.field(field, "must be an integer")
    if not low <= value <= high:
        raise ValidationFailed.field(field, f"must be between {low} and {high}")
    return value


def validate_slot_duration(value: object) -> int:
    return _bounded_int("slot_duration_minutes", value, SLOT_DURATION_RANGE)


def validate_buffer(value: object) -> int:
    return _bounded_int("buffer_minutes", value, BUFFER_RANGE)


def validate_min_notice(value: object) -> int:
    return _bounded_int("min_notice_minutes", value, MIN_NOTICE_RANGE)


def validate_horizon(value: object) -> int:
    return _bounded_int("horizon_days", value, HORIZON_RANGE)


def validate_weekday(value: object) -> int:
    return _bounded_int("weekday", value, (0, 6))


def validate_calendar_name(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationFailed.field("name", "must be a non-empty string")
    if len(value) > NAME_MAX_LENGTH:
        raise ValidationFailed.field("name", f"must be at most {NAME_MAX_LENGTH} characters")
    return value


def parse_slot_start(text: object) -> datetime:
    """The ``slot_start`` of a booking or reschedule: RFC 3339 with offset or Z, as aware UTC."""
    return parse_instant(text, "slot_start")


ATTENDEE_NAME_MAX_LENGTH = 200
ATTENDEE_EMAIL_MAX_LENGTH = 320
ATTENDEE_PHONE_MAX_LENGTH = 32
NOTES_MAX_LENGTH = 5000
# the longest an appointment can last (the largest slot duration): bounds every overlap query
MAX_APPOINTMENT_LENGTH = timedelta(minutes=SLOT_DURATION_RANGE[1])
_EMAIL_RE = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


def optional_text(field: str, value: object, limit: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationFailed.field(field, "must be a string")
    value = value.strip()
    if len(value) > limit:
        raise ValidationFailed.field(field, f"must be at most {limit} characters")
    return value or None


def validate_attendee(
    name: object = None, email: object = None, phone: object = None, notes: object = None
) -> tuple[str | None, str | None, str | None, str | None]:
    """(name, email, phone, notes), stripped, empty as None; the same rules for the HTTP and agent paths."""
    name_ = optional_text("attendee_name", name, ATTENDEE_NAME_MAX_LENGTH)
    email_ = optional_text("attendee_email", email, ATTENDEE_EMAIL_MAX_LENGTH)
    if email_ is not None and not _EMAIL_RE.fullmatch(email_):
        raise ValidationFailed.field("attendee_email", "must be an email address such as ann@example.com")
    phone_ = optional_text("attendee_phone", phone, ATTENDEE_PHONE_MAX_LENGTH)
    notes_ = optional_text("notes", notes, NOTES_MAX_LENGTH)
    return name_, email_, phone_, notes_
