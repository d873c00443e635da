"""Campaigns and their contacts through the real HTTP API, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from adapters.memory.clock import ManualClock
from tests.http.calls_support import unique_phone
from tests.http.scheduling_support import outbox
from tests.support.apps import Api, ApiFactory, Tenant


async def active_agent(api: Api, t: Tenant) -> int:
    agent = (await api.client.post("/v2/agents", json={"name": "Caller"}, headers=t.headers)).json()["data"]
    assert (await api.client.post(f"/v2/agents/{agent['id']}/publish", headers=t.headers)).status_code == 200
    return int(agent["id"])


async def new_campaign(api: Api, t: Tenant, **fields: Any) -> dict[str, Any]:
    body = {"name": "Spring follow-ups", "agent_id": fields.pop("agent_id", None) or await active_agent(api, t),
            **fields}
    created = await api.client.post("/v2/campaigns", json=body, headers=t.headers)
    assert created.status_code == 201, created.text
    return dict(created.json()["data"])


async def test_campaign_defaults_location_and_stats(any_api: Api) -> None:
    t = await any_api.tenant()
    c = any_api.client
    created = await c.post("/v2/campaigns", json={"name": "Spring", "agent_id": await active_agent(any_api, t)},
                           headers=t.headers)
    assert created.status_code == 201
    campaign = created.json()["data"]
    assert created.headers["location"] == f"/v2/campaigns/{campaign['id']}"
    assert campaign["status"] == "draft" and campaign["status_reason"] is None
    assert campaign["timezone"] == "UTC" and campaign["timezone_mode"] == "recipient"
    assert campaign["calling_hours"] == {"start": "08:00", "end": "21:00"}
    assert campaign["max_concurrent_calls"] == 5 and campaign["schedule_id"] is None
    assert campaign["retry"] == {"busy": {"max_attempts": 3, "delay_minutes": 10},
                                 "no_answer": {"max_attempts": 3, "delay_minutes": 60},
                                 "voicemail": {"max_attempts": 1, "delay_minutes": 60},
                                 "failed": {"max_attempts": 2, "delay_minutes": 30}}
    assert "stats" not in campaign
    got = (await c.get(created.headers["location"], headers=t.headers)).json()["data"]
    assert got["stats"] == {"total": 0, "pending": 0, "dialing": 0, "retry_wait": 0, "completed": 0, "failed": 0,
                            "skipped_dnc": 0, "cancelled": 0}


async def test_create_validates_fields_and_references(any_api: Api) -> None:
    t, other = await any_api.tenant(), await any_api.tenant()
    c = any_api.client
    agent = await active_agent(any_api, t)
    foreign_agent = await active_agent(any_api, other)
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"agent_id": foreign_agent}, 404, "agent_id"),
        ({"agent_id": agent, "schedule_id": 5}, 404, "schedule_id"),
        ({"agent_id": agent, "from_phone_number_id": 999999}, 404, "from_phone_number_id"),
        ({"agent_id": agent, "timezone": "Mars/Base"}, 400, "timezone"),
        ({"agent_id": agent, "max_concurrent_calls": 51}, 400, "max_concurrent_calls"),
        ({"agent_id": agent, "calling_hours": {"start": "21:00", "end": "08:00"}}, 400, "calling_hours.end"),
        ({"agent_id": agent, "calling_hours": {"start": "8am"}}, 400, "calling_hours.start"),
        ({"agent_id": agent, "retry": {"busy": {"max_attempts": 11}}}, 400, "retry.busy.max_attempts"),
        ({"agent_id": agent, "retry": {"failed": {"delay_minutes": 10081}}}, 400, "retry.failed.delay_minutes"),
        ({"agent_id": agent, "timezone_mode": "local"}, 400, "timezone_mode"),
        ({"agent_id": agent, "name": "  "}, 400, "name"),
    ]
    for extra, status, field in cases:
        r = await c.post("/v2/campaigns", json={"name": "X", **extra}, headers=t.headers)
        assert r.status_code == status, (extra, r.text)
        error = r.json()["error"]
        assert field in error["message"] or field in str(error.get("details")), (extra, error)
    retry = await new_campaign(any_api, t, agent_id=agent, retry={"busy": {"max_attempts": 5}},
                               timezone="America/New_York", timezone_mode="campaign")
    assert retry["retry"]["busy"] == {"max_attempts": 5, "delay_minutes": 10}
    assert retry["retry"]["no_answer"] == {"max_attempts": 3, "delay_minutes": 60}


async def test_the_from_number_must_be_the_organizations(any_api: Api) -> None:
    t, other = await any_api.tenant(), await any_api.tenant()
    c = any_api.client
    mine = await c.post("/v2/telephony/phone-numbers", json={"phone_number": unique_phone()}, headers=t.headers)
    theirs = await c.post("/v2/telephony/phone-numbers", json={"phone_number": unique_phone()},
                          headers=other.headers)
    assert mine.status_code == theirs.status_code == 201, mine.text
    ok = await new_campaign(any_api, t, from_phone_number_id=mine.json()["data"]["id"])
    assert ok["from_phone_number_id"] == mine.json()["data"]["id"]
    refused = await c.post("/v2/campaigns", headers=t.headers, json={
        "name": "X", "agent_id": ok["agent_id"], "from_phone_number_id": theirs.json()["data"]["id"]})
    assert refused.status_code == 404 and refused.json()["error"]["details"] == {"field": "from_phone_number_id"}


async def test_lifecycle_start_pause_cancel_with_events(any_api: Api) -> None:
    t = await any_api.tenant()
    c = any_api.client
    campaign = await new_campaign(any_api, t)
    path = f"/v2/campaigns/{campaign['id']}"
    empty = await c.post(f"{path}/start", headers=t.headers)
    assert empty.status_code == 422 and empty.json()["error"]["code"] == "campaign_empty"
    added = await c.post(f"{path}/contacts", headers=t.headers,
                         json={"contacts": [{"phone": "+14155550100"}, {"phone": "+14155550101"}]})
    assert added.status_code == 201 and added.json()["data"]["accepted"] == 2
    headers = {**t.headers, "Idempotency-Key": f"start-{campaign['id']}"}
    started = await c.post(f"{path}/start", headers=headers)
    assert started.status_code == 200 and started.json()["data"]["status"] == "running"
    assert started.json()["data"]["started_at"]
    replayed = await c.post(f"{path}/start", headers=headers)
    assert replayed.headers.get("idempotency-replayed") == "true" and replayed.json() == started.json()
    again = await c.post(f"{path}/start", headers=t.headers)
    assert again.status_code == 409 and again.json()["error"]["code"] == "invalid_transition"
    # running: contacts may still be added; PATCH and DELETE are refused
    late = await c.post(f"{path}/contacts", headers=t.headers, json={"contacts": [{"phone": "+14155550102"}]})
    assert late.status_code == 201 and late.json()["data"]["accepted"] == 1
    for method, kwargs in (("PATCH", {"json": {"name": "New"}}), ("DELETE", {})):
        refused = await c.request(method, path, headers=t.headers, **kwargs)
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "invalid_transition", method
    paused = await c.post(f"{path}/pause", headers=t.headers)
    assert paused.status_code == 200 and paused.json()["data"]["status"] == "paused"
    assert (await c.post(f"{path}/pause", headers=t.headers)).status_code == 409
    patched = await c.patch(path, headers=t.headers, json={"max_concurrent_calls": 9,
                                                            "retry": {"no_answer": {"delay_minutes": 120}}})
    assert patched.status_code == 200, patched.text
    assert patched.json()["data"]["max_concurrent_calls"] == 9
    assert patched.json()["data"]["retry"]["no_answer"] == {"max_attempts": 3, "delay_minutes": 120}
    cancelled = await c.post(f"{path}/cancel", headers=t.headers)
    assert cancelled.status_code == 200 and cancelled.json()["data"]["status"] == "cancelled"
    assert (await c.post(f"{path}/cancel", headers=t.headers)).status_code == 409
    got = (await c.get(path, headers=t.headers)).json()["data"]
    assert got["stats"]["total"] == 3 and got["stats"]["cancelled"] == 3 and got["stats"]["pending"] == 0
    catalogue = {e["name"] for e in (await c.get("/v2/webhooks/events", headers=t.headers)).json()["data"]}
    assert {"campaign.started", "campaign.paused"} <= catalogue
    # written to the outbox with the change; the idempotent replay and the refused moves wrote nothing
    view = {"id": campaign["id"], "name": campaign["name"], "agent_id": campaign["agent_id"]}
    assert await outbox(any_api, t.organization_id, "campaign.") == [
        ("campaign.started", {**view, "status": "running"}), ("campaign.paused", {**view, "status": "paused"})]
    assert (await c.delete(path, headers=t.headers)).status_code == 204
    assert (await c.get(path, headers=t.headers)).status_code == 404


async def test_only_an_active_agent_starts_a_campaign(any_api: Api) -> None:
    t = await any_api.tenant()
    c = any_api.client
    draft_agent = (await c.post("/v2/agents", json={"name": "Draft"}, headers=t.headers)).json()["data"]["id"]
    campaign = await new_campaign(any_api, t, agent_id=draft_agent)
    await c.post(f"/v2/campaigns/{campaign['id']}/contacts", headers=t.headers,
                 json={"contacts": [{"phone": "+14155550100"}]})
    refused = await c.post(f"/v2/campaigns/{campaign['id']}/start", headers=t.headers)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "invalid_transition"
    assert refused.json()["error"]["details"]["agent_status"] == "draft"


async def test_list_filters_by_status_and_pages(any_api: Api) -> None:
    t = await any_api.tenant()
    c = any_api.client
    agent = await active_agent(any_api, t)
    ids = [(await new_campaign(any_api, t, agent_id=agent))["id"] for _ in range(3)]
    await c.post(f"/v2/campaigns/{ids[0]}/cancel", headers=t.headers)
    page = (await c.get("/v2/campaigns?limit=2", headers=t.headers)).json()
    assert page["meta"] == {"total": 3, "limit": 2, "offset": 0} and [x["id"] for x in page["data"]] == ids[:0:-1]
    cancelled = (await c.get("/v2/campaigns?status=cancelled", headers=t.headers)).json()
    assert [x["id"] for x in cancelled["data"]] == [ids[0]]
    assert (await c.get("/v2/campaigns?status=bogus", headers=t.headers)).status_code == 400
    other = await any_api.tenant()
    assert (await c.get("/v2/campaigns", headers=other.headers)).json()["meta"]["total"] == 0
    assert (await c.get(f"/v2/campaigns/{ids[1]}", headers=other.headers)).status_code == 404
    assert (await c.post(f"/v2/campaigns/{ids[1]}/contacts", headers=other.headers,
                         json={"contacts": [{"phone": "+14155550100"}]})).status_code == 404


async def test_contacts_bulk_duplicates_rejections_and_detail(any_api: Api) -> None:
    t = await any_api.tenant()
    c = any_api.client
    campaign = await new_campaign(any_api, t)
    path = f"/v2/campaigns/{campaign['id']}/contacts"
    r = await c.post(path, headers=t.headers, json={"contacts": [
        {"phone": "+1 415 555 0100", "name": "Ada", "timezone": "Europe/London", "custom_data": {"crm": "A-1"}},
        {"phone": "12"},
        {"phone": "+14155550100"},
        {"phone": "+14155550101", "timezone": "Nowhere/Land"},
        {"phone": "+14155550102", "name": "=HYPERLINK(\"http://x\")"},
    ]})
    assert r.status_code == 201, r.text
    assert r.json()["data"] == {"accepted": 2, "duplicates": 1, "rejected_count": 2, "rejected": [
        {"row": 1, "field": "phone", "message": "must be an E.164 phone number such as +14155550100"},
        {"row": 3, "field": "timezone", "message": "must be an IANA time zone name, such as Europe/Berlin"}]}
    nothing = await c.post(path, headers=t.headers, json={"contacts": [{"phone": "nope"}]})
    assert nothing.status_code == 400 and nothing.json()["error"]["details"]["rejected"][0]["row"] == 0
    too_many = await c.post(path, headers=t.headers, json={"contacts": [{"phone": "+14155550100"}] * 10_001})
    assert too_many.status_code == 400
    listed = (await c.get(f"{path}?status=pending", headers=t.headers)).json()
    assert listed["meta"]["total"] == 2
    ada, formula = listed["data"]
    assert ada["phone"] == "+14155550100" and ada["custom_data"] == {"crm": "A-1"} and ada["attempt_count"] == 0
    assert formula["name"] == "=HYPERLINK(\"http://x\")"
    detail = (await c.get(f"{path}/{ada['id']}", headers=t.headers)).json()["data"]
    assert detail["attempts"] == [] and detail["status"] == "pending"
    assert detail["next_attempt_at"] == detail["created_at"]  # due from when it was added
    assert (await c.get(f"{path}?status=completed", headers=t.headers)).json()["meta"]["total"] == 0
    assert (await c.delete(f"{path}/{ada['id']}", headers=t.headers)).status_code == 204
    assert (await c.get(f"{path}/{ada['id']}", headers=t.headers)).status_code == 404
    assert (await c.delete(f"{path}/{ada['id']}", headers=t.headers)).status_code == 404
    await c.post(f"/v2/campaigns/{campaign['id']}/cancel", headers=t.headers)
    refused = await c.delete(f"{path}/{formula['id']}", headers=t.headers)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "invalid_transition"
    ended = await c.post(path, headers=t.headers, json={"contacts": [{"phone": "+14155550109"}]})
    assert ended.status_code == 409


def _csv(name: str, content: bytes) -> dict[str, Any]:
    return {"files": {"file": (name, content, "text/csv")}}


async def test_csv_import_with_bom_custom_columns_and_bad_rows(any_api: Api) -> None:
    t = await any_api.tenant()
    c = any_api.client
    campaign = await new_campaign(any_api, t)
    path = f"/v2/campaigns/{campaign['id']}/contacts"
    content = ("\ufeffPhone,Name,Timezone,crm_id,note\r\n"
               "+14155550100,Ada,Europe/London,A-1,\"=cmd|' /C calc'!A0\"\r\n"
               "not a number,Bob,,B-2,\r\n"
               "+14155550100,Ada again,,,\r\n"
               "+14155550101,Cy,Mars/Base,,\r\n"
               "\r\n"
               "+14155550102,Di,,D-4,\"multi\nline\"\r\n").encode()
    r = await c.post(f"{path}/import", headers=t.headers, **_csv("contacts.csv", content))
    assert r.status_code == 201, r.text
    assert r.json()["data"] == {"accepted": 2, "duplicates": 1, "rejected_count": 2, "rejected": [
        {"row": 3, "field": "phone", "message": "must be an E.164 phone number such as +14155550100"},
        {"row": 5, "field": "timezone", "message": "must be an IANA time zone name, such as Europe/Berlin"}]}
    contacts = (await c.get(path, headers=t.headers)).json()["data"]
    assert contacts[0]["name"] == "Ada" and contacts[0]["timezone"] == "Europe/London"
    assert contacts[0]["custom_data"] == {"crm_id": "A-1", "note": "=cmd|' /C calc'!A0"}
    assert contacts[1]["custom_data"] == {"crm_id": "D-4", "note": "multi\nline"}
    # the same file again: every valid row is a duplicate (not an error)
    again = await c.post(f"{path}/import", headers=t.headers, **_csv("contacts.csv", content))
    assert again.status_code == 201 and again.json()["data"]["accepted"] == 0
    assert again.json()["data"]["duplicates"] == 3
    body = await c.post(f"{path}/import", headers={**t.headers, "Content-Type": "text/csv"},
                        content=b"phone\n+14155550199\n")
    assert body.status_code == 201 and body.json()["data"]["accepted"] == 1


async def test_hostile_csv_files_are_400_naming_file_never_500(any_api: Api) -> None:
    t = await any_api.tenant()
    c = any_api.client
    campaign = await new_campaign(any_api, t)
    url = f"/v2/campaigns/{campaign['id']}/contacts/import"
    for content in (b"", b"\n\n", b"name,timezone\nAda,UTC\n", b"phone;name\n+14155550100;Ada\n",
                    b"phone\n+1415\x005550100\n", b"phone\n\xff\xfe\xfd\n", b"\x00\x00\x00",
                    b"phone,phone\n+14155550100,+14155550101\n", b"phone\nnot-a-phone\n",
                    b"\xef\xbb\xbf"):
        r = await c.post(url, headers=t.headers, **_csv("x.csv", content))
        assert r.status_code == 400, (content, r.status_code, r.text)
        assert r.json()["error"]["details"]["validation_errors"].keys() == {"file"}, (content, r.text)
    missing = await c.post(url, headers=t.headers, files={"other": ("x.csv", b"phone\n+14155550100\n", "text/csv")})
    assert missing.status_code == 400 and "file" in missing.json()["error"]["message"]
    wrong_type = await c.post(url, headers={**t.headers, "Content-Type": "application/json"}, content=b"{}")
    assert wrong_type.status_code == 415
    nul_row = await c.post(url, headers=t.headers, **_csv("x.csv", b"phone,name\n+14155550100,A\x00B\n"
                                                                    b"+14155550101,C\n"
                                                                    b'+14155550102,"Eve\r\nBcc: x@y.example"\n'))
    assert nul_row.status_code == 201
    one_line = "must be one line: no line breaks, tabs or other control characters"
    assert nul_row.json()["data"]["rejected"] == [{"row": 2, "field": "name", "message": one_line},
                                                  {"row": 4, "field": "name", "message": one_line}]


async def test_a_file_over_10_mb_is_413(any_api: Api) -> None:
    t = await any_api.tenant()
    campaign = await new_campaign(any_api, t)
    big = b"phone,note\n" + b"+14155550100," + b"x" * (10 * 1024 * 1024) + b"\n"
    r = await any_api.client.post(f"/v2/campaigns/{campaign['id']}/contacts/import", headers=t.headers,
                                  **_csv("big.csv", big))
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"


async def test_a_large_import_is_inserted_in_batches(any_api: Api) -> None:
    t = await any_api.tenant()
    campaign = await new_campaign(any_api, t)
    rows = "".join(f"+1415{n:07d},Person {n},{n % 7}\n" for n in range(2_600))
    r = await any_api.client.post(f"/v2/campaigns/{campaign['id']}/contacts/import", headers=t.headers,
                                  **_csv("many.csv", ("phone,name,bucket\n" + rows).encode()))
    assert r.status_code == 201, r.text
    assert r.json()["data"]["accepted"] + r.json()["data"]["rejected_count"] == 2_600
    got = (await any_api.client.get(f"/v2/campaigns/{campaign['id']}", headers=t.headers)).json()["data"]
    assert got["stats"]["total"] == got["stats"]["pending"] == r.json()["data"]["accepted"]


async def test_patch_merges_checks_references_and_a_no_op_keeps_updated_at(make_api: ApiFactory,
                                                                           sql_url: str) -> None:
    clock = ManualClock(datetime(2026, 3, 2, 9, tzinfo=UTC))
    api = await make_api(sql_url, clock=clock)
    t, other = await api.tenant(), await api.tenant()
    c = api.client
    number = await c.post("/v2/telephony/phone-numbers", json={"phone_number": unique_phone()}, headers=t.headers)
    campaign = await new_campaign(api, t, from_phone_number_id=number.json()["data"]["id"],
                                  calling_hours={"start": "09:00", "end": "17:00"})
    path = f"/v2/campaigns/{campaign['id']}"
    clock.advance(minutes=5)
    same = await c.patch(path, headers=t.headers, json={"name": campaign["name"], "calling_hours": {"end": "17:00"}})
    assert same.status_code == 200 and same.json()["data"]["updated_at"] == campaign["updated_at"]
    merged = await c.patch(path, headers=t.headers, json={"calling_hours": {"end": "24:00"},
                                                           "from_phone_number_id": None, "timezone": "Asia/Tokyo"})
    assert merged.status_code == 200, merged.text
    data = merged.json()["data"]
    assert data["calling_hours"] == {"start": "09:00", "end": "24:00"} and data["from_phone_number_id"] is None
    assert data["timezone"] == "Asia/Tokyo" and data["updated_at"] != campaign["updated_at"]
    foreign = await active_agent(api, other)
    for body, status, field in (({"agent_id": foreign}, 404, "agent_id"), ({"schedule_id": 3}, 404, "schedule_id"),
                                ({"calling_hours": {"start": "24:00"}}, 400, "calling_hours.start"),
                                ({"status": "running"}, 400, "status"), ({"timezone": "Nope/Nope"}, 400, "timezone"),
                                ({"max_concurrent_calls": 0}, 400, "max_concurrent_calls")):
        refused = await c.patch(path, headers=t.headers, json=body)
        assert refused.status_code == status, (body, refused.text)
        assert field in refused.text, (body, refused.text)
    assert (await c.get(path, headers=t.headers)).json()["data"]["agent_id"] == campaign["agent_id"]


async def test_concurrent_batches_of_the_same_numbers_add_each_once(concurrent_api: Api) -> None:
    t = await concurrent_api.tenant()
    campaign = await new_campaign(concurrent_api, t)
    batch = {"contacts": [{"phone": f"+1415555{n:04d}"} for n in range(300)]}

    async def send() -> Any:
        return await concurrent_api.client.post(f"/v2/campaigns/{campaign['id']}/contacts", json=batch,
                                                headers=t.headers)

    answers = await asyncio.gather(*(send() for _ in range(4)))
    assert [r.status_code for r in answers] == [201] * 4, [r.text for r in answers]
    assert sum(r.json()["data"]["accepted"] for r in answers) == 300
    assert sum(r.json()["data"]["duplicates"] for r in answers) == 900
    got = (await concurrent_api.client.get(f"/v2/campaigns/{campaign['id']}", headers=t.headers)).json()["data"]
    assert got["stats"]["total"] == 300


async def test_a_campaign_follows_a_schedule_that_cannot_be_deleted_while_in_use(any_api: Api) -> None:
    t, other = await any_api.tenant(), await any_api.tenant()
    c = any_api.client
    weekly = [{"day": d, "start": "09:00", "end": "17:00"} for d in range(5)]

    async def schedule(tenant: Tenant) -> int:
        r = await c.post("/v2/schedules", headers=tenant.headers,
                         json={"name": "Office", "timezone": "Europe/Paris", "weekly": weekly})
        assert r.status_code == 201, r.text
        return int(r.json()["data"]["id"])

    mine, theirs = await schedule(t), await schedule(other)
    refused = await c.post("/v2/campaigns", headers=t.headers,
                           json={"name": "X", "agent_id": await active_agent(any_api, t), "schedule_id": theirs})
    assert refused.status_code == 404 and refused.json()["error"]["details"] == {"field": "schedule_id"}
    campaign = await new_campaign(any_api, t, schedule_id=mine)
    assert campaign["schedule_id"] == mine
    path = f"/v2/campaigns/{campaign['id']}"
    await c.post(f"{path}/contacts", headers=t.headers, json={"contacts": [{"phone": "+14155550100"}]})
    assert (await c.post(f"{path}/start", headers=t.headers)).status_code == 200
    in_use = await c.delete(f"/v2/schedules/{mine}", headers=t.headers)
    assert in_use.status_code == 409 and in_use.json()["error"]["code"] == "in_use"
    assert in_use.json()["error"]["details"]["campaign_ids"] == [campaign["id"]]
    await c.post(f"{path}/pause", headers=t.headers)
    assert (await c.delete(f"/v2/schedules/{mine}", headers=t.headers)).status_code == 409
    # a draft does not hold its schedule; starting it once the schedule is gone is refused
    draft = await new_campaign(any_api, t, agent_id=campaign["agent_id"], schedule_id=mine)
    await c.post(f"/v2/campaigns/{draft['id']}/contacts", headers=t.headers,
                 json={"contacts": [{"phone": "+14155550100"}]})
    await c.post(f"{path}/cancel", headers=t.headers)
    assert (await c.delete(f"/v2/schedules/{mine}", headers=t.headers)).status_code == 204
    gone = await c.post(f"/v2/campaigns/{draft['id']}/start", headers=t.headers)
    assert gone.status_code == 409 and gone.json()["error"]["details"]["schedule_id"] == mine
    cleared = await c.patch(f"/v2/campaigns/{draft['id']}", headers=t.headers, json={"schedule_id": None})
    assert cleared.status_code == 200 and cleared.json()["data"]["schedule_id"] is None
    assert (await c.post(f"/v2/campaigns/{draft['id']}/start", headers=t.headers)).status_code == 200


@pytest.mark.slow
async def test_ten_thousand_rows_with_one_percent_bad_are_accepted_but_the_bad_ones(any_api: Api) -> None:
    t = await any_api.tenant()
    campaign = await new_campaign(any_api, t)
    bad = {n for n in range(10_000) if n % 100 == 37}
    rows = "".join(f"{'not-a-phone' if n in bad else f'+1415555{n:04d}'},Person {n}\n" for n in range(10_000))
    r = await any_api.client.post(f"/v2/campaigns/{campaign['id']}/contacts/import", headers=t.headers,
                                  **_csv("ten-thousand.csv", ("phone,name\n" + rows).encode()))
    assert r.status_code == 201, r.text
    data = r.json()["data"]
    assert (data["accepted"], data["duplicates"], data["rejected_count"]) == (9_900, 0, 100)
    # the header is row 1, so the n-th data row (from 0) is row n + 2
    assert [(e["row"], e["field"]) for e in data["rejected"]] == [(n + 2, "phone") for n in sorted(bad)]
    stats = (await any_api.client.get(f"/v2/campaigns/{campaign['id']}", headers=t.headers)).json()["data"]["stats"]
    assert stats["total"] == stats["pending"] == 9_900


async def test_a_fifty_megabyte_file_is_413_and_adds_nothing(any_api: Api) -> None:
    t = await any_api.tenant()
    campaign = await new_campaign(any_api, t)
    row = b"+14155550100,Ada\n"
    huge = b"phone,name\n" + row * (50 * 1024 * 1024 // len(row))
    r = await any_api.client.post(f"/v2/campaigns/{campaign['id']}/contacts/import", headers=t.headers,
                                  **_csv("huge.csv", huge))
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"
    stats = (await any_api.client.get(f"/v2/campaigns/{campaign['id']}", headers=t.headers)).json()["data"]["stats"]
    assert stats["total"] == 0
