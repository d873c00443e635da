"""The documented ceilings (api.md, "Ceilings") through HTTP on SQLite and PostgreSQL: contacts per campaign
(422 campaign_contact_limit, nothing of the request kept) and the key-value objects every resource takes
(``metadata``, ``custom_data``: 50 keys, keys of 40 characters, values of 500; 400 naming the field)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.apps import Api, Tenant

FULL = {f"key_{i:02d}_" + "k" * 33: "v" * 500 for i in range(50)}  # every ceiling reached, none passed


def _bad(response: httpx.Response, field: str) -> None:
    assert response.status_code == 400, response.text[:500]
    error = response.json()["error"]
    assert error["code"] == "bad_request" and field in error["details"]["validation_errors"], error


async def _agent(api: Api, t: Tenant) -> int:
    created = await api.client.post("/v2/agents", json={"name": "Desk"}, headers=t.headers)
    assert created.status_code == 201, created.text
    agent_id = int(created.json()["data"]["id"])
    assert (await api.client.post(f"/v2/agents/{agent_id}/publish", headers=t.headers)).status_code == 200
    return agent_id


async def test_metadata_and_custom_data_have_stripes_ceilings_everywhere(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    c = api.client
    assert len(max(FULL, key=len)) == 40
    too_many = {**FULL, "one_more": "x"}
    long_key = {"k" * 41: "x"}
    long_value = {"note": "v" * 501}
    long_json = {"nested": {"list": ["v" * 100] * 5}}  # a value that is not text is measured as its JSON

    ok = await c.post("/v2/agents", json={"name": "Full", "metadata": FULL}, headers=t.headers)
    assert ok.status_code == 201, ok.text
    for metadata, field in ((too_many, "metadata"), (long_key, "metadata"), (long_value, "metadata.note"),
                            (long_json, "metadata.nested")):
        _bad(await c.post("/v2/agents", json={"name": "X", "metadata": metadata}, headers=t.headers), field)
    agent_id = ok.json()["data"]["id"]
    _bad(await c.patch(f"/v2/agents/{agent_id}", json={"metadata": {"one_more": "x"}}, headers=t.headers),
         "metadata")  # 50 kept + 1 merged in
    replaced = await c.patch(f"/v2/agents/{agent_id}", json={"metadata": {next(iter(FULL)): None, "b": "y"}},
                             headers=t.headers)
    assert replaced.status_code == 200, replaced.text

    agent = await _agent(api, t)
    call = {"bot_id": str(agent), "destination_phone": "+1555010000"}
    for custom, field in ((long_key, "custom_data"), (long_value, "custom_data.note")):
        _bad(await c.post("/v2/calls", json={**call, "custom_data": custom}, headers=t.headers), field)
        _bad(await c.post("/v2/leads", json={"phone": "+1555010000", "agent_id": agent, "custom_data": custom},
                          headers=t.headers), field)
    _bad(await c.post("/v2/leads", json={"phone": "+1555010000", "agent_id": agent, "custom_data": too_many},
                      headers=t.headers), "custom_data")
    assert (await c.post("/v2/calls", json={**call, "custom_data": FULL}, headers=t.headers)).status_code == 201

    campaign = await c.post("/v2/campaigns", json={"name": "C", "agent_id": agent}, headers=t.headers)
    path = f"/v2/campaigns/{campaign.json()['data']['id']}"
    rows: list[dict[str, Any]] = [{"phone": "+14155550100", "custom_data": FULL},
                                  {"phone": "+14155550101", "custom_data": long_key},
                                  {"phone": "+14155550102", "custom_data": long_value}]
    added = await c.post(f"{path}/contacts", json={"contacts": rows}, headers=t.headers)
    assert added.status_code == 201, added.text
    assert added.json()["data"]["accepted"] == 1
    assert [(r["row"], r["field"]) for r in added.json()["data"]["rejected"]] == [(1, "custom_data"),
                                                                                  (2, "custom_data.note")]
    assert (await c.post(f"{path}/start", headers=t.headers)).status_code == 200
    _bad(await c.post(f"{path}/dial", json={"phone": "+14155550103", "custom_data": long_value},
                      headers=t.headers), "custom_data.note")


async def test_a_campaign_holds_at_most_its_ceiling_of_contacts(any_api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ceiling (100,000; three here) counts what a request would add, duplicates aside; a request that would pass
    it is refused whole (422 campaign_contact_limit) and adds nothing, whatever its path."""
    monkeypatch.setattr("application.campaigns.MAX_CONTACTS_PER_CAMPAIGN", 3)
    api = any_api
    t = await api.tenant()
    c = api.client
    agent = await _agent(api, t)
    campaign = await c.post("/v2/campaigns", json={"name": "C", "agent_id": agent}, headers=t.headers)
    campaign_id = campaign.json()["data"]["id"]
    path = f"/v2/campaigns/{campaign_id}"

    async def total() -> int:
        return int((await c.get(path, headers=t.headers)).json()["data"]["stats"]["total"])

    def full(response: httpx.Response) -> None:
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == "campaign_contact_limit" and error["details"]["limit"] == 3, error

    two = [{"phone": "+14155550100"}, {"phone": "+14155550101"}]
    assert (await c.post(f"{path}/contacts", json={"contacts": two}, headers=t.headers)).status_code == 201
    full(await c.post(f"{path}/contacts", headers=t.headers,
                      json={"contacts": [{"phone": "+14155550102"}, {"phone": "+14155550103"}]}))
    assert await total() == 2
    csv = b"phone\n+14155550102\n+14155550103\n"
    full(await c.post(f"{path}/contacts/import", files={"file": ("c.csv", csv, "text/csv")}, headers=t.headers))
    assert await total() == 2
    third = await c.post(f"{path}/contacts", json={"contacts": [*two, {"phone": "+14155550102"}]},
                         headers=t.headers)
    assert third.status_code == 201 and third.json()["data"] == {
        **third.json()["data"], "accepted": 1, "duplicates": 2}, third.text
    full(await c.post("/v2/leads", json={"phone": "+14155550104", "campaign_id": campaign_id}, headers=t.headers))
    again = await c.post("/v2/leads", json={"phone": "+14155550100", "campaign_id": campaign_id}, headers=t.headers)
    assert again.status_code == 201, again.text  # a number it has already is that contact, not a new one
    assert await total() == 3
