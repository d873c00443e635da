"""The calling window: calling hours in every zone of the contact, a schedule, DST, several zones, and the
laws of ``next_open_at``, checked against an oracle that reads local wall clocks one instant at a time."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from domain.business_hours import HolidayRegion, build_schedule
from domain.calling_window import WindowRules, calling_window, recipient_zones
from domain.campaigns import CallingHours
from tests.properties import examples

ZONES = ["America/New_York", "America/Los_Angeles", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata",
         "Pacific/Auckland", "UTC"]


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def _ambiguous(at: datetime, zone: str) -> bool:
    """A wall time the zone repeats (fall back): the domain reads calling hours at its first occurrence."""
    local = at.astimezone(ZoneInfo(zone))
    return local.replace(fold=1 - local.fold).utcoffset() != local.utcoffset()


def _oracle(at: datetime, hours: CallingHours, zones: tuple[str, ...]) -> bool:
    start = int(hours.start[:2]) * 60 + int(hours.start[3:])
    end = 1440 if hours.end == "24:00" else int(hours.end[:2]) * 60 + int(hours.end[3:])
    for zone in zones:
        local = at.astimezone(ZoneInfo(zone))
        if not start <= local.hour * 60 + local.minute < end:
            return False
    return True


instants = st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2027, 12, 31)).map(
    lambda d: d.replace(second=0, microsecond=0, tzinfo=UTC))
hours_st = st.tuples(st.integers(0, 46), st.integers(1, 48)).filter(lambda p: p[0] < p[1]).map(
    lambda p: CallingHours(f"{p[0] // 2:02d}:{p[0] % 2 * 30:02d}",
                           "24:00" if p[1] == 48 else f"{p[1] // 2:02d}:{p[1] % 2 * 30:02d}"))
zone_sets = st.lists(st.sampled_from(ZONES), min_size=1, max_size=3, unique=True).map(tuple)


@settings(max_examples=examples(200), deadline=None)
@given(at=instants, hours=hours_st, zones=zone_sets)
def test_open_exactly_when_every_zone_is_inside_its_calling_hours(at: datetime, hours: CallingHours,
                                                                   zones: tuple[str, ...]) -> None:
    assume(not any(_ambiguous(at, z) for z in zones))
    verdict = calling_window(at, WindowRules(hours), number_zones=zones)
    assert verdict.zones == tuple(sorted(zones))
    assert verdict.open == _oracle(at, hours, zones)


@settings(max_examples=examples(100), deadline=None)
@given(at=instants, hours=hours_st, zones=zone_sets)
def test_next_open_at_is_the_first_instant_all_zones_are_open(at: datetime, hours: CallingHours,
                                                                zones: tuple[str, ...]) -> None:
    rules = WindowRules(hours)
    verdict = calling_window(at, rules, number_zones=zones)
    if verdict.open:
        assert verdict.next_open_at == at
        return
    assert verdict.reason == "outside_calling_hours"
    if verdict.next_open_at is None:  # the zones share no opening at all: none at any hour of the next days
        assert not any(_oracle(at + timedelta(minutes=30 * k), hours, zones) for k in range(1, 96))
        return
    found = verdict.next_open_at
    assert found > at
    assert calling_window(found, rules, number_zones=zones).open
    probe = at + timedelta(minutes=15)
    while probe < found - timedelta(minutes=1):  # nothing open in between
        if not any(_ambiguous(probe, z) for z in zones):
            assert not _oracle(probe, hours, zones), probe
        probe += timedelta(minutes=15)


def test_a_contact_where_it_is_three_in_the_morning_waits_for_eight() -> None:
    at = utc(2026, 11, 24, 8, 0)  # 03:00 in New York
    verdict = calling_window(at, WindowRules(CallingHours()), contact_zone="America/New_York")
    assert not verdict.open and verdict.reason == "outside_calling_hours"
    assert verdict.next_open_at == utc(2026, 11, 24, 13, 0)  # 08:00 EST
    assert calling_window(utc(2026, 11, 24, 13, 0), WindowRules(CallingHours()),
                          contact_zone="America/New_York").open


def test_spring_forward_opens_when_the_gap_ends_and_fall_back_reads_the_first_occurrence() -> None:
    # New York, 2026-03-08: 02:00 EST jumps to 03:00 EDT. Hours from 02:30 open at 03:00 EDT (07:00 UTC).
    rules = WindowRules(CallingHours("02:30", "05:00"), timezone="America/New_York", timezone_mode="campaign")
    verdict = calling_window(utc(2026, 3, 8, 6, 0), rules)
    assert verdict.next_open_at == utc(2026, 3, 8, 7, 0)
    # 2026-11-01: 01:00-02:00 happens twice; hours ending 01:30 end at the first 01:30 (EDT, 05:30 UTC)
    rules = WindowRules(CallingHours("00:00", "01:30"), timezone="America/New_York", timezone_mode="campaign")
    assert calling_window(utc(2026, 11, 1, 5, 15), rules).open
    assert not calling_window(utc(2026, 11, 1, 6, 15), rules).open  # the second 01:15 (EST)


def test_several_zones_must_all_be_open() -> None:
    rules = WindowRules(CallingHours())
    zones = ("America/Los_Angeles", "America/New_York")
    at = utc(2026, 6, 10, 13, 0)  # 09:00 in New York, 06:00 in Los Angeles
    verdict = calling_window(at, rules, number_zones=zones)
    assert not verdict.open
    assert verdict.next_open_at == utc(2026, 6, 10, 15, 0)  # 08:00 in Los Angeles
    assert calling_window(utc(2026, 6, 11, 0, 30), rules, number_zones=zones).open  # 20:30 NY, 17:30 LA
    assert not calling_window(utc(2026, 6, 11, 1, 0), rules, number_zones=zones).open  # 21:00 NY


def test_zones_come_from_the_contact_then_the_number_then_the_campaign() -> None:
    recipient = WindowRules(CallingHours(), timezone="Europe/Berlin")
    assert recipient_zones(recipient, "Asia/Tokyo", ["America/New_York"]) == ("Asia/Tokyo",)
    assert recipient_zones(recipient, None, ["America/New_York", "America/Chicago"]) == (
        "America/Chicago", "America/New_York")
    assert recipient_zones(recipient, None, []) == ("Europe/Berlin",)
    campaign = WindowRules(CallingHours(), timezone="Europe/Berlin", timezone_mode="campaign")
    assert recipient_zones(campaign, "Asia/Tokyo", ["America/New_York"]) == ("Europe/Berlin",)


def test_zones_that_never_share_an_opening_have_no_next_open_at() -> None:
    rules = WindowRules(CallingHours("09:00", "10:00"))
    verdict = calling_window(utc(2026, 6, 10, 0, 0), rules, number_zones=("Pacific/Auckland", "Europe/Berlin"))
    assert not verdict.open and verdict.next_open_at is None


def _schedule(holidays: dict[str, str] | None = None, exceptions: list[dict[str, object]] | None = None):  # type: ignore[no-untyped-def]
    weekly = [{"day": d, "start": "09:00", "end": "17:00"} for d in range(5)]
    return build_schedule(id=1, organization_id=1, name="office", timezone="America/New_York", weekly=weekly,
                          exceptions=exceptions or [], holidays=holidays)


def test_a_schedule_narrows_the_window_and_a_holiday_closes_it() -> None:
    thanksgiving = date(2026, 11, 26)
    rules = WindowRules(CallingHours(), timezone="America/New_York", timezone_mode="campaign",
                        schedule=_schedule(holidays={"country": "US"}),
                        is_holiday=lambda day: day == thanksgiving)
    assert calling_window(utc(2026, 11, 25, 15, 0), rules).open  # Wednesday 10:00 EST
    verdict = calling_window(utc(2026, 11, 25, 23, 0), rules)  # Wednesday 18:00: the schedule is closed
    assert not verdict.open
    assert verdict.next_open_at == utc(2026, 11, 27, 14, 0)  # Thursday is a holiday: Friday 09:00
    assert HolidayRegion("US") == rules.schedule.holidays  # type: ignore[union-attr]


def test_in_recipient_mode_the_schedule_is_read_in_the_contacts_zone() -> None:
    rules = WindowRules(CallingHours(), timezone="UTC", schedule=_schedule())
    at = utc(2026, 11, 25, 15, 0)  # 10:00 in New York, 07:00 in Los Angeles
    assert calling_window(at, rules, contact_zone="America/New_York").open
    verdict = calling_window(at, rules, contact_zone="America/Los_Angeles")
    assert verdict.next_open_at == utc(2026, 11, 25, 17, 0)  # 09:00 in Los Angeles


def test_the_phone_port_names_the_zones_of_a_number() -> None:
    from adapters.phones.libphonenumber import LibPhoneNumberNormalizer

    phones = LibPhoneNumberNormalizer()
    assert phones.time_zones("+14155550123") == ("America/Los_Angeles",)
    assert len(phones.time_zones("+18005550123")) > 10  # toll-free: every North American zone
    assert phones.time_zones("+1555010000") == ()  # a simulator test number: unknown (the campaign's zone)
