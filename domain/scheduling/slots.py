"""Open slots of a calendar: generation, the booking check, the search for the next one and rendering.

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
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, time, timedelta, timezone

from domain.errors import SlotUnavailable
from domain.rfc3339 import render_in_zone
from domain.scheduling.model import (
    BUSY_STATUSES,
    Appointment,
    AvailabilityRule,
    Blackout,
    Calendar,
    HeldIntervals,
    HeldSlot,
    Slot,
)
from domain.timezones import (
    EPOCH,
    EPOCH_ORDINAL,
    MICROSECOND,
    US_PER_DAY,
    US_PER_MINUTE,
    US_PER_SECOND,
    Timeline,
    to_epoch_us,
    zone_of,
)


def _merged_busy(
    calendar: Calendar,
    blackouts: Iterable[Blackout],
    appointments: Iterable[Appointment | HeldSlot] | HeldIntervals,
    exclude_appointment_id: int | None,
) -> tuple[list[int], list[int]]:
    epoch, unit, holding = EPOCH, MICROSECOND, BUSY_STATUSES
    if isinstance(appointments, HeldIntervals):
        pad = calendar.buffer_minutes * US_PER_MINUTE
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
    timeline: Timeline, low: int, high: int, window_start: int, window_end: int
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
    step = calendar.slot_duration_minutes * US_PER_MINUTE
    if step <= 0:
        return []
    now_us = to_epoch_us(now)
    lower = max(to_epoch_us(range_start), now_us + calendar.min_notice_minutes * US_PER_MINUTE)
    upper = min(to_epoch_us(range_end), now_us + calendar.horizon_days * US_PER_DAY)
    if lower >= upper:
        return []

    by_weekday: dict[int, list[tuple[int, int]]] = {}
    for rule in rules:
        if rule.end_minute > rule.start_minute:  # an end of 24:00 is the next local date's midnight
            window = (rule.start_minute * US_PER_MINUTE, rule.end_minute * US_PER_MINUTE)
            by_weekday.setdefault(rule.weekday, []).append(window)
    if not by_weekday:
        return []

    busy_starts, busy_ends = _merged_busy(calendar, blackouts, busy_appointments, exclude_appointment_id)
    n_busy = len(busy_ends)
    timeline = Timeline(calendar.zone, lower, upper)
    # local dates, with a day of margin on each side (any offset, midnight transitions)
    first_day = (lower + timeline.offset_at(lower)) // US_PER_DAY - 1
    last_day = (upper + timeline.offset_at(upper)) // US_PER_DAY + 1
    found: set[int] = set()
    for day in range(first_day, last_day + 1):
        windows = by_weekday.get((day + EPOCH_ORDINAL - 1) % 7)
        if not windows:
            continue
        midnight = day * US_PER_DAY  # the local date's 00:00 wall time, written as if UTC
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
    previous_us, previous = 0, EPOCH
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
        slot_start + MICROSECOND,
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


_RENDER_TIMELINE_SPAN_US = 400 * 86_400 * 1_000_000


def render_slots(slots: Iterable[Slot], tz_name: str) -> list[tuple[str, str]]:
    """(start, end) of each slot as RFC 3339 with the explicit offset of zone ``tz_name``: the same text
    ``render_in_zone`` gives, with the zone's offsets over the span looked up once (``Timeline``) and the
    date and clock parts of the text cached, instead of one ``astimezone`` and ``isoformat`` per value."""
    zone = zone_of(tz_name)
    items = list(slots)
    if not items:
        return []
    epoch, unit = EPOCH, MICROSECOND
    values = [(dt - epoch) // unit for slot in items for dt in (slot.start, slot.end)]
    first, last = min(values), max(values)
    if last - first > _RENDER_TIMELINE_SPAN_US:  # not worth a timeline: one conversion per value
        return [(render_in_zone(slot.start, tz_name), render_in_zone(slot.end, tz_name)) for slot in items]
    timeline = Timeline(zone, first, last)
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
        day, rest = divmod(us + offset, US_PER_DAY)
        prefix = days.get(day)
        if prefix is None:
            prefix = days[day] = date.fromordinal(day + EPOCH_ORDINAL).isoformat() + "T"
        clock = clocks.get(rest)
        if clock is None:
            seconds, micro = divmod(rest, US_PER_SECOND)
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
