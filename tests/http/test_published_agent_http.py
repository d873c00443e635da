"""Calls run the agent's latest published version, never the draft: an edit to an active agent reaches calls only
once published; calls and call logs name the version they ran; a version can be restored as the draft."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from adapters.memory.clock import ManualClock
from tests.http import calls_support
from tests.http.calls_support import active_agent, finish_calls, place
from tests.http.dashboard_support import cookie, login, new_user
from tests.support.apps import Api, ApiFactory, Tenant

START = datetime(2026, 1, 5, 9, tzinfo=UTC)


@pytest.fixture(autouse=True)
async def close_workers() -> AsyncIterator[None]:
    yield
    await calls_support.close_workers()


async def _agent(api: Api, t: Tenant, agent_id: int) -> dict[str, Any]:
    response = await api.client.get(f"/v2/agents/{agent_id}", headers=t.headers)
    assert response.status_code == 200, response.text
    return response.json()["data"]  # type: ignore[no-any-return]


async def _patch(api: Api, t: Tenant, agent_id: int, body: dict[str, Any]) -> dict[str, Any]:
    response = await api.client.patch(f"/v2/agents/{agent_id}", json=body, headers=t.headers)
    assert response.status_code == 200, response.text
    return response.json()["data"]  # type: ignore[no-any-return]


async def _publish(api: Api, t: Tenant, agent_id: int) -> int:
    response = await api.client.post(f"/v2/agents/{agent_id}/publish", headers=t.headers)
    assert response.status_code == 200, response.text
    return response.json()["data"]["version"]  # type: ignore[no-any-return]


async def _ran(api: Api, t: Tenant, call_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The finished call and its call log."""
    call = (await api.client.get(f"/v2/calls/{call_id}", headers=t.headers)).json()["data"]
    log = (await api.client.get(f"/v2/call-logs/{call['call_log_id']}", headers=t.headers)).json()["data"]
    return call, log


async def test_an_edit_reaches_calls_only_once_published(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant()
    agent = await active_agent(api, t, first_message="Hello {{contact_name}}, version one here.")
    shown = await _agent(api, t, agent["id"])
    assert (shown["published_version"], shown["has_unpublished_changes"]) == (1, False)

    # the draft changes, with a placeholder the published version does not have
    edited = await _patch(api, t, agent["id"],
                          {"first_message": "Version two for {{contact_name}}, order {{order_id}}."})
    assert (edited["published_version"], edited["has_unpublished_changes"]) == (1, True)
    listed = (await api.client.get("/v2/agents", headers=t.headers)).json()["data"]
    assert [(a["id"], a["published_version"], a["has_unpublished_changes"]) for a in listed] == [(agent["id"], 1, True)]

    before = await place(api, t, agent, "+1555010000")  # the published version needs no order_id
    assert before.status_code == 201, before.text
    assert before.json()["data"]["agent_version"] == 1
    await finish_calls(api, t.organization_id)
    call, log = await _ran(api, t, before.json()["data"]["id"])
    assert log["transcript"][0]["text"] == "Hello Ada, version one here."
    assert call["agent_version"] == log["agent_version"] == 1

    assert await _publish(api, t, agent["id"]) == 2
    assert (await _agent(api, t, agent["id"]))["has_unpublished_changes"] is False
    refused = await place(api, t, agent, "+1555010000")  # now the published version wants order_id
    assert refused.status_code == 400 and refused.json()["error"]["details"]["missing_placeholders"] == ["order_id"]
    after = await place(api, t, agent, "+1555010000", custom_data={"order_id": "A-17"})
    assert after.status_code == 201, after.text
    await finish_calls(api, t.organization_id)
    call, log = await _ran(api, t, after.json()["data"]["id"])
    assert log["transcript"][0]["text"] == "Version two for Ada, order A-17."
    assert call["agent_version"] == log["agent_version"] == 2


async def test_a_queued_call_keeps_the_version_it_was_placed_with(make_api: ApiFactory, sql_url: str) -> None:
    """What is read when the line is dialled (the voicemail message, the agent's name) comes from the call's
    version too, even when a newer version is published while the call waits in the queue."""
    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant()
    agent = await active_agent(api, t, voicemail={"action": "leave_message",
                                                  "message": "Old message for {{contact_name}}."})
    queued = await place(api, t, agent, "+1555010004")
    assert queued.status_code == 201, queued.text
    await _patch(api, t, agent["id"], {"voicemail": {"message": "New message for {{contact_name}}."}})
    assert await _publish(api, t, agent["id"]) == 2
    await finish_calls(api, t.organization_id)
    call, log = await _ran(api, t, queued.json()["data"]["id"])
    assert call["status"] == "voicemail" and call["agent_version"] == 1
    assert [turn["text"] for turn in log["transcript"]] == ["Old message for Ada."]


async def test_restore_makes_a_version_the_draft(any_api: Api) -> None:
    api, t = any_api, await any_api.tenant()
    agent = await active_agent(api, t, prompt="Prompt one.", first_message=None)
    await _patch(api, t, agent["id"], {"prompt": "Prompt two.", "max_call_duration_seconds": 300})
    assert await _publish(api, t, agent["id"]) == 2

    restored = await api.client.post(f"/v2/agents/{agent['id']}/versions/1/restore", headers=t.headers)
    assert restored.status_code == 200, restored.text
    data = restored.json()["data"]
    assert (data["prompt"], data["max_call_duration_seconds"], data["status"]) == ("Prompt one.", 600, "active")
    assert (data["published_version"], data["has_unpublished_changes"]) == (2, True)  # calls still run version 2
    assert await _agent(api, t, agent["id"]) == data

    # restoring the published version's configuration leaves nothing to publish; a status change alone neither
    again = (await api.client.post(f"/v2/agents/{agent['id']}/versions/2/restore", headers=t.headers)).json()["data"]
    assert (again["prompt"], again["has_unpublished_changes"]) == ("Prompt two.", False)
    paused = await _patch(api, t, agent["id"], {"status": "paused"})
    assert paused["has_unpublished_changes"] is False
    assert (await _patch(api, t, agent["id"], {"prompt": "Prompt one."}))["has_unpublished_changes"] is True
    assert (await _patch(api, t, agent["id"], {"prompt": "Prompt two."}))["has_unpublished_changes"] is False

    for path in (f"/v2/agents/{agent['id']}/versions/3/restore", "/v2/agents/999999999/versions/1/restore"):
        missing = await api.client.post(path, headers=t.headers)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found", path
    other = await api.tenant()
    assert (await api.client.post(f"/v2/agents/{agent['id']}/versions/1/restore",
                                  headers=other.headers)).status_code == 404


async def test_a_deleted_calendar_is_neither_restored_nor_published(any_api: Api) -> None:
    """docs/api.md: a version whose calendar has been deleted since is 404 naming calendar_id, also when the draft
    names that calendar too; and a draft left pointing at a deleted calendar is not published until it points at a
    live one (or none)."""
    api, t = any_api, await any_api.tenant()
    calendar = await api.client.post("/v2/scheduling/calendars", json={"name": "Desk", "timezone": "UTC"},
                                     headers=t.headers)
    assert calendar.status_code == 201, calendar.text
    calendar_id = calendar.json()["data"]["id"]
    agent = await active_agent(api, t, calendar_id=calendar_id)
    deleted = await api.client.delete(f"/v2/scheduling/calendars/{calendar_id}", headers=t.headers)
    assert deleted.status_code == 204

    for path in (f"/v2/agents/{agent['id']}/versions/1/restore", f"/v2/agents/{agent['id']}/publish"):
        refused = await api.client.post(path, headers=t.headers)
        assert refused.status_code == 404, (path, refused.text)
        assert refused.json()["error"]["details"]["field"] == "calendar_id", path
    assert (await _agent(api, t, agent["id"]))["published_version"] == 1  # nothing was published

    assert (await _patch(api, t, agent["id"], {"calendar_id": None}))["calendar_id"] is None
    assert await _publish(api, t, agent["id"]) == 2
    assert (await api.client.post(f"/v2/agents/{agent['id']}/versions/1/restore", headers=t.headers)).status_code \
        == 404


async def test_an_agent_never_published_has_changes_to_publish(any_api: Api) -> None:
    api, t = any_api, await any_api.tenant()
    created = await api.client.post("/v2/agents", json={"name": "Draft"}, headers=t.headers)
    assert (created.json()["data"]["published_version"], created.json()["data"]["has_unpublished_changes"]) == (
        None, True)
    copy = await api.client.post(f"/v2/agents/{created.json()['data']['id']}/duplicate", headers=t.headers)
    assert (copy.json()["data"]["published_version"], copy.json()["data"]["has_unpublished_changes"]) == (None, True)


async def test_the_openapi_document_describes_versions(any_api: Api) -> None:
    document = (await any_api.client.get("/v2/openapi.json")).json()
    schemas = document["components"]["schemas"]
    agent = schemas["AgentOut"]["properties"]
    assert agent["has_unpublished_changes"]["type"] == "boolean"
    assert {"published_version", "has_unpublished_changes"} <= set(schemas["AgentOut"]["required"])
    assert "agent_version" in schemas["CallOut"]["properties"]
    assert "agent_version" in schemas["CallLogOut"]["properties"]
    restore = document["paths"]["/agents/{id}/versions/{version}/restore"]["post"]
    assert restore["operationId"] == "restoreAgentVersion" and "404" in restore["responses"]


async def test_the_dashboard_says_whether_there_is_something_to_publish(any_api: Api) -> None:
    api = any_api
    user = await new_user(api)
    session, csrf = await login(api, user)
    t = user.tenant
    agent = await active_agent(api, t)
    path = f"/dashboard/agents/{agent['id']}"
    page = (await api.client.get(path, headers=cookie(session))).text
    assert "Publish again" in page and "Publish a new version" not in page and "same as version 1" in page
    await _patch(api, t, agent["id"], {"prompt": "A new prompt."})
    page = (await api.client.get(path, headers=cookie(session))).text
    assert "Publish a new version" in page and "calls run version 1 until you publish" in page
    published = await api.client.post(f"{path}/publish", headers=cookie(session), data={"csrf_token": csrf},
                                      follow_redirects=False)
    assert published.status_code == 303, published.text
    page = (await api.client.get(path, headers=cookie(session))).text
    assert "Publish again" in page and "same as version 2" in page
