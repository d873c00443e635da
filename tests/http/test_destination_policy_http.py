"""The destination policy over HTTP on SQLite and PostgreSQL: the organization's dialing_policy (shown, set,
validated), and every path that dials or texts refusing premium-rate numbers and other countries with 422
destination_not_allowed before anything is queued: POST /calls, POST /sms, leads, campaign contacts (at add and at
dial time), POST /campaigns/{id}/dial, the widget and trigger actions."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from adapters.memory.clock import ManualClock
from domain.events import EventType
from tests.http.calls_support import active_agent, place
from tests.http.dialer_support import campaign, close_workers, contacts, dial
from tests.http.test_triggers_http import record
from tests.http.triggers_support import create, evaluate, run_jobs, runs
from tests.support.apps import Api, ApiFactory, Tenant

MONDAY_NOON = datetime(2026, 1, 5, 12, tzinfo=UTC)
REFUSED = [  # (number, reason): the numbers the widget dialled when it was attacked
    ("+19005550123", "premium_rate"),  # a North American 900 number
    ("+449091234567", "premium_rate"),  # a UK premium-rate number
    ("+882345678901", "country"),  # an international network: no country
    ("+8613800138000", "country"),  # China
]
SIMULATOR = "+1555010000"
CANADA = "+16135550123"


@pytest.fixture
async def clocked(make_api: ApiFactory, sql_url: str) -> Api:
    return await make_api(sql_url, clock=ManualClock(MONDAY_NOON))


@pytest.fixture(autouse=True)
async def _workers() -> Any:
    yield
    await close_workers()


def refused(response: httpx.Response, reason: str) -> None:
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "destination_not_allowed", error
    assert error["details"]["reason"] == reason, error


async def set_policy(api: Api, t: Tenant, **policy: Any) -> httpx.Response:
    return await api.client.patch(f"/v2/organizations/{t.organization_id}", headers=t.headers,
                                  json={"dialing_policy": policy})


async def test_an_organization_shows_and_sets_its_dialing_policy(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    own = await api.client.get(f"/v2/organizations/{t.organization_id}", headers=t.headers)
    assert own.status_code == 200, own.text
    assert own.json()["data"]["dialing_policy"] == {"allowed_countries": ["US", "CA"], "block_premium": True}
    changed = await set_policy(api, t, allowed_countries=["us", "GB", "GB"])
    assert changed.status_code == 200, changed.text
    assert changed.json()["data"]["dialing_policy"] == {"allowed_countries": ["US", "GB"], "block_premium": True}
    premium = await set_policy(api, t, block_premium=False)  # a merge patch: the countries stay
    assert premium.json()["data"]["dialing_policy"] == {"allowed_countries": ["US", "GB"], "block_premium": False}
    again = await api.client.get(f"/v2/organizations/{t.organization_id}", headers=t.headers)
    assert again.json()["data"]["dialing_policy"] == {"allowed_countries": ["US", "GB"], "block_premium": False}
    for bad in (["XX"], ["USA"], [""], []):  # [] would refuse every number: a mistake, refused
        invalid = await set_policy(api, t, allowed_countries=bad)
        assert invalid.status_code == 400, invalid.text
        [field] = invalid.json()["error"]["details"]["validation_errors"]
        assert field.startswith("dialing_policy.allowed_countries"), field
    own_plan = await api.client.patch(f"/v2/organizations/{t.organization_id}", headers=t.headers,
                                      json={"plan": "starter"})
    assert own_plan.status_code == 400 and "plan" in own_plan.json()["error"]["details"]["validation_errors"]
    other = await api.tenant()
    assert (await api.client.get(f"/v2/organizations/{other.organization_id}",
                                 headers=t.headers)).status_code in (403, 404)


async def test_a_partner_sets_a_childs_policy(any_api: Api) -> None:
    api = any_api
    partner = await api.tenant(org_type="partner")
    child = await api.client.post("/v2/organizations", headers=partner.headers, json={"name": "Client"})
    assert child.status_code == 201, child.text
    assert child.json()["data"]["dialing_policy"]["allowed_countries"] == ["US", "CA"]
    changed = await api.client.patch(f"/v2/organizations/{child.json()['data']['id']}", headers=partner.headers,
                                     json={"dialing_policy": {"allowed_countries": ["CA"]}})
    assert changed.status_code == 200, changed.text
    assert changed.json()["data"]["dialing_policy"]["allowed_countries"] == ["CA"]


async def test_post_calls_refuses_premium_and_foreign_numbers(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    agent = await active_agent(api, t)
    for number, reason in REFUSED:
        refused(await place(api, t, agent, number), reason)
    assert (await api.client.get("/v2/calls", headers=t.headers)).json()["meta"]["total"] == 0
    for number in (SIMULATOR, CANADA):  # the simulator's numbers count as the United States
        placed = await place(api, t, agent, number)
        assert placed.status_code == 201, placed.text
    await set_policy(api, t, allowed_countries=["US", "CN"], block_premium=False)
    for number in ("+19005550124", "+8613800138001"):
        placed = await place(api, t, agent, number)
        assert placed.status_code == 201, placed.text
    refused(await place(api, t, agent, "+449091234568"), "country")  # premium allowed, the UK is not


async def test_post_sms_refuses_premium_and_foreign_numbers(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    for number, reason in REFUSED:
        refused(await api.client.post("/v2/sms", headers=t.headers, json={"to": number, "body": "Hi"}), reason)
    assert (await api.client.get("/v2/sms", headers=t.headers)).json()["meta"]["total"] == 0


async def test_leads_are_refused_whole(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    agent = await active_agent(api, t)
    for number, reason in REFUSED:
        refused(await api.client.post("/v2/leads", headers=t.headers, json={
            "phone": number, "name": "Ada", "agent_id": agent["id"]}), reason)
    assert (await api.client.get("/v2/leads", headers=t.headers)).json()["meta"]["total"] == 0


async def test_campaign_contacts_outside_the_policy_are_rejected_rows(clocked: Api) -> None:
    api = clocked
    t = await api.tenant()
    found = await campaign(api, t, [{"phone": SIMULATOR}], start=False, allowed_countries=["us"])
    assert found["allowed_countries"] == ["US"]
    nowhere = await api.client.post("/v2/campaigns", headers=t.headers, json={
        "name": "Nowhere", "agent_id": found["agent_id"], "allowed_countries": []})
    assert nowhere.status_code == 400 and "allowed_countries" in nowhere.json()["error"]["details"]["validation_errors"]
    rows = [{"phone": number} for number, _ in REFUSED] + [{"phone": CANADA}, {"phone": "+1555010001"}]
    added = await api.client.post(f"/v2/campaigns/{found['id']}/contacts", headers=t.headers,
                                  json={"contacts": rows})
    assert added.status_code == 201, added.text
    data = added.json()["data"]
    assert data["accepted"] == 1 and data["rejected_count"] == 5
    assert [(r["row"], r["field"]) for r in data["rejected"]] == [(i, "phone") for i in range(5)]
    assert data["rejected"][0]["message"].startswith("destination_not_allowed (premium_rate)")
    assert data["rejected"][4]["message"].startswith("destination_not_allowed (country)")  # Canada: narrowed out
    csv = "phone\n+8613800138000\n+1555010002\n"
    imported = await api.client.post(f"/v2/campaigns/{found['id']}/contacts/import", headers=t.headers,
                                     files={"file": ("c.csv", csv.encode(), "text/csv")})
    assert imported.status_code == 201, imported.text
    assert imported.json()["data"]["accepted"] == 1 and imported.json()["data"]["rejected_count"] == 1
    bad = await api.client.patch(f"/v2/campaigns/{found['id']}", headers=t.headers,
                                 json={"allowed_countries": ["ZZ"]})
    assert bad.status_code == 400 and "allowed_countries" in bad.json()["error"]["details"]["validation_errors"]
    cleared = await api.client.patch(f"/v2/campaigns/{found['id']}", headers=t.headers,
                                     json={"allowed_countries": None})
    assert cleared.status_code == 200 and cleared.json()["data"]["allowed_countries"] is None


async def test_dial_now_and_leads_to_a_campaign_are_refused(clocked: Api) -> None:
    api = clocked
    t = await api.tenant()
    found = await campaign(api, t, [{"phone": SIMULATOR}], timezone_mode="campaign")
    for number, reason in REFUSED:
        refused(await api.client.post(f"/v2/campaigns/{found['id']}/dial", headers=t.headers,
                                      json={"phone": number}), reason)
        refused(await api.client.post("/v2/leads", headers=t.headers, json={
            "phone": number, "campaign_id": found["id"]}), reason)
    assert set(await contacts(api, t, found["id"])) == {SIMULATOR}


async def test_a_contact_outside_a_narrowed_policy_at_dial_time_is_skipped_with_the_reason(clocked: Api) -> None:
    api = clocked
    t = await api.tenant()
    people = [{"phone": phone, "name": "Ada", "custom_data": {"plan": "Gold"}} for phone in (CANADA, SIMULATOR)]
    found = await campaign(api, t, people, timezone_mode="campaign", max_concurrent_calls=2)
    assert (await set_policy(api, t, allowed_countries=["US"])).status_code == 200  # Canada is out now
    await dial(api)
    await dial(api)
    by_phone = await contacts(api, t, found["id"])
    assert by_phone[CANADA]["status"] == "skipped_dnc" and by_phone[CANADA]["reason"] == "destination_not_allowed"
    assert by_phone[CANADA]["attempts"] == []
    assert by_phone[SIMULATOR]["status"] == "dialing"
    calls = (await api.client.get(f"/v2/calls?campaign_id={found['id']}", headers=t.headers)).json()["data"]
    assert [c["destination_phone"] for c in calls] == [SIMULATOR]


async def test_the_widget_refuses_premium_and_foreign_numbers(clocked: Api) -> None:
    api = clocked
    t = await api.tenant()
    found = await campaign(api, t, [{"phone": SIMULATOR}], timezone_mode="campaign")
    minted = await api.client.post("/v2/widget/tokens", headers=t.headers, json={
        "campaign_id": found["id"], "allowed_origins": ["https://shop.example"]})
    assert minted.status_code == 201, minted.text
    headers = {"Authorization": f"Widget {minted.json()['data']['token']}", "Origin": "https://shop.example"}
    for number, reason in REFUSED:
        refused(await api.client.post("/v2/widget/contacts", headers=headers, json={
            "phone": number, "name": "Ada", "custom_data": {"plan": "Gold"}}), reason)
    assert set(await contacts(api, t, found["id"])) == {SIMULATOR}
    assert (await api.client.get("/v2/calls", headers=t.headers)).json()["meta"]["total"] == 0


async def test_trigger_actions_that_call_text_or_add_a_contact_are_refused(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    agent = await active_agent(api, t)
    found = await campaign(api, t, [{"phone": SIMULATOR}], start=False, agent_id=agent["id"])
    made = await create(api, t, name="Reach out", event="lead.created", actions=[
        {"type": "call", "config": {"agent_id": agent["id"], "phone": "{{data.phone}}",
                                    "custom_data": {"contact_name": "Ada"}}},
        {"type": "sms", "config": {"to": "{{data.phone}}", "body": "Hello"}},
        {"type": "campaign_contact", "config": {"campaign_id": found["id"], "phone": "{{data.phone}}"}}])
    assert made.status_code == 201, made.text
    await evaluate(api)
    await record(api, EventType.LEAD_CREATED(t.organization_id, {**EventType.LEAD_CREATED.example,
                                                                 "phone": "+19005550125"}))
    await evaluate(api)
    await run_jobs(api)
    [run] = await runs(api, t, made.json()["data"]["id"])
    assert [a["status"] for a in run["actions"]] == ["failed", "failed", "failed"], run
    assert all(a["error"].startswith("destination_not_allowed") for a in run["actions"]), run
    assert (await api.client.get("/v2/calls", headers=t.headers)).json()["meta"]["total"] == 0
    assert (await api.client.get("/v2/sms", headers=t.headers)).json()["meta"]["total"] == 0
    assert set(await contacts(api, t, found["id"])) == {SIMULATOR}
