"""Usage broken down through the real HTTP API on SQLite and PostgreSQL: GET /usage/metrics?group_by=agent|campaign
splits a metric's series by the agent and campaign of the calls measured (real calls carry their agent into the
ledger), by day or hour, and group_by=child splits a partner's by sub-organization; the OpenAPI document says so."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from adapters.memory.clock import ManualClock
from application.ports.platform import UnitOfWork
from application.ports.usage import CALL_SECONDS, SMS_SEGMENTS, UsageRecorder
from tests.http.calls_support import active_agent, finish_calls, place
from tests.http.test_usage_http import START
from tests.support.apps import Api, ApiFactory, Tenant


async def record(api: Api, organization_id: int, kind: str, quantity: float, reference: str, at: Any = START,
                 **dimensions: Any) -> None:
    container = api.worker()
    async with container() as r:
        await (await r.get(UsageRecorder)).record(organization_id, kind, quantity, at,
                                                  f"{reference}-{organization_id}", **dimensions)
        await (await r.get(UnitOfWork)).commit()


async def series(api: Api, t: Tenant, **params: str) -> Any:
    response = await api.client.get("/v2/usage/metrics", params=params, headers=t.headers)
    return response


async def test_real_calls_are_broken_down_by_their_agent(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant(plan="business")
    front = await active_agent(api, t)
    back = await active_agent(api, t, name="Back office")
    for agent, n in ((front, 2), (back, 1)):
        for i in range(n):
            assert (await place(api, t, agent, f"+155501000{i}")).status_code == 201
    await finish_calls(api, t.organization_id)
    day = START.date().isoformat()
    response = await series(api, t, metric="calls", start=day, end=day, group_by="agent")
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["group_by"] == "agent" and data["series"] == [{"date": day, "value": 3.0}]
    assert [(g["id"], g["value"]) for g in data["groups"]] == sorted([(front["id"], 2.0), (back["id"], 1.0)])
    assert all("name" not in g for g in data["groups"])
    plain = (await series(api, t, metric="calls", start=day, end=day)).json()["data"]
    assert "groups" not in plain and plain["series"] == data["series"]  # the breakdown sums to the day counters


async def test_campaign_breakdown_by_hour_with_messages_under_null(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant(plan="business")
    org = t.organization_id
    await record(api, org, CALL_SECONDS, 90, "call:a", START, agent_id=1, campaign_id=7)
    await record(api, org, CALL_SECONDS, 30, "call:b", START + timedelta(hours=2), agent_id=1, campaign_id=8)
    await record(api, org, CALL_SECONDS, 60, "call:c", START + timedelta(hours=2, minutes=5), agent_id=2)
    await record(api, org, SMS_SEGMENTS, 2, "sms:a", START)
    day = START.date().isoformat()
    data = (await series(api, t, metric="call_minutes", start=day, end=day, granularity="hour",
                         group_by="campaign")).json()["data"]
    assert data["granularity"] == "hour" and len(data["series"]) == 24
    groups = {g["id"]: g for g in data["groups"]}
    assert list(groups) == [7, 8, None]  # by id, the calls without a campaign last
    assert groups[7]["value"] == 1.5 and groups[7]["series"][9] == {
        "date": day, "hour": "2026-01-05T09:00:00Z", "value": 1.5}
    assert groups[8]["series"][11]["value"] == 0.5 and groups[None]["series"][11]["value"] == 1.0
    assert data["series"][11]["value"] == 1.5 and data["series"][9]["value"] == 1.5
    sms = (await series(api, t, metric="sms_segments", start=day, end=day, group_by="agent")).json()["data"]
    assert [(g["id"], g["value"]) for g in sms["groups"]] == [(None, 2.0)]
    empty = (await series(api, t, metric="calls", start=day, end=day, group_by="agent")).json()["data"]
    assert empty["groups"] == [] and empty["series"] == [{"date": day, "value": 0.0}]


async def test_a_partner_breaks_its_usage_down_by_child(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(START))
    partner = await api.tenant(plan="enterprise", org_type="partner")
    ids = []
    for name in ("Acme Dental", "Bob's Plumbing", "Quiet Co"):
        created = await api.client.post("/v2/organizations", json={"name": name, "plan": "business"},
                                        headers=partner.headers)
        assert created.status_code == 201, created.text
        ids.append(created.json()["data"]["id"])
    await record(api, ids[0], CALL_SECONDS, 120, "call:x", START)
    await record(api, ids[1], CALL_SECONDS, 60, "call:y", START + timedelta(days=1))
    await record(api, partner.organization_id, CALL_SECONDS, 600, "call:own", START)  # not a child's
    data = (await series(api, partner, metric="call_minutes", start="2026-01-05",
                         end="2026-01-06", group_by="child")).json()["data"]
    assert [(g["id"], g["name"], g["value"]) for g in data["groups"]] == [
        (ids[0], "Acme Dental", 2.0), (ids[1], "Bob's Plumbing", 1.0)]
    assert [p["value"] for p in data["series"]] == [2.0, 1.0]
    assert [p["value"] for p in data["groups"][1]["series"]] == [0.0, 1.0]
    # a direct organization has no children; and group_by is checked
    other = await api.tenant()
    refused = await series(api, other, metric="calls", start="2026-01-05", end="2026-01-05", group_by="child")
    errors = refused.json()["error"]["details"]["validation_errors"]
    assert refused.status_code == 400 and "group_by" in errors, refused.text
    bad = await series(api, partner, metric="calls", start="2026-01-05", end="2026-01-05", group_by="phone")
    assert bad.status_code == 400, bad.text


async def test_group_by_is_documented(api: Api) -> None:
    document = (await api.client.get("/v2/openapi.json")).json()
    parameters = {p["name"]: p for p in document["paths"]["/usage/metrics"]["get"]["parameters"]}
    assert "'agent', 'campaign', 'child'" in str(parameters["group_by"]["schema"]), parameters["group_by"]
    out = document["components"]["schemas"]["SeriesOut"]["properties"]
    assert {"group_by", "groups"} <= set(out)
