"""In-house scheduling: calendars, availability rules, blackouts, open slots and the appointment machine.

Pure domain code (standard library only). Every instant this module hands out is an aware UTC
``datetime``; local time only exists while rules are expanded and when a value is rendered.

Slot generation (``open_slots``)
--------------------------------
* Rules are expanded per LOCAL date in the calendar's zone: a rule with weekday ``w`` applies to every
  local date whose weekday is ``w``.
* A rule window on local date ``D`` is the elapsed interval from the FIRST instant at which the local
  clock reads ``D start_time`` to the LAST instant at which it reads ``D end_time``.  Slots are stepped
  from the window start in elapsed (UTC) time, ``slot_duration_minutes`` apart, and a slot must end no
  later than the window end.  Stepping in elapsed time never lands on a nonexistent local time.
* DST choice -- spring forward (gap): a rule start (or end) that does not exist on that date is
  SHIFTED to the first existing instant, i.e. the transition instant itself.  A 02:30-05:00 rule in
  New York on the spring-forward day therefore starts at 03:00 EDT; a 02:00-03:00 rule that lies
  entirely inside the gap yields nothing that day.
* Fall back (repeated hour): the window starts at the earlier occurrence of the start time and ends
  at the later occurrence of the end time, so a rule covering the repeated hour yields BOTH instants
  (01:00 EDT and 01:00 EST in New York).  When a window contains an offset change, a stepped slot is
  also kept only if the local wall clock stays within the rule's ``[start_time, end_time]`` for the
  whole slot (a 01:30-03:00 rule on the New York fall-back night offers 01:30 EDT and 01:30 EST but
  not 01:00 EST, which elapsed stepping would otherwise reach).
* Busy time = ``pending`` and ``confirmed`` appointments widened by ``buffer_minutes`` on both sides,
  plus blackouts (not widened).  Intervals are half-open ``[start, end)``: touching is not overlapping.
* A slot is offered when it overlaps no busy time, starts at or after ``now + min_notice_minutes``,
  starts strictly before ``now + horizon_days`` and starts inside ``[range_start, range_end)``
  (membership by start, so consecutive ranges partition the slots).  Output is sorted and unique.
* Busy intervals are merged once and probed with ``bisect``: O((S + B) log B) for S candidates and
  B busy intervals.  The zone's offset changes over the span are located once (sampling every 6 h,
  then bisecting to the second), so expanding rules is integer arithmetic.

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

import hashlib
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta, timezone
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from domain.errors import InvalidTransition, SlotUnavailable, ValidationFailed
from domain.parsing import parse_instant
from domain.state_machine import TransitionTable

# --------------------------------------------------------------------------- constants

SLOT_DURATION_RANGE = (5, 480)
BUFFER_RANGE = (0, 240)
MIN_NOTICE_RANGE = (0, 43_200)
HORIZON_RANGE = (1, 365)
MAX_AVAILABILITY_RANGE_DAYS = 62
NAME_MAX_LENGTH = 200

INITIAL = "none"  # the state before an appointment exists
STATUSES = ("pending", "confirmed", "cancelled", "completed", "no_show")
SLOT_HOLDING_STATUSES = frozenset({"pending", "confirmed"})
# busy time for availability: every status but cancelled. An outcome (completed, no_show) never frees the
# appointment's time, whatever the clock says; only a cancel (decline, reschedule) does.
BUSY_STATUSES = frozenset({"pending", "confirmed", "completed", "no_show"})
TERMINAL_STATUSES = frozenset({"cancelled", "completed", "no_show"})
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

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_US_PER_MINUTE = 60_000_000
_US_PER_SECOND = 1_000_000
_MAX_APPOINTMENT_US = SLOT_DURATION_RANGE[1] * _US_PER_MINUTE
_NOT_IANA = frozenset({"localtime", "Factory", "posixrules"})


# --------------------------------------------------------------------------- entities


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
        return self


@dataclass(frozen=True, slots=True)
class AvailabilityRule:
    id: int | None
    calendar_id: int | None
    weekday: int  # 0-6, Monday = 0, of the calendar-local date
    start_time: time  # calendar-local wall time
    end_time: time  # calendar-local wall time, > start_time


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


def to_epoch_us(dt: datetime) -> int:
    """An aware datetime as UTC microseconds since the Unix epoch (a naive one raises TypeError: it
    cannot meet the aware epoch)."""
    return (dt - _EPOCH) // _US


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

    def _move(self, trigger: str, now: datetime | None, **changes: object) -> Appointment:
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


# --------------------------------------------------------------------------- validation


@lru_cache(maxsize=1)
def _iana_names() -> frozenset[str]:
    return frozenset(available_timezones())


def validate_timezone(name: object, field: str = "timezone") -> str:
    """``name`` if it is a valid IANA zone name, else ValidationFailed on ``field``."""
    if not isinstance(name, str) or not name or name in _NOT_IANA or name.startswith(("posix/", "right/")):
        raise ValidationFailed.field(field, "must be an IANA time zone name, such as Europe/Berlin")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError, TypeError):
        raise ValidationFailed.field(field, "must be an IANA time zone name, such as Europe/Berlin") from None
    names = _iana_names()
    if names and name not in names:
        raise ValidationFailed.field(field, "must be an IANA time zone name, such as Europe/Berlin")
    return name


def zone_of(name: str, field: str = "timezone") -> ZoneInfo:
    return ZoneInfo(validate_timezone(name, field))


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


_HHMM_RE = re.compile(r"([01]\d|2[0-3]):([0-5]\d)")


def parse_hhmm(text: object, field: str) -> time:
    """A strict ``"HH:MM"`` (00:00-23:59) wall time."""
    match = _HHMM_RE.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValidationFailed.field(field, 'must be a time "HH:MM" between 00:00 and 23:59')
    return time(int(match[1]), int(match[2]))


def format_hhmm(value: time) -> str:
    return f"{value.hour:02d}:{value.minute:02d}"


def parse_rule_times(start_time: object, end_time: object) -> tuple[time, time]:
    """Parse a rule's ``"HH:MM"`` pair (``datetime.time`` values are accepted too); end must follow start."""
    start = start_time if isinstance(start_time, time) else parse_hhmm(start_time, "start_time")
    end = end_time if isinstance(end_time, time) else parse_hhmm(end_time, "end_time")
    if start.tzinfo is not None or end.tzinfo is not None:
        raise ValidationFailed.field("start_time", "must be a local wall time without offset")
    if end <= start:
        raise ValidationFailed.field("end_time", "must be later than start_time")
    return start, end


def build_rule(
    *, id: int | None, calendar_id: int | None, weekday: object, start_time: object, end_time: object
) -> AvailabilityRule:
    start, end = parse_rule_times(start_time, end_time)
    return AvailabilityRule(id, calendar_id, validate_weekday(weekday), start, end)


def parse_slot_start(text: object) -> datetime:
    """The ``slot_start`` of a booking or reschedule: RFC 3339 with offset or Z, as aware UTC."""
    return parse_instant(text, "slot_start")


def validate_window(start: datetime, end: datetime, *, end_field: str = "end") -> tuple[datetime, datetime]:
    """An aware ``[start, end)`` with end > start, in UTC."""
    for name, value in (("start", start), (end_field, end)):
        if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
            raise ValidationFailed.field(name, "must carry an explicit UTC offset or Z")
    if end <= start:
        raise ValidationFailed.field(end_field, "must be later than start")
    return start.astimezone(UTC), end.astimezone(UTC)


def build_blackout(
    *, id: int | None, calendar_id: int | None, start: object, end: object, reason: str | None = None
) -> Blackout:
    """A blackout from RFC 3339 strings (or aware datetimes); end must be later than start."""
    start_at, end_at = validate_window(parse_instant(start, "start"), parse_instant(end, "end"))
    return Blackout(id, calendar_id, require_supported(start_at, "start"), require_supported(end_at, "end"), reason)


def validate_availability_range(start: datetime, end: datetime) -> tuple[datetime, datetime]:
    """An availability query window: end > start and at most MAX_AVAILABILITY_RANGE_DAYS long."""
    start_at, end_at = validate_window(start, end)
    if end_at - start_at > timedelta(days=MAX_AVAILABILITY_RANGE_DAYS):
        raise ValidationFailed.field("end", f"the range is at most {MAX_AVAILABILITY_RANGE_DAYS} days")
    return start_at, end_at


# --------------------------------------------------------------------------- rendering


def render_in_zone(dt: datetime, tz_name: str) -> str:
    """RFC 3339 with the explicit offset ``dt`` has in zone ``tz_name`` (same instant)."""
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError("render_in_zone needs an aware datetime")
    local = dt.astimezone(zone_of(tz_name))
    return local.isoformat(timespec="microseconds" if local.microsecond else "seconds")


# --------------------------------------------------------------------------- slot generation


def _offset_us(zone: ZoneInfo, us: int) -> int:
    """The zone's UTC offset at instant ``us`` (whole seconds suffice: transitions fall on them)."""
    offset = datetime.fromtimestamp(us // _US_PER_SECOND, zone).utcoffset()
    return 0 if offset is None else offset // _US


def _transition(zone: ZoneInfo, before: int, after: int) -> int:
    """The first instant in ``(before, after]`` that has the offset of ``after`` (to the second);
    ``before`` must have another offset."""
    target = _offset_us(zone, after)
    lo, hi = before // _US_PER_SECOND, -(-after // _US_PER_SECOND)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _offset_us(zone, mid * _US_PER_SECOND) == target:
            hi = mid
        else:
            lo = mid
    return hi * _US_PER_SECOND


_SAMPLE_US = 6 * 3600 * _US_PER_SECOND
_MARGIN_US = 3 * 86_400 * _US_PER_SECOND
_US_PER_DAY = 86_400 * _US_PER_SECOND
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


class _Timeline:
    """A zone's UTC offsets over a bounded span, found once, so that expanding rules is integer work.

    ``offsets[i]`` holds on ``[times[i-1], times[i])``; all values are UTC microseconds. The zone is
    sampled every 6 hours and each change located to the second (offset changes closer together than
    that, which tzdata does not have in modern times, would be missed)."""

    __slots__ = ("offsets", "times")

    def __init__(self, zone: ZoneInfo, start: int, end: int) -> None:
        start -= _MARGIN_US
        end += _MARGIN_US
        self.times: list[int] = []
        self.offsets: list[int] = [_offset_us(zone, start)]
        previous = start
        while previous < end:
            probe = min(previous + _SAMPLE_US, end)
            offset = _offset_us(zone, probe)
            if offset != self.offsets[-1]:
                self.times.append(_transition(zone, previous, probe))
                self.offsets.append(offset)
            previous = probe

    def offset_at(self, instant: int) -> int:
        return self.offsets[bisect_right(self.times, instant)]

    def resolve(self, wall: int) -> tuple[int, int]:
        """(first, last) instant at which the local clock reads ``wall`` (a wall time written as if UTC).

        Equal for an ordinary time; first < last in a repeated hour; for a nonexistent time (gap)
        both are the transition instant, i.e. the first existing instant after the gap."""
        times, offsets = self.times, self.offsets
        if not times:
            return wall - offsets[0], wall - offsets[0]
        guess = bisect_right(times, wall - self.offset_at(wall))
        near = range(max(0, guess - 1), min(len(offsets), guess + 2))
        hits = [wall - offsets[j] for j in near if bisect_right(times, wall - offsets[j]) == j]
        if hits:
            return min(hits), max(hits)
        for j in near:
            if j and times[j - 1] + offsets[j - 1] <= wall < times[j - 1] + offsets[j]:
                return times[j - 1], times[j - 1]
        raise AssertionError("unreachable: a wall time is either reached or skipped")  # pragma: no cover


def _merged_busy(
    calendar: Calendar,
    blackouts: Iterable[Blackout],
    appointments: Iterable[Appointment | HeldSlot] | HeldIntervals,
    exclude_appointment_id: int | None,
) -> tuple[list[int], list[int]]:
    epoch, unit, holding = _EPOCH, _US, BUSY_STATUSES
    if isinstance(appointments, HeldIntervals):
        pad = calendar.buffer_minutes * _US_PER_MINUTE
        intervals = [(start - pad, end + pad) for i, start, end in zip(
            appointments.ids, appointments.starts, appointments.ends, strict=True)
            if exclude_appointment_id is None or i != exclude_appointment_id]
    else:
        buffer = timedelta(minutes=calendar.buffer_minutes)
        intervals = [
            ((appt.slot_start - buffer - epoch) // unit, (appt.slot_end + buffer - epoch) // unit)
            for appt in appointments
            if appt.status in holding and (exclude_appointment_id is None or appt.id != exclude_appointment_id)
        ]
    intervals.extend(((b.start - epoch) // unit, (b.end - epoch) // unit) for b in blackouts)
    intervals.sort()
    starts: list[int] = []
    ends: list[int] = []
    for start, end in intervals:
        if end <= start:
            continue
        if ends and start <= ends[-1]:
            if end > ends[-1]:
                ends[-1] = end
        else:
            starts.append(start)
            ends.append(end)
    return starts, ends


def _window_check(
    timeline: _Timeline, low: int, high: int, window_start: int, window_end: int
) -> Callable[[int, int], bool] | None:
    """None when the window holds no UTC-offset change (every grid slot in it is inside the rule).

    Otherwise a predicate telling whether the local wall clock stays within ``[low, high]`` (walls
    written as if UTC) during ``[start, finish)``: around a fall-back, elapsed stepping may reach a slot
    whose wall time lies outside the rule (e.g. 01:00 EST for a rule starting 01:30 that night)."""
    off_before = timeline.offset_at(window_start)
    off_after = timeline.offset_at(window_end)
    if off_before == off_after:
        return None
    shift = timeline.times[bisect_right(timeline.times, window_start)]

    def inside(start: int, finish: int) -> bool:
        if finish <= shift or start >= shift:
            offset_start = off_before if start < shift else off_after
            offset_end = off_before if finish <= shift else off_after
            first_wall, end_wall = start + offset_start, finish + offset_end
        else:
            first_wall = min(start + off_before, shift + off_after)
            end_wall = max(shift + off_before, finish + off_after)
        return first_wall >= low and end_wall <= high

    return inside


def open_slots(
    calendar: Calendar,
    rules: Iterable[AvailabilityRule],
    blackouts: Iterable[Blackout],
    busy_appointments: Iterable[Appointment | HeldSlot] | HeldIntervals,
    range_start: datetime,
    range_end: datetime,
    now: datetime,
    *,
    exclude_appointment_id: int | None = None,
) -> list[Slot]:
    """The bookable slots whose start lies in ``[range_start, range_end)``, sorted, in UTC.

    ``busy_appointments`` (appointments or HeldSlots of any status: only pending and confirmed ones are
    busy; or HeldIntervals) are ignored for the one with ``exclude_appointment_id`` (being rescheduled).
    See the module docstring."""
    step = calendar.slot_duration_minutes * _US_PER_MINUTE
    if step <= 0:
        return []
    now_us = to_epoch_us(now)
    lower = max(to_epoch_us(range_start), now_us + calendar.min_notice_minutes * _US_PER_MINUTE)
    upper = min(to_epoch_us(range_end), now_us + calendar.horizon_days * _US_PER_DAY)
    if lower >= upper:
        return []

    by_weekday: dict[int, list[tuple[int, int]]] = {}
    for rule in rules:
        if rule.end_time > rule.start_time:
            window = (
                (rule.start_time.hour * 60 + rule.start_time.minute) * _US_PER_MINUTE,
                (rule.end_time.hour * 60 + rule.end_time.minute) * _US_PER_MINUTE,
            )
            by_weekday.setdefault(rule.weekday, []).append(window)
    if not by_weekday:
        return []

    busy_starts, busy_ends = _merged_busy(calendar, blackouts, busy_appointments, exclude_appointment_id)
    n_busy = len(busy_ends)
    timeline = _Timeline(calendar.zone, lower, upper)
    # local dates, with a day of margin on each side (any offset, midnight transitions)
    first_day = (lower + timeline.offset_at(lower)) // _US_PER_DAY - 1
    last_day = (upper + timeline.offset_at(upper)) // _US_PER_DAY + 1
    found: set[int] = set()
    for day in range(first_day, last_day + 1):
        windows = by_weekday.get((day + _EPOCH_ORDINAL - 1) % 7)
        if not windows:
            continue
        midnight = day * _US_PER_DAY  # the local date's 00:00 wall time, written as if UTC
        for start_offset, end_offset in windows:
            low, high = midnight + start_offset, midnight + end_offset
            window_start = timeline.resolve(low)[0]
            window_end = timeline.resolve(high)[1]
            if window_end - window_start < step:
                continue
            inside = _window_check(timeline, low, high, window_start, window_end)
            candidate = window_start
            if candidate < lower:
                candidate += -(-(lower - candidate) // step) * step
            last_start = min(window_end - step, upper - 1)
            while candidate <= last_start:
                finish = candidate + step
                i = bisect_right(busy_ends, candidate)  # first busy interval ending after the start
                if i < n_busy and busy_starts[i] < finish:
                    # jump to the first grid point at or after the end of this busy interval
                    candidate += -(-(busy_ends[i] - candidate) // step) * step
                    continue
                if inside is None or inside(candidate, finish):
                    found.add(candidate)
                candidate = finish

    duration = timedelta(0, 0, step)
    slots: list[Slot] = []
    previous_us, previous = 0, _EPOCH
    gaps: dict[int, timedelta] = {step: duration}
    for start_us in sorted(found):
        gap = start_us - previous_us
        delta = gaps.get(gap)
        if delta is None:
            delta = gaps[gap] = timedelta(0, 0, gap)
        previous_us, previous = start_us, previous + delta
        slots.append(Slot(previous, previous + duration))
    return slots


def slot_at(calendar: Calendar, slot_start: datetime) -> Slot:
    """The slot of ``calendar`` that starts at ``slot_start`` (end = start + slot duration)."""
    if slot_start.tzinfo is None or slot_start.utcoffset() is None:
        raise ValueError("slot_start must be an aware datetime")
    start = slot_start.astimezone(UTC)
    return Slot(start, start + calendar.slot_duration)


def is_open_slot(
    calendar: Calendar,
    rules: Iterable[AvailabilityRule],
    blackouts: Iterable[Blackout],
    busy_appointments: Iterable[Appointment | HeldSlot] | HeldIntervals,
    slot_start: datetime,
    now: datetime,
    *,
    exclude_appointment_id: int | None = None,
) -> bool:
    """True iff ``slot_start`` is exactly the start of an open slot (booking and reschedule path)."""
    slots = open_slots(
        calendar,
        rules,
        blackouts,
        busy_appointments,
        slot_start,
        slot_start + _US,
        now,
        exclude_appointment_id=exclude_appointment_id,
    )
    return any(slot.start == slot_start for slot in slots)


def require_open_slot(
    calendar: Calendar,
    rules: Iterable[AvailabilityRule],
    blackouts: Iterable[Blackout],
    busy_appointments: Iterable[Appointment | HeldSlot] | HeldIntervals,
    slot_start: datetime,
    now: datetime,
    *,
    exclude_appointment_id: int | None = None,
) -> Slot:
    """The slot starting at ``slot_start``, or SlotUnavailable (409) when it is not open."""
    if not is_open_slot(
        calendar, rules, blackouts, busy_appointments, slot_start, now, exclude_appointment_id=exclude_appointment_id
    ):
        raise SlotUnavailable(
            "slot_start is not an open slot of this calendar",
            details={"slot_start": render_in_zone(slot_start, calendar.timezone)},
        )
    return slot_at(calendar, slot_start)


# --------------------------------------------------------------------------- attendees, ranges, feeds

MAX_RULES_PER_CALENDAR = 100
ATTENDEE_NAME_MAX_LENGTH = 200
ATTENDEE_EMAIL_MAX_LENGTH = 320
ATTENDEE_PHONE_MAX_LENGTH = 32
NOTES_MAX_LENGTH = 5000
BLACKOUT_REASON_MAX_LENGTH = 500
DEFAULT_AVAILABILITY_DAYS = 7
FEED_LOOKBACK_DAYS = 90
FEED_MAX_EVENTS = 5000
# the longest an appointment can last (the largest slot duration): bounds every overlap query
MAX_APPOINTMENT_LENGTH = timedelta(minutes=SLOT_DURATION_RANGE[1])
# RFC 5545 STATUS of a VEVENT by appointment status
ICS_STATUS = {
    "pending": "TENTATIVE",
    "confirmed": "CONFIRMED",
    "completed": "CONFIRMED",
    "no_show": "CONFIRMED",
    "cancelled": "CANCELLED",
}
_EMAIL_RE = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_FEED_TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{20,128}")


def _optional_text(field: str, value: object, limit: int) -> str | None:
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
    name_ = _optional_text("attendee_name", name, ATTENDEE_NAME_MAX_LENGTH)
    email_ = _optional_text("attendee_email", email, ATTENDEE_EMAIL_MAX_LENGTH)
    if email_ is not None and not _EMAIL_RE.fullmatch(email_):
        raise ValidationFailed.field("attendee_email", "must be an email address such as ann@example.com")
    phone_ = _optional_text("attendee_phone", phone, ATTENDEE_PHONE_MAX_LENGTH)
    notes_ = _optional_text("notes", notes, NOTES_MAX_LENGTH)
    return name_, email_, phone_, notes_


SUPPORTED_YEARS = (1971, 2199)


def require_supported(value: datetime, field: str) -> datetime:
    """``value`` if it lies in the years scheduling works with (SUPPORTED_YEARS, so that any zone can
    render it), else ValidationFailed on ``field``."""
    low, high = SUPPORTED_YEARS
    if not low <= value.astimezone(UTC).year <= high:
        raise ValidationFailed.field(field, f"must lie between the years {low} and {high}")
    return value


def validate_blackout_reason(reason: object) -> str | None:
    return _optional_text("reason", reason, BLACKOUT_REASON_MAX_LENGTH)


def local_day_start(day: date, tz_name: str) -> datetime:
    """The first instant of local date ``day`` in zone ``tz_name`` (where midnight does not exist, as in
    Santiago's spring-forward, the first existing instant of that date), as aware UTC."""
    zone = zone_of(tz_name)
    wall = (day.toordinal() - _EPOCH_ORDINAL) * _US_PER_DAY
    timeline = _Timeline(zone, wall - _US_PER_DAY, wall + _US_PER_DAY)
    return _EPOCH + timedelta(microseconds=timeline.resolve(wall)[0])


def availability_range(
    start: datetime | date | None, end: datetime | date | None, tz_name: str, now: datetime
) -> tuple[datetime, datetime]:
    """An availability query window from optional bounds: an instant, or a date read as the start of that
    local date in ``tz_name``. start defaults to ``now``, end to start + DEFAULT_AVAILABILITY_DAYS."""

    def bound(value: datetime | date, field: str) -> datetime:
        if isinstance(value, datetime):
            return require_supported(value, field)
        require_supported(datetime(value.year, value.month, value.day, tzinfo=UTC), field)
        return local_day_start(value, tz_name)

    start_at = now if start is None else bound(start, "start")
    end_at = start_at + timedelta(days=DEFAULT_AVAILABILITY_DAYS) if end is None else bound(end, "end")
    return validate_availability_range(start_at, end_at)


def format_utc(dt: datetime) -> str:
    """RFC 3339 in UTC with a trailing Z (how appointments and blackouts are shown)."""
    value = dt.astimezone(UTC)
    return value.isoformat(timespec="microseconds" if value.microsecond else "seconds").replace("+00:00", "Z")


_RENDER_TIMELINE_SPAN_US = 400 * 86_400 * 1_000_000


def render_slots(slots: Iterable[Slot], tz_name: str) -> list[tuple[str, str]]:
    """(start, end) of each slot as RFC 3339 with the explicit offset of zone ``tz_name``: the same text
    ``render_in_zone`` gives, with the zone's offsets over the span looked up once (``_Timeline``) and the
    date and clock parts of the text cached, instead of one ``astimezone`` and ``isoformat`` per value."""
    zone = zone_of(tz_name)
    items = list(slots)
    if not items:
        return []
    epoch, unit = _EPOCH, _US
    values = [(dt - epoch) // unit for slot in items for dt in (slot.start, slot.end)]
    first, last = min(values), max(values)
    if last - first > _RENDER_TIMELINE_SPAN_US:  # not worth a timeline: one conversion per value
        return [(render_in_zone(slot.start, tz_name), render_in_zone(slot.end, tz_name)) for slot in items]
    timeline = _Timeline(zone, first, last)
    times, offsets = timeline.times, timeline.offsets
    bounds = [-(2**62), *times, 2**62]
    suffixes: dict[int, str] = {}
    days: dict[int, str] = {}
    clocks: dict[int, str] = {}
    texts: list[str] = []
    low = high = offset = 0
    suffix = ""
    for us in values:
        if not low <= us < high:  # another offset period (values are mostly sorted: rarely)
            index = bisect_right(times, us)
            low, high, offset = bounds[index], bounds[index + 1], offsets[index]
            suffix = suffixes.get(offset) or suffixes.setdefault(
                offset, datetime(2000, 1, 1, tzinfo=timezone(timedelta(microseconds=offset))).isoformat()[19:])
        day, rest = divmod(us + offset, _US_PER_DAY)
        prefix = days.get(day)
        if prefix is None:
            prefix = days[day] = date.fromordinal(day + _EPOCH_ORDINAL).isoformat() + "T"
        clock = clocks.get(rest)
        if clock is None:
            seconds, micro = divmod(rest, _US_PER_SECOND)
            clock = clocks[rest] = time(seconds // 3600, seconds // 60 % 60, seconds % 60, micro).isoformat(
                timespec="microseconds" if micro else "seconds")
        texts.append(prefix + clock + suffix)
    return list(zip(texts[0::2], texts[1::2], strict=True))


def next_open_slot_windows(after: datetime, now: datetime, calendar: Calendar, step_days: int = 14) -> list[
        tuple[datetime, datetime]]:
    """The successive query windows in which to look for the first open slot at or after ``after``:
    ``step_days`` long, from max(after, now) up to the booking horizon."""
    start = max(after.astimezone(UTC), now)
    horizon = now + timedelta(days=calendar.horizon_days)
    windows: list[tuple[datetime, datetime]] = []
    while start < horizon:
        end = min(start + timedelta(days=step_days), horizon)
        windows.append((start, end))
        start = end
    return windows


def feed_token_digest(token: str) -> str:
    """What is stored for an ICS feed token: its SHA-256, hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def is_feed_token_shaped(token: str) -> bool:
    return bool(_FEED_TOKEN_RE.fullmatch(token))


def ics_uid(appointment_id: int) -> str:
    """The stable VEVENT UID of an appointment (a reschedule's new row has a new id, hence a new UID)."""
    return f"appointment-{appointment_id}@parley"


_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_day_or_instant(text: object, field: str) -> datetime | date:
    """A query bound: ``YYYY-MM-DD`` (a local date, resolved later in a zone) or an RFC 3339 instant with
    offset or Z (aware UTC). A date-time without offset raises ValidationFailed."""
    if isinstance(text, str) and _DATE_RE.fullmatch(text.strip()):
        try:
            return date.fromisoformat(text.strip())
        except ValueError:
            raise ValidationFailed.field(field, "is not a valid date") from None
    return parse_instant(text, field)
