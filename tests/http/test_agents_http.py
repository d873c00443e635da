"""Agents through the real HTTP API."""

from __future__ import annotations

from typing import Any

from tests.support.apps import Api


async def test_agent_lifecycle_create_publish_version_duplicate(any_api: Api) -> None:
    t = await any_api.tenant()
    c = any_api.client
    created = await c.post("/v2/agents", json={"name": "Front desk", "prompt": "Hello {{contact_name}}"},
                           headers=t.headers)
    assert created.status_code == 201
    agent = created.json()["data"]
    assert agent["status"] == "draft" and agent["agent_mode"] == "outbound"

    published = await c.post(f"/v2/agents/{agent['id']}/publish", headers=t.headers)
    assert published.status_code == 200
    assert published.json()["data"]["version"] == 1 and published.json()["data"]["status"] == "active"
    await c.patch(f"/v2/agents/{agent['id']}", json={"prompt": "Changed"}, headers=t.headers)
    second = await c.post(f"/api/v2/agents/{agent['id']}/publish", headers=t.headers)
    assert second.json()["data"]["version"] == 2

    versions = (await c.get(f"/v2/agents/{agent['id']}/versions", headers=t.headers)).json()["data"]
    assert [v["version"] for v in versions] == [1, 2]
    v1 = (await c.get(f"/v2/agents/{agent['id']}/versions/1", headers=t.headers)).json()["data"]
    assert v1["snapshot"]["prompt"] == "Hello {{contact_name}}"

    dup = await c.post(f"/v2/agents/{agent['id']}/duplicate", headers=t.headers)
    assert dup.status_code == 201
    assert dup.json()["data"]["name"] == "Front desk (Copy)" and dup.json()["data"]["status"] == "draft"


async def test_archived_agent_cannot_be_published(api: Api) -> None:
    t = await api.tenant()
    agent = (await api.client.post("/v2/agents", json={"name": "A"}, headers=t.headers)).json()["data"]
    archived = await api.client.patch(f"/v2/agents/{agent['id']}", json={"status": "archived"}, headers=t.headers)
    assert archived.json()["data"]["status"] == "archived"
    refused = await api.client.post(f"/v2/agents/{agent['id']}/publish", headers=t.headers)
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "invalid_transition"


async def test_draft_cannot_be_activated_by_patch(api: Api) -> None:
    t = await api.tenant()
    agent = (await api.client.post("/v2/agents", json={"name": "A"}, headers=t.headers)).json()["data"]
    refused = await api.client.patch(f"/v2/agents/{agent['id']}", json={"status": "active"}, headers=t.headers)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "invalid_transition"


async def test_list_filters_and_meta(api: Api) -> None:
    t = await api.tenant()
    for name, mode in [("Sales bot", "outbound"), ("Support", "inbound"), ("Sales inbound", "inbound")]:
        await api.client.post("/v2/agents", json={"name": name, "agent_mode": mode}, headers=t.headers)
    page = (await api.client.get("/v2/agents?limit=2&offset=0", headers=t.headers)).json()
    assert page["meta"] == {"total": 3, "limit": 2, "offset": 0} and len(page["data"]) == 2
    sales = (await api.client.get("/v2/agents?search=sales&agent_mode=inbound", headers=t.headers)).json()
    assert [a["name"] for a in sales["data"]] == ["Sales inbound"]
    past_end = (await api.client.get("/v2/agents?offset=10", headers=t.headers)).json()
    assert past_end["meta"]["total"] == 3 and past_end["data"] == []
    bad = await api.client.get("/v2/agents?limit=101", headers=t.headers)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "bad_request"


async def test_another_organizations_agent_is_not_found(api: Api) -> None:
    a, b = await api.tenant(), await api.tenant()
    agent = (await api.client.post("/v2/agents", json={"name": "Mine"}, headers=a.headers)).json()["data"]
    for method in ("GET", "PATCH", "DELETE"):
        r = await api.client.request(method, f"/v2/agents/{agent['id']}", headers=b.headers,
                                     json={"name": "x"} if method == "PATCH" else None)
        assert r.status_code == 404, method
    assert (await api.client.get(f"/v2/agents/{agent['id']}", headers=a.headers)).status_code == 200


async def test_delete_returns_204_and_agent_is_gone(api: Api) -> None:
    t = await api.tenant()
    agent = (await api.client.post("/v2/agents", json={"name": "A"}, headers=t.headers)).json()["data"]
    r = await api.client.delete(f"/v2/agents/{agent['id']}", headers=t.headers)
    assert r.status_code == 204 and r.content == b""
    assert (await api.client.get(f"/v2/agents/{agent['id']}", headers=t.headers)).status_code == 404


async def test_invalid_fields_give_validation_errors(api: Api) -> None:
    t = await api.tenant()
    r = await api.client.post("/v2/agents", json={"name": "A", "transfer_phone": "12"}, headers=t.headers)
    assert r.status_code == 400
    assert "transfer_phone" in r.json()["error"]["details"]["validation_errors"]
    r = await api.client.post("/v2/agents", json={"name": "A", "timezone": "Mars/Base"}, headers=t.headers)
    assert "timezone" in r.json()["error"]["details"]["validation_errors"]
    r = await api.client.post("/v2/agents", json={"name": "A", "unknown": 1}, headers=t.headers)
    assert r.status_code == 400
    r = await api.client.post("/v2/agents", content=b"{not json", headers={**t.headers,
                                                                         "Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request"


async def test_an_agents_timezone_is_checked_like_a_calendars(api: Api) -> None:
    """One validator for every IANA zone a client names: names Python opens but that are not IANA zones are
    refused for an agent (create and PATCH) with the very words a calendar gets."""
    t = await api.tenant()
    created = await api.client.post("/v2/agents", json={"name": "A", "timezone": "Europe/Berlin"}, headers=t.headers)
    assert created.status_code == 201 and created.json()["data"]["timezone"] == "Europe/Berlin"
    agent_id = created.json()["data"]["id"]
    for name in ("posix/Europe/Berlin", "right/UTC", "localtime", "Factory"):
        agent = await api.client.post("/v2/agents", json={"name": "A", "timezone": name}, headers=t.headers)
        patched = await api.client.patch(f"/v2/agents/{agent_id}", json={"timezone": name}, headers=t.headers)
        calendar = await api.client.post("/v2/scheduling/calendars", json={"name": "C", "timezone": name},
                                         headers=t.headers)
        assert agent.status_code == patched.status_code == calendar.status_code == 400, name
        assert _errors(agent)["timezone"] == _errors(patched)["timezone"] == _errors(calendar)["timezone"]


# --------------------------------------------------------------------------- PATCH is a merge patch


def _errors(response: Any) -> dict[str, str]:
    return response.json()["error"]["details"]["validation_errors"]


async def test_patch_of_a_nested_object_changes_only_the_members_sent(any_api: Api) -> None:
    t = await any_api.tenant()
    c = any_api.client
    agent = (await c.post("/v2/agents", json={
        "name": "Merge", "description": "kept",
        "voice": {"provider": "acme-tts", "voice_id": "anna"},
        "llm": {"model": "big-model", "temperature": 0.5},
        "voicemail": {"action": "leave_message", "message": "Call us back"},
        "metadata": {"team": "sales", "limits": {"daily": 10, "weekly": 50}, "tag": "x"},
    }, headers=t.headers)).json()["data"]
    patched = await c.patch(f"/v2/agents/{agent['id']}", json={
        "llm": {"temperature": 0.3},
        "voice": {"voice_id": "bert"},
        "voicemail": {"message": None},
        "metadata": {"limits": {"weekly": None, "monthly": 100}, "tag": None},
    }, headers=t.headers)
    assert patched.status_code == 200, patched.text
    data = patched.json()["data"]
    assert data["llm"] == {"model": "big-model", "temperature": 0.3, "provider_id": None}
    assert data["voice"] == {"provider": "acme-tts", "voice_id": "bert", "provider_id": None, "speed": 1.0}
    assert data["voicemail"] == {"action": "leave_message", "message": None}
    assert data["metadata"] == {"team": "sales", "limits": {"daily": 10, "monthly": 100}}
    assert data["description"] == "kept" and data["name"] == "Merge"
    assert (await c.get(f"/v2/agents/{agent['id']}", headers=t.headers)).json()["data"] == data

    await c.post(f"/v2/agents/{agent['id']}/publish", headers=t.headers)
    snapshot = (await c.get(f"/v2/agents/{agent['id']}/versions/1", headers=t.headers)).json()["data"]["snapshot"]
    assert snapshot["llm"] == {"model": "big-model", "temperature": 0.3, "provider_id": None}
    assert snapshot["voice"] == {"provider": "acme-tts", "voice_id": "bert", "provider_id": None, "speed": 1.0}


async def test_patch_null_clears_nullable_fields_and_is_refused_for_required_ones(any_api: Api) -> None:
    t = await any_api.tenant()
    c = any_api.client
    agent = (await c.post("/v2/agents", json={"name": "Nulls", "description": "d", "transfer_phone": "+14155550100"},
                          headers=t.headers)).json()["data"]
    cleared = await c.patch(f"/v2/agents/{agent['id']}", json={"description": None, "transfer_phone": None},
                            headers=t.headers)
    assert cleared.status_code == 200
    assert cleared.json()["data"]["description"] is None and cleared.json()["data"]["transfer_phone"] is None
    for body, field in [({"llm": None}, "llm"), ({"name": None}, "name"), ({"metadata": None}, "metadata"),
                        ({"llm": {"model": None}}, "llm.model"), ({"voice": {"provider": None}}, "voice.provider"),
                        ({"voicemail": {"action": None}}, "voicemail.action"),
                        ({"llm": {"temperature": 2.5}}, "llm.temperature"),
                        ({"llm": {"temprature": 1}}, "llm.temprature")]:
        refused = await c.patch(f"/v2/agents/{agent['id']}", json=body, headers=t.headers)
        assert refused.status_code == 400, (body, refused.text)
        assert refused.json()["error"]["code"] == "bad_request"
        assert field in _errors(refused), (body, _errors(refused))
    unchanged = (await c.get(f"/v2/agents/{agent['id']}", headers=t.headers)).json()["data"]
    assert unchanged["llm"] == {"model": "parley-sim-1", "temperature": 0.7, "provider_id": None}
    assert unchanged["updated_at"] == cleared.json()["data"]["updated_at"]


async def test_versions_list_is_paged_with_meta(any_api: Api) -> None:
    t = await any_api.tenant()
    c = any_api.client
    agent = (await c.post("/v2/agents", json={"name": "Versions"}, headers=t.headers)).json()["data"]
    for _ in range(3):
        assert (await c.post(f"/v2/agents/{agent['id']}/publish", headers=t.headers)).status_code == 200
    everything = (await c.get(f"/v2/agents/{agent['id']}/versions", headers=t.headers)).json()
    assert everything["meta"] == {"total": 3, "limit": 25, "offset": 0}
    assert [v["version"] for v in everything["data"]] == [1, 2, 3]
    page = (await c.get(f"/v2/agents/{agent['id']}/versions?limit=1&offset=1", headers=t.headers)).json()
    assert page["meta"] == {"total": 3, "limit": 1, "offset": 1} and [v["version"] for v in page["data"]] == [2]
    past_end = (await c.get(f"/v2/agents/{agent['id']}/versions?offset=5", headers=t.headers)).json()
    assert past_end["meta"]["total"] == 3 and past_end["data"] == []
    bad = await c.get(f"/v2/agents/{agent['id']}/versions?limit=0", headers=t.headers)
    assert bad.status_code == 400


async def test_a_placeholder_no_call_could_fill_is_refused(any_api: Api) -> None:
    """A custom_data key is at most 40 characters, so a longer {{placeholder}} could never be filled and every call
    would fail: refused when the text is written, naming it."""
    t = await any_api.tenant()
    longest, too_long = "k" * 40, "k" * 41
    made = await any_api.client.post("/v2/agents", json={"name": "A", "prompt": f"Hi {{{{{longest}}}}}"},
                                     headers=t.headers)
    assert made.status_code == 201, made.text
    refused = await any_api.client.post("/v2/agents", json={"name": "B", "prompt": f"Hi {{{{{too_long}}}}}"},
                                        headers=t.headers)
    assert refused.status_code == 400 and list(refused.json()["error"]["details"]["validation_errors"]) == ["prompt"]
    path = f"/v2/agents/{made.json()['data']['id']}"
    for body, field in (({"first_message": f"{{{{{too_long}}}}}"}, "first_message"),
                        ({"voicemail": {"action": "leave_message", "message": f"{{{{{too_long}}}}}"}},
                         "voicemail.message")):
        patched = await any_api.client.patch(path, json=body, headers=t.headers)
        assert patched.status_code == 400, patched.text
        assert list(patched.json()["error"]["details"]["validation_errors"]) == [field]
    assert (await any_api.client.patch(path, json={"name": "Renamed"}, headers=t.headers)).status_code == 200
