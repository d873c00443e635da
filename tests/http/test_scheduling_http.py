"""Scheduling through the real HTTP API: calendars, rules, blackouts, availability across DST,
the appointment lifecycle, events, idempotency and the ICS feed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import icalendar
import pytest

from tests.http.scheduling_support import book, make_calendar, outbox, scheduling_api, slots
from tests.support.apps import Api, ApiFactory


@pytest.fixture
async def sched(make_api: ApiFactory, sqlite_url: str) -> Api:
    return await scheduling_api(make_api, sqlite_url)


@pytest.fixture
async def any_sched(make_api: ApiFactory, sql_url: str) -> Api:
    return await scheduling_api(make_api, sql_url)


# --------------------------------------------------------------------------- calendars, rules, blackouts


async def test_calendar_crud_and_validation(any_sched: Api) -> None:
    api, t = any_sched, await any_sched.tenant()
    c = api.client
    created = await c.post("/v2/scheduling/calendars", headers=t.headers, json={
        "name": "Dental", "timezone": "Europe/Berlin", "slot_duration_minutes": 45, "buffer_minutes": 15,
        "min_notice_minutes": 120, "horizon_days": 30})
    assert created.status_code == 201
    cal = created.json()["data"]
    assert cal | {"id": 0, "created_at": "", "updated_at": ""} == {
        "id": 0, "name": "Dental", "timezone": "Europe/Berlin", "slot_duration_minutes": 45, "buffer_minutes": 15,
        "min_notice_minutes": 120, "horizon_days": 30, "agent_id": None, "feed_token_active": False,
        "max_upcoming_per_attendee": 3, "max_bookings_per_day": None, "reminder_minutes": None,
        "reminder_channel": "email", "created_at": "", "updated_at": ""}
    defaults = (await c.post("/v2/scheduling/calendars", headers=t.headers,
                             json={"name": "D", "timezone": "UTC"})).json()["data"]
    assert (defaults["slot_duration_minutes"], defaults["buffer_minutes"], defaults["min_notice_minutes"],
            defaults["horizon_days"]) == (30, 0, 0, 60)

    patched = await c.patch(f"/v2/scheduling/calendars/{cal['id']}", headers=t.headers,
                            json={"name": "Dental 2", "buffer_minutes": 0})
    assert patched.status_code == 200
    assert patched.json()["data"]["name"] == "Dental 2" and patched.json()["data"]["slot_duration_minutes"] == 45
    assert (await c.get(f"/v2/scheduling/calendars/{cal['id']}", headers=t.headers)).json()["data"]["name"] == \
        "Dental 2"
    listed = (await c.get("/v2/scheduling/calendars?limit=1", headers=t.headers)).json()
    assert listed["meta"] == {"total": 2, "limit": 1, "offset": 0} and len(listed["data"]) == 1

    for body, field in [({"name": "X", "timezone": "Mars/Base"}, "timezone"),
                        ({"name": "X", "timezone": "UTC", "slot_duration_minutes": 4}, "slot_duration_minutes"),
                        ({"name": "X", "timezone": "UTC", "horizon_days": 366}, "horizon_days"),
                        ({"name": " ", "timezone": "UTC"}, "name"),
                        ({"name": "X", "timezone": "UTC", "color": "red"}, "color")]:
        bad = await c.post("/v2/scheduling/calendars", headers=t.headers, json=body)
        assert bad.status_code == 400, body
        assert field in bad.json()["error"]["details"]["validation_errors"], bad.text
    bad = await c.patch(f"/v2/scheduling/calendars/{cal['id']}", headers=t.headers, json={"timezone": "Nowhere"})
    assert bad.status_code == 400

    assert (await c.delete(f"/v2/scheduling/calendars/{cal['id']}", headers=t.headers)).status_code == 204
    assert (await c.get(f"/v2/scheduling/calendars/{cal['id']}", headers=t.headers)).status_code == 404


async def test_calendar_agent_must_belong_to_the_organization(sched: Api) -> None:
    a, b = await sched.tenant(), await sched.tenant()
    agent = (await sched.client.post("/v2/agents", json={"name": "Bot"}, headers=a.headers)).json()["data"]
    ok = await sched.client.post("/v2/scheduling/calendars", headers=a.headers,
                                 json={"name": "C", "timezone": "UTC", "agent_id": agent["id"]})
    assert ok.status_code == 201 and ok.json()["data"]["agent_id"] == agent["id"]
    by_agent = (await sched.client.get(f"/v2/scheduling/calendars?agent_id={agent['id']}", headers=a.headers)).json()
    assert [c["id"] for c in by_agent["data"]] == [ok.json()["data"]["id"]]
    foreign = await sched.client.post("/v2/scheduling/calendars", headers=b.headers,
                                      json={"name": "C", "timezone": "UTC", "agent_id": agent["id"]})
    assert foreign.status_code == 404 and foreign.json()["error"]["code"] == "not_found"
    cal_b = (await sched.client.post("/v2/scheduling/calendars", headers=b.headers,
                                     json={"name": "C", "timezone": "UTC"})).json()["data"]
    patched = await sched.client.patch(f"/v2/scheduling/calendars/{cal_b['id']}", headers=b.headers,
                                       json={"agent_id": agent["id"]})
    assert patched.status_code == 404


async def test_rules_and_blackouts(sched: Api) -> None:
    t = await sched.tenant()
    c = sched.client
    cal = await make_calendar(sched, t, hours=None)
    base = f"/v2/scheduling/calendars/{cal['id']}"
    first = await c.post(f"{base}/rules", headers=t.headers, json={"weekday": 0, "start_time": "13:00",
                                                                   "end_time": "17:00"})
    second = await c.post(f"{base}/rules", headers=t.headers, json={"weekday": 0, "start_time": "09:00",
                                                                    "end_time": "12:00"})
    assert first.status_code == second.status_code == 201
    assert second.json()["data"] == {"id": second.json()["data"]["id"], "calendar_id": cal["id"], "weekday": 0,
                                     "start_time": "09:00", "end_time": "12:00"}
    listed = (await c.get(f"{base}/rules", headers=t.headers)).json()
    assert [r["start_time"] for r in listed["data"]] == ["09:00", "13:00"] and listed["meta"]["total"] == 2
    for body, field in [({"weekday": 7, "start_time": "09:00", "end_time": "10:00"}, "weekday"),
                        ({"weekday": 0, "start_time": "9:00", "end_time": "10:00"}, "start_time"),
                        ({"weekday": 0, "start_time": "10:00", "end_time": "10:00"}, "end_time"),
                        ({"weekday": 0, "start_time": "24:00", "end_time": "10:00"}, "start_time")]:
        bad = await c.post(f"{base}/rules", headers=t.headers, json=body)
        assert bad.status_code == 400 and field in bad.json()["error"]["details"]["validation_errors"], bad.text
    assert (await c.delete(f"{base}/rules/{first.json()['data']['id']}", headers=t.headers)).status_code == 204
    assert (await c.delete(f"{base}/rules/{first.json()['data']['id']}", headers=t.headers)).status_code == 404

    blackout = await c.post(f"{base}/blackouts", headers=t.headers, json={
        "start": "2026-03-09T10:00:00-04:00", "end": "2026-03-09T11:00:00-04:00", "reason": "Dentist"})
    assert blackout.status_code == 201
    assert blackout.json()["data"] | {"id": 0} == {"id": 0, "calendar_id": cal["id"], "start": "2026-03-09T14:00:00Z",
                                                   "end": "2026-03-09T15:00:00Z", "reason": "Dentist"}
    assert await slots(sched, t, cal["id"], "2026-03-09", "2026-03-10") == [
        "2026-03-09T09:00:00-04:00", "2026-03-09T09:30:00-04:00", "2026-03-09T11:00:00-04:00",
        "2026-03-09T11:30:00-04:00"]
    for body in [{"start": "2026-03-09T10:00:00", "end": "2026-03-09T11:00:00Z"},
                 {"start": "2026-03-09T11:00:00Z", "end": "2026-03-09T10:00:00Z"}]:
        assert (await c.post(f"{base}/blackouts", headers=t.headers, json=body)).status_code == 400
    in_range = (await c.get(f"{base}/blackouts", params={"start": "2026-03-09T00:00:00Z",
                                                         "end": "2026-03-10T00:00:00Z"}, headers=t.headers)).json()
    assert in_range["meta"]["total"] == 1
    later = (await c.get(f"{base}/blackouts", params={"start": "2026-03-10T00:00:00Z"}, headers=t.headers)).json()
    assert later["meta"]["total"] == 0
    assert (await c.delete(f"{base}/blackouts/{blackout.json()['data']['id']}", headers=t.headers)).status_code == 204
    assert len(await slots(sched, t, cal["id"], "2026-03-09", "2026-03-10")) == 6


async def test_a_rule_may_end_at_24_00_as_in_schedules(any_sched: Api) -> None:
    api, t = any_sched, await any_sched.tenant()
    c = api.client
    cal = await make_calendar(api, t, hours=None)  # America/New_York, 30-minute slots
    base = f"/v2/scheduling/calendars/{cal['id']}"
    evening = await c.post(f"{base}/rules", headers=t.headers, json={"weekday": 0, "start_time": "22:00",
                                                                     "end_time": "24:00"})
    assert evening.status_code == 201, evening.text
    assert (evening.json()["data"]["start_time"], evening.json()["data"]["end_time"]) == ("22:00", "24:00")
    for weekday in (1, 6):  # a whole Tuesday, and a whole Sunday (2026-03-08 is 23 hours long in New York)
        whole = await c.post(f"{base}/rules", headers=t.headers, json={"weekday": weekday, "start_time": "00:00",
                                                                       "end_time": "24:00"})
        assert whole.status_code == 201, whole.text
    listed = (await c.get(f"{base}/rules", headers=t.headers)).json()["data"]
    assert [(r["weekday"], r["start_time"], r["end_time"]) for r in listed] == [
        (0, "22:00", "24:00"), (1, "00:00", "24:00"), (6, "00:00", "24:00")]
    assert await slots(api, t, cal["id"], "2026-03-09", "2026-03-10") == [
        "2026-03-09T22:00:00-04:00", "2026-03-09T22:30:00-04:00", "2026-03-09T23:00:00-04:00",
        "2026-03-09T23:30:00-04:00"]
    tuesday = await slots(api, t, cal["id"], "2026-03-10", "2026-03-11")
    assert len(tuesday) == 48 and tuesday[0] == "2026-03-10T00:00:00-04:00" and tuesday[-1] == \
        "2026-03-10T23:30:00-04:00"
    sunday = await slots(api, t, cal["id"], "2026-03-08", "2026-03-09")
    assert len(sunday) == 46 and sunday[-1] == "2026-03-08T23:30:00-04:00"
    assert (await book(api, t, cal["id"], "2026-03-09T23:30:00-04:00")).status_code == 201
    for body, field in [({"weekday": 0, "start_time": "10:00", "end_time": "24:01"}, "end_time"),
                        ({"weekday": 0, "start_time": "24:00", "end_time": "24:00"}, "start_time"),
                        ({"weekday": 0, "start_time": "10:00", "end_time": "00:00"}, "end_time")]:
        bad = await c.post(f"{base}/rules", headers=t.headers, json=body)
        assert bad.status_code == 400 and field in bad.json()["error"]["details"]["validation_errors"], bad.text


async def test_scopes_and_tenancy(sched: Api) -> None:
    owner = await sched.tenant()
    cal = await make_calendar(sched, owner)
    reader = await sched.key_for(owner.organization_id, ("scheduling:read",))
    writer = await sched.key_for(owner.organization_id, ("scheduling:write",))
    c = sched.client
    assert (await c.get(f"/v2/scheduling/calendars/{cal['id']}", headers=reader.headers)).status_code == 200
    denied = await c.post("/v2/scheduling/calendars", json={"name": "x", "timezone": "UTC"}, headers=reader.headers)
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "INSUFFICIENT_SCOPE"
    assert (await c.get("/v2/scheduling/calendars", headers=writer.headers)).status_code == 403
    assert (await c.delete(f"/v2/scheduling/calendars/{cal['id']}", headers=writer.headers)).status_code == 403
    booked = await book(sched, writer, cal["id"], "2026-03-10T09:00:00-04:00")
    assert booked.status_code == 201
    # cancelling takes scheduling:write or scheduling:delete
    assert (await c.delete(f"/v2/scheduling/appointments/{booked.json()['data']['id']}",
                           headers=writer.headers)).status_code == 200
    assert (await c.get("/v2/scheduling/availability", params={"calendar_id": cal["id"]})).status_code == 401

    stranger = await sched.tenant()
    for method, path in [("GET", f"/v2/scheduling/calendars/{cal['id']}"),
                         ("GET", f"/v2/scheduling/calendars/{cal['id']}/rules"),
                         ("GET", f"/v2/scheduling/availability?calendar_id={cal['id']}"),
                         ("GET", f"/v2/scheduling/appointments/{booked.json()['data']['id']}"),
                         ("DELETE", f"/v2/scheduling/appointments/{booked.json()['data']['id']}"),
                         ("GET", f"/v2/scheduling/calendars/{cal['id']}/feed.ics"),
                         ("DELETE", f"/v2/scheduling/calendars/{cal['id']}")]:
        r = await c.request(method, path, headers=stranger.headers)
        assert r.status_code == 404, (method, path)
    assert (await book(sched, stranger, cal["id"], "2026-03-10T10:00:00-04:00")).status_code == 404
    others = (await c.get("/v2/scheduling/appointments", headers=stranger.headers)).json()
    assert others["meta"]["total"] == 0


# --------------------------------------------------------------------------- availability across DST

NY_SPRING = ["2026-03-07T09:00:00-05:00", "2026-03-08T09:00:00-04:00", "2026-03-09T09:00:00-04:00"]
NY_FALL = ["2026-10-31T09:00:00-04:00", "2026-11-01T09:00:00-05:00", "2026-11-02T09:00:00-05:00"]
BERLIN_SPRING = ["2026-03-28T09:00:00+01:00", "2026-03-29T09:00:00+02:00", "2026-03-30T09:00:00+02:00"]
BERLIN_FALL = ["2026-10-24T09:00:00+02:00", "2026-10-25T09:00:00+01:00", "2026-10-26T09:00:00+01:00"]


@pytest.mark.parametrize(("tz", "first_slots"), [
    ("America/New_York", NY_SPRING), ("America/New_York", NY_FALL),
    ("Europe/Berlin", BERLIN_SPRING), ("Europe/Berlin", BERLIN_FALL),
])
async def test_nine_to_five_gives_nine_local_on_both_sides_of_the_switch(sched: Api, tz: str,
                                                                         first_slots: list[str]) -> None:
    t = await sched.tenant()
    cal = await make_calendar(sched, t, tz=tz)
    days = [s[:10] for s in first_slots]
    found = await slots(sched, t, cal["id"], days[0], (datetime.fromisoformat(days[-1]) + timedelta(days=1))
                        .date().isoformat())
    assert len(found) == 3 * 16
    assert [found[0], found[16], found[32]] == first_slots
    assert [s[11:19] for s in found[15::16]] == ["16:30:00"] * 3
    # each start is a valid slot_start: book the 09:00 slot after the switch, then it is gone
    booked = await book(sched, t, cal["id"], first_slots[1])
    assert booked.status_code == 201, booked.text
    assert booked.json()["data"]["slot_start"] == datetime.fromisoformat(first_slots[1]).astimezone(UTC) \
        .isoformat().replace("+00:00", "Z")
    again = await slots(sched, t, cal["id"], days[1], days[2])
    assert first_slots[1] not in again and len(again) == 15


async def test_nonexistent_and_repeated_local_times(sched: Api) -> None:
    t = await sched.tenant()
    cal = await make_calendar(sched, t, hours=None)
    base = f"/v2/scheduling/calendars/{cal['id']}/rules"
    # Sunday rules: 02:30-04:00 starts inside the spring-forward gap; 01:00-02:00 is repeated at fall-back
    for start, end in (("02:30", "04:00"), ("01:00", "02:00")):
        assert (await sched.client.post(base, headers=t.headers, json={"weekday": 6, "start_time": start,
                                                                        "end_time": end})).status_code == 201
    spring = await slots(sched, t, cal["id"], "2026-03-08", "2026-03-09")
    assert spring == ["2026-03-08T01:00:00-05:00", "2026-03-08T01:30:00-05:00",
                      "2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00"]
    fall = await slots(sched, t, cal["id"], "2026-11-01", "2026-11-02")
    assert fall[:4] == ["2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00",
                        "2026-11-01T01:00:00-05:00", "2026-11-01T01:30:00-05:00"]
    # the two 01:00 instants of the repeated hour are different slots
    assert (await book(sched, t, cal["id"], "2026-11-01T01:00:00-04:00")).status_code == 201
    assert (await book(sched, t, cal["id"], "2026-11-01T01:00:00-05:00")).status_code == 201
    taken = await book(sched, t, cal["id"], "2026-11-01T05:00:00Z")  # = 01:00 EDT
    assert taken.status_code == 409 and taken.json()["error"]["code"] == "slot_unavailable"


async def test_availability_in_another_zone_shows_the_same_instants(sched: Api) -> None:
    t = await sched.tenant()
    cal = await make_calendar(sched, t, tz="Europe/Berlin")
    home = await slots(sched, t, cal["id"], "2026-03-27T00:00:00Z", "2026-03-31T00:00:00Z")
    r = await sched.client.get("/v2/scheduling/availability", headers=t.headers, params={
        "calendar_id": cal["id"], "start": "2026-03-27T00:00:00Z", "end": "2026-03-31T00:00:00Z",
        "timezone": "Asia/Kolkata"})
    data = r.json()["data"]
    assert data["timezone"] == "Asia/Kolkata" and data["calendar_id"] == cal["id"]
    kolkata = [s["start"] for s in data["slots"]]
    assert all(s.endswith("+05:30") for s in kolkata)
    assert [datetime.fromisoformat(s) for s in kolkata] == [datetime.fromisoformat(s) for s in home]
    assert all(datetime.fromisoformat(s["end"]) - datetime.fromisoformat(s["start"]) == timedelta(minutes=30)
               for s in data["slots"])
    too_long = await sched.client.get("/v2/scheduling/availability", headers=t.headers, params={
        "calendar_id": cal["id"], "start": "2026-03-01T00:00:00Z", "end": "2026-05-03T00:00:00Z"})
    assert too_long.status_code == 400 and too_long.json()["error"]["details"]["reason"] == "range_too_long"
    assert "end" in too_long.json()["error"]["details"]["validation_errors"]
    # a date bound is the start of that date in the display zone
    assert data["start"] == "2026-03-27T05:30:00+05:30"
    by_date = (await sched.client.get("/v2/scheduling/availability", headers=t.headers, params={
        "calendar_id": cal["id"], "start": "2026-03-28", "end": "2026-03-29", "timezone": "Asia/Kolkata"})).json()
    assert by_date["data"]["start"] == "2026-03-28T00:00:00+05:30"


async def test_availability_parameters(sched: Api) -> None:
    t = await sched.tenant()
    cal = await make_calendar(sched, t, tz="UTC", min_notice_minutes=60, horizon_days=2)
    c = sched.client
    # defaults: from now (2026-03-02 12:00Z) for 7 days, cut by notice (13:00) and horizon (before 03-04 12:00)
    r = (await c.get("/v2/scheduling/availability", params={"calendar_id": cal["id"]}, headers=t.headers)).json()
    found = [s["start"] for s in r["data"]["slots"]]
    assert found[0] == "2026-03-02T13:00:00+00:00" and found[-1] == "2026-03-04T11:30:00+00:00"
    for params, field in [({"start": "2026-03-02T10:00:00"}, "start"), ({"timezone": "Mars/Base"}, "timezone"),
                          ({"start": "2026-03-02", "end": "2026-06-02"}, "end"),
                          ({"start": "2026-03-03", "end": "2026-03-02"}, "end"), ({"start": "2026-02-30"}, "start"),
                          ({"start": "0001-01-01T00:00:00Z", "timezone": "America/New_York"}, "start"),
                          ({"start": "9999-12-31", "end": "9999-12-31T23:00:00Z"}, "start")]:
        bad = await c.get("/v2/scheduling/availability", params={"calendar_id": cal["id"], **params},
                          headers=t.headers)
        assert bad.status_code == 400 and field in bad.json()["error"]["details"]["validation_errors"], bad.text
    assert (await c.get("/v2/scheduling/availability", headers=t.headers)).status_code == 400
    missing = await c.get("/v2/scheduling/availability", params={"calendar_id": 10**9}, headers=t.headers)
    assert missing.status_code == 404


# --------------------------------------------------------------------------- appointments


async def test_booking_validation_and_slot_rules(sched: Api) -> None:
    t = await sched.tenant()
    cal = await make_calendar(sched, t, buffer_minutes=30)
    for bad_start in ("0001-01-01T00:00:00Z", "2026-03-10", "soon", "2026-03-10T09:00:00+25:00"):
        assert (await book(sched, t, cal["id"], bad_start)).status_code == 400, bad_start
    no_offset = await book(sched, t, cal["id"], "2026-03-10T09:00:00")
    assert no_offset.status_code == 400
    assert "slot_start" in no_offset.json()["error"]["details"]["validation_errors"]
    for slot_start in ["2026-03-10T09:15:00-04:00",  # off the grid
                       "2026-03-10T08:30:00-04:00",  # outside the rule
                       "2026-03-10T16:45:00-04:00",  # would end after 17:00
                       "2026-03-01T09:00:00-05:00"]:  # in the past
        r = await book(sched, t, cal["id"], slot_start)
        assert r.status_code == 409 and r.json()["error"]["code"] == "slot_unavailable", slot_start
    first = await book(sched, t, cal["id"], "2026-03-10T10:00:00-04:00", attendee_name="Ann",
                       attendee_email="ann@example.com", attendee_phone="+1 415 555 0100", notes="Checkup")
    assert first.status_code == 201
    data = first.json()["data"]
    assert data | {"id": 0, "created_at": "", "updated_at": ""} == {
        "id": 0, "calendar_id": cal["id"], "status": "confirmed", "slot_start": "2026-03-10T14:00:00Z",
        "slot_end": "2026-03-10T14:30:00Z", "attendee_name": "Ann", "attendee_email": "ann@example.com",
        "attendee_phone": "+14155550100", "notes": "Checkup", "cancel_reason": None, "rescheduled_from": None,
        "call_id": None, "sequence": 0, "created_at": "", "updated_at": ""}
    # the buffer keeps the neighbours free; 11:00 is fine
    for neighbour in ("2026-03-10T09:30:00-04:00", "2026-03-10T10:30:00-04:00"):
        assert (await book(sched, t, cal["id"], neighbour)).status_code == 409
    assert (await book(sched, t, cal["id"], "2026-03-10T11:00:00-04:00")).status_code == 201
    bad = await book(sched, t, cal["id"], "2026-03-10T12:00:00-04:00", attendee_email="not-an-email")
    assert bad.status_code == 400
    bad = await book(sched, t, cal["id"], "2026-03-10T12:00:00-04:00", attendee_phone="12")
    assert bad.status_code == 400 and "attendee_phone" in bad.json()["error"]["details"]["validation_errors"]


async def test_lifecycle_events_and_illegal_moves(any_sched: Api) -> None:
    api, t = any_sched, await any_sched.tenant()
    c = api.client
    cal = await make_calendar(api, t)
    booked = (await book(api, t, cal["id"], "2026-03-10T09:00:00-04:00")).json()["data"]
    pending = (await book(api, t, cal["id"], "2026-03-10T10:00:00-04:00", require_approval=True)).json()["data"]
    assert pending["status"] == "pending"
    held = await book(api, t, cal["id"], "2026-03-10T10:00:00-04:00")
    assert held.status_code == 409 and held.json()["error"]["code"] == "slot_unavailable"
    assert "2026-03-10T10:00:00-04:00" not in await slots(api, t, cal["id"], "2026-03-10", "2026-03-11")

    approved = await c.post(f"/v2/scheduling/appointments/{pending['id']}/approve", headers=t.headers)
    assert approved.status_code == 200 and approved.json()["data"]["status"] == "confirmed"
    assert approved.json()["data"]["sequence"] == 1
    again = await c.post(f"/v2/scheduling/appointments/{pending['id']}/approve", headers=t.headers)
    assert again.status_code == 409 and again.json()["error"]["code"] == "invalid_transition"

    request = (await book(api, t, cal["id"], "2026-03-10T11:00:00-04:00", require_approval=True)).json()["data"]
    declined = await c.post(f"/v2/scheduling/appointments/{request['id']}/decline", headers=t.headers)
    assert declined.json()["data"]["status"] == "cancelled" and declined.json()["data"]["cancel_reason"] == "declined"
    assert "2026-03-10T11:00:00-04:00" in await slots(api, t, cal["id"], "2026-03-10", "2026-03-11")
    assert (await c.post(f"/v2/scheduling/appointments/{booked['id']}/decline",
                         headers=t.headers)).status_code == 409

    cancelled = await c.delete(f"/v2/scheduling/appointments/{booked['id']}", headers=t.headers)
    assert cancelled.status_code == 200
    assert cancelled.json()["data"]["status"] == "cancelled" and cancelled.json()["data"]["cancel_reason"] == \
        "cancelled"
    assert (await c.delete(f"/v2/scheduling/appointments/{booked['id']}", headers=t.headers)).status_code == 409
    assert (await book(api, t, cal["id"], "2026-03-10T09:00:00-04:00")).status_code == 201  # released

    early = await c.post(f"/v2/scheduling/appointments/{pending['id']}/outcome", headers=t.headers,
                         json={"outcome": "no_show"})
    assert early.status_code == 409 and early.json()["error"]["code"] == "invalid_transition"  # not started yet
    assert api.clock is not None
    api.clock.set(datetime(2026, 3, 10, 14, 5, tzinfo=UTC))  # 10:05 New York: the appointment has started
    outcome = await c.post(f"/v2/scheduling/appointments/{pending['id']}/outcome", headers=t.headers,
                           json={"outcome": "no_show", "notes": "did not come"})
    assert outcome.status_code == 200
    assert outcome.json()["data"]["status"] == "no_show" and outcome.json()["data"]["notes"] == "did not come"
    for path, body in [("outcome", {"outcome": "completed"}), ("approve", None), ("decline", None)]:
        r = await c.post(f"/v2/scheduling/appointments/{pending['id']}/{path}", headers=t.headers, json=body)
        assert r.status_code == 409 and r.json()["error"]["code"] == "invalid_transition"
    assert (await c.post(f"/v2/scheduling/appointments/{pending['id']}/outcome", headers=t.headers,
                         json={"outcome": "late"})).status_code == 400
    assert (await c.patch(f"/v2/scheduling/appointments/{pending['id']}", headers=t.headers,
                          json={"slot_start": "2026-03-10T15:00:00-04:00"})).status_code == 409
    assert (await c.post("/v2/scheduling/appointments/999999999/approve", headers=t.headers)).status_code == 404

    events = await outbox(api, t.organization_id)
    assert [e for e, _ in events] == ["appointment.booked", "appointment.booked", "appointment.cancelled",
                                      "appointment.cancelled", "appointment.booked"]
    assert events[0][1] == booked  # the appointment as the API shows it
    assert events[1][1] == approved.json()["data"]
    assert events[2][1] == declined.json()["data"]
    assert events[3][1] == cancelled.json()["data"]


async def test_reschedule_moves_atomically_and_links_the_rows(any_sched: Api) -> None:
    api, t = any_sched, await any_sched.tenant()
    c = api.client
    cal = await make_calendar(api, t)
    original = (await book(api, t, cal["id"], "2026-03-10T09:00:00-04:00", attendee_name="Bo")).json()["data"]
    blocker = (await book(api, t, cal["id"], "2026-03-10T12:00:00-04:00")).json()["data"]

    taken = await c.patch(f"/v2/scheduling/appointments/{original['id']}", headers=t.headers,
                          json={"slot_start": "2026-03-10T12:00:00-04:00"})
    assert taken.status_code == 409 and taken.json()["error"]["code"] == "slot_unavailable"
    no_offset = await c.patch(f"/v2/scheduling/appointments/{original['id']}", headers=t.headers,
                              json={"slot_start": "2026-03-10T12:00:00"})
    assert no_offset.status_code == 400
    unchanged = (await c.get(f"/v2/scheduling/appointments/{original['id']}", headers=t.headers)).json()["data"]
    assert unchanged == original  # nothing changed

    # moving by half a slot overlaps its own old time: the appointment does not block itself
    moved = await c.patch(f"/v2/scheduling/appointments/{original['id']}", headers=t.headers,
                          json={"slot_start": "2026-03-10T09:30:00-04:00"})
    assert moved.status_code == 200
    result = moved.json()["data"]
    assert result == {"appointment_id": result["appointment_id"], "previous_appointment_id": original["id"],
                      "status": "confirmed", "slot_start": "2026-03-10T13:30:00Z", "slot_end": "2026-03-10T14:00:00Z"}
    assert result["appointment_id"] != original["id"]
    old = (await c.get(f"/v2/scheduling/appointments/{original['id']}", headers=t.headers)).json()["data"]
    new = (await c.get(f"/v2/scheduling/appointments/{result['appointment_id']}", headers=t.headers)).json()["data"]
    assert (old["status"], old["cancel_reason"], old["sequence"]) == ("cancelled", "rescheduled", 1)
    assert (new["status"], new["rescheduled_from"], new["attendee_name"]) == ("confirmed", original["id"], "Bo")
    open_now = await slots(api, t, cal["id"], "2026-03-10", "2026-03-11")
    assert "2026-03-10T09:00:00-04:00" in open_now and "2026-03-10T09:30:00-04:00" not in open_now

    # a pending request stays pending when moved
    request = (await book(api, t, cal["id"], "2026-03-11T09:00:00-04:00", require_approval=True)).json()["data"]
    moved = (await c.patch(f"/v2/scheduling/appointments/{request['id']}", headers=t.headers,
                           json={"slot_start": "2026-03-11T10:00:00-04:00"})).json()["data"]
    assert moved["status"] == "pending"

    events = await outbox(api, t.organization_id)
    rescheduled = [d for e, d in events if e == "appointment.rescheduled"]
    assert len(rescheduled) == 2
    assert rescheduled[0] | {"previous_appointment": None} == new | {"previous_appointment": None}
    assert rescheduled[0]["previous_appointment"] == old
    assert blocker["status"] == "confirmed"

    listed = (await c.get("/v2/scheduling/appointments", headers=t.headers,
                          params={"calendar_id": cal["id"], "status": "cancelled"})).json()
    assert [a["id"] for a in listed["data"]] == [original["id"], request["id"]]
    day = (await c.get("/v2/scheduling/appointments", headers=t.headers, params={
        "start": "2026-03-11T00:00:00Z", "end": "2026-03-12T00:00:00Z"})).json()
    assert day["meta"]["total"] == 2
    assert (await c.get("/v2/scheduling/appointments", params={"start": "2026-03-11T00:00:00"},
                        headers=t.headers)).status_code == 400
    assert (await c.get("/v2/scheduling/appointments", params={"status": "lost"}, headers=t.headers)).status_code \
        == 400


async def test_idempotency_key_on_booking(sched: Api) -> None:
    t = await sched.tenant()
    cal = await make_calendar(sched, t)
    headers = {**t.headers, "Idempotency-Key": "book-1"}
    body = {"calendar_id": cal["id"], "slot_start": "2026-03-10T09:00:00-04:00"}
    first = await sched.client.post("/v2/scheduling/appointments", json=body, headers=headers)
    second = await sched.client.post("/v2/scheduling/appointments", json=body, headers=headers)
    assert first.status_code == second.status_code == 201
    assert second.content == first.content and second.headers["idempotency-replayed"] == "true"
    listed = (await sched.client.get("/v2/scheduling/appointments", headers=t.headers)).json()
    assert listed["meta"]["total"] == 1
    assert len(await outbox(sched, t.organization_id)) == 1
    other = await sched.client.post("/v2/scheduling/appointments", headers=headers,
                                    json={**body, "slot_start": "2026-03-10T10:00:00-04:00"})
    assert other.status_code == 422 and other.json()["error"]["code"] == "idempotency_key_mismatch"
    # a 409 slot_unavailable is a stored answer too
    conflict_headers = {**t.headers, "Idempotency-Key": "book-2"}
    lost = await sched.client.post("/v2/scheduling/appointments", json=body, headers=conflict_headers)
    replay = await sched.client.post("/v2/scheduling/appointments", json=body, headers=conflict_headers)
    assert lost.status_code == replay.status_code == 409 and replay.headers["idempotency-replayed"] == "true"


async def test_deleting_a_calendar_with_upcoming_appointments_is_refused(sched: Api) -> None:
    t = await sched.tenant()
    cal = await make_calendar(sched, t)
    booked = (await book(sched, t, cal["id"], "2026-03-10T09:00:00-04:00")).json()["data"]
    refused = await sched.client.delete(f"/v2/scheduling/calendars/{cal['id']}", headers=t.headers)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "conflict"
    assert refused.json()["error"]["details"] == {"active_appointments": 1}
    await sched.client.delete(f"/v2/scheduling/appointments/{booked['id']}", headers=t.headers)
    assert (await sched.client.delete(f"/v2/scheduling/calendars/{cal['id']}", headers=t.headers)).status_code == 204
    # the appointment stays readable; the calendar is gone
    assert (await sched.client.get(f"/v2/scheduling/appointments/{booked['id']}", headers=t.headers)).status_code \
        == 200
    assert (await book(sched, t, cal["id"], "2026-03-10T10:00:00-04:00")).status_code == 404


# --------------------------------------------------------------------------- ICS feed


def _events(body: bytes) -> dict[str, icalendar.Event]:
    parsed = icalendar.Calendar.from_ical(body)
    return {str(e["uid"]): e for e in parsed.walk("VEVENT")}


async def test_ics_feed_round_trips_with_stable_uids_and_sequences(any_sched: Api) -> None:
    api, t = any_sched, await any_sched.tenant()
    c = api.client
    cal = await make_calendar(api, t, tz="Europe/Berlin")
    a = (await book(api, t, cal["id"], "2026-03-10T09:00:00+01:00", attendee_name="Ann")).json()["data"]
    p = (await book(api, t, cal["id"], "2026-03-10T10:00:00+01:00", require_approval=True)).json()["data"]
    feed_path = f"/v2/scheduling/calendars/{cal['id']}/feed.ics"
    first = await c.get(feed_path, headers=t.headers)
    assert first.status_code == 200 and first.headers["content-type"].startswith("text/calendar")
    parsed = icalendar.Calendar.from_ical(first.content)
    assert str(parsed["x-wr-calname"]) == "Front desk" and str(parsed["x-wr-timezone"]) == "Europe/Berlin"
    events = _events(first.content)
    uid_a, uid_p = f"appointment-{a['id']}@parley", f"appointment-{p['id']}@parley"
    assert set(events) == {uid_a, uid_p}
    assert events[uid_a].decoded("dtstart") == datetime(2026, 3, 10, 8, tzinfo=UTC)
    assert events[uid_a].decoded("dtend") == datetime(2026, 3, 10, 8, 30, tzinfo=UTC)
    assert b"DTSTART:20260310T080000Z" in first.content  # UTC times
    assert (str(events[uid_a]["status"]), int(events[uid_a]["sequence"])) == ("CONFIRMED", 0)
    assert str(events[uid_p]["status"]) == "TENTATIVE"
    assert "Ann" in str(events[uid_a]["summary"])
    assert (await c.get(feed_path, headers=t.headers)).content == first.content  # stable while nothing changes

    await c.post(f"/v2/scheduling/appointments/{p['id']}/approve", headers=t.headers)
    await c.delete(f"/v2/scheduling/appointments/{a['id']}", headers=t.headers)
    events = _events((await c.get(feed_path, headers=t.headers)).content)
    assert (str(events[uid_a]["status"]), int(events[uid_a]["sequence"])) == ("CANCELLED", 1)
    assert (str(events[uid_p]["status"]), int(events[uid_p]["sequence"])) == ("CONFIRMED", 1)

    moved = (await c.patch(f"/v2/scheduling/appointments/{p['id']}", headers=t.headers,
                           json={"slot_start": "2026-03-10T11:00:00+01:00"})).json()["data"]
    events = _events((await c.get(feed_path, headers=t.headers)).content)
    uid_new = f"appointment-{moved['appointment_id']}@parley"
    assert (str(events[uid_p]["status"]), int(events[uid_p]["sequence"])) == ("CANCELLED", 2)
    assert (str(events[uid_new]["status"]), int(events[uid_new]["sequence"])) == ("CONFIRMED", 0)
    assert events[uid_new].decoded("dtstart") == datetime(2026, 3, 10, 10, tzinfo=UTC)


async def test_feed_urls_point_at_the_server_and_prefix_the_client_used(sched: Api,
                                                                         make_api: ApiFactory,
                                                                         sqlite_url: str) -> None:
    t = await sched.tenant()
    cal = await make_calendar(sched, t)
    base = "http://parley.internal:9000/api/v2"
    issued = (await sched.client.post(f"{base}/scheduling/calendars/{cal['id']}/feed-token",
                                      headers=t.headers)).json()["data"]
    assert issued["url"] == f"{base}/scheduling/feeds/{issued['token']}.ics"
    assert (await sched.client.get(issued["url"])).status_code == 200

    configured = await make_api(sqlite_url, public_base_url="https://cal.example.com")
    t2 = await configured.tenant()
    cal2 = await make_calendar(configured, t2)
    other = (await configured.client.post(f"{base}/scheduling/calendars/{cal2['id']}/feed-token",
                                          headers=t2.headers)).json()["data"]
    assert other["url"] == f"https://cal.example.com/v2/scheduling/feeds/{other['token']}.ics"


async def test_secret_feed_url(sched: Api) -> None:
    t = await sched.tenant()
    c = sched.client
    cal = await make_calendar(sched, t)
    await book(sched, t, cal["id"], "2026-03-10T09:00:00-04:00")
    issued = await c.post(f"/v2/scheduling/calendars/{cal['id']}/feed-token", headers=t.headers)
    assert issued.status_code == 201
    url, token = issued.json()["data"]["url"], issued.json()["data"]["token"]
    assert url.endswith(f"/v2/scheduling/feeds/{token}.ics")
    public_path = f"/v2/scheduling/feeds/{token}.ics"
    feed = await c.get(public_path)  # no API key: the token is the credential
    assert feed.status_code == 200 and feed.headers["content-type"].startswith("text/calendar")
    assert feed.content == (await c.get(f"/v2/scheduling/calendars/{cal['id']}/feed.ics", headers=t.headers)).content
    got = (await c.get(f"/v2/scheduling/calendars/{cal['id']}", headers=t.headers)).json()["data"]
    assert got["feed_token_active"] is True and token not in str(got)

    rotated = (await c.post(f"/v2/scheduling/calendars/{cal['id']}/feed-token", headers=t.headers)).json()["data"]
    assert rotated["token"] != token
    assert (await c.get(public_path)).status_code == 404  # the old one stops working
    assert (await c.get(f"/v2/scheduling/feeds/{rotated['token']}.ics")).status_code == 200
    for path in ["/v2/scheduling/feeds/unknown-token-0123456789.ics", f"/v2/scheduling/feeds/{rotated['token']}",
                 "/v2/scheduling/feeds/x.ics"]:
        r = await c.get(path)
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", path
    assert (await c.delete(f"/v2/scheduling/calendars/{cal['id']}/feed-token", headers=t.headers)).status_code == 204
    assert (await c.get(f"/v2/scheduling/feeds/{rotated['token']}.ics")).status_code == 404
