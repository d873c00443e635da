"""RFC 3339 instants: parsing client text, and rendering in UTC or with a zone's offset.

Parsing refuses what Python would quietly accept but the databases cannot hold or the contract does not
mean: a date-time without an offset, and instants that leave the representable range once converted to
UTC. Rendering writes UTC with a trailing ``Z`` (``format_utc``) or the explicit offset an instant has in
an IANA zone (``render_in_zone``); seconds carry a fraction only when there is one.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

from domain.errors import ValidationFailed
from domain.timezones import zone_of

# What a datetime (and both databases) hold, in UTC: a local time near either end may fall outside it.
MIN_INSTANT = datetime(1, 1, 1, tzinfo=UTC)
MAX_INSTANT = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
INSTANT_RANGE_RULE = "must lie between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z once converted to UTC"

_RFC3339_RE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?(?P<offset>[Zz]|[+-]\d{2}:\d{2})",
    re.ASCII,
)
_NO_OFFSET_RE = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?", re.ASCII)


def in_range(value: datetime, field: str) -> datetime:
    """An aware datetime as UTC, refused (400 on ``field``) outside [MIN_INSTANT, MAX_INSTANT]."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationFailed.field(field, "must carry an explicit UTC offset or Z")
    try:
        utc = value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise ValidationFailed.field(field, INSTANT_RANGE_RULE) from None
    if not MIN_INSTANT <= utc <= MAX_INSTANT:
        raise ValidationFailed.field(field, INSTANT_RANGE_RULE)
    return utc


def check_created_window(created_after: datetime | None, created_before: datetime | None) -> None:
    """A list's ``created_after`` / ``created_before`` window: one that ends before it starts is a client's mistake
    (400 naming ``created_before``), not a question whose answer is nothing (equal bounds: an empty page, as ever)."""
    if created_after is not None and created_before is not None and created_after > created_before:
        raise ValidationFailed.field("created_before", "must not be before created_after")


def parse_instant(text: object, field: str) -> datetime:
    """An RFC 3339 timestamp with an explicit offset or trailing Z, as an aware UTC datetime.

    Seconds may be omitted (``2026-03-09T09:00Z``); fractions beyond microseconds are truncated.
    A value without offset, out of range, or anything else, raises ValidationFailed on ``field``."""
    if isinstance(text, datetime):
        return in_range(text, field)
    if not isinstance(text, str):
        raise ValidationFailed.field(field, "must be an RFC 3339 timestamp string")
    match = _RFC3339_RE.fullmatch(text.strip())
    if match is None:
        if _NO_OFFSET_RE.fullmatch(text.strip()):
            raise ValidationFailed.field(
                field, "must carry an explicit UTC offset or Z, e.g. 2026-03-09T09:00:00-04:00"
            )
        raise ValidationFailed.field(field, "must be an RFC 3339 timestamp, e.g. 2026-03-09T09:00:00-04:00")
    year, month, day, hour, minute, second, fraction = match.groups()[:7]
    offset = match["offset"]
    try:
        micro = int((fraction[1:] + "000000")[:6]) if fraction else 0
        naive = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second or 0), micro)
    except (ValueError, OverflowError):
        raise ValidationFailed.field(field, "is not a valid date and time") from None
    if offset in ("Z", "z"):
        return in_range(naive.replace(tzinfo=UTC), field)
    hours, minutes = int(offset[1:3]), int(offset[4:6])
    if hours > 23 or minutes > 59:
        raise ValidationFailed.field(field, "has an offset outside -23:59 to +23:59")
    sign = 1 if offset[0] == "+" else -1
    try:
        utc = naive - sign * timedelta(hours=hours, minutes=minutes)
    except OverflowError:
        raise ValidationFailed.field(field, INSTANT_RANGE_RULE) from None
    return in_range(utc.replace(tzinfo=UTC), field)


def render_in_zone(dt: datetime, tz_name: str) -> str:
    """RFC 3339 with the explicit offset ``dt`` has in zone ``tz_name`` (same instant)."""
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError("render_in_zone needs an aware datetime")
    local = dt.astimezone(zone_of(tz_name))
    return local.isoformat(timespec="microseconds" if local.microsecond else "seconds")


def format_utc(dt: datetime) -> str:
    """RFC 3339 in UTC with a trailing Z (how appointments and blackouts are shown)."""
    value = dt.astimezone(UTC)
    return value.isoformat(timespec="microseconds" if value.microsecond else "seconds").replace("+00:00", "Z")


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


def format_utc_millis(value: datetime) -> str:
    """RFC 3339 in UTC with a trailing Z and millisecond precision, always (webhook timestamps)."""
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def format_utc_or_none(value: datetime | None) -> str | None:
    """``format_utc``, with None for None (optional timestamps of a view)."""
    return format_utc(value) if value is not None else None
