"""The calling window of a campaign contact: may it be dialled at an instant, and if not, when next?

A contact may be dialled while, in every zone that is its local time, the campaign's ``calling_hours`` are open
and (when the campaign follows a business-hours schedule) the schedule is open too. Standard library only.

Which zones are the contact's local time (``recipient_zones``):

* ``timezone_mode`` ``campaign``: the campaign's ``timezone``, always;
* ``recipient``: the contact's own ``timezone``; else the zones of its number (the phone-number port answers
  them; when a number spans several zones, e.g. a toll-free or a mobile number of a large country, **all** must
  be open); else the campaign's ``timezone``.

The schedule's hours are read in the same zones in ``recipient`` mode ("9 to 5 where they are") and in the
schedule's own zone in ``campaign`` mode. Calling hours are wall-clock times laid on each local date exactly as
a schedule's weekly hours are (``domain.business_hours``), so DST changes are exact: the spring-forward gap is
skipped, a repeated hour is read at its first occurrence.

``next_open_at`` is the first instant at or after the asked one at which every constraint is open at once (the
intersection of their openings), looked for up to ``SEARCH_DAYS`` ahead.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache

from domain.business_hours import Interval as WallInterval
from domain.business_hours import (
    IsHoliday,
    Schedule,
    WeeklyInterval,
    iter_open_spans,
    no_holidays,
    parse_minutes,
)
from domain.campaigns import CallingHours, CampaignStatusReason
from domain.timezones import EPOCH, to_epoch_us, zone_of

SEARCH_DAYS = 31
"""How far ahead an opening is looked for. Calling hours alone open daily, so when all of a contact's zones
share no opening in this span they never will; a schedule may stay closed longer (the dialer looks again)."""

OUTSIDE_CALLING_HOURS = CampaignStatusReason.OUTSIDE_CALLING_HOURS.value


@dataclass(frozen=True, slots=True)
class WindowRules:
    """What a campaign says about when its contacts may be called."""

    calling_hours: CallingHours
    timezone: str = "UTC"
    timezone_mode: str = "recipient"
    schedule: Schedule | None = None
    is_holiday: IsHoliday = no_holidays
    """The schedule's public holidays (a predicate over local dates)."""


@dataclass(frozen=True, slots=True)
class WindowVerdict:
    open: bool
    next_open_at: datetime | None
    """Open: the instant asked. Closed: the first instant every constraint is open again; None when that is not
    within SEARCH_DAYS."""
    zones: tuple[str, ...]
    """The zones read as the contact's local time."""
    reason: str | None = None
    """Closed: ``outside_calling_hours``."""


def recipient_zones(rules: WindowRules, contact_zone: str | None, number_zones: Sequence[str]) -> tuple[str, ...]:
    """The contact's local zones under the campaign's mode (see the module's docstring)."""
    if rules.timezone_mode == "campaign":
        return (rules.timezone,)
    if contact_zone:
        return (contact_zone,)
    known = tuple(sorted(set(number_zones)))
    return known or (rules.timezone,)


@lru_cache(maxsize=256)
def _hours_schedule(start: str, end: str) -> Schedule:
    """Calling hours as a schedule open every day from ``start`` to ``end``."""
    interval = WallInterval(parse_minutes(start, "calling_hours.start"),
                            parse_minutes(end, "calling_hours.end", end=True))
    return Schedule(id=None, organization_id=0, name="calling hours", timezone="UTC",
                    weekly=tuple(WeeklyInterval(day, interval) for day in range(7)))


def _streams(rules: WindowRules, zones: tuple[str, ...], t: int, until: int) -> list[Iterator[tuple[int, int]]]:
    hours = _hours_schedule(rules.calling_hours.start, rules.calling_hours.end)
    streams: list[Iterator[tuple[int, int]]] = []

    def spans(schedule: Schedule, zone: str, is_holiday: IsHoliday) -> Iterator[tuple[int, int]]:
        for span in iter_open_spans(schedule, t, zone=zone_of(zone), is_holiday=is_holiday, until=until):
            yield span.start, span.end

    for zone in zones:
        streams.append(spans(hours, zone, no_holidays))
    if rules.schedule is not None:
        schedule_zones = zones if rules.timezone_mode == "recipient" else (rules.schedule.timezone,)
        for zone in schedule_zones:
            streams.append(spans(rules.schedule, zone, rules.is_holiday))
    return streams


def _first_common(streams: list[Iterator[tuple[int, int]]], t: int, until: int) -> int | None:
    """The first instant >= ``t`` (before ``until``) inside a span of every stream (each sorted, disjoint)."""
    current: list[tuple[int, int] | None] = [None] * len(streams)
    while t < until:
        latest_start = t
        for i, stream in enumerate(streams):
            span = current[i]
            while span is None or span[1] <= t:
                span = next(stream, None)
                if span is None:
                    return None
            current[i] = span
            latest_start = max(latest_start, span[0])
        if latest_start == t:
            return t
        t = latest_start
    return None


def calling_window(at: datetime, rules: WindowRules, *, contact_zone: str | None = None,
                   number_zones: Sequence[str] = ()) -> WindowVerdict:
    """Whether a contact may be dialled at instant ``at`` and, when not, when it next may."""
    zones = recipient_zones(rules, contact_zone, number_zones)
    t = to_epoch_us(at)
    until = to_epoch_us(at + timedelta(days=SEARCH_DAYS))
    found = _first_common(_streams(rules, zones, t, until), t, until)
    if found == t:
        return WindowVerdict(True, at, zones)
    next_open = None if found is None else EPOCH + timedelta(microseconds=found)
    return WindowVerdict(False, next_open, zones, OUTSIDE_CALLING_HOURS)
