"""Scheduling helpers around slot generation: fast rendering, query bounds, attendees, feeds."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.errors import ValidationFailed
from domain.rfc3339 import format_utc, parse_day_or_instant, render_in_zone
from domain.scheduling.feeds import ICS_STATUS, feed_token_digest, ics_uid, is_feed_token_shaped
from domain.scheduling.model import STATUSES, Calendar, Slot, validate_attendee
from domain.scheduling.rules import availability_range, build_blackout, require_supported
from domain.scheduling.slots import next_open_slot_windows, render_slots
from domain.timezones import local_day_start
from tests.properties import examples

ZONES = ["UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata", "America/Santiago",
         "Pacific/Chatham", "Europe/Dublin", "Pacific/Apia", "America/St_Johns"]
bases = st.datetimes(datetime(1990, 1, 1), datetime(2060, 1, 1), timezones=st.just(UTC))


@settings(max_examples=examples(200), deadline=None)
@given(zone=st.sampled_from(ZONES), base=bases, offsets=st.lists(st.integers(0, 70 * 86_400), min_size=1, max_size=30),
       minutes=st.sampled_from([5, 15, 30, 60, 480]), far=st.booleans())
def test_render_slots_equals_render_in_zone(zone: str, base: datetime, offsets: list[int], minutes: int,
                                            far: bool) -> None:
    """Within an availability range (a timeline of offsets) and beyond one (a conversion per value)."""
    starts = [base + timedelta(seconds=o) for o in offsets]  # in any order
    if far:
        starts.append(starts[-1] + timedelta(days=500))
    slots = [Slot(s, s + timedelta(minutes=minutes)) for s in starts]
    assert render_slots(slots, zone) == [(render_in_zone(s.start, zone), render_in_zone(s.end, zone)) for s in slots]


def test_render_slots_around_switches() -> None:
    start = datetime(2026, 3, 8, 5, tzinfo=UTC)
    slots = [Slot(start + timedelta(minutes=30 * i), start + timedelta(minutes=30 * i + 30)) for i in range(8)]
    rendered = render_slots(slots, "America/New_York")
    assert rendered[2] == ("2026-03-08T01:00:00-05:00", "2026-03-08T01:30:00-05:00")
    assert rendered[3] == ("2026-03-08T01:30:00-05:00", "2026-03-08T03:00:00-04:00")
    assert render_slots([], "UTC") == []


@pytest.mark.parametrize(("day", "tz", "expected"), [
    (date(2026, 3, 8), "America/New_York", datetime(2026, 3, 8, 5, tzinfo=UTC)),
    (date(2026, 3, 9), "America/New_York", datetime(2026, 3, 9, 4, tzinfo=UTC)),
    (date(2026, 10, 25), "Europe/Berlin", datetime(2026, 10, 24, 22, tzinfo=UTC)),
    (date(2026, 10, 26), "Europe/Berlin", datetime(2026, 10, 25, 23, tzinfo=UTC)),
    # Santiago springs forward at midnight: 2026-09-06 starts at 01:00 -03
    (date(2026, 9, 6), "America/Santiago", datetime(2026, 9, 6, 4, tzinfo=UTC)),
    (date(2026, 3, 1), "Asia/Kolkata", datetime(2026, 2, 28, 18, 30, tzinfo=UTC)),
])
def test_local_day_start(day: date, tz: str, expected: datetime) -> None:
    assert local_day_start(day, tz) == expected
    assert local_day_start(day, tz).astimezone(ZoneInfo(tz)).date() == day


def test_availability_range_defaults_and_limits() -> None:
    now = datetime(2026, 3, 2, 12, tzinfo=UTC)
    assert availability_range(None, None, "UTC", now) == (now, now + timedelta(days=7))
    assert availability_range(date(2026, 3, 3), date(2026, 3, 4), "Europe/Berlin", now) == (
        datetime(2026, 3, 2, 23, tzinfo=UTC), datetime(2026, 3, 3, 23, tzinfo=UTC))
    assert availability_range(now, None, "UTC", now)[1] == now + timedelta(days=7)
    with pytest.raises(ValidationFailed):
        availability_range(date(2026, 3, 3), date(2026, 6, 3), "UTC", now)
    with pytest.raises(ValidationFailed):
        availability_range(date(2026, 3, 3), date(2026, 3, 3), "UTC", now)


def test_parse_day_or_instant() -> None:
    assert parse_day_or_instant("2026-03-09", "start") == date(2026, 3, 9)
    assert parse_day_or_instant("2026-03-09T09:00:00-04:00", "start") == datetime(2026, 3, 9, 13, tzinfo=UTC)
    for bad in ("2026-02-30", "2026-03-09T09:00:00", "tomorrow", ""):
        with pytest.raises(ValidationFailed) as caught:
            parse_day_or_instant(bad, "start")
        assert "start" in caught.value.details["validation_errors"]  # type: ignore[index]


def test_validate_attendee() -> None:
    assert validate_attendee(" Ann ", "ann@example.com", "+14155550100", "") == (
        "Ann", "ann@example.com", "+14155550100", None)
    assert validate_attendee() == (None, None, None, None)
    for kwargs, field in [({"email": "ann"}, "attendee_email"), ({"name": "x" * 201}, "attendee_name"),
                          ({"phone": "1" * 33}, "attendee_phone"), ({"notes": "n" * 5001}, "notes"),
                          ({"name": 5}, "attendee_name")]:
        with pytest.raises(ValidationFailed) as caught:
            validate_attendee(**kwargs)  # type: ignore[arg-type]
        assert field in caught.value.details["validation_errors"]  # type: ignore[index]


def test_next_open_slot_windows_cover_after_to_horizon() -> None:
    now = datetime(2026, 3, 2, 12, tzinfo=UTC)
    cal = Calendar(1, 1, "c", "UTC", horizon_days=30)
    windows = next_open_slot_windows(now - timedelta(days=3), now, cal)
    assert windows[0][0] == now and windows[-1][1] == now + timedelta(days=30)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(windows))
    assert next_open_slot_windows(now + timedelta(days=31), now, cal) == []


def test_feed_helpers() -> None:
    assert set(ICS_STATUS) == set(STATUSES)
    assert ICS_STATUS["cancelled"] == "CANCELLED" and ICS_STATUS["pending"] == "TENTATIVE"
    assert ics_uid(42) == "appointment-42@parley"
    assert len(feed_token_digest("abc")) == 64 and feed_token_digest("abc") != feed_token_digest("abd")
    assert is_feed_token_shaped("A" * 32) and not is_feed_token_shaped("short") and not is_feed_token_shaped("a/" * 20)
    assert format_utc(datetime(2026, 3, 9, 9, tzinfo=ZoneInfo("Europe/Berlin"))) == "2026-03-09T08:00:00Z"
    assert format_utc(datetime(2026, 3, 9, 8, 0, 0, 5, tzinfo=UTC)) == "2026-03-09T08:00:00.000005Z"


def test_instants_outside_the_supported_years_are_refused() -> None:
    now = datetime(2026, 3, 2, 12, tzinfo=UTC)
    for start, end in [(datetime(1, 1, 1, tzinfo=UTC), None), (date(1, 1, 1), date(1, 1, 2)),
                       (date(9999, 12, 30), None), (now, datetime(9999, 1, 1, tzinfo=UTC))]:
        with pytest.raises(ValidationFailed):
            availability_range(start, end, "America/New_York", now)
    with pytest.raises(ValidationFailed):
        build_blackout(id=None, calendar_id=1, start="0001-01-01T00:00:00Z", end="2026-01-01T00:00:00Z")
    assert require_supported(now, "x") == now
