from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

from domain.identity import persisted
from domain.parsing import MAX_ID
from domain.scheduling import model
from domain.scheduling.model import Appointment, AvailabilityRule, Blackout, Calendar
from domain.scheduling.rules import BLACKOUT_REASON_MAX_LENGTH, format_hhmm, format_rule_end
from entrypoints.http.schemas import OneLine, within

Name = Annotated[OneLine, Meta(min_length=1, max_length=model.NAME_MAX_LENGTH)]
TimeZone = Annotated[str, Meta(min_length=1, max_length=64, description="IANA time zone, e.g. Europe/Berlin")]
SlotDuration = Annotated[int, within(model.SLOT_DURATION_RANGE, description="Minutes per slot")]
Buffer = Annotated[int, within(model.BUFFER_RANGE, description="Minutes kept free before and after each appointment")]
MinNotice = Annotated[int, within(model.MIN_NOTICE_RANGE,
                                  description="Minutes between now and the earliest bookable start")]
Horizon = Annotated[int, within(model.HORIZON_RANGE, description="Days ahead that can be booked")]
Id = Annotated[int, Meta(ge=1, le=MAX_ID)]
PerAttendee = Annotated[int, within(model.MAX_UPCOMING_PER_ATTENDEE_RANGE, description=(
    "At most this many pending and confirmed future appointments per attendee (same email or phone); null: no cap"))]
PerDay = Annotated[int, within(model.MAX_BOOKINGS_PER_DAY_RANGE, description=(
    "At most this many appointments (not cancelled) starting on one local date of the calendar; null: no cap"))]
ReminderMinutes = Annotated[int, within(model.REMINDER_MINUTES_RANGE, description=(
    "Minutes before a confirmed appointment its attendee is reminded; null: no reminder"))]
ReminderChannel = Literal["email", "sms"]
Weekday = Annotated[int, Meta(ge=0, le=6, description="0 = Monday ... 6 = Sunday, of the calendar's local date")]
WallTime = Annotated[str, Meta(pattern=r"^([01]\d|2[0-3]):[0-5]\d$", description='Local wall time "HH:MM"')]
EndWallTime = Annotated[str, Meta(pattern=r"^(([01]\d|2[0-3]):[0-5]\d|24:00)$",
                                  description='Local wall time "HH:MM", or "24:00" for the end of the day')]
Instant = Annotated[str, Meta(min_length=1, max_length=64,
                              description="RFC 3339 timestamp with an explicit offset or Z")]
Email = Annotated[str, Meta(max_length=model.ATTENDEE_EMAIL_MAX_LENGTH, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")]
Phone = Annotated[str, Meta(max_length=model.ATTENDEE_PHONE_MAX_LENGTH, description="E.164, e.g. +14155550100")]
Notes = Annotated[str, Meta(max_length=model.NOTES_MAX_LENGTH)]
Status = Literal["pending", "confirmed", "cancelled", "completed", "no_show"]
CancelReason = Literal["declined", "cancelled", "rescheduled"]


# A "type: ignore[arg-type]" below marks a field whose domain type is wider than the documented one: a status
# the domain keeps as a str where the schema lists its values, or a field that is None only before the row is stored.

class CalendarCreate(Struct, forbid_unknown_fields=True):
    name: Name
    timezone: TimeZone
    slot_duration_minutes: SlotDuration = 30
    buffer_minutes: Buffer = 0
    min_notice_minutes: MinNotice = 0
    horizon_days: Horizon = 60
    agent_id: Id | None = None
    max_upcoming_per_attendee: PerAttendee | None = model.DEFAULT_MAX_UPCOMING_PER_ATTENDEE
    max_bookings_per_day: PerDay | None = None
    reminder_minutes: ReminderMinutes | None = None
    reminder_channel: ReminderChannel = "email"


class CalendarUpdate(Struct, forbid_unknown_fields=True):
    name: Name | UnsetType = UNSET
    timezone: TimeZone | UnsetType = UNSET
    slot_duration_minutes: SlotDuration | UnsetType = UNSET
    buffer_minutes: Buffer | UnsetType = UNSET
    min_notice_minutes: MinNotice | UnsetType = UNSET
    horizon_days: Horizon | UnsetType = UNSET
    agent_id: Id | UnsetType | None = UNSET
    max_upcoming_per_attendee: PerAttendee | UnsetType | None = UNSET
    max_bookings_per_day: PerDay | UnsetType | None = UNSET
    reminder_minutes: ReminderMinutes | UnsetType | None = UNSET
    reminder_channel: ReminderChannel | UnsetType = UNSET


class CalendarOut(Struct):
    id: int
    name: str
    timezone: str
    slot_duration_minutes: int
    buffer_minutes: int
    min_notice_minutes: int
    horizon_days: int
    agent_id: int | None
    feed_token_active: bool
    max_upcoming_per_attendee: int | None
    max_bookings_per_day: int | None
    reminder_minutes: int | None
    reminder_channel: ReminderChannel
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, c: Calendar) -> CalendarOut:
        return cls(
            id=persisted(c.id), name=c.name, timezone=c.timezone, slot_duration_minutes=c.slot_duration_minutes,
            buffer_minutes=c.buffer_minutes, min_notice_minutes=c.min_notice_minutes, horizon_days=c.horizon_days,
            agent_id=c.agent_id, feed_token_active=c.feed_token is not None,
            max_upcoming_per_attendee=c.max_upcoming_per_attendee, max_bookings_per_day=c.max_bookings_per_day,
            reminder_minutes=c.reminder_minutes,
            reminder_channel=c.reminder_channel,  # type: ignore[arg-type]  # the domain keeps a str
            created_at=c.created_at,  # type: ignore[arg-type]  # the domain's type is wider
            updated_at=c.updated_at,  # type: ignore[arg-type]  # the domain's type is wider
        )


class RuleCreate(Struct, forbid_unknown_fields=True):
    weekday: Weekday
    start_time: WallTime
    end_time: EndWallTime


class RuleOut(Struct):
    id: int
    calendar_id: int
    weekday: int
    start_time: str
    end_time: str

    @classmethod
    def of(cls, r: AvailabilityRule) -> RuleOut:
        return cls(persisted(r.id), persisted(r.calendar_id), r.weekday, format_hhmm(r.start_time), format_rule_end(r))


class BlackoutCreate(Struct, forbid_unknown_fields=True):
    start: Instant
    end: Instant
    reason: Annotated[OneLine, Meta(max_length=BLACKOUT_REASON_MAX_LENGTH)] | None = None


class BlackoutOut(Struct):
    id: int
    calendar_id: int
    start: datetime
    end: datetime
    reason: str | None

    @classmethod
    def of(cls, b: Blackout) -> BlackoutOut:
        return cls(persisted(b.id), persisted(b.calendar_id), b.start, b.end, b.reason)


class SlotOut(Struct):
    start: str
    """RFC 3339 with the offset of the requested zone; a valid slot_start."""
    end: str


class AvailabilityOut(Struct):
    calendar_id: int
    timezone: str
    start: str
    end: str
    slots: list[SlotOut]


class AppointmentCreate(Struct, forbid_unknown_fields=True):
    calendar_id: Id
    slot_start: Instant
    attendee_name: Annotated[OneLine, Meta(max_length=model.ATTENDEE_NAME_MAX_LENGTH)] | None = None
    attendee_email: Email | None = None
    attendee_phone: Phone | None = None
    require_approval: bool = False
    notes: Notes | None = None


class AppointmentOut(Struct):
    id: int
    calendar_id: int
    status: Status
    slot_start: datetime
    slot_end: datetime
    attendee_name: str | None
    attendee_email: str | None
    attendee_phone: str | None
    notes: str | None
    cancel_reason: CancelReason | None
    rescheduled_from: int | None
    call_id: str | None
    sequence: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, a: Appointment) -> AppointmentOut:
        return cls(
            id=persisted(a.id), calendar_id=a.calendar_id, status=a.status,  # type: ignore[arg-type]  # the domain's type is wider
            slot_start=a.slot_start, slot_end=a.slot_end, attendee_name=a.attendee_name,
            attendee_email=a.attendee_email, attendee_phone=a.attendee_phone, notes=a.notes,
            cancel_reason=a.cancel_reason,  # type: ignore[arg-type]  # the domain's type is wider
            rescheduled_from=a.rescheduled_from, call_id=a.call_id, sequence=a.sequence,
            created_at=a.created_at,  # type: ignore[arg-type]  # the domain's type is wider
            updated_at=a.updated_at,  # type: ignore[arg-type]  # the domain's type is wider
        )


class RescheduleIn(Struct, forbid_unknown_fields=True):
    slot_start: Instant


class RescheduleOut(Struct):
    appointment_id: int
    previous_appointment_id: int
    status: Status
    slot_start: datetime
    slot_end: datetime


class OutcomeIn(Struct, forbid_unknown_fields=True):
    outcome: Literal["completed", "no_show"]
    notes: Notes | None = None


class FeedTokenOut(Struct):
    url: str
    token: str
