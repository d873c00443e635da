"""Parsing of client text that every layer shares: ids and RFC 3339 instants.

Both refuse what Python would quietly accept but the databases cannot hold or the contract does not
mean: non-ASCII digits (``int("١٢") == 12``, ``"²".isdigit()``), ids beyond what a BIGINT column and a
JSON number hold exactly, and instants that leave the representable range once converted to UTC.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from domain.errors import ValidationFailed

MAX_ID = 2**53  # the largest id accepted anywhere: exact in JSON numbers, well inside BIGINT
ID_RULE = f"must be a whole number from 1 to {MAX_ID}, in ASCII digits"

# What a datetime (and both databases) hold, in UTC: a local time near either end may fall outside it.
MIN_INSTANT = datetime(1, 1, 1, tzinfo=UTC)
MAX_INSTANT = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
INSTANT_RANGE_RULE = "must lie between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z once converted to UTC"

_ASCII_DIGITS = re.compile(r"[0-9]{1,20}")
_RFC3339_RE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?(?P<offset>[Zz]|[+-]\d{2}:\d{2})",
    re.ASCII,
)
_NO_OFFSET_RE = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?", re.ASCII)


def parse_id(text: object, field: str) -> int:
    """A positive id written in ASCII digits (surrounding spaces allowed), at most MAX_ID."""
    if isinstance(text, bool):
        raise ValidationFailed.field(field, ID_RULE)
    if isinstance(text, int):
        value = text
    elif isinstance(text, str) and _ASCII_DIGITS.fullmatch(text.strip()):
        value = int(text.strip())
    else:
        raise ValidationFailed.field(field, ID_RULE)
    if not 1 <= value <= MAX_ID:
        raise ValidationFailed.field(field, ID_RULE)
    return value


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
