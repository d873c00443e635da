"""Time zones: validating IANA zone names, a zone's UTC offsets over a span (``Timeline``) and the first
instant of a local date.

Standard library only. Instants are handled as UTC microseconds since the Unix epoch (``to_epoch_us``), so
that expanding local wall times over a span is integer work; every IANA zone a client names (calendars,
availability's display ``timezone``, agents) goes through ``validate_timezone``.
"""

from __future__ import annotations

from bisect import bisect_right
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from domain.errors import ValidationFailed

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)
US_PER_MINUTE = 60_000_000
US_PER_SECOND = 1_000_000
_NOT_IANA = frozenset({"localtime", "Factory", "posixrules"})


def to_epoch_us(dt: datetime) -> int:
    """An aware datetime as UTC microseconds since the Unix epoch (a naive one raises TypeError: it
    cannot meet the aware epoch)."""
    return (dt - EPOCH) // MICROSECOND


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


def _offset_us(zone: ZoneInfo, us: int) -> int:
    """The zone's UTC offset at instant ``us`` (whole seconds suffice: transitions fall on them)."""
    offset = datetime.fromtimestamp(us // US_PER_SECOND, zone).utcoffset()
    return 0 if offset is None else offset // MICROSECOND


def _transition(zone: ZoneInfo, before: int, after: int) -> int:
    """The first instant in ``(before, after]`` that has the offset of ``after`` (to the second);
    ``before`` must have another offset."""
    target = _offset_us(zone, after)
    lo, hi = before // US_PER_SECOND, -(-after // US_PER_SECOND)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _offset_us(zone, mid * US_PER_SECOND) == target:
            hi = mid
        else:
            lo = mid
    return hi * US_PER_SECOND


_SAMPLE_US = 6 * 3600 * US_PER_SECOND
_MARGIN_US = 3 * 86_400 * US_PER_SECOND
US_PER_DAY = 86_400 * US_PER_SECOND
EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


class Timeline:
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


def local_day_start(day: date, tz_name: str) -> datetime:
    """The first instant of local date ``day`` in zone ``tz_name`` (where midnight does not exist, as in
    Santiago's spring-forward, the first existing instant of that date), as aware UTC."""
    zone = zone_of(tz_name)
    wall = (day.toordinal() - EPOCH_ORDINAL) * US_PER_DAY
    timeline = Timeline(zone, wall - US_PER_DAY, wall + US_PER_DAY)
    return EPOCH + timedelta(microseconds=timeline.resolve(wall)[0])
