"""A calendar's booking caps through the real HTTP API: upcoming appointments per attendee (same email in any case,
or same phone) and bookings per local day of the calendar; settable on create and PATCH; a voice agent's mid-call
booking obeys them too. Concurrent bookings: tests/http/test_scheduling_concurrency.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.http import calls_support
from tests.http.calls_support import active_agent, finish_calls, place
from tests.http.scheduling_support import book, make_calendar, scheduling_api
from tests.support.apps import Api, ApiFactory, Tenant


@pytest.fixture
async def any_sched(make_api: ApiFactory, sql_url: str) -> Api:
    return await scheduling_api(make_api, sql_url)


@pytest.fixture(autouse=True)
async def close_workers() -> AsyncIterator[None]:
    yield
    await calls_support.close_workers()


def _refused(response: Any, limit: str) -> None:
    assert response.status_code == 409, response.text
    error = response.json()["error"]
    assert error["code"] == "booking_limit_reached" and error["details"]["limit"] == limit
    assert limit in error["message"]


async def _cancel(api: Api, t: Tenant, appointment_id: int) -> None:
    response = await api.client.delete(f"/v2/scheduling/appointments/{appointment_id}", headers=t.headers)
    assert response.status_code == 200, response.text


async def test_an_attendee_holds_at_most_three_upcoming_appointments(any_sched: Api) -> None:
    api, t = any_sched, await any_sched.tenant()
    cal = await make_calendar(api, t)
    assert cal["max_upcoming_per_attendee"] == 3 and cal["max_bookings_per_day"] is None
    made = []
    for day, email in ((3, "ada@example.com"), (4, "ADA@example.com"), (5, "Ada@Example.COM")):
        booked = await book(api, t, cal["id"], f"2026-03-{day:02d}T10:00:00-05:00", attendee_email=email)
        assert booked.status_code == 201, booked.text
        made.append(booked.json()["data"])
    _refused(await book(api, t, cal["id"], "2026-03-06T10:00:00-05:00", attendee_email="ada@EXAMPLE.com"),
             "max_upcoming_per_attendee")
    # a request for approval (pending) is refused alike
    _refused(await book(api, t, cal["id"], "2026-03-06T10:00:00-05:00", attendee_phone="+14155550123",
                        attendee_email="ada@example.com", require_approval=True), "max_upcoming_per_attendee")
    other = await book(api, t, cal["id"], "2026-03-06T10:00:00-05:00", attendee_email="bob@example.com")
    assert other.status_code == 201, other.text
    # a cancelled appointment frees a place; a past one no longer counts
    await _cancel(api, t, made[0]["id"])
    again = await book(api, t, cal["id"], "2026-03-06T11:00:00-05:00", attendee_email="ada@example.com")
    assert again.status_code == 201, again.text
    assert api.clock is not None
    api.clock.advance(days=3)  # 2026-03-05 12:00 UTC: the appointment of 03-04 is past
    later = await book(api, t, cal["id"], "2026-03-07T10:00:00-05:00", attendee_email="ada@example.com")
    assert later.status_code == 201, later.text


async def test_the_phone_is_the_attendee_too(any_sched: Api) -> None:
    api, t = any_sched, await any_sched.tenant()
    cal = await make_calendar(api, t, max_upcoming_per_attendee=1)
    first = await book(api, t, cal["id"], "2026-03-03T10:00:00-05:00", attendee_phone="+1 415 555 0123")
    assert first.status_code == 201, first.text
    _refused(await book(api, t, cal["id"], "2026-03-04T10:00:00-05:00", attendee_phone="+14155550123",
                        attendee_email="new@example.com"), "max_upcoming_per_attendee")
    # a reschedule moves the attendee's one appointment: it is not counted against itself
    moved = await api.client.patch(f"/v2/scheduling/appointments/{first.json()['data']['id']}", headers=t.headers,
                                   json={"slot_start": "2026-03-04T10:00:00-05:00"})
    assert moved.status_code == 200, moved.text


async def test_a_day_takes_at_most_max_bookings_per_day_in_the_calendars_zone(any_sched: Api) -> None:
    api, t = any_sched, await any_sched.tenant()
    cal = await make_calendar(api, t, tz="America/New_York", hours=("00:00", "24:00"), max_bookings_per_day=2,
                              max_upcoming_per_attendee=None)
    # 23:00 and 23:30 New York on 03-03 are 04:00 and 04:30 UTC on 03-04: the same local day as 09:00 on 03-03
    for start in ("2026-03-03T09:00:00-05:00", "2026-03-04T04:00:00Z"):
        booked = await book(api, t, cal["id"], start, attendee_email="same@example.com")
        assert booked.status_code == 201, booked.text
    refused = await book(api, t, cal["id"], "2026-03-04T04:30:00Z", attendee_email="other@example.com")
    _refused(refused, "max_bookings_per_day")
    assert refused.json()["error"]["details"]["date"] == "2026-03-03"
    next_day = await book(api, t, cal["id"], "2026-03-04T05:00:00Z", attendee_email="other@example.com")
    assert next_day.status_code == 201, next_day.text  # 00:00 New York on 03-04
    # the cap can be raised or lifted
    patched = await api.client.patch(f"/v2/scheduling/calendars/{cal['id']}", headers=t.headers,
                                     json={"max_bookings_per_day": None})
    assert patched.status_code == 200 and patched.json()["data"]["max_bookings_per_day"] is None
    assert (await book(api, t, cal["id"], "2026-03-04T04:30:00Z")).status_code == 201


async def test_caps_are_set_on_create_and_patch_and_validated(any_sched: Api) -> None:
    api, t = any_sched, await any_sched.tenant()
    cal = await make_calendar(api, t, hours=None, max_upcoming_per_attendee=None, max_bookings_per_day=40)
    assert (cal["max_upcoming_per_attendee"], cal["max_bookings_per_day"]) == (None, 40)
    patched = await api.client.patch(f"/v2/scheduling/calendars/{cal['id']}", headers=t.headers,
                                     json={"max_upcoming_per_attendee": 5})
    assert patched.status_code == 200, patched.text
    shown = (await api.client.get(f"/v2/scheduling/calendars/{cal['id']}", headers=t.headers)).json()["data"]
    assert (shown["max_upcoming_per_attendee"], shown["max_bookings_per_day"]) == (5, 40)
    for body in ({"max_upcoming_per_attendee": 0}, {"max_bookings_per_day": 0}, {"max_bookings_per_day": "two"}):
        bad = await api.client.patch(f"/v2/scheduling/calendars/{cal['id']}", headers=t.headers, json=body)
        assert bad.status_code == 400, bad.text
        assert next(iter(body)) in bad.json()["error"]["details"]["validation_errors"], bad.text


async def test_a_mid_call_booking_obeys_the_caps(make_api: ApiFactory, sql_url: str) -> None:
    """The simulator's booking number: an attendee at the cap gets no appointment (the call goes on); a day at its
    cap sends the agent to the next day with room."""
    api = await scheduling_api(make_api, sql_url, start=datetime(2026, 3, 2, 12, tzinfo=UTC))
    t = await api.tenant()
    cal = await make_calendar(api, t, tz="UTC", hours=("10:00", "11:00"), max_upcoming_per_attendee=1,
                              max_bookings_per_day=1)
    agent = await active_agent(api, t, calendar_id=cal["id"])
    # the day after (03-03) is full: someone else holds its one booking
    taken = await book(api, t, cal["id"], "2026-03-03T10:00:00Z", attendee_email="first@example.com")
    assert taken.status_code == 201, taken.text

    first = (await place(api, t, agent, "+1555010006")).json()["data"]["id"]
    await finish_calls(api, t.organization_id)
    listed = (await api.client.get("/v2/scheduling/appointments", headers=t.headers,
                                   params={"calendar_id": cal["id"]})).json()["data"]
    by_call = [a for a in listed if a["call_id"] == first]
    assert [a["slot_start"] for a in by_call] == ["2026-03-04T10:00:00Z"]  # 03-03 was full
    assert by_call[0]["attendee_phone"] == "+1555010006"

    second = (await place(api, t, agent, "+1555010006")).json()["data"]["id"]
    await finish_calls(api, t.organization_id)
    call = (await api.client.get(f"/v2/calls/{second}", headers=t.headers)).json()["data"]
    assert call["status"] == "completed" and call["outcome"] == "conversation_completed"
    total = (await api.client.get("/v2/scheduling/appointments", headers=t.headers,
                                  params={"calendar_id": cal["id"]})).json()["meta"]["total"]
    assert total == 2  # the attendee already holds one upcoming appointment
