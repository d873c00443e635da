"""Availability rules, blackouts and query windows: parsing and validating them, and the bounds every
scheduling instant must respect."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta

from domain.errors import RangeTooLong, ValidationFailed
from domain.rfc3339 import parse_instant
from domain.scheduling.model import MINUTES_PER_DAY, AvailabilityRule, Blackout, optional_text, validate_weekday
from domain.timezones import local_day_start

MAX_AVAILABILITY_RANGE_DAYS = 62
_HHMM_RE = re.compile(r"([01]\d|2[0-3]):([0-5]\d)")
END_OF_DAY = "24:00"  # a rule's end_time that closes the local day


def parse_hhmm(text: object, field: str) -> time:
    """A strict ``"HH:MM"`` (00:00-23:59) wall time."""
    match = _HHMM_RE.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValidationFailed.field(field, 'must be a time "HH:MM" between 00:00 and 23:59')
    return time(int(match[1]), int(match[2]))


def format_hhmm(value: time) -> str:
    return f"{value.hour:02d}:{value.minute:02d}"


def format_rule_end(rule: AvailabilityRule) -> str:
    """A rule's end as the API shows it: ``"24:00"`` for the end of the day."""
    return END_OF_DAY if rule.end_minute == MINUTES_PER_DAY else format_hhmm(rule.end_time)


def parse_rule_times(start_time: object, end_time: object) -> tuple[time, time]:
    """Parse a rule's ``"HH:MM"`` pair (``datetime.time`` values are accepted too); end must follow start.
    The end may be ``"24:00"``, the end of the day, as in business-hours schedules; it is kept as 00:00
    (``AvailabilityRule.end_minute`` reads it as 1440)."""
    start = start_time if isinstance(start_time, time) else parse_hhmm(start_time, "start_time")
    end = _parse_end(end_time)
    if start.tzinfo is not None or end.tzinfo is not None:
        raise ValidationFailed.field("start_time", "must be a local wall time without offset")
    if end_time != END_OF_DAY and end <= start:
        raise ValidationFailed.field("end_time", "must be later than start_time")
    return start, end


def _parse_end(end_time: object) -> time:
    """A rule's end: ``"HH:MM"`` (00:00-23:59), or ``"24:00"`` kept as 00:00."""
    if end_time == END_OF_DAY:
        return time(0, 0)
    if isinstance(end_time, time):
        return end_time
    match = _HHMM_RE.fullmatch(end_time) if isinstance(end_time, str) else None
    if match is None:
        raise ValidationFailed.field("end_time", 'must be a time "HH:MM" between 00:00 and 23:59, or "24:00"')
    return time(int(match[1]), int(match[2]))


def build_rule(
    *, id: int | None, calendar_id: int | None, weekday: object, start_time: object, end_time: object
) -> AvailabilityRule:
    start, end = parse_rule_times(start_time, end_time)
    return AvailabilityRule(id, calendar_id, validate_weekday(weekday), start, end)


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
        raise RangeTooLong.field("end", f"the range is at most {MAX_AVAILABILITY_RANGE_DAYS} days")
    return start_at, end_at


MAX_RULES_PER_CALENDAR = 100
BLACKOUT_REASON_MAX_LENGTH = 500
DEFAULT_AVAILABILITY_DAYS = 7
SUPPORTED_YEARS = (1971, 2199)


def require_supported(value: datetime, field: str) -> datetime:
    """``value`` if it lies in the years scheduling works with (SUPPORTED_YEARS, so that any zone can
    render it), else ValidationFailed on ``field``."""
    low, high = SUPPORTED_YEARS
    if not low <= value.astimezone(UTC).year <= high:
        raise ValidationFailed.field(field, f"must lie between the years {low} and {high}")
    return value


def validate_blackout_reason(reason: object) -> str | None:
    return optional_text("reason", reason, BLACKOUT_REASON_MAX_LENGTH)


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
