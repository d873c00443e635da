"""Business-hours schedules over HTTP: every route, field errors, scopes, tenant isolation, the 409 while in
use, and status and preview across a DST change and a public holiday."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from adapters.memory.clock import ManualClock
from application.ports.business_hours import ScheduleUsage
from entrypoints.overrides import Pinned
from tests.http.dialer_support import agent, campaign
from tests.support.apps import Api, ApiFactory, Tenant

WEEKDAYS_9_TO_5 = [{"day": d, "start": "09:00", "end": "17:00"} for d in range(5)]


def body(**fields: Any) -> dict[str, Any]:
    return {"name": "Support hours", "timezone": "America/New_York", "weekly": WEEKDAYS_9_TO_5, **fields}


async def create(api: Api, tenant: Tenant, **fields: Any) -> dict[str, Any]:
    response = await api.client.post("/v2/schedules", json=body(**fields), headers=tenant.headers)
    assert response.status_code == 201, response.text
    return response.json()["data"]  # type: ignore[no-any-return]


def field_errors(response: Any) -> dict[str, str]:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "bad_request"
    return error["details"]["validation_errors"]  # type: ignore[no-any-return]


async def test_create_read_list_update_and_delete(any_api: Api) -> None:
    t = await any_api.tenant()
    c = any_api.client
    created = await c.post("/v2/schedules", headers=t.headers, json=body(
        weekly=[*WEEKDAYS_9_TO_5, {"day": 4, "start": "22:00", "end": "02:00"}, {"day": 5, "start": "00:00",
                                                                                "end": "24:00"}],
        exceptions=[{"date": "2026-12-24", "intervals": [{"start": "09:00", "end": "12:00"}]},
                    {"date": "2026-12-31", "closed": True}],
        holidays={"country": "US", "subdivision": "CA"}))
    assert created.status_code == 201, created.text
    schedule = created.json()["data"]
    assert created.headers["location"] == f"/v2/schedules/{schedule['id']}"
    assert schedule["weekly"][5:] == [{"day": 4, "start": "22:00", "end": "02:00"},
                                      {"day": 5, "start": "00:00", "end": "24:00"}]
    assert schedule["exceptions"] == [
        {"date": "2026-12-24", "closed": False, "intervals": [{"start": "09:00", "end": "12:00"}]},
        {"date": "2026-12-31", "closed": True, "intervals": []}]
    assert schedule["holidays"] == {"country": "US", "subdivision": "CA"}
    assert (await c.get(f"/v2/schedules/{schedule['id']}", headers=t.headers)).json()["data"] == schedule

    second = await create(any_api, t, name="Sales")
    listed = (await c.get("/v2/schedules", params={"limit": 1, "offset": 1}, headers=t.headers)).json()
    assert listed["meta"] == {"total": 2, "limit": 1, "offset": 1}
    assert [s["id"] for s in listed["data"]] == [second["id"]]

    patched = await c.patch(f"/v2/schedules/{schedule['id']}", headers=t.headers, json={
        "name": "Renamed", "holidays": None, "exceptions": [{"date": "2027-01-01", "closed": True}]})
    assert patched.status_code == 200, patched.text
    data = patched.json()["data"]
    assert (data["name"], data["holidays"], data["timezone"]) == ("Renamed", None, "America/New_York")
    assert data["exceptions"] == [{"date": "2027-01-01", "closed": True, "intervals": []}]
    assert data["weekly"] == schedule["weekly"] and data["created_at"] == schedule["created_at"]
    # the merged document is validated again, naming the field
    refused = await c.patch(f"/v2/schedules/{schedule['id']}", headers=t.headers,
                            json={"weekly": [{"day": 0, "start": "09:00", "end": "09:00"}]})
    assert field_errors(refused) == {"weekly[0].end": field_errors(refused)["weekly[0].end"]}
    unchanged = await c.patch(f"/v2/schedules/{schedule['id']}", headers=t.headers, json={})
    assert unchanged.json()["data"] == data
    cleared = await c.patch(f"/v2/schedules/{schedule['id']}", headers=t.headers, json={"exceptions": None})
    assert cleared.json()["data"]["exceptions"] == []

    assert (await c.delete(f"/v2/schedules/{schedule['id']}", headers=t.headers)).status_code == 204
    for response in (await c.get(f"/v2/schedules/{schedule['id']}", headers=t.headers),
                     await c.delete(f"/v2/schedules/{schedule['id']}", headers=t.headers)):
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert (await c.get("/v2/schedules", headers=t.headers)).json()["meta"]["total"] == 1


async def test_field_errors_name_the_field(api: Api) -> None:
    t = await api.tenant()
    cases = [
        (body(weekly=[*WEEKDAYS_9_TO_5, {"day": 1, "start": "9:00", "end": "17:00"}]), "weekly[5].start"),
        (body(weekly=[{"day": 7, "start": "09:00", "end": "17:00"}]), "weekly[0].day"),
        (body(weekly=[{"day": 0, "start": "09:00", "end": "24:30"}]), "weekly[0].end"),
        (body(weekly=[{"day": 0, "start": "10:00", "end": "10:00"}]), "weekly[0].end"),
        (body(exceptions=[{"date": "2026-02-30", "closed": True}]), "exceptions[0].date"),
        (body(exceptions=[{"date": "2026-05-01", "closed": True}, {"date": "2026-05-01", "closed": True}]),
         "exceptions[1].date"),
        (body(exceptions=[{"date": "2026-05-01", "intervals": [{"start": "12:00", "end": "noon"}]}]),
         "exceptions[0].intervals[0].end"),
        (body(holidays={"country": "XX"}), "holidays.country"),
        (body(holidays={"country": "us"}), "holidays.country"),
        (body(holidays={"country": "US", "subdivision": "ZZ"}), "holidays.subdivision"),
        (body(timezone="Mars/Olympus_Mons"), "timezone"),
        ({"name": "No hours", "timezone": "UTC"}, "weekly"),
        (body(extra=1), "extra"),
    ]
    for payload, field in cases:
        response = await api.client.post("/v2/schedules", json=payload, headers=t.headers)
        assert field in field_errors(response), (field, response.text)


async def test_status_and_preview_across_a_dst_change_and_a_holiday(any_api: Api) -> None:
    t = await any_api.tenant()
    c = any_api.client
    schedule = await create(any_api, t, holidays={"country": "US"})
    status_url, preview_url = f"/v2/schedules/{schedule['id']}/status", f"/v2/schedules/{schedule['id']}/preview"

    # Friday 2026-03-06 17:30 EST; New York springs forward on Sunday 03-08
    friday = (await c.get(status_url, params={"at": "2026-03-06T22:30:00Z"}, headers=t.headers)).json()["data"]
    assert friday == {"schedule_id": schedule["id"], "at": "2026-03-06T17:30:00-05:00",
                      "timezone": "America/New_York", "open": False, "reason": "closed",
                      "next_open_at": "2026-03-09T09:00:00-04:00", "next_close_at": "2026-03-09T17:00:00-04:00"}
    monday = (await c.get(status_url, params={"at": "2026-03-09T13:00:00Z"}, headers=t.headers)).json()["data"]
    assert (monday["open"], monday["reason"]) == (True, "weekly")
    assert (monday["next_close_at"], monday["next_open_at"]) == ("2026-03-09T17:00:00-04:00",
                                                                "2026-03-10T09:00:00-04:00")
    # the same instant written in another zone gives the same answer
    same = await c.get(status_url, params={"at": "2026-03-09T14:00:00+01:00"}, headers=t.headers)
    assert same.json()["data"] == monday

    week = await c.get(preview_url, params={"start": "2026-03-06", "end": "2026-03-10"}, headers=t.headers)
    assert week.status_code == 200, week.text
    assert week.json()["data"] == {
        "schedule_id": schedule["id"], "timezone": "America/New_York",
        "start": "2026-03-06T00:00:00-05:00", "end": "2026-03-10T00:00:00-04:00",
        "intervals": [{"start": "2026-03-06T09:00:00-05:00", "end": "2026-03-06T17:00:00-05:00"},
                      {"start": "2026-03-09T09:00:00-04:00", "end": "2026-03-09T17:00:00-04:00"}]}

    # Memorial Day (Monday 2026-05-25) is a US public holiday: closed all day
    holiday = (await c.get(status_url, params={"at": "2026-05-25T15:00:00Z"}, headers=t.headers)).json()["data"]
    assert (holiday["open"], holiday["reason"], holiday["next_open_at"]) == (False, "holiday",
                                                                             "2026-05-26T09:00:00-04:00")
    around = await c.get(preview_url, params={"start": "2026-05-22T00:00:00-04:00",
                                              "end": "2026-05-27T00:00:00-04:00"}, headers=t.headers)
    assert [i["start"] for i in around.json()["data"]["intervals"]] == ["2026-05-22T09:00:00-04:00",
                                                                      "2026-05-26T09:00:00-04:00"]
    # an exception beats the holiday
    await c.patch(f"/v2/schedules/{schedule['id']}", headers=t.headers,
                  json={"exceptions": [{"date": "2026-05-25", "intervals": [{"start": "10:00", "end": "12:00"}]}]})
    opened = (await c.get(status_url, params={"at": "2026-05-25T15:00:00Z"}, headers=t.headers)).json()["data"]
    assert (opened["open"], opened["reason"], opened["next_close_at"]) == (True, "exception",
                                                                           "2026-05-25T12:00:00-04:00")

    # hours read in a recipient's zone (Berlin moves to summer time on 03-29, three weeks after New York)
    berlin = await c.get(preview_url, headers=t.headers, params={
        "start": "2026-03-27", "end": "2026-03-31", "timezone": "Europe/Berlin"})
    data = berlin.json()["data"]
    assert data["timezone"] == "Europe/Berlin" and data["start"] == "2026-03-27T00:00:00+01:00"
    assert [(i["start"], i["end"]) for i in data["intervals"]] == [
        ("2026-03-27T09:00:00+01:00", "2026-03-27T17:00:00+01:00"),
        ("2026-03-30T09:00:00+02:00", "2026-03-30T17:00:00+02:00")]
    in_berlin = await c.get(status_url, headers=t.headers, params={"at": "2026-03-27T08:30:00Z",
                                                                   "timezone": "Europe/Berlin"})
    assert (in_berlin.json()["data"]["open"], in_berlin.json()["data"]["at"]) == (True, "2026-03-27T09:30:00+01:00")


async def test_query_errors(api: Api) -> None:
    t = await api.tenant()
    schedule = await create(api, t)
    status_url, preview_url = f"/v2/schedules/{schedule['id']}/status", f"/v2/schedules/{schedule['id']}/preview"
    c = api.client
    assert "at" in field_errors(await c.get(status_url, params={"at": "2026-03-06T22:30:00"}, headers=t.headers))
    assert "timezone" in field_errors(await c.get(status_url, params={"timezone": "Nowhere/Land"},
                                                  headers=t.headers))
    assert "end" in field_errors(await c.get(preview_url, params={"start": "2026-03-06", "end": "2026-03-05"},
                                             headers=t.headers))
    too_long = await c.get(preview_url, params={"start": "2026-01-01", "end": "2026-03-05"}, headers=t.headers)
    assert too_long.status_code == 400, too_long.text  # an invalid parameter, the reason in details
    error = too_long.json()["error"]
    assert error["code"] == "bad_request" and "end" in error["details"]["validation_errors"]
    assert error["details"]["reason"] == "range_too_long"
    longest = await c.get(preview_url, params={"start": "2026-01-01T00:00:00Z", "end": "2026-03-04T00:00:00Z"},
                          headers=t.headers)
    assert longest.status_code == 200 and len(longest.json()["data"]["intervals"]) == 44


async def test_defaults_use_the_clock(make_api: ApiFactory, sqlite_url: str) -> None:
    api = await make_api(sqlite_url, clock=ManualClock(datetime(2026, 3, 9, 13, 30, tzinfo=UTC)))
    t = await api.tenant()
    schedule = await create(api, t)
    status = (await api.client.get(f"/v2/schedules/{schedule['id']}/status", headers=t.headers)).json()["data"]
    assert status["at"] == "2026-03-09T09:30:00-04:00" and status["open"]
    preview = (await api.client.get(f"/v2/schedules/{schedule['id']}/preview", headers=t.headers)).json()["data"]
    assert preview["start"] == "2026-03-09T09:30:00-04:00" and preview["end"] == "2026-03-16T09:30:00-04:00"
    assert len(preview["intervals"]) == 6 and preview["intervals"][0]["start"] == "2026-03-09T09:30:00-04:00"


async def test_another_organizations_schedule_is_not_found(any_api: Api) -> None:
    mine, theirs = await any_api.tenant(), await any_api.tenant(name="Other")
    schedule = await create(any_api, theirs)
    c = any_api.client
    url = f"/v2/schedules/{schedule['id']}"
    for response in (await c.get(url, headers=mine.headers),
                     await c.patch(url, json={"name": "Mine now"}, headers=mine.headers),
                     await c.delete(url, headers=mine.headers),
                     await c.get(f"{url}/status", headers=mine.headers),
                     await c.get(f"{url}/preview", headers=mine.headers)):
        assert response.status_code == 404, response.text
        assert response.json()["error"]["code"] == "not_found"
    assert (await c.get("/v2/schedules", headers=mine.headers)).json()["meta"]["total"] == 0
    assert (await c.get(url, headers=theirs.headers)).json()["data"]["name"] == "Support hours"


async def test_scopes(api: Api) -> None:
    t = await api.tenant()
    schedule = await create(api, t)
    reader = await api.key_for(t.organization_id, ("schedules:read",))
    writer = await api.key_for(t.organization_id, ("schedules:write",))
    c, url = api.client, f"/v2/schedules/{schedule['id']}"
    assert (await c.get(url, headers=reader.headers)).status_code == 200
    assert (await c.get(f"{url}/status", headers=reader.headers)).status_code == 200
    for response in (await c.post("/v2/schedules", json=body(), headers=reader.headers),
                     await c.patch(url, json={"name": "x"}, headers=reader.headers),
                     await c.delete(url, headers=writer.headers),
                     await c.get(url, headers=writer.headers)):
        assert response.status_code == 403 and response.json()["error"]["code"] == "INSUFFICIENT_SCOPE"
    assert (await c.patch(url, json={"name": "x"}, headers=writer.headers)).status_code == 200


class _UsedByCampaigns:
    async def users_of(self, organization_id: int, schedule_id: int) -> list[int]:
        return [12, 7]


async def test_a_schedule_in_use_cannot_be_deleted(make_api: ApiFactory, sqlite_url: str) -> None:
    api = await make_api(sqlite_url, overrides=(Pinned(ScheduleUsage, _UsedByCampaigns()),))
    t = await api.tenant()
    schedule = await create(api, t)
    refused = await api.client.delete(f"/v2/schedules/{schedule['id']}", headers=t.headers)
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "in_use"
    assert refused.json()["error"]["details"] == {"campaign_ids": [7, 12]}
    assert (await api.client.get(f"/v2/schedules/{schedule['id']}", headers=t.headers)).status_code == 200


async def test_create_honours_idempotency_key(any_api: Api) -> None:
    t = await any_api.tenant()
    headers = {**t.headers, "Idempotency-Key": "hours-once"}
    first = await any_api.client.post("/v2/schedules", json=body(), headers=headers)
    again = await any_api.client.post("/v2/schedules", json=body(), headers=headers)
    assert first.status_code == again.status_code == 201
    assert again.headers["idempotency-replayed"] == "true" and again.content == first.content
    assert (await any_api.client.get("/v2/schedules", headers=t.headers)).json()["meta"]["total"] == 1
    other = await any_api.client.post("/v2/schedules", json=body(name="Else"), headers=headers)
    assert other.status_code == 422 and other.json()["error"]["code"] == "idempotency_key_mismatch"


async def test_a_delete_racing_a_campaign_taking_up_the_schedule_never_leaves_it_on_a_deleted_one(
        concurrent_api: Api) -> None:
    """Starting a campaign that follows the schedule, or pointing a paused one at it, against deleting the schedule
    at the same moment (on PostgreSQL the requests really run side by side): one of them wins, never both."""
    api = concurrent_api
    t = await api.tenant()
    contacts = [{"phone": "+1555010001", "custom_data": {"plan": "gold"}}]
    caller = await agent(api, t)  # one agent for all: the key's 60 requests a minute hold the whole test
    for _ in range(4):
        schedule = await create(api, t)
        found = await campaign(api, t, contacts, start=False, schedule_id=schedule["id"], agent_id=caller)
        started, deleted = await asyncio.gather(
            api.client.post(f"/v2/campaigns/{found['id']}/start", headers=t.headers),
            api.client.delete(f"/v2/schedules/{schedule['id']}", headers=t.headers))
        assert (started.status_code, deleted.status_code) in ((200, 409), (409, 204)), (started.text, deleted.text)

        schedule = await create(api, t)
        paused = await campaign(api, t, contacts, agent_id=caller)
        assert (await api.client.post(f"/v2/campaigns/{paused['id']}/pause", headers=t.headers)).status_code == 200
        moved, deleted = await asyncio.gather(
            api.client.patch(f"/v2/campaigns/{paused['id']}", json={"schedule_id": schedule["id"]},
                             headers=t.headers),
            api.client.delete(f"/v2/schedules/{schedule['id']}", headers=t.headers))
        assert (moved.status_code, deleted.status_code) in ((200, 409), (404, 204)), (moved.text, deleted.text)
