"""Helpers for the dialer tests: campaigns through HTTP, and the worker (dialer and calls passes) on the app's
database and manual clock."""

from __future__ import annotations

from typing import Any

from dishka import AsyncContainer

from application.call_progress import RunCallProgressCommand
from application.dialer_pass import DialerReport, RunDialerPassCommand
from entrypoints.features import calls as calls_feature
from entrypoints.features import campaigns as campaigns_feature
from entrypoints.ioc import build_container
from tests.support.apps import Api, Tenant

_WORKERS: dict[int, AsyncContainer] = {}


async def close_workers() -> None:
    while _WORKERS:
        _, container = _WORKERS.popitem()
        await container.close()


def worker(api: Api) -> AsyncContainer:
    container = _WORKERS.get(id(api))
    if container is None:
        container = _WORKERS[id(api)] = build_container(api.settings, *api.overrides)
    return container


async def dial(api: Api) -> DialerReport:
    """One dialer pass."""
    return await campaigns_feature.dial_pass(worker(api), api.settings).execute(RunDialerPassCommand())


async def tick(api: Api, *, seconds: float = 60) -> None:
    """One round of the worker as `parley worker` runs it: a dialer pass, a calls pass (dial, advance, end),
    a dialer pass (outcomes), then the clock moves on."""
    assert api.clock is not None
    await dial(api)
    await calls_feature.progress(worker(api)).execute(RunCallProgressCommand())
    await dial(api)
    api.clock.advance(seconds=seconds)


async def agent(api: Api, t: Tenant, **fields: Any) -> int:
    # a transfer number: the simulator's ...05 caller asks for a person, and the agent hands it over
    body = {"name": "Caller", "prompt": "You call {{contact_name}} about {{plan}}.", "transfer_phone": "+14155550199",
            **fields}
    created = await api.client.post("/v2/agents", json=body, headers=t.headers)
    assert created.status_code == 201, created.text
    agent_id = int(created.json()["data"]["id"])
    assert (await api.client.post(f"/v2/agents/{agent_id}/publish", headers=t.headers)).status_code == 200
    return agent_id


async def campaign(api: Api, t: Tenant, contacts: list[dict[str, Any]], *, start: bool = True,
                   **fields: Any) -> dict[str, Any]:
    body = {"name": "Renewals", "agent_id": fields.pop("agent_id", None) or await agent(api, t), **fields}
    created = await api.client.post("/v2/campaigns", json=body, headers=t.headers)
    assert created.status_code == 201, created.text
    found = created.json()["data"]
    added = await api.client.post(f"/v2/campaigns/{found['id']}/contacts", json={"contacts": contacts},
                                  headers=t.headers)
    assert added.status_code == 201 and added.json()["data"]["accepted"] == len(contacts), added.text
    if start:
        started = await api.client.post(f"/v2/campaigns/{found['id']}/start", headers=t.headers)
        assert started.status_code == 200, started.text
    return dict(found)


async def get(api: Api, t: Tenant, path: str) -> Any:
    response = await api.client.get(f"/v2{path}", headers=t.headers)
    assert response.status_code == 200, response.text
    return response.json()["data"]


async def contacts(api: Api, t: Tenant, campaign_id: int) -> dict[str, dict[str, Any]]:
    """The campaign's contacts by phone, each with its attempts."""
    listed = (await api.client.get(f"/v2/campaigns/{campaign_id}/contacts?limit=100", headers=t.headers)).json()
    out = {}
    for c in listed["data"]:
        out[c["phone"]] = await get(api, t, f"/campaigns/{campaign_id}/contacts/{c['id']}")
    return out


async def campaign_calls(api: Api, t: Tenant, campaign_id: int) -> list[dict[str, Any]]:
    response = await api.client.get(f"/v2/calls?campaign_id={campaign_id}&limit=100", headers=t.headers)
    assert response.status_code == 200, response.text
    return list(response.json()["data"])
