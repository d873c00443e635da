"""An agent's engine settings: llm, voice and transcriber name AI providers of the organization (none: the
built-in offline one), custom http tools, the analysis schema and the end-of-turn silence; all part of the agent's
versioned, published configuration."""

from __future__ import annotations

from typing import Any

from tests.support.apps import Api

TOOL = {"name": "lookup_order", "description": "Find an order by its number", "url": "https://tools.example.com/order",
        "parameters": {"type": "object", "required": ["order"], "properties": {"order": {"type": "string"}}},
        "timeout_ms": 2500}


def _field(response: Any) -> str:
    error = response.json()["error"]
    details = error.get("details") or {}
    return str(details.get("field") or next(iter(details.get("validation_errors", {})), "")) or error["message"]


async def _provider(api: Api, headers: dict[str, str], name: str = "OpenAI") -> int:
    created = await api.client.post("/v2/ai-providers", json={
        "name": name, "type": "openai_compatible", "base_url": "https://api.openai.com/v1", "api_key": "sk-1"},
        headers=headers)
    assert created.status_code == 201, created.text
    return int(created.json()["data"]["id"])


async def test_a_new_agent_takes_the_offline_defaults(any_api: Api) -> None:
    t = await any_api.tenant()
    agent = (await any_api.client.post("/v2/agents", json={"name": "Desk"}, headers=t.headers)).json()["data"]
    assert agent["llm"] == {"model": "parley-sim-1", "temperature": 0.7, "provider_id": None}
    assert agent["voice"] == {"provider": "simulator", "voice_id": "default", "provider_id": None, "speed": 1.0}
    assert agent["transcriber"] == {"provider_id": None, "model": None, "language": None}
    assert (agent["tools"], agent["analysis_schema"], agent["end_of_turn_silence_ms"]) == ([], None, 500)


async def test_engine_settings_name_providers_of_the_organization(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    mine = await _provider(api, t.headers)
    other = await api.tenant()
    theirs = await _provider(api, other.headers, "Theirs")
    created = await api.client.post("/v2/agents", json={
        "name": "Desk", "llm": {"provider_id": mine, "model": "gpt-4o-mini", "temperature": 0.2},
        "voice": {"provider_id": mine, "voice_id": "nova", "speed": 1.2},
        "transcriber": {"provider_id": mine, "model": "whisper-1", "language": "en"}}, headers=t.headers)
    assert created.status_code == 201, created.text
    agent = created.json()["data"]
    assert agent["llm"] == {"model": "gpt-4o-mini", "temperature": 0.2, "provider_id": mine}
    assert agent["voice"] == {"provider": "simulator", "voice_id": "nova", "provider_id": mine, "speed": 1.2}
    assert agent["transcriber"] == {"provider_id": mine, "model": "whisper-1", "language": "en"}

    for body, field in [({"llm": {"provider_id": theirs}}, "llm.provider_id"),
                        ({"voice": {"provider_id": 999_999}}, "voice.provider_id"),
                        ({"transcriber": {"provider_id": theirs}}, "transcriber.provider_id")]:
        refused = await api.client.post("/v2/agents", json={"name": "X", **body}, headers=t.headers)
        assert refused.status_code == 422, refused.text
        assert _field(refused) == field
        patched = await api.client.patch(f"/v2/agents/{agent['id']}", json=body, headers=t.headers)
        assert patched.status_code == 422 and _field(patched) == field
    back = await api.client.patch(f"/v2/agents/{agent['id']}", json={"transcriber": {"provider_id": None}},
                                  headers=t.headers)
    assert back.json()["data"]["transcriber"] == {"provider_id": None, "model": "whisper-1", "language": "en"}
    assert (await api.client.post("/v2/agents", json={"name": "X", "voice": {"speed": 9}},
                                  headers=t.headers)).status_code == 400


async def test_custom_tools_are_validated(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    created = await api.client.post("/v2/agents", json={"name": "Tools", "tools": [TOOL]}, headers=t.headers)
    assert created.status_code == 201, created.text
    assert created.json()["data"]["tools"] == [{"type": "http", **TOOL}]
    cases: list[tuple[dict[str, Any], str]] = [
        ({"name": "9lives"}, "tools[0].name"),
        ({"name": "end_call"}, "tools[0].name"),
        ({"parameters": {"type": "array"}}, "tools[0].parameters"),
        ({"parameters": {"type": "object", "properties": []}}, "tools[0].parameters"),
        ({"timeout_ms": 50}, "tools[0].timeout_ms"),
        ({"timeout_ms": 30_001}, "tools[0].timeout_ms"),
        ({"url": "ftp://tools.example.com"}, "tools[0].url"),
        ({"type": "python"}, "tools[0].type"),
    ]
    for change, field in cases:
        refused = await api.client.post("/v2/agents", json={"name": "X", "tools": [{**TOOL, **change}]},
                                        headers=t.headers)
        assert refused.status_code == 400, (change, refused.text)
        assert field in refused.text, (change, refused.text)
    blocked = await api.client.post("/v2/agents", json={"name": "X", "tools": [
        TOOL, {**TOOL, "name": "other", "url": "https://10.0.0.2/x"}]}, headers=t.headers)
    assert blocked.status_code == 400 and blocked.json()["error"]["code"] == "blocked_address"
    assert blocked.json()["error"]["details"] == {"field": "tools[1].url"}  # which of the tools, named
    twice = await api.client.post("/v2/agents", json={"name": "X", "tools": [TOOL, TOOL]}, headers=t.headers)
    assert twice.status_code == 400 and "tools[1].name" in twice.text


async def test_tools_and_the_analysis_schema_are_replaced_whole(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    schema = {"type": "object", "properties": {"booked": {"type": "boolean"}, "reason": {"type": "string"}}}
    agent = (await api.client.post("/v2/agents", json={"name": "A", "tools": [TOOL], "analysis_schema": schema,
                                                       "end_of_turn_silence_ms": 800},
                                   headers=t.headers)).json()["data"]
    assert (agent["analysis_schema"], agent["end_of_turn_silence_ms"]) == (schema, 800)
    listed = (await api.client.get("/v2/agents", headers=t.headers)).json()["data"]  # a page is read another way
    assert [(a["tools"], a["analysis_schema"], a["end_of_turn_silence_ms"]) for a in listed] == [
        ([{"type": "http", **TOOL}], schema, 800)]
    other = {"type": "object", "properties": {"score": {"type": "integer"}}}
    patched = (await api.client.patch(f"/v2/agents/{agent['id']}", json={
        "analysis_schema": other, "tools": [{"name": "ping", "url": "https://tools.example.com/ping"}]},
        headers=t.headers)).json()["data"]
    assert patched["analysis_schema"] == other  # not merged with the schema before
    assert [tool["name"] for tool in patched["tools"]] == ["ping"]
    assert patched["tools"][0]["timeout_ms"] == 5000
    assert patched["tools"][0]["parameters"] == {"type": "object", "properties": {}}
    refused = await api.client.patch(f"/v2/agents/{agent['id']}", json={"analysis_schema": {"type": "string"}},
                                     headers=t.headers)
    assert refused.status_code == 400 and "analysis_schema" in refused.text
    for silence in (199, 3001):
        bad = await api.client.patch(f"/v2/agents/{agent['id']}", json={"end_of_turn_silence_ms": silence},
                                     headers=t.headers)
        assert bad.status_code == 400 and "end_of_turn_silence_ms" in bad.text
    cleared = (await api.client.patch(f"/v2/agents/{agent['id']}", json={"analysis_schema": None, "tools": []},
                                      headers=t.headers)).json()["data"]
    assert (cleared["analysis_schema"], cleared["tools"]) == (None, [])


async def test_engine_settings_are_part_of_the_published_version(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    provider = await _provider(api, t.headers)
    agent = (await api.client.post("/v2/agents", json={
        "name": "V", "llm": {"provider_id": provider}, "tools": [TOOL], "end_of_turn_silence_ms": 700},
        headers=t.headers)).json()["data"]
    assert (await api.client.post(f"/v2/agents/{agent['id']}/publish", headers=t.headers)).status_code == 200
    snapshot = (await api.client.get(f"/v2/agents/{agent['id']}/versions/1",
                                     headers=t.headers)).json()["data"]["snapshot"]
    assert snapshot["llm"]["provider_id"] == provider and snapshot["tools"] == [{"type": "http", **TOOL}]
    assert (snapshot["end_of_turn_silence_ms"], snapshot["analysis_schema"]) == (700, None)
    assert snapshot["transcriber"] == {"provider_id": None, "model": None, "language": None}

    changed = (await api.client.patch(f"/v2/agents/{agent['id']}", json={"end_of_turn_silence_ms": 900,
                                                                        "llm": {"provider_id": None}},
                                      headers=t.headers)).json()["data"]
    assert changed["has_unpublished_changes"] is True
    restored = await api.client.post(f"/v2/agents/{agent['id']}/versions/1/restore", headers=t.headers)
    assert restored.status_code == 200
    data = restored.json()["data"]
    assert (data["end_of_turn_silence_ms"], data["llm"]["provider_id"], data["has_unpublished_changes"]) == (
        700, provider, False)
