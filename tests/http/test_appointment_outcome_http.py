"""An outcome is recorded only once the appointment has started, and never frees time that is still ahead:
the slot cannot be booked twice and the ICS feed never shows two confirmed events at one time."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.http.scheduling_support import book, make_calendar, scheduling_api, slots
from tests.support.apps import ApiFactory

START = datetime(2026, 3, 2, 12, tzinfo=UTC)  # a Monday; the calendar is in UTC, open 10:00-12:00


async def test_an_outcome_before_the_start_is_refused_and_an_outcome_never_frees_the_slot(
        make_api: ApiFactory, sql_url: str) -> None:
    api = await scheduling_api(make_api, sql_url, START)
    assert api.clock is not None
    t = await api.tenant()
    c = api.client
    cal = await make_calendar(api, t, tz="UTC", hours=("10:00", "12:00"), slot_duration_minutes=30,
                              buffer_minutes=15)
    booked = await book(api, t, cal["id"], "2026-03-03T10:00:00Z", attendee_name="Ada")
    assert booked.status_code == 201, booked.text
    appointment = booked.json()["data"]
    outcome = f"/v2/scheduling/appointments/{appointment['id']}/outcome"

    early = await c.post(outcome, json={"outcome": "completed"}, headers=t.headers)
    assert early.status_code == 409, early.text
    error = early.json()["error"]
    assert error["code"] == "invalid_transition" and "started" in error["message"]
    assert error["details"]["slot_start"] == "2026-03-03T10:00:00Z"
    got = (await c.get(f"/v2/scheduling/appointments/{appointment['id']}", headers=t.headers)).json()["data"]
    assert got["status"] == "confirmed"
    day = ("2026-03-03T00:00:00Z", "2026-03-04T00:00:00Z")
    before = await slots(api, t, cal["id"], *day)
    assert "2026-03-03T10:00:00+00:00" not in before and "2026-03-03T11:00:00+00:00" in before
    again = await book(api, t, cal["id"], "2026-03-03T10:00:00Z")
    assert again.status_code == 409 and again.json()["error"]["code"] == "slot_unavailable"

    # during the appointment: the outcome is accepted, and its time (slot and buffer) stays busy
    api.clock.set(datetime(2026, 3, 3, 10, 5, tzinfo=UTC))
    recorded = await c.post(outcome, json={"outcome": "no_show"}, headers=t.headers)
    assert recorded.status_code == 200 and recorded.json()["data"]["status"] == "no_show"
    open_now = await slots(api, t, cal["id"], *day)
    assert open_now == ["2026-03-03T11:00:00+00:00", "2026-03-03T11:30:00+00:00"]
    inside_buffer = await book(api, t, cal["id"], "2026-03-03T10:30:00Z")
    assert inside_buffer.status_code == 409 and inside_buffer.json()["error"]["code"] == "slot_unavailable"

    later = await book(api, t, cal["id"], "2026-03-03T11:00:00Z")
    assert later.status_code == 201
    feed = (await c.get(f"/v2/scheduling/calendars/{cal['id']}/feed.ics", headers=t.headers)).text
    events = feed.split("BEGIN:VEVENT")[1:]
    starts = [line.split(":", 1)[1].strip() for block in events for line in block.splitlines()
              if line.startswith("DTSTART")]
    assert len(starts) == len(set(starts)) == 2


async def test_an_outcome_is_replayed_under_its_idempotency_key(make_api: ApiFactory, sql_url: str) -> None:
    api = await scheduling_api(make_api, sql_url, START)
    assert api.clock is not None
    t = await api.tenant()
    cal = await make_calendar(api, t, tz="UTC", hours=("10:00", "12:00"), slot_duration_minutes=30)
    booked = await book(api, t, cal["id"], "2026-03-03T10:00:00Z", attendee_name="Ada")
    assert booked.status_code == 201, booked.text
    api.clock.set(datetime(2026, 3, 3, 10, 35, tzinfo=UTC))
    path = f"/v2/scheduling/appointments/{booked.json()['data']['id']}/outcome"
    headers = {**t.headers, "Idempotency-Key": "outcome-once"}
    first = await api.client.post(path, json={"outcome": "completed"}, headers=headers)
    assert first.status_code == 200, first.text
    again = await api.client.post(path, json={"outcome": "completed"}, headers=headers)
    assert again.status_code == 200 and again.headers.get("idempotency-replayed") == "true"
    assert again.content == first.content
