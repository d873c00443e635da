"""Idempotency-Key through the HTTP API (docs/api.md, Idempotency)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from adapters.memory.clock import ManualClock
from application.ports.accounts import IdempotencyStore
from application.ports.platform import UnitOfWork
from domain import idempotency as policy
from tests.support.apps import Api, ApiFactory


async def _agent_count(api: Api, headers: dict[str, str]) -> int:
    return (await api.client.get("/v2/agents", headers=headers)).json()["meta"]["total"]


async def test_replay_returns_original_response_and_acts_once(api: Api) -> None:
    t = await api.tenant()
    headers = {**t.headers, "Idempotency-Key": "create-1"}
    first = await api.client.post("/v2/agents", json={"name": "Once"}, headers=headers)
    second = await api.client.post("/v2/agents", json={"name": "Once"}, headers=headers)
    assert first.status_code == second.status_code == 201
    assert second.content == first.content
    assert second.headers["idempotency-replayed"] == "true"
    assert "idempotency-replayed" not in first.headers
    assert second.headers["x-request-id"] != first.headers["x-request-id"]
    assert "x-ratelimit-remaining" in second.headers
    assert await _agent_count(api, t.headers) == 1


async def test_quoted_key_equals_bare_key(api: Api) -> None:
    t = await api.tenant()
    a = await api.client.post("/v2/agents", json={"name": "Q"}, headers={**t.headers, "Idempotency-Key": "k1"})
    b = await api.client.post("/v2/agents", json={"name": "Q"}, headers={**t.headers, "Idempotency-Key": '"k1"'})
    assert b.headers.get("idempotency-replayed") == "true" and a.content == b.content


async def test_same_key_other_body_is_a_mismatch(api: Api) -> None:
    t = await api.tenant()
    headers = {**t.headers, "Idempotency-Key": "create-2"}
    await api.client.post("/v2/agents", json={"name": "One"}, headers=headers)
    other = await api.client.post("/v2/agents", json={"name": "Two"}, headers=headers)
    assert other.status_code == 422
    assert other.json()["error"]["code"] == "idempotency_key_mismatch"
    assert await _agent_count(api, t.headers) == 1


async def test_keys_are_scoped_to_the_organization(api: Api) -> None:
    a, b = await api.tenant(), await api.tenant()
    for t in (a, b):
        r = await api.client.post("/v2/agents", json={"name": "Same"}, headers={**t.headers, "Idempotency-Key": "x"})
        assert r.status_code == 201 and "idempotency-replayed" not in r.headers


@pytest.mark.parametrize("key", ["", "a" * 256])
async def test_invalid_keys_are_rejected(api: Api, key: str) -> None:
    t = await api.tenant()
    r = await api.client.post("/v2/agents", json={"name": "A"}, headers={**t.headers, "Idempotency-Key": key})
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request"
    assert await _agent_count(api, t.headers) == 0


async def test_invalid_body_is_not_stored(api: Api) -> None:
    t = await api.tenant()
    headers = {**t.headers, "Idempotency-Key": "fix-me"}
    bad = await api.client.post("/v2/agents", json={"name": 1}, headers=headers)
    assert bad.status_code == 400
    good = await api.client.post("/v2/agents", json={"name": "Fixed"}, headers=headers)
    assert good.status_code == 201 and "idempotency-replayed" not in good.headers


async def _claim(api: Api, organization_id: int, lineage_id: int, key: str, body: bytes,
                 clock: ManualClock) -> None:
    container = api.worker()
    async with container() as r:
        store = await r.get(IdempotencyStore)
        now = clock.now()
        fp = policy.fingerprint("POST", "/api/v2/agents", body)
        await store.insert_if_absent(policy.IdempotencyRecord(organization_id, lineage_id, key, fp, now, now,
                                                              "other", None))
        await (await r.get(UnitOfWork)).commit()


async def test_in_flight_duplicate_gets_409_until_the_claim_is_stale(make_api: ApiFactory, sqlite_url: str) -> None:
    clock = ManualClock()
    api = await make_api(sqlite_url, clock=clock)
    t = await api.tenant()
    body = json.dumps({"name": "Slow"}).encode()
    await _claim(api, t.organization_id, t.key_id, "busy", body, clock)
    headers = {**t.headers, "Idempotency-Key": "busy", "Content-Type": "application/json"}
    busy = await api.client.post("/v2/agents", content=body, headers=headers)
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "idempotency_key_in_use"
    clock.advance(seconds=61)
    taken = await api.client.post("/v2/agents", content=body, headers=headers)
    assert taken.status_code == 201


async def test_replay_window_is_24_hours(make_api: ApiFactory, sqlite_url: str) -> None:
    clock = ManualClock()
    api = await make_api(sqlite_url, clock=clock)
    t = await api.tenant()
    headers = {**t.headers, "Idempotency-Key": "daily"}
    first = await api.client.post("/v2/agents", json={"name": "D"}, headers=headers)
    clock.advance(hours=23)
    replay = await api.client.post("/v2/agents", json={"name": "D"}, headers=headers)
    assert replay.headers.get("idempotency-replayed") == "true"
    clock.advance(hours=2)
    again = await api.client.post("/v2/agents", json={"name": "D"}, headers=headers)
    assert again.status_code == 201 and "idempotency-replayed" not in again.headers
    assert again.json()["data"]["id"] != first.json()["data"]["id"]


async def test_concurrent_duplicates_have_exactly_one_effect(concurrent_api: Api) -> None:
    any_api = concurrent_api
    t = await any_api.tenant()
    headers = {**t.headers, "Idempotency-Key": "race"}
    responses = await asyncio.gather(*[
        any_api.client.post("/v2/agents", json={"name": "Race"}, headers=headers) for _ in range(12)
    ])
    statuses = sorted(r.status_code for r in responses)
    assert set(statuses) <= {201, 409}, statuses
    created = {r.json()["data"]["id"] for r in responses if r.status_code == 201}
    assert len(created) == 1
    assert await _agent_count(any_api, t.headers) == 1
    later = await any_api.client.post("/v2/agents", json={"name": "Race"}, headers=headers)
    assert later.headers.get("idempotency-replayed") == "true"
    assert later.json()["data"]["id"] in created


async def test_another_key_of_the_organization_never_sees_a_stored_response(any_api: Api) -> None:
    """Records are per key lineage: a second key sending the same Idempotency-Key and body runs afresh (and
    does not get the first key's new secret); the first key's rotated successor gets the replay."""
    t = await any_api.tenant(plan="enterprise")
    other = await any_api.key_for(t.organization_id, ("*",))
    body = {"name": "crm", "scopes": ["agents:read"]}

    async def create(headers: dict[str, str]) -> Any:
        return await any_api.client.post("/v2/api-keys", json=body, headers={**headers, "Idempotency-Key": "shared"})

    first = await create(t.headers)
    second = await create(other.headers)
    assert first.status_code == second.status_code == 201, second.text
    assert "idempotency-replayed" not in second.headers
    assert second.json()["data"]["key"] != first.json()["data"]["key"]
    assert second.json()["data"]["id"] != first.json()["data"]["id"]

    rotated = await any_api.client.post(f"/v2/api-keys/{t.key_id}/rotate", headers=t.headers)
    assert rotated.status_code == 200, rotated.text
    successor = {"Authorization": f"Bearer {rotated.json()['data']['key']}"}
    replay = await create(successor)
    assert replay.headers.get("idempotency-replayed") == "true"
    assert replay.content == first.content
    assert (await create(other.headers)).content == second.content
    listed = await any_api.client.get("/v2/api-keys", headers=t.headers)
    assert listed.json()["meta"]["total"] == 5  # t, other, t's successor and the two created
