"""Business-hours schedules: weekly opening hours, exceptions by date and public holidays, evaluated in
local wall-clock time and answered in exact instants.

Standard library only. A schedule's hours are wall-clock times of a zone (the schedule's own, or one the
caller names, e.g. a recipient's): they are laid on each local date and turned into UTC instants with that
zone's ``Timeline`` (``domain.timezones``), so they stay exact across DST changes.

Rules
-----
* ``weekly``: intervals ``{day, start, end}``, several per day, day 0-6 with Monday = 0, ``start`` "HH:MM",
  ``end`` "HH:MM" or "24:00". An interval whose end is before its start runs past midnight into the next
  day (``22:00-02:00``); ``end == start`` is refused (say ``00:00-24:00`` for a whole day).
* ``exceptions``: by local date, either closed all day or open only during other intervals (same rules).
* ``holidays``: ``{country, subdivision?}``: the public holidays of that region close the whole day. The
  domain does not know the calendar of holidays: callers pass a predicate ``is_holiday(date) -> bool``
  (``application/ports/business_hours.py`` names the port that makes one), so this module stays pure.
* Precedence on a local date: an exception, else a holiday, else the weekly intervals of its weekday.
  An interval belongs to the date it starts on: a Friday ``22:00-02:00`` stays open until Saturday 02:00
  even when that Saturday is a holiday or an exception (those decide Saturday's own intervals).
* Overlapping or touching intervals are merged: the schedule is a set of open instants.

DST
---
A wall time the zone skips (spring forward) is read as the first instant after the gap, so an interval
that starts in the gap opens when the gap ends and one that lies wholly inside it is empty that day. A
wall time the zone repeats (fall back) is read as its first occurrence (the earlier offset), for starts and
ends alike. Both readings keep wall-time order, so an interval never ends before it starts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

from domain.errors import RangeTooLong, ValidationFailed
from domain.timezones import (
    EPOCH,
    EPOCH_ORDINAL,
    US_PER_DAY,
    US_PER_MINUTE,
    US_PER_SECOND,
    Timeline,
    to_epoch_us,
    validate_timezone,
    zone_of,
)

NAME_MAX_LENGTH = 200
MAX_WEEKLY_INTERVALS = 100
MAX_EXCEPTIONS = 500
MAX_EXCEPTION_INTERVALS = 20
MAX_PREVIEW_DAYS = 62
SUPPORTED_YEARS = (1971, 2199)
MINUTES_PER_DAY = 1440

Reason = Literal["weekly", "exception", "holiday", "closed"]
IsHoliday = Callable[[date], bool]


def no_holidays(_: date) -> bool:
    return False


# --------------------------------------------------------------------------- the model


@dataclass(frozen=True, slots=True)
class Interval:
    """Local wall-clock minutes: ``start`` 0-1439 from the date's midnight, ``end`` 1-1440; ``end <= start``
    runs past midnight into the next day."""

    start: int
    end: int

    @property
    def overnight(self) -> bool:
        return self.end <= self.start

    @property
    def span(self) -> tuple[int, int]:
        """(start, end) in minutes from the date's midnight, end up to 2 x 1440."""
        return self.start, self.end + (MINUTES_PER_DAY if self.overnight else 0)


@dataclass(frozen=True, slots=True)
class WeeklyInterval:
    day: int  # 0-6, Monday = 0
    interval: Interval


@dataclass(frozen=True, slots=True)
class ScheduleException:
    """A local date whose hours are ``intervals`` (closed all day when empty)."""

    date: date
    intervals: tuple[Interval, ...] = ()

    @property
    def closed(self) -> bool:
        return not self.intervals


@dataclass(frozen=True, slots=True)
class HolidayRegion:
    country: str  # ISO 3166-1 alpha-2, e.g. "US"
    subdivision: str | None = None  # e.g. "CA"


@dataclass(frozen=True, slots=True)
class Schedule:
    id: int | None
    organization_id: int
    name: str
    timezone: str
    weekly: tuple[WeeklyInterval, ...] = ()
    exceptions: tuple[ScheduleException, ...] = ()
    holidays: HolidayRegion | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    _by_date: dict[date, ScheduleException] = field(default_factory=dict, init=False, repr=False, compare=False,
                                                    hash=False)
    _by_day: tuple[tuple[Interval, ...], ...] = field(default=(), init=False, repr=False, compare=False,
                                                      hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_date", {e.date: e for e in self.exceptions})
        object.__setattr__(self, "_by_day", tuple(tuple(w.interval for w in self.weekly if w.day == d)
                                                  for d in range(7)))

    def day_plan(self, day: date, is_holiday: IsHoliday = no_holidays) -> tuple[Reason, tuple[Interval, ...]]:
        """What decides local date ``day`` (exception, then holiday, then weekly) and its intervals."""
        exception = self._by_date.get(day)
        if exception is not None:
            return "exception", exception.intervals
        if self.holidays is not None and is_holiday(day):
            return "holiday", ()
        return "weekly", self._by_day[day.weekday()]


# --------------------------------------------------------------------------- validation

_HHMM_RE = re.compile(r"([01]\d|2[0-3]):([0-5]\d)")
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_COUNTRY_RE = re.compile(r"[A-Z]{2}")
_SUBDIVISION_RE = re.compile(r"[A-Z0-9]{1,10}(-[A-Z0-9]{1,10})?")
HHMM_RULE = 'must be a time "HH:MM" between 00:00 and 23:59'
END_RULE = 'must be a time "HH:MM" between 00:00 and 23:59, or "24:00"'


def parse_minutes(text: object, field_name: str, *, end: bool = False) -> int:
    """``"HH:MM"`` as minutes from midnight; ``"24:00"`` (1440) only for an end."""
    if end and text == "24:00":
        return MINUTES_PER_DAY
    match = _HHMM_RE.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValidationFailed.field(field_name, END_RULE if end else HHMM_RULE)
    return int(match[1]) * 60 + int(match[2])


def format_minutes(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValidationFailed.field(where, "must be an object")
    return value


def _list(value: object, where: str, limit: int) -> Sequence[Any]:
    if not isinstance(value, list | tuple):
        raise ValidationFailed.field(where, "must be an array")
    if len(value) > limit:
        raise ValidationFailed.field(where, f"must have at most {limit} items")
    return value


def parse_interval(value: object, where: str) -> Interval:
    item = _mapping(value, where)
    start = parse_minutes(item.get("start"), f"{where}.start")
    end = parse_minutes(item.get("end"), f"{where}.end", end=True)
    if end == start:
        raise ValidationFailed.field(f"{where}.end", 'must differ from start (use "00:00" to "24:00" for a whole day)')
    return Interval(start, end)


def parse_weekly(value: object, where: str = "weekly") -> tuple[WeeklyInterval, ...]:
    found = []
    for i, raw in enumerate(_list(value, where, MAX_WEEKLY_INTERVALS)):
        item = _mapping(raw, f"{where}[{i}]")
        day = item.get("day")
        if isinstance(day, bool) or not isinstance(day, int) or not 0 <= day <= 6:
            raise ValidationFailed.field(f"{where}[{i}].day", "must be an integer from 0 (Monday) to 6 (Sunday)")
        found.append(WeeklyInterval(day, parse_interval(item, f"{where}[{i}]")))
    return tuple(found)


def parse_date(text: object, field_name: str) -> date:
    if not isinstance(text, str) or not _DATE_RE.fullmatch(text):
        raise ValidationFailed.field(field_name, "must be a date YYYY-MM-DD")
    try:
        value = date.fromisoformat(text)
    except ValueError:
        raise ValidationFailed.field(field_name, "is not a valid date") from None
    low, high = SUPPORTED_YEARS
    if not low <= value.year <= high:
        raise ValidationFailed.field(field_name, f"must lie between the years {low} and {high}")
    return value


def parse_exceptions(value: object, where: str = "exceptions") -> tuple[ScheduleException, ...]:
    found: list[ScheduleException] = []
    seen: dict[date, int] = {}
    for i, raw in enumerate(_list(value, where, MAX_EXCEPTIONS)):
        here = f"{where}[{i}]"
        item = _mapping(raw, here)
        day = parse_date(item.get("date"), f"{here}.date")
        if day in seen:
            raise ValidationFailed.field(f"{here}.date", f"repeats the date of {where}[{seen[day]}]")
        seen[day] = i
        closed, intervals = item.get("closed"), item.get("intervals")
        if closed is not None and not isinstance(closed, bool):
            raise ValidationFailed.field(f"{here}.closed", "must be true or false")
        if closed and intervals:
            raise ValidationFailed.field(f"{here}.intervals", "must be empty or left out when closed is true")
        if closed:
            found.append(ScheduleException(day))
            continue
        if intervals is None:
            raise ValidationFailed.field(here, "must say closed: true or give intervals")
        parsed = tuple(parse_interval(x, f"{here}.intervals[{j}]")
                       for j, x in enumerate(_list(intervals, f"{here}.intervals", MAX_EXCEPTION_INTERVALS)))
        if not parsed:
            raise ValidationFailed.field(f"{here}.intervals", "must not be empty (say closed: true instead)")
        found.append(ScheduleException(day, parsed))
    return tuple(sorted(found, key=lambda e: e.date))


def parse_holidays(value: object, where: str = "holidays") -> HolidayRegion | None:
    """The shape of a holiday region (whether the region exists is the holiday calendar's to say)."""
    if value is None:
        return None
    item = _mapping(value, where)
    country = item.get("country")
    if not isinstance(country, str) or not _COUNTRY_RE.fullmatch(country):
        raise ValidationFailed.field(f"{where}.country", 'must be an ISO 3166-1 country code such as "US"')
    subdivision = item.get("subdivision")
    if subdivision is not None and (not isinstance(subdivision, str) or not _SUBDIVISION_RE.fullmatch(subdivision)):
        raise ValidationFailed.field(f"{where}.subdivision", 'must be a subdivision code such as "CA"')
    return HolidayRegion(country, subdivision)


def validate_name(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationFailed.field("name", "must be a non-empty string")
    if len(value) > NAME_MAX_LENGTH:
        raise ValidationFailed.field("name", f"must be at most {NAME_MAX_LENGTH} characters")
    return value


def build_schedule(*, id: int | None, organization_id: int, name: object, timezone: object, weekly: object = (),
                   exceptions: object = (), holidays: object = None, created_at: datetime | None = None,
                   updated_at: datetime | None = None) -> Schedule:
    """A schedule from client values (the documented JSON shapes); ValidationFailed names the first bad field,
    e.g. ``weekly[2].start``."""
    return Schedule(
        id=id, organization_id=organization_id, name=validate_name(name),
        timezone=validate_timezone(timezone),
        weekly=parse_weekly([] if weekly is None else weekly),
        exceptions=parse_exceptions([] if exceptions is None else exceptions),
        holidays=parse_holidays(holidays), created_at=created_at, updated_at=updated_at,
    )


def schedule_document(schedule: Schedule) -> dict[str, Any]:
    """The client-facing JSON shape of a schedule's settings (what PATCH merges into)."""
    return {
        "name": schedule.name,
        "timezone": schedule.timezone,
        "weekly": weekly_document(schedule.weekly),
        "exceptions": exceptions_document(schedule.exceptions),
        "holidays": holidays_document(schedule.holidays),
    }


def interval_document(interval: Interval) -> dict[str, str]:
    end = "24:00" if interval.end == MINUTES_PER_DAY else format_minutes(interval.end)
    return {"start": format_minutes(interval.start), "end": end}


def weekly_document(weekly: Sequence[WeeklyInterval]) -> list[dict[str, Any]]:
    return [{"day": w.day, **interval_document(w.interval)} for w in weekly]


def exceptions_document(exceptions: Sequence[ScheduleException]) -> list[dict[str, Any]]:
    return [{"date": e.date.isoformat(), "closed": True} if e.closed else
            {"date": e.date.isoformat(), "intervals": [interval_document(i) for i in e.intervals]}
            for e in exceptions]


def holidays_document(region: HolidayRegion | None) -> dict[str, Any] | None:
    if region is None:
        return None
    return {"country": region.country, **({"subdivision": region.subdivision} if region.subdivision else {})}


def require_supported(value: datetime, field_name: str) -> datetime:
    """An aware ``value`` as UTC if it lies in SUPPORTED_YEARS, else ValidationFailed on ``field_name``."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationFailed.field(field_name, "must carry an explicit UTC offset or Z")
    utc = value.astimezone(UTC)
    low, high = SUPPORTED_YEARS
    if not low <= utc.year <= high:
        raise ValidationFailed.field(field_name, f"must lie between the years {low} and {high}")
    return utc


def validate_preview_range(start: datetime, end: datetime) -> tuple[datetime, datetime]:
    """A preview window: end after start (400 otherwise), at most MAX_PREVIEW_DAYS long (422 otherwise)."""
    start_at, end_at = require_supported(start, "start"), require_supported(end, "end")
    if end_at <= start_at:
        raise ValidationFailed.field("end", "must be later than start")
    if end_at - start_at > timedelta(days=MAX_PREVIEW_DAYS):
        raise RangeTooLong.field("end", f"the range is at most {MAX_PREVIEW_DAYS} days")
    return start_at, end_at


# --------------------------------------------------------------------------- evaluation


@dataclass(frozen=True, slots=True)
class OpenSpan:
    """An opening, as UTC microseconds since the epoch: open on ``[start, end)``."""

    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Status:
    open: bool
    reason: Reason
    next_open_at: datetime | None
    """Closed: when it next opens. Open: when it opens again after ``next_close_at``. None: not within the
    search horizon."""
    next_close_at: datetime | None
    """Open: when this opening ends. Closed: when the opening at ``next_open_at`` ends."""


_CHUNK_DAYS = 32
SEARCH_DAYS = 400  # how far past an instant openings are looked for (further ones are reported as null)


def _instant(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


def _local_date(us: int, zone: ZoneInfo) -> date:
    return datetime.fromtimestamp(us // US_PER_SECOND, zone).date()


def _wall_us(day: date) -> int:
    """Local midnight of ``day`` as wall microseconds (the wall time written as if UTC)."""
    return (day.toordinal() - EPOCH_ORDINAL) * US_PER_DAY


def _raw_spans(schedule: Schedule, first: date, days: int, timeline: Timeline,
               is_holiday: IsHoliday) -> Iterator[tuple[int, int, Reason]]:
    """(start, end, source) of every non-empty interval of local dates ``first`` .. ``first + days - 1``."""
    for n in range(days):
        day = first + timedelta(days=n)
        source, intervals = schedule.day_plan(day, is_holiday)
        midnight = _wall_us(day)
        for interval in intervals:
            start_min, end_min = interval.span
            start = timeline.resolve(midnight + start_min * US_PER_MINUTE)[0]
            end = timeline.resolve(midnight + end_min * US_PER_MINUTE)[0]
            if end > start:
                yield start, end, source


def _evaluation_zone(schedule: Schedule, zone: str | None) -> ZoneInfo:
    return zone_of(schedule.timezone if zone is None else zone)


def iter_open_spans(schedule: Schedule, after: int, *, zone: ZoneInfo, is_holiday: IsHoliday = no_holidays,
                    until: int | None = None) -> Iterator[OpenSpan]:
    """The merged openings that end after instant ``after`` (microseconds), in order, lazily, as far as
    ``until`` or else the search horizon."""
    first = _local_date(after, zone) - timedelta(days=1)  # the previous date may run past midnight into ours
    horizon = _local_date(after, zone) + timedelta(days=SEARCH_DAYS)
    if until is not None:
        horizon = min(horizon, _local_date(until, zone) + timedelta(days=1))
    pending: list[list[int]] = []  # merged, not yet final (a later date's interval may still touch them)
    day = first
    while day <= horizon:
        days = min(_CHUNK_DAYS, (horizon - day).days + 1)
        wall = _wall_us(day)
        timeline = Timeline(zone, wall - 2 * US_PER_DAY, wall + (days + 2) * US_PER_DAY)
        for start, end, _ in sorted(_raw_spans(schedule, day, days, timeline, is_holiday)):
            if pending and start <= pending[-1][1]:
                pending[-1][1] = max(pending[-1][1], end)
            else:
                pending.append([start, end])
        day += timedelta(days=days)
        # openings of later dates start at or after that date's first instant: what ends before it is final
        boundary = timeline.resolve(_wall_us(day))[0] if day <= horizon else None
        keep: list[list[int]] = []
        for span in pending:
            if boundary is None or span[1] < boundary:
                if span[1] > after:
                    yield OpenSpan(span[0], span[1])
            else:
                keep.append(span)
        pending = keep
        if until is not None and boundary is not None and boundary > until and not pending:
            return


def _covering_source(schedule: Schedule, at: int, zone: ZoneInfo, is_holiday: IsHoliday) -> Reason | None:
    """The source of an interval holding instant ``at`` (an exception's before a weekly one), if any."""
    day = _local_date(at, zone) - timedelta(days=1)
    wall = _wall_us(day)
    timeline = Timeline(zone, wall - US_PER_DAY, wall + 4 * US_PER_DAY)
    sources = {source for start, end, source in _raw_spans(schedule, day, 2, timeline, is_holiday)
               if start <= at < end}
    if not sources:
        return None
    return "exception" if "exception" in sources else "weekly"


def status_at(schedule: Schedule, at: datetime, *, zone: str | None = None,
              is_holiday: IsHoliday = no_holidays) -> Status:
    """Whether the schedule is open at instant ``at`` (any aware datetime), why, and its next changes, with
    hours read in ``zone`` (default: the schedule's). ``is_holiday``: the region's public holidays."""
    tz = _evaluation_zone(schedule, zone)
    t = to_epoch_us(require_supported(at, "at"))
    spans = iter_open_spans(schedule, t, zone=tz, is_holiday=is_holiday)
    current = next(spans, None)
    if current is not None and current.start <= t:
        following = next(spans, None)
        open_reason = _covering_source(schedule, t, tz, is_holiday) or "weekly"
        return Status(True, open_reason, _instant(following.start) if following else None, _instant(current.end))
    source, _ = schedule.day_plan(_local_date(t, tz), is_holiday)
    reason: Reason = "closed" if source == "weekly" else source
    if current is None:
        return Status(False, reason, None, None)
    return Status(False, reason, _instant(current.start), _instant(current.end))


def next_opening(schedule: Schedule, at: datetime, *, zone: str | None = None,
                 is_holiday: IsHoliday = no_holidays) -> datetime | None:
    """The first instant at or after ``at`` at which the schedule is open (``at`` itself when open now), or
    None when it does not open within the search horizon."""
    tz = _evaluation_zone(schedule, zone)
    t = to_epoch_us(require_supported(at, "at"))
    span = next(iter_open_spans(schedule, t, zone=tz, is_holiday=is_holiday), None)
    if span is None:
        return None
    return _instant(max(span.start, t))


def preview(schedule: Schedule, start: datetime, end: datetime, *, zone: str | None = None,
            is_holiday: IsHoliday = no_holidays) -> list[tuple[datetime, datetime]]:
    """The openings within ``[start, end)`` (at most MAX_PREVIEW_DAYS), clipped to it, as aware UTC pairs,
    with hours read in ``zone`` (default: the schedule's)."""
    start_at, end_at = validate_preview_range(start, end)
    tz = _evaluation_zone(schedule, zone)
    low, high = to_epoch_us(start_at), to_epoch_us(end_at)
    found = []
    for span in iter_open_spans(schedule, low, zone=tz, is_holiday=is_holiday, until=high):
        if span.start >= high:
            break
        found.append((_instant(max(span.start, low)), _instant(min(span.end, high))))
    return found
