"""AI providers: the built-in offline one in every organization, openai_compatible ones with a base URL checked
like any outbound URL and a key that is write-only and sealed at rest, scopes, and no deleting one an agent uses."""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.ai_providers_tables import ai_providers
from adapters.sql.uow import SqlUnitOfWork
from application.ai_providers import ResolveAgentEngines, ResolveAgentEnginesCommand
from application.ports.engines import EngineChoice
from domain.agents import Agent, Llm
from entrypoints.ioc import build_container
from tests.support.apps import Api

OPENAI = {"name": "OpenAI", "type": "openai_compatible", "base_url": "https://api.openai.com/v1/",
          "api_key": "sk-very-secret-key"}


async def _sealed(api: Api, provider_id: int) -> str | None:
    async with api.worker()() as r:
        conn = await (await r.get(SqlUnitOfWork)).connection()
        return (await conn.execute(sa.select(ai_providers.c.api_key_sealed)
                                   .where(ai_providers.c.id == provider_id))).scalar_one()


async def test_every_organization_has_the_built_in_offline_provider(any_api: Api) -> None:
    t = await any_api.tenant()
    listed = (await any_api.client.get("/v2/ai-providers", headers=t.headers)).json()
    assert listed["meta"]["total"] == 1
    [offline] = listed["data"]
    assert (offline["name"], offline["type"], offline["builtin"], offline["base_url"], offline["has_api_key"]) == (
        "Parley offline", "offline", True, None, False)
    assert (await any_api.client.get("/v2/ai-providers", headers=t.headers)).json()["data"] == [offline]
    refused = await any_api.client.delete(f"/v2/ai-providers/{offline['id']}", headers=t.headers)
    assert refused.status_code == 409
    retyped = await any_api.client.patch(f"/v2/ai-providers/{offline['id']}", json={"type": "openai_compatible",
                                         "base_url": "https://api.openai.com/v1"}, headers=t.headers)
    assert retyped.status_code == 409
    renamed = await any_api.client.patch(f"/v2/ai-providers/{offline['id']}", json={"name": "Local"},
                                         headers=t.headers)
    assert renamed.status_code == 200 and renamed.json()["data"]["name"] == "Local"


async def test_the_key_is_write_only_and_sealed_at_rest(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    created = await api.client.post("/v2/ai-providers", json=OPENAI, headers=t.headers)
    assert created.status_code == 201, created.text
    provider = created.json()["data"]
    assert created.headers["location"].endswith(f"/ai-providers/{provider['id']}")
    assert "sk-very-secret-key" not in created.text and "api_key" not in provider
    assert (provider["base_url"], provider["has_api_key"], provider["builtin"]) == (
        "https://api.openai.com/v1", True, False)
    got = await api.client.get(f"/v2/ai-providers/{provider['id']}", headers=t.headers)
    assert got.status_code == 200 and "sk-very-secret-key" not in got.text
    sealed = await _sealed(api, provider["id"])
    assert sealed and "sk-very-secret-key" not in sealed

    cleared = await api.client.patch(f"/v2/ai-providers/{provider['id']}", json={"api_key": None},
                                     headers=t.headers)
    assert cleared.status_code == 200 and cleared.json()["data"]["has_api_key"] is False
    moved = await api.client.patch(f"/v2/ai-providers/{provider['id']}",
                                   json={"base_url": "https://llm.example.com/openai/v1", "api_key": "sk-2"},
                                   headers=t.headers)
    assert moved.json()["data"]["base_url"] == "https://llm.example.com/openai/v1"
    assert moved.json()["data"]["has_api_key"] is True
    other = await api.tenant()
    assert (await api.client.get(f"/v2/ai-providers/{provider['id']}", headers=other.headers)).status_code == 404


async def test_the_opened_key_reaches_the_engines_choice(api: Api) -> None:
    t = await api.tenant()
    provider = (await api.client.post("/v2/ai-providers", json=OPENAI, headers=t.headers)).json()["data"]
    container = build_container(api.settings, *api.overrides)
    try:
        async with container() as r:
            agent = Agent(1, t.organization_id, "Desk", prompt="You book dentist visits.",
                          llm=Llm(model="gpt-4o-mini", temperature=0.3, provider_id=provider["id"]))
            choices = await (await r.get(ResolveAgentEngines)).execute(ResolveAgentEnginesCommand(agent, ("Parking",)))
    finally:
        await container.close()
    assert choices.llm == EngineChoice("openai_compatible", "https://api.openai.com/v1", "sk-very-secret-key",
                                       model="gpt-4o-mini", temperature=0.3, language="en-US")
    assert choices.voice.provider_type == "offline" and choices.voice.voice_id is None
    assert choices.transcriber.provider_type == "offline"
    assert choices.transcriber.vocabulary == ("You book dentist visits.", "Parking")


async def test_base_urls_are_checked_like_any_outbound_url(any_api: Api) -> None:
    t = await any_api.tenant()

    async def create(**body: object) -> tuple[int, str]:
        answer = await any_api.client.post("/v2/ai-providers", json={"name": "X", "type": "openai_compatible",
                                                                     **body}, headers=t.headers)
        return answer.status_code, answer.text

    assert (await create(base_url="http://api.openai.com/v1"))[0] == 400  # https only
    status, text = await create(base_url="https://10.1.2.3/v1")
    assert status == 400 and '"code":"blocked_address"' in text and '"field":"base_url"' in text
    assert (await create(base_url="ftp://example.com"))[0] == 400
    assert (await create(base_url="https://api.example.com/v1?key=1"))[0] == 400
    status, text = await create()
    assert status == 400 and "base_url" in text  # an openai_compatible provider needs one
    status, text = await create(type="offline", base_url="https://api.openai.com/v1")
    assert status == 400 and "base_url" in text
    status, text = await create(base_url="https://api.example.com/v1", unknown=1)
    assert status == 400


async def test_reads_need_agents_read_and_writes_agents_write(any_api: Api) -> None:
    t = await any_api.tenant()
    reader = (await any_api.key_for(t.organization_id, ("agents:read",))).headers
    assert (await any_api.client.get("/v2/ai-providers", headers=reader)).status_code == 200
    assert (await any_api.client.post("/v2/ai-providers", json=OPENAI, headers=reader)).status_code == 403
    writer = (await any_api.key_for(t.organization_id, ("agents:write",))).headers
    assert (await any_api.client.post("/v2/ai-providers", json=OPENAI, headers=writer)).status_code == 201
    assert (await any_api.client.get("/v2/ai-providers", headers=writer)).status_code == 403


async def test_a_provider_an_agent_uses_cannot_be_deleted(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    provider = (await api.client.post("/v2/ai-providers", json=OPENAI, headers=t.headers)).json()["data"]
    agent = (await api.client.post("/v2/agents", json={"name": "Desk", "llm": {"provider_id": provider["id"],
                                   "model": "gpt-4o-mini"}}, headers=t.headers)).json()["data"]
    refused = await api.client.delete(f"/v2/ai-providers/{provider['id']}", headers=t.headers)
    assert refused.status_code == 409 and refused.json()["error"]["details"]["agent_ids"] == [agent["id"]]
    # published with it, then the draft moves away: the published version still uses it
    assert (await api.client.post(f"/v2/agents/{agent['id']}/publish", headers=t.headers)).status_code == 200
    moved = await api.client.patch(f"/v2/agents/{agent['id']}", json={"llm": {"provider_id": None}},
                                   headers=t.headers)
    assert moved.status_code == 200 and moved.json()["data"]["llm"]["provider_id"] is None
    assert (await api.client.delete(f"/v2/ai-providers/{provider['id']}", headers=t.headers)).status_code == 409
    assert (await api.client.post(f"/v2/agents/{agent['id']}/publish", headers=t.headers)).status_code == 200
    deleted = await api.client.delete(f"/v2/ai-providers/{provider['id']}", headers=t.headers)
    assert deleted.status_code == 204
    assert (await api.client.get(f"/v2/ai-providers/{provider['id']}", headers=t.headers)).status_code == 404
