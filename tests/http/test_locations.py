"""A 201 that creates an addressable resource carries Location: the resource's URL under the prefix the
client used; it can be fetched (or deleted) there, and an idempotent replay repeats it."""

from __future__ import annotations

import pytest

from tests.support.apps import Api


@pytest.mark.parametrize("prefix", ["/v2", "/api/v2"])
async def test_created_resources_carry_their_location(any_api: Api, prefix: str) -> None:
    t = await any_api.tenant(org_type="partner")
    c = any_api.client
    created = await c.post(f"{prefix}/agents", json={"name": "Located"}, headers=t.headers)
    assert created.status_code == 201
    agent = created.json()["data"]
    assert created.headers["location"] == f"{prefix}/agents/{agent['id']}"
    assert (await c.get(created.headers["location"], headers=t.headers)).json()["data"]["id"] == agent["id"]

    org = await c.post(f"{prefix}/organizations", json={"name": "Child"}, headers=t.headers)
    assert org.headers["location"] == f"{prefix}/organizations/{org.json()['data']['id']}"

    calendar = await c.post(f"{prefix}/scheduling/calendars", json={"name": "Cal", "timezone": "UTC"},
                            headers=t.headers)
    cal_id = calendar.json()["data"]["id"]
    assert calendar.headers["location"] == f"{prefix}/scheduling/calendars/{cal_id}"
    blackout = await c.post(f"{prefix}/scheduling/calendars/{cal_id}/blackouts", headers=t.headers, json={
        "start": "2026-03-10T00:00:00Z", "end": "2026-03-11T00:00:00Z"})
    assert blackout.status_code == 201, blackout.text
    assert blackout.headers["location"] == (
        f"{prefix}/scheduling/calendars/{cal_id}/blackouts/{blackout.json()['data']['id']}")
    assert (await c.delete(blackout.headers["location"], headers=t.headers)).status_code == 204


async def test_an_idempotent_replay_repeats_the_location(any_api: Api) -> None:
    t = await any_api.tenant()
    headers = {**t.headers, "Idempotency-Key": "located-once"}
    first = await any_api.client.post("/v2/agents", json={"name": "Once"}, headers=headers)
    again = await any_api.client.post("/v2/agents", json={"name": "Once"}, headers=headers)
    assert again.headers.get("idempotency-replayed") == "true"
    assert first.headers["location"] == again.headers["location"] == f"/v2/agents/{first.json()['data']['id']}"


async def test_errors_carry_no_location(any_api: Api) -> None:
    t = await any_api.tenant()
    refused = await any_api.client.post("/v2/agents", json={}, headers=t.headers)
    assert refused.status_code == 400 and "location" not in refused.headers
