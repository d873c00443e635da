"""Business-hours schedules: validation, precedence, DST and the laws of status, next opening and preview,
checked against an independent oracle (zoneinfo read directly, one instant at a time)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.business_hours import (
    MAX_PREVIEW_DAYS,
    HolidayRegion,
    Interval,
    Schedule,
    ScheduleException,
    WeeklyInterval,
    build_schedule,
    next_opening,
    preview,
    schedule_document,
    status_at,
)
from domain.errors import RangeTooLong, ValidationFailed
from tests.properties import examples

ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "UTC"]
# local dates with a DST change in 2026: Berlin, New York, Lord Howe (30 minutes)
DST_DAYS = [date(2026, 3, 29), date(2026, 10, 25), date(2026, 3, 8), date(2026, 11, 1), date(2026, 4, 5),
            date(2026, 10, 4)]


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def schedule(tz: str = "Europe/Berlin", weekly: list[dict[str, object]] | None = None,
             exceptions: list[dict[str, object]] | None = None, holidays: object = None) -> Schedule:
    return build_schedule(id=1, organization_id=1, name="Hours", timezone=tz, weekly=weekly or [],
                          exceptions=exceptions or [], holidays=holidays)


def every_day(start: str, end: str) -> list[dict[str, object]]:
    return [{"day": d, "start": start, "end": end} for d in range(7)]


# --------------------------------------------------------------------------- the oracle


def _first_instant(wall: datetime, zone: ZoneInfo) -> datetime:
    """The first instant the local clock of ``zone`` reads ``wall`` (naive); in a gap, the end of the gap."""
    found = []
    for fold in (0, 1):
        candidate = wall.replace(tzinfo=zone, fold=fold).astimezone(UTC)
        if candidate.astimezone(zone).replace(tzinfo=None) == wall:
            found.append(candidate)
    if found:
        return min(found)
    low = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)  # before the transition
    high = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)  # after it
    low, high = min(low, high), max(low, high)
    before = low.astimezone(zone).utcoffset()
    while high - low > timedelta(seconds=1):
        mid = (low + (high - low) / 2).replace(microsecond=0)
        if mid.astimezone(zone).utcoffset() == before:
            low = mid
        else:
            high = mid
    return high


def oracle_open(s: Schedule, at: datetime, zone: str | None = None, holidays: frozenset[date] = frozenset()) -> bool:
    tz = ZoneInfo(zone or s.timezone)
    local = at.astimezone(tz).date()
    for day in (local - timedelta(days=1), local):
        _, intervals = s.day_plan(day, lambda d: d in holidays)
        midnight = datetime(day.year, day.month, day.day)
        for interval in intervals:
            start_min, end_min = interval.span
            start = _first_instant(midnight + timedelta(minutes=start_min), tz)
            end = _first_instant(midnight + timedelta(minutes=end_min), tz)
            if start <= at < end:
                return True
    return False


# --------------------------------------------------------------------------- strategies

minutes = st.one_of(st.sampled_from([0, 60, 90, 120, 150, 180, 1380, 1410]), st.integers(0, 1439))


@st.composite
def intervals(draw: st.DrawFn) -> Interval:
    start = draw(minutes)
    end = draw(st.one_of(st.sampled_from([1440, 120, 150, 180]), st.integers(1, 1440)).filter(
        lambda e: e % 1440 != start))
    return Interval(start, end)


@st.composite
def schedules(draw: st.DrawFn) -> tuple[Schedule, frozenset[date], date]:
    tz = draw(st.sampled_from(ZONES))
    around = draw(st.sampled_from(DST_DAYS))
    weekly = tuple(WeeklyInterval(draw(st.integers(0, 6)), draw(intervals()))
                   for _ in range(draw(st.integers(0, 6))))
    near = st.integers(-4, 4).map(lambda n: around + timedelta(days=n))
    days = draw(st.lists(near, max_size=3, unique=True))
    exceptions = tuple(ScheduleException(d, tuple(draw(st.lists(intervals(), max_size=2)))) for d in sorted(days))
    holidays = frozenset(draw(st.lists(near, max_size=3)))
    region = HolidayRegion("XX") if holidays or draw(st.booleans()) else None
    return Schedule(1, 1, "s", tz, weekly, exceptions, region), holidays, around


@st.composite
def instants(draw: st.DrawFn, around: date) -> datetime:
    base = datetime(around.year, around.month, around.day, tzinfo=UTC)
    return base + timedelta(minutes=draw(st.integers(-5 * 1440, 5 * 1440)), seconds=draw(
        st.sampled_from([0, 0, 1, 59])))


PROPERTY = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(st.data(), schedules())
def test_status_agrees_with_the_oracle_and_its_next_changes_hold(data: st.DataObject,
                                                                 generated: tuple[Schedule, frozenset[date], date]
                                                                 ) -> None:
    s, holidays, around = generated
    t = data.draw(instants(around))
    zone = data.draw(st.sampled_from([None, *ZONES]))
    is_holiday = holidays.__contains__
    status = status_at(s, t, zone=zone, is_holiday=is_holiday)
    assert status.open == oracle_open(s, t, zone, holidays)
    if status.open:
        assert status.reason in ("weekly", "exception")
        close = status.next_close_at
        assert close is not None and close > t
        assert not oracle_open(s, close, zone, holidays)
        for k in range(8):  # open all along [t, close)
            assert oracle_open(s, t + (close - t) * k / 8, zone, holidays)
        assert oracle_open(s, close - timedelta(microseconds=1), zone, holidays)
        if close - t <= timedelta(days=MAX_PREVIEW_DAYS):
            assert preview(s, t, close, zone=zone, is_holiday=is_holiday) == [(t, close)]
        assert next_opening(s, t, zone=zone, is_holiday=is_holiday) == t
        if status.next_open_at is not None:  # it reopens after closing, and not before
            assert status.next_open_at > close and oracle_open(s, status.next_open_at, zone, holidays)
            assert not oracle_open(s, status.next_open_at - timedelta(microseconds=1), zone, holidays)
    else:
        assert status.reason in ("closed", "exception", "holiday")
        opens = status.next_open_at
        assert next_opening(s, t, zone=zone, is_holiday=is_holiday) == opens
        if opens is not None:
            assert opens > t and oracle_open(s, opens, zone, holidays)
            for k in range(8):  # nothing open between t and it
                assert not oracle_open(s, t + (opens - t) * k / 8, zone, holidays)
            assert not oracle_open(s, opens - timedelta(microseconds=1), zone, holidays)
            if opens - t <= timedelta(days=MAX_PREVIEW_DAYS):
                assert preview(s, t, opens, zone=zone, is_holiday=is_holiday) == []
            assert status.next_close_at is not None and status.next_close_at > opens
            assert not oracle_open(s, status.next_close_at, zone, holidays)


@PROPERTY
@given(st.data(), schedules(), st.sampled_from(["Asia/Kolkata", "America/St_Johns", "Pacific/Chatham", *ZONES]))
def test_the_answer_does_not_depend_on_the_zone_the_instant_is_written_in(
        data: st.DataObject, generated: tuple[Schedule, frozenset[date], date], written_in: str) -> None:
    s, holidays, around = generated
    t = data.draw(instants(around))
    is_holiday = holidays.__contains__
    assert status_at(s, t.astimezone(ZoneInfo(written_in)), is_holiday=is_holiday) == status_at(
        s, t, is_holiday=is_holiday)
    end = t + timedelta(days=3)
    assert preview(s, t.astimezone(ZoneInfo(written_in)), end.astimezone(ZoneInfo(written_in)),
                   is_holiday=is_holiday) == preview(s, t, end, is_holiday=is_holiday)


@PROPERTY
@given(st.data(), schedules())
def test_preview_is_exactly_the_open_instants(data: st.DataObject,
                                              generated: tuple[Schedule, frozenset[date], date]) -> None:
    s, holidays, around = generated
    start = data.draw(instants(around))
    end = start + timedelta(minutes=data.draw(st.integers(1, 4 * 1440)))
    found = preview(s, start, end, is_holiday=holidays.__contains__)
    previous_end = start
    for opening, closing in found:
        assert start <= opening < closing <= end and opening >= previous_end
        assert oracle_open(s, opening, None, holidays) and oracle_open(s, closing - timedelta(microseconds=1),
                                                                       None, holidays)
        if opening > previous_end:  # the gap before it is closed
            assert not oracle_open(s, opening - timedelta(microseconds=1), None, holidays)
            assert not oracle_open(s, previous_end + (opening - previous_end) / 2, None, holidays)
        previous_end = closing
    if previous_end < end:
        assert not oracle_open(s, previous_end, None, holidays)
        assert not oracle_open(s, previous_end + (end - previous_end) / 2, None, holidays)


# --------------------------------------------------------------------------- examples: DST


def _lengths(s: Schedule, start: datetime, end: datetime, zone: str | None = None) -> list[timedelta]:
    return [b - a for a, b in preview(s, start, end, zone=zone)]


def test_spring_forward_in_berlin_shortens_an_interval_across_the_gap() -> None:
    s = schedule(weekly=[{"day": 6, "start": "01:00", "end": "04:00"}, {"day": 6, "start": "09:00", "end": "17:00"}])
    found = preview(s, utc(2026, 3, 28), utc(2026, 3, 30))
    assert found == [(utc(2026, 3, 29, 0), utc(2026, 3, 29, 2)), (utc(2026, 3, 29, 7), utc(2026, 3, 29, 15))]


def test_an_interval_inside_the_gap_is_empty_and_one_starting_in_it_opens_when_it_ends() -> None:
    s = schedule(weekly=[{"day": 6, "start": "02:15", "end": "02:45"}, {"day": 6, "start": "02:30", "end": "05:00"}])
    assert preview(s, utc(2026, 3, 28), utc(2026, 3, 30)) == [(utc(2026, 3, 29, 1), utc(2026, 3, 29, 3))]


def test_fall_back_in_new_york_lengthens_an_interval_over_the_repeated_hour() -> None:
    s = schedule("America/New_York", weekly=[{"day": 6, "start": "00:00", "end": "03:00"}])
    assert _lengths(s, utc(2026, 10, 31), utc(2026, 11, 3)) == [timedelta(hours=4)]
    status = status_at(s, utc(2026, 11, 1, 5, 30))  # 01:30 EST, the second 01:30
    assert status.open and status.next_close_at == utc(2026, 11, 1, 8)


def test_lord_howe_shifts_by_thirty_minutes() -> None:
    s = schedule("Australia/Lord_Howe", weekly=every_day("01:00", "03:00"))
    # 2026-10-04: 02:00 -> 02:30 (+10:30 -> +11:00); 2026-04-05: 02:00 -> 01:30 (+11:00 -> +10:30)
    assert _lengths(s, utc(2026, 10, 3, 12), utc(2026, 10, 4, 12)) == [timedelta(hours=1, minutes=30)]
    assert _lengths(s, utc(2026, 4, 4, 12), utc(2026, 4, 5, 12)) == [timedelta(hours=2, minutes=30)]
    nine = schedule("Australia/Lord_Howe", weekly=every_day("09:00", "17:00"))
    assert preview(nine, utc(2026, 10, 3, 12), utc(2026, 10, 4, 12)) == [(utc(2026, 10, 3, 22), utc(2026, 10, 4, 6))]
    assert preview(nine, utc(2026, 10, 2, 12), utc(2026, 10, 3, 12)) == [
        (utc(2026, 10, 2, 22, 30), utc(2026, 10, 3, 6, 30))]


def test_an_overnight_interval_runs_into_the_next_day_across_a_dst_change() -> None:
    s = schedule(weekly=[{"day": 5, "start": "22:00", "end": "06:00"}])  # Saturday night, Berlin springs forward
    assert preview(s, utc(2026, 3, 27), utc(2026, 3, 31)) == [(utc(2026, 3, 28, 21), utc(2026, 3, 29, 4))]
    status = status_at(s, utc(2026, 3, 29, 1, 30))
    assert status.open and status.reason == "weekly" and status.next_close_at == utc(2026, 3, 29, 4)
    assert status.next_open_at == utc(2026, 4, 4, 20)


def test_touching_intervals_merge_across_midnight() -> None:
    s = schedule("UTC", weekly=[{"day": 0, "start": "20:00", "end": "24:00"}, {"day": 1, "start": "00:00",
                                                                               "end": "02:00"}])
    assert preview(s, utc(2026, 3, 2), utc(2026, 3, 4)) == [(utc(2026, 3, 2, 20), utc(2026, 3, 3, 2))]
    assert status_at(s, utc(2026, 3, 2, 21)).next_close_at == utc(2026, 3, 3, 2)


def test_the_callers_zone_reads_the_hours_in_its_own_wall_clock() -> None:
    s = schedule("Europe/Berlin", weekly=every_day("09:00", "17:00"))
    assert preview(s, utc(2026, 3, 2), utc(2026, 3, 3), zone="America/New_York") == [
        (utc(2026, 3, 2, 14), utc(2026, 3, 2, 22))]
    assert status_at(s, utc(2026, 3, 2, 9)).open
    assert not status_at(s, utc(2026, 3, 2, 9), zone="America/New_York").open


# --------------------------------------------------------------------------- examples: precedence


def test_an_exception_beats_a_holiday_which_beats_the_weekly_hours() -> None:
    christmas = date(2026, 12, 25)  # a Friday
    s = schedule("America/New_York", weekly=every_day("09:00", "17:00"),
                 exceptions=[{"date": "2026-12-24", "intervals": [{"start": "09:00", "end": "12:00"}]},
                             {"date": "2026-12-31", "closed": True}],
                 holidays={"country": "US"})
    is_holiday = {christmas, date(2026, 12, 24)}.__contains__
    eve = status_at(s, utc(2026, 12, 24, 15), is_holiday=is_holiday)  # 10:00 local
    assert eve.open and eve.reason == "exception" and eve.next_close_at == utc(2026, 12, 24, 17)
    after_noon = status_at(s, utc(2026, 12, 24, 18), is_holiday=is_holiday)
    assert (after_noon.open, after_noon.reason) == (False, "exception")
    assert after_noon.next_open_at == utc(2026, 12, 26, 14)  # the holiday is skipped
    day = status_at(s, utc(2026, 12, 25, 15), is_holiday=is_holiday)
    assert (day.open, day.reason) == (False, "holiday")
    assert (status_at(s, utc(2026, 12, 31, 15), is_holiday=is_holiday).reason) == "exception"
    assert status_at(s, utc(2026, 12, 28, 23), is_holiday=is_holiday).reason == "closed"
    assert status_at(s, utc(2026, 12, 28, 15), is_holiday=is_holiday).reason == "weekly"
    # without a region, holidays do not apply
    plain = schedule("America/New_York", weekly=every_day("09:00", "17:00"))
    assert status_at(plain, utc(2026, 12, 25, 15), is_holiday=is_holiday).open


def test_an_overnight_interval_belongs_to_the_day_it_starts_on() -> None:
    s = schedule("UTC", weekly=[{"day": 3, "start": "22:00", "end": "02:00"}], holidays={"country": "US"})
    friday = date(2026, 12, 25)
    status = status_at(s, utc(2026, 12, 25, 1), is_holiday={friday}.__contains__)
    assert status.open and status.reason == "weekly"


def test_a_schedule_that_never_opens_has_no_next_changes() -> None:
    status = status_at(schedule(), utc(2026, 3, 2))
    assert (status.open, status.reason, status.next_open_at, status.next_close_at) == (False, "closed", None, None)
    assert next_opening(schedule(), utc(2026, 3, 2)) is None


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(("fields", "field"), [
    ({"weekly": [{"day": 0, "start": "09:00", "end": "17:00"}, {"day": 1, "start": "9:00", "end": "17:00"}]},
     "weekly[1].start"),
    ({"weekly": [{"day": 7, "start": "09:00", "end": "17:00"}]}, "weekly[0].day"),
    ({"weekly": [{"day": 0, "start": "24:00", "end": "17:00"}]}, "weekly[0].start"),
    ({"weekly": [{"day": 0, "start": "09:00", "end": "24:01"}]}, "weekly[0].end"),
    ({"weekly": [{"day": 0, "start": "09:00", "end": "09:00"}]}, "weekly[0].end"),
    ({"weekly": [{"day": 0, "start": "00:00", "end": "24:00"}, {"day": 2, "start": "00:00", "end": "00:00"}]},
     "weekly[1].end"),
    ({"exceptions": [{"date": "2026-02-30", "closed": True}]}, "exceptions[0].date"),
    ({"exceptions": [{"date": "2026-02-01", "closed": True}, {"date": "2026-02-01", "closed": True}]},
     "exceptions[1].date"),
    ({"exceptions": [{"date": "2026-02-01"}]}, "exceptions[0]"),
    ({"exceptions": [{"date": "2026-02-01", "closed": True, "intervals": [{"start": "09:00", "end": "10:00"}]}]},
     "exceptions[0].intervals"),
    ({"exceptions": [{"date": "2026-02-01", "intervals": []}]}, "exceptions[0].intervals"),
    ({"exceptions": [{"date": "2026-02-01", "intervals": [{"start": "10:00", "end": "x"}]}]},
     "exceptions[0].intervals[0].end"),
    ({"holidays": {"country": "usa"}}, "holidays.country"),
    ({"holidays": {"country": "US", "subdivision": "c a"}}, "holidays.subdivision"),
    ({"timezone": "Mars/Olympus"}, "timezone"),
    ({"name": " "}, "name"),
])
def test_validation_names_the_field(fields: dict[str, object], field: str) -> None:
    values = {"name": "Hours", "timezone": "Europe/Berlin", **fields}
    with pytest.raises(ValidationFailed) as caught:
        build_schedule(id=None, organization_id=1, **values)  # type: ignore[arg-type]
    assert caught.value.details == {"validation_errors": {field: caught.value.details["validation_errors"][field]}}


def test_the_document_round_trips() -> None:
    s = schedule(weekly=[{"day": 4, "start": "22:00", "end": "02:00"}, {"day": 0, "start": "00:00", "end": "24:00"}],
                 exceptions=[{"date": "2026-05-01", "closed": True},
                             {"date": "2026-04-30", "intervals": [{"start": "09:00", "end": "12:00"}]}],
                 holidays={"country": "DE", "subdivision": "BE"})
    document = schedule_document(s)
    assert document["weekly"][1] == {"day": 0, "start": "00:00", "end": "24:00"}
    assert [e["date"] for e in document["exceptions"]] == ["2026-04-30", "2026-05-01"]
    assert build_schedule(id=1, organization_id=1, **document) == s


def test_preview_is_bounded_to_62_days_naming_the_field() -> None:
    s = schedule(weekly=every_day("09:00", "17:00"))
    assert len(preview(s, utc(2026, 1, 1), utc(2026, 3, 4))) == 62
    with pytest.raises(RangeTooLong) as caught:
        preview(s, utc(2026, 1, 1), utc(2026, 3, 4, 0, 1))
    assert "end" in caught.value.details["validation_errors"]
    with pytest.raises(ValidationFailed):
        preview(s, utc(2026, 1, 2), utc(2026, 1, 1))
