"""Open-slot generation: DST behaviour, busy time, notice/horizon, parsing and rendering."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.errors import SlotUnavailable, ValidationFailed
from domain.rfc3339 import parse_instant, render_in_zone
from domain.scheduling.model import (
    STATUSES,
    Appointment,
    AvailabilityRule,
    Blackout,
    Calendar,
    HeldIntervals,
    Slot,
    parse_slot_start,
)
from domain.scheduling.rules import build_blackout, build_rule, parse_hhmm, validate_availability_range
from domain.scheduling.slots import is_open_slot, open_slots, require_open_slot
from domain.timezones import validate_timezone
from tests.properties import examples

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def calendar(tz: str, **settings_: int) -> Calendar:
    values = {"horizon_days": 365} | settings_
    return Calendar(id=1, organization_id=1, name="c", timezone=tz, **values)


def rule(weekday: int, start: str, end: str, id: int = 1) -> AvailabilityRule:
    return build_rule(id=id, calendar_id=1, weekday=weekday, start_time=start, end_time=end)


def every_day(start: str, end: str) -> list[AvailabilityRule]:
    return [rule(w, start, end, id=w) for w in range(7)]


def appointment(start: datetime, minutes: int = 30, status: str = "confirmed", id: int = 1) -> Appointment:
    return Appointment(id=id, organization_id=1, calendar_id=1, status=status, slot_start=start,
                       slot_end=start + timedelta(minutes=minutes))


def slots_on(cal: Calendar, rules: list[AvailabilityRule], day: date, **kw: object) -> list[Slot]:
    """Slots whose local date (in the calendar's zone) is ``day``."""
    zone = ZoneInfo(cal.timezone)
    start = datetime.combine(day, time(0), zone) - timedelta(hours=6)
    found = open_slots(cal, rules, kw.get("blackouts", []), kw.get("appointments", []), start,
                       start + timedelta(hours=36), kw.get("now", NOW))
    return [s for s in found if s.start.astimezone(zone).date() == day]


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


# --------------------------------------------------------------------------- DST, by example

# (zone, day before, switch day, day after, UTC hour of 09:00 local on each)
DST_CASES = [
    ("America/New_York", date(2026, 3, 7), date(2026, 3, 8), date(2026, 3, 9), (14, 13, 13)),
    ("America/New_York", date(2026, 10, 31), date(2026, 11, 1), date(2026, 11, 2), (13, 14, 14)),
    ("Europe/Berlin", date(2026, 3, 28), date(2026, 3, 29), date(2026, 3, 30), (8, 7, 7)),
    ("Europe/Berlin", date(2026, 10, 24), date(2026, 10, 25), date(2026, 10, 26), (7, 8, 8)),
]


@pytest.mark.parametrize(("tz", "before", "switch", "after", "hours"), DST_CASES)
def test_business_hours_start_at_nine_local_around_each_switch(
    tz: str, before: date, switch: date, after: date, hours: tuple[int, int, int]
) -> None:
    cal = calendar(tz)
    zone = ZoneInfo(tz)
    for day, utc_hour in zip((before, switch, after), hours, strict=True):
        slots = slots_on(cal, every_day("09:00", "17:00"), day)
        assert len(slots) == 16
        assert slots[0].start == utc(day.year, day.month, day.day, utc_hour)
        first_local = slots[0].start.astimezone(zone)
        last_local = slots[-1].end.astimezone(zone)
        assert (first_local.hour, first_local.minute) == (9, 0)
        assert (last_local.hour, last_local.minute) == (17, 0)
        assert all(s.end - s.start == timedelta(minutes=30) for s in slots)


@pytest.mark.parametrize(("tz", "day"), [("America/New_York", date(2026, 3, 8)), ("Europe/Berlin", date(2026, 3, 29))])
def test_rule_inside_the_spring_forward_gap_yields_nothing(tz: str, day: date) -> None:
    cal = calendar(tz)
    assert slots_on(cal, [rule(day.weekday(), "02:00", "03:00")], day) == []
    # the day before and after the same rule works normally
    for other in (day - timedelta(days=7), day + timedelta(days=7)):
        assert len(slots_on(cal, [rule(day.weekday(), "02:00", "03:00")], other)) == 2


def exists(dt: datetime, zone: ZoneInfo) -> bool:
    local = dt.astimezone(zone)
    return local.replace(tzinfo=None).replace(tzinfo=zone).astimezone(UTC) == dt or local.replace(
        tzinfo=None
    ).replace(tzinfo=zone, fold=1).astimezone(UTC) == dt


def test_rule_across_the_gap_steps_in_elapsed_time_new_york() -> None:
    cal = calendar("America/New_York")
    day = date(2026, 3, 8)
    slots = slots_on(cal, [rule(6, "01:00", "04:00")], day)
    # 01:00 EST .. 04:00 EDT is two elapsed hours
    assert [s.start for s in slots] == [utc(2026, 3, 8, 6), utc(2026, 3, 8, 6, 30), utc(2026, 3, 8, 7),
                                        utc(2026, 3, 8, 7, 30)]
    rendered = [render_in_zone(s.start, "America/New_York") for s in slots]
    assert rendered == ["2026-03-08T01:00:00-05:00", "2026-03-08T01:30:00-05:00", "2026-03-08T03:00:00-04:00",
                        "2026-03-08T03:30:00-04:00"]
    zone = ZoneInfo("America/New_York")
    assert all(exists(s.start, zone) for s in slots)


def test_nonexistent_rule_start_shifts_to_the_first_existing_instant() -> None:
    cal = calendar("Europe/Berlin")
    slots = slots_on(cal, [rule(6, "02:30", "04:00")], date(2026, 3, 29))
    # 03:00 CEST = 01:00Z is the first instant after the gap
    assert [render_in_zone(s.start, "Europe/Berlin") for s in slots] == [
        "2026-03-29T03:00:00+02:00", "2026-03-29T03:30:00+02:00"]


def test_fall_back_repeated_hour_yields_both_instants_new_york() -> None:
    cal = calendar("America/New_York")
    slots = slots_on(cal, [rule(6, "01:00", "02:00")], date(2026, 11, 1))
    assert [s.start for s in slots] == [utc(2026, 11, 1, 5), utc(2026, 11, 1, 5, 30), utc(2026, 11, 1, 6),
                                        utc(2026, 11, 1, 6, 30)]
    assert [render_in_zone(s.start, "America/New_York") for s in slots] == [
        "2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T01:00:00-05:00",
        "2026-11-01T01:30:00-05:00"]


def test_fall_back_repeated_hour_yields_both_instants_berlin() -> None:
    cal = calendar("Europe/Berlin")
    # in Berlin the repeated hour is 02:00-03:00; 01:00-02:00 is an ordinary hour there
    repeated = slots_on(cal, [rule(6, "02:00", "03:00")], date(2026, 10, 25))
    assert [render_in_zone(s.start, "Europe/Berlin") for s in repeated] == [
        "2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T02:00:00+01:00",
        "2026-10-25T02:30:00+01:00"]
    ordinary = slots_on(cal, [rule(6, "01:00", "02:00")], date(2026, 10, 25))
    assert [s.start for s in ordinary] == [utc(2026, 10, 24, 23), utc(2026, 10, 24, 23, 30)]


def test_slot_leaving_the_rule_wall_time_around_fall_back_is_dropped() -> None:
    cal = calendar("America/New_York")
    slots = slots_on(cal, [rule(6, "01:30", "03:00")], date(2026, 11, 1))
    assert [render_in_zone(s.start, "America/New_York") for s in slots] == [
        "2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00", "2026-11-01T02:00:00-05:00",
        "2026-11-01T02:30:00-05:00"]


def test_midnight_transition_in_santiago() -> None:
    # Chile springs forward at 24:00 -> 01:00 on Saturday night 2026-09-05/06
    cal = calendar("America/Santiago")
    slots = slots_on(cal, [rule(6, "00:00", "02:00")], date(2026, 9, 6))
    assert [render_in_zone(s.start, "America/Santiago") for s in slots] == [
        "2026-09-06T01:00:00-03:00", "2026-09-06T01:30:00-03:00"]


# --------------------------------------------------------------------------- busy time, by example


def test_buffer_widens_bookings_on_both_sides_and_blackouts_block() -> None:
    cal = calendar("UTC", buffer_minutes=15)
    day = date(2026, 2, 2)
    taken = appointment(utc(2026, 2, 2, 11))
    blackout = Blackout(1, 1, utc(2026, 2, 2, 14), utc(2026, 2, 2, 15, 10))
    cancelled = appointment(utc(2026, 2, 2, 9), status="cancelled", id=2)
    slots = slots_on(cal, [rule(0, "09:00", "17:00")], day, appointments=[taken, cancelled], blackouts=[blackout])
    starts = {(s.start.hour, s.start.minute) for s in slots}
    assert (9, 0) in starts  # cancelled does not hold the slot
    assert {(10, 30), (11, 0), (11, 30)}.isdisjoint(starts)  # 10:45-11:45 is busy
    assert {(10, 0), (12, 0)} <= starts
    assert {(14, 0), (14, 30), (15, 0)}.isdisjoint(starts)
    assert (13, 30) in starts and (15, 30) in starts


def test_pending_holds_the_slot_and_reschedule_ignores_itself() -> None:
    cal = calendar("UTC")
    rules = [rule(0, "09:00", "10:00")]
    held = appointment(utc(2026, 2, 2, 9), status="pending", id=7)
    assert not is_open_slot(cal, rules, [], [held], utc(2026, 2, 2, 9), NOW)
    assert is_open_slot(cal, rules, [], [held], utc(2026, 2, 2, 9), NOW, exclude_appointment_id=7)
    assert is_open_slot(cal, rules, [], [held], utc(2026, 2, 2, 9, 30), NOW)
    assert not is_open_slot(cal, rules, [], [held], utc(2026, 2, 2, 9, 15), NOW)  # not on the grid
    assert not is_open_slot(cal, rules, [], [held], utc(2026, 2, 2, 10), NOW)  # would end after 10:00
    with pytest.raises(SlotUnavailable):
        require_open_slot(cal, rules, [], [held], utc(2026, 2, 2, 9), NOW)
    slot = require_open_slot(cal, rules, [], [held], utc(2026, 2, 2, 9, 30), NOW)
    assert slot == Slot(utc(2026, 2, 2, 9, 30), utc(2026, 2, 2, 10))


def test_notice_and_horizon() -> None:
    cal = calendar("UTC", min_notice_minutes=90, horizon_days=2)
    now = utc(2026, 2, 2, 9, 10)
    slots = open_slots(cal, every_day("09:00", "17:00"), [], [], now - timedelta(days=1), now + timedelta(days=9), now)
    assert slots[0].start == utc(2026, 2, 2, 11)
    assert slots[-1].start == utc(2026, 2, 4, 9)  # before now + 2 days = 09:10
    on_the_hour = utc(2026, 2, 2, 9)
    exact = open_slots(cal, every_day("09:00", "17:00"), [], [], on_the_hour, on_the_hour + timedelta(days=9),
                       on_the_hour)
    assert exact[0].start == utc(2026, 2, 2, 10, 30)  # at or after now + notice
    assert exact[-1].start == utc(2026, 2, 3, 16, 30)  # 2026-02-04 09:00 is not strictly before the horizon
    assert open_slots(cal, every_day("09:00", "17:00"), [], [], now, now + timedelta(days=2), now)[-1] == slots[-1]


# --------------------------------------------------------------------------- properties

ZONES = ["UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata", "America/Santiago",
         "Pacific/Chatham", "Europe/Dublin", "Pacific/Apia"]
NEAR_SWITCHES = [utc(2026, 3, 5), utc(2026, 3, 26), utc(2026, 4, 2), utc(2026, 9, 3), utc(2026, 9, 24),
                 utc(2026, 10, 22), utc(2026, 10, 29), utc(2011, 12, 27)]

nows = st.one_of(
    st.builds(lambda base, minutes: base + timedelta(minutes=minutes), st.sampled_from(NEAR_SWITCHES),
              st.integers(0, 6 * 1440)),
    st.datetimes(datetime(2024, 1, 1), datetime(2030, 1, 1), timezones=st.just(UTC)),
)


@st.composite
def rule_lists(draw: st.DrawFn) -> list[AvailabilityRule]:
    items = []
    for i in range(draw(st.integers(1, 6))):
        start = draw(st.integers(0, 1438))
        end = draw(st.integers(start + 1, 1439))
        items.append(AvailabilityRule(i, 1, draw(st.integers(0, 6)), time(start // 60, start % 60),
                                      time(end // 60, end % 60)))
    return items


@st.composite
def scenarios(draw: st.DrawFn) -> dict:
    now = draw(nows)
    cal = Calendar(
        id=1, organization_id=1, name="c", timezone=draw(st.sampled_from(ZONES)),
        slot_duration_minutes=draw(st.sampled_from([5, 15, 20, 30, 45, 60, 90, 240])),
        buffer_minutes=draw(st.integers(0, 60)), min_notice_minutes=draw(st.integers(0, 3000)),
        horizon_days=draw(st.integers(1, 14)),
    )
    offsets = st.integers(-1440, 16 * 1440)
    appointments = [
        appointment(now + timedelta(minutes=draw(offsets)), minutes=draw(st.integers(5, 240)),
                    status=draw(st.sampled_from(STATUSES)), id=i)
        for i in range(draw(st.integers(0, 12)))
    ]
    blackouts = []
    for i in range(draw(st.integers(0, 4))):
        start = now + timedelta(minutes=draw(offsets))
        blackouts.append(Blackout(i, 1, start, start + timedelta(minutes=draw(st.integers(1, 3000)))))
    range_start = now + timedelta(minutes=draw(st.integers(-2 * 1440, 8 * 1440)))
    range_end = range_start + timedelta(minutes=draw(st.integers(1, 16 * 1440)))
    return {"calendar": cal, "rules": draw(rule_lists()), "appointments": appointments, "blackouts": blackouts,
            "range_start": range_start, "range_end": range_end, "now": now}


def run(sc: dict, **overrides: object) -> list[Slot]:
    args = sc | overrides
    return open_slots(args["calendar"], args["rules"], args["blackouts"], args["appointments"], args["range_start"],
                      args["range_end"], args["now"])


def overlaps(a_start: datetime, a_end: datetime, b_start: datetime, b_end: datetime) -> bool:
    return a_start < b_end and b_start < a_end


def wall_minutes(dt: datetime, zone: ZoneInfo) -> tuple[date, int]:
    local = dt.astimezone(zone)
    return local.date(), local.hour * 60 + local.minute + local.second / 60


def inside_some_rule(slot: Slot, rules: list[AvailabilityRule], zone: ZoneInfo) -> bool:
    """The local wall clock stays on one date, within one rule's [start, end], for the whole slot."""
    day, first = wall_minutes(slot.start, zone)
    end_day, last = wall_minutes(slot.end - timedelta(minutes=1), zone)
    walls = [first, last + 1]  # the end is exclusive: the wall a minute before it, plus that minute
    if slot.start.astimezone(zone).utcoffset() != (slot.end - timedelta(minutes=1)).astimezone(zone).utcoffset():
        # an offset change inside the slot: look at every minute of it
        for k in range(1, int((slot.end - slot.start).total_seconds() // 60)):
            d, w = wall_minutes(slot.start + timedelta(minutes=k), zone)
            if d != day:
                return False
            walls.append(w)
    if end_day != day:
        return False
    return any(
        r.weekday == day.weekday()
        and min(walls) >= r.start_time.hour * 60 + r.start_time.minute
        and max(walls) <= r.end_time.hour * 60 + r.end_time.minute
        for r in rules
    )


PROPERTY_SETTINGS = settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(scenarios())
def test_slot_properties(sc: dict) -> None:
    cal: Calendar = sc["calendar"]
    zone = ZoneInfo(cal.timezone)
    slots = run(sc)
    starts = [s.start for s in slots]
    assert starts == sorted(set(starts))  # sorted, unique
    buffer = timedelta(minutes=cal.buffer_minutes)
    for s in slots:
        assert s.start.tzinfo is UTC and s.end - s.start == timedelta(minutes=cal.slot_duration_minutes)
        assert sc["range_start"] <= s.start < sc["range_end"]
        assert s.start >= sc["now"] + timedelta(minutes=cal.min_notice_minutes)
        assert s.start < sc["now"] + timedelta(days=cal.horizon_days)
        for a in sc["appointments"]:
            if a.status != "cancelled":  # an outcome (completed, no_show) keeps its time busy
                assert not overlaps(s.start, s.end, a.slot_start - buffer, a.slot_end + buffer)
        for b in sc["blackouts"]:
            assert not overlaps(s.start, s.end, b.start, b.end)
        assert inside_some_rule(s, sc["rules"], zone)
        assert exists(s.start, zone)


@PROPERTY_SETTINGS
@given(scenarios())
def test_busy_notice_and_horizon_only_remove_slots(sc: dict) -> None:
    """Metamorphic oracle: the result equals the free grid filtered by a nested loop."""
    cal: Calendar = sc["calendar"]
    free_cal = Calendar(id=1, organization_id=1, name="c", timezone=cal.timezone,
                        slot_duration_minutes=cal.slot_duration_minutes, horizon_days=365)
    free = open_slots(free_cal, sc["rules"], [], [], sc["range_start"], sc["range_end"],
                      sc["range_start"] - timedelta(days=1))
    buffer = timedelta(minutes=cal.buffer_minutes)
    busy = [(a.slot_start - buffer, a.slot_end + buffer) for a in sc["appointments"]
            if a.status != "cancelled"] + [(b.start, b.end) for b in sc["blackouts"]]
    earliest = sc["now"] + timedelta(minutes=cal.min_notice_minutes)
    horizon = sc["now"] + timedelta(days=cal.horizon_days)
    expected = [
        s for s in free
        if earliest <= s.start < horizon
        and not any(overlaps(s.start, s.end, b0, b1) for b0, b1 in busy)
    ]
    assert run(sc) == expected
    for s in expected[:5]:
        assert is_open_slot(cal, sc["rules"], sc["blackouts"], sc["appointments"], s.start, sc["now"])


@PROPERTY_SETTINGS
@given(scenarios(), st.sampled_from(ZONES))
def test_rendering_in_any_zone_keeps_the_instants(sc: dict, render_zone: str) -> None:
    slots = run(sc)
    zone = ZoneInfo(render_zone)
    for s in slots:
        text = render_in_zone(s.start, render_zone)
        assert parse_slot_start(text) == s.start
        assert datetime.fromisoformat(text).utcoffset() == s.start.astimezone(zone).utcoffset()
    rendered = {parse_instant(render_in_zone(s.start, render_zone), "start") for s in slots}
    assert rendered == {parse_instant(render_in_zone(s.start, "UTC"), "start") for s in slots} == {
        s.start for s in slots}


@settings(max_examples=examples(60), deadline=None)
@given(scenarios())
def test_excluded_appointment_does_not_block_its_own_move(sc: dict) -> None:
    cal: Calendar = sc["calendar"]
    mover = appointment(sc["now"] + timedelta(days=1), status="confirmed", id=999)
    without = run(sc)
    assert open_slots(cal, sc["rules"], sc["blackouts"], [*sc["appointments"], mover], sc["range_start"],
                      sc["range_end"], sc["now"], exclude_appointment_id=999) == without


@PROPERTY_SETTINGS
@given(scenarios(), st.integers(-2 * 1440, 16 * 1440), st.integers(0, 3 * 1440))
def test_held_intervals_give_what_the_appointments_give(sc: dict, offset: int, length: int) -> None:
    """The bulk form availability reads (integers, sorted) keeps exactly the holding appointments, its
    window is what overlaps it, and slot generation over it is the same."""
    held = HeldIntervals.of(sc["appointments"])
    holding = sorted((a for a in sc["appointments"] if a.status != "cancelled"),
                     key=lambda a: (a.slot_start, a.slot_end, a.id))
    assert list(held.ids) == [a.id for a in holding]
    assert list(held.starts) == sorted(held.starts)
    assert run(sc, appointments=held) == run(sc)
    mover = holding[0].id if holding else None
    cal = sc["calendar"]
    assert open_slots(cal, sc["rules"], sc["blackouts"], held, sc["range_start"], sc["range_end"], sc["now"],
                      exclude_appointment_id=mover) == open_slots(
        cal, sc["rules"], sc["blackouts"], sc["appointments"], sc["range_start"], sc["range_end"], sc["now"],
        exclude_appointment_id=mover)

    start = sc["now"] + timedelta(minutes=offset)
    end = start + timedelta(minutes=length)
    window = held.overlapping(start, end)
    assert list(window.ids) == [a.id for a in holding if overlaps(a.slot_start, a.slot_end, start, end)]
    assert len(window) == len(window.starts) == len(window.ends)


# --------------------------------------------------------------------------- parsing and validation


def test_parse_slot_start_accepts_offsets_and_z() -> None:
    assert parse_slot_start("2026-03-09T09:00:00-04:00") == utc(2026, 3, 9, 13)
    assert parse_slot_start("2026-03-09T09:00:00Z") == utc(2026, 3, 9, 9)
    assert parse_slot_start("2026-03-09T09:00:00.250+05:30") == utc(2026, 3, 9, 3, 30, 0, 250000)
    assert parse_slot_start("2026-03-09T09:00:00-04:00").tzinfo is UTC


@pytest.mark.parametrize(
    "text", ["2026-03-09T09:00:00", "2026-03-09", "09:00", "", "2026-03-09T09:00:00+25:00", "2026-02-30T09:00:00Z",
             "tomorrow", "2026-03-09T09:00:00-0400x"],
)
def test_parse_slot_start_rejects(text: str) -> None:
    with pytest.raises(ValidationFailed) as caught:
        parse_slot_start(text)
    assert "slot_start" in caught.value.details["validation_errors"]


def test_parse_slot_start_rejects_a_non_string() -> None:
    with pytest.raises(ValidationFailed):
        parse_slot_start(None)


def test_validators() -> None:
    assert validate_timezone("America/New_York") == "America/New_York"
    for bad in ("Mars/Olympus", "", "localtime", "../etc/passwd", None, "EST5EDT/x"):
        with pytest.raises(ValidationFailed) as caught:
            validate_timezone(bad)
        assert "timezone" in caught.value.details["validation_errors"]
    good = Calendar(1, 1, "c", "Europe/Berlin")
    assert good.validated() is good
    for field, value in (("slot_duration_minutes", 4), ("slot_duration_minutes", 481), ("buffer_minutes", -1),
                         ("buffer_minutes", 241), ("min_notice_minutes", 43201), ("horizon_days", 0),
                         ("horizon_days", 366), ("slot_duration_minutes", True)):
        with pytest.raises(ValidationFailed) as caught:
            Calendar(1, 1, "c", "UTC", **{field: value}).validated()
        assert field in caught.value.details["validation_errors"]
    assert parse_hhmm("23:59", "start_time") == time(23, 59)
    for bad in ("24:00", "9:00", "09:60", "09:00:00", 900):
        with pytest.raises(ValidationFailed):
            parse_hhmm(bad, "start_time")
    with pytest.raises(ValidationFailed) as caught:
        build_rule(id=1, calendar_id=1, weekday=0, start_time="10:00", end_time="10:00")
    assert "end_time" in caught.value.details["validation_errors"]
    with pytest.raises(ValidationFailed) as caught:
        build_rule(id=1, calendar_id=1, weekday=7, start_time="09:00", end_time="10:00")
    assert "weekday" in caught.value.details["validation_errors"]
    blackout = build_blackout(id=1, calendar_id=1, start="2026-03-09T09:00:00+01:00", end="2026-03-09T10:00:00Z")
    assert blackout.start == utc(2026, 3, 9, 8)
    with pytest.raises(ValidationFailed) as caught:
        build_blackout(id=1, calendar_id=1, start="2026-03-09T09:00:00Z", end="2026-03-09T09:00:00Z")
    assert "end" in caught.value.details["validation_errors"]
    with pytest.raises(ValidationFailed):
        validate_availability_range(utc(2026, 1, 1), utc(2026, 3, 5))
    assert validate_availability_range(utc(2026, 1, 1), utc(2026, 3, 4)) == (utc(2026, 1, 1), utc(2026, 3, 4))


def test_render_in_zone() -> None:
    instant = utc(2026, 3, 9, 13)
    assert render_in_zone(instant, "America/New_York") == "2026-03-09T09:00:00-04:00"
    assert render_in_zone(instant, "Asia/Kolkata") == "2026-03-09T18:30:00+05:30"
    assert render_in_zone(instant, "UTC") == "2026-03-09T13:00:00+00:00"
    with pytest.raises(ValidationFailed):
        render_in_zone(instant, "Nowhere/Else")


# --------------------------------------------------------------------------- DST oracle

DST_ZONES = ["America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "America/Santiago", "Pacific/Chatham"]


@cache
def switches(tz: str) -> tuple[tuple[date, int], ...]:
    """(local date, local wall minute just after the change) of each 2026 offset change of ``tz``."""
    zone = ZoneInfo(tz)
    found = []
    moment = utc(2026, 1, 1)
    previous = moment.astimezone(zone).utcoffset()
    while moment.year == 2026:
        moment += timedelta(minutes=15)
        local = moment.astimezone(zone)
        if local.utcoffset() != previous:
            previous = local.utcoffset()
            found.append((local.date(), local.hour * 60 + local.minute))
    return tuple(found)


def brute_force_day(tz: str, day: date, start: int, end: int, step: int) -> list[datetime]:
    """Independent oracle, scanning every quarter hour (all inputs are multiples of 15 minutes): the
    window runs from the first instant whose wall time on ``day`` is at or after ``start`` to the last
    at which it reads ``end`` (or the first one after the walls <= ``end`` when ``end`` falls in a gap);
    grid slots must keep the wall clock inside the rule throughout."""
    zone = ZoneInfo(tz)
    q = timedelta(minutes=15)
    scan = [utc(day.year, day.month, day.day) - timedelta(hours=16) + k * q for k in range(56 * 4)]
    walls = {u: wall_minutes(u, zone) for u in scan}
    on_day = [u for u in scan if walls[u][0] == day]
    opening = [u for u in on_day if walls[u][1] >= start]
    closing = [u for u in on_day if walls[u][1] <= end]
    if not opening or not closing:
        return []
    window_start, window_end = opening[0], closing[-1]
    if walls[window_end][1] < end:
        window_end += q
    found = []
    candidate = window_start
    while candidate + timedelta(minutes=step) <= window_end:
        quarters = [walls[candidate + k * q] for k in range(step // 15)]
        if all(d == day and start <= w and w + 15 <= end for d, w in quarters):
            found.append(candidate)
        candidate += timedelta(minutes=step)
    return found


@settings(max_examples=examples(80), deadline=None)
@given(st.sampled_from(DST_ZONES), st.data(), st.integers(-16, 4), st.integers(1, 20),
       st.sampled_from([15, 30, 45, 60, 90]))
def test_rules_across_offset_changes_match_a_scan(tz: str, data: st.DataObject, lead: int, length: int,
                                                  step: int) -> None:
    day, switch_wall = data.draw(st.sampled_from(switches(tz)))
    start = min(max(switch_wall // 15 + lead, 0), 94) * 15
    end = min(start + length * 15, 23 * 60 + 45)
    cal = calendar(tz, slot_duration_minutes=step)
    rules = [AvailabilityRule(1, 1, day.weekday(), time(start // 60, start % 60), time(end // 60, end % 60))]
    zone = ZoneInfo(tz)
    around = utc(day.year, day.month, day.day)
    got = [s.start for s in open_slots(cal, rules, [], [], around - timedelta(days=2), around + timedelta(days=2),
                                       around - timedelta(days=30))
           if s.start.astimezone(zone).date() == day]
    assert got == brute_force_day(tz, day, start, end, step)
