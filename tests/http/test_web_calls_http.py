"""Web calls (POST /v2/calls/web) against the real app: the call and its single-use token, the gates that apply
(published version, active agent) and those that do not (no phone numbers), and the web protocol on the media
endpoint running the agent's real conversation on the offline engines."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.http.calls_support import active_agent
from tests.http.dashboard_support import cookie, login, new_user
from tests.http.media_support import MediaApp, media_app
from tests.support.apps import Api, AppPool
from tests.support.emulators.media_client import AsgiWebSocket, WebSocketClosed

# the web protocol's conversations at real time, end to end (make test runs it; make test-fast leaves it out)
pytestmark = pytest.mark.slow


@pytest.fixture
async def served(app_pool: AppPool, tmp_root: Path, sql_url: str) -> AsyncIterator[MediaApp]:
    async with media_app(app_pool, tmp_root, sql_url) as app:
        yield app


async def _web_call(served: MediaApp, **body: Any) -> tuple[Any, dict[str, Any]]:
    api = served.api
    tenant = await api.tenant()
    agent = await active_agent(api, tenant, first_message="Hello, this is the front desk.",
                               prompt="Answer questions about the clinic.")
    response = await api.client.post("/v2/calls/web", json={"agent_id": agent["id"], **body},
                                     headers=tenant.headers)
    assert response.status_code == 201, response.text
    return tenant, response.json()["data"]


async def test_a_web_call_is_created_ringing_with_its_stream_url(served: MediaApp) -> None:
    tenant, data = await _web_call(served, custom_data={"topic": "hours"})
    assert set(data) == {"call_id", "token", "websocket_url", "expires_at"}
    assert data["websocket_url"] == f"ws://parley.test/v2/media-streams/{data['token']}"
    call = (await served.api.client.get(f"/v2/calls/{data['call_id']}", headers=tenant.headers)).json()["data"]
    assert (call["direction"], call["status"], call["destination_phone"], call["from_phone"]) == (
        "web", "ringing", "", "")
    assert call["custom_data"] == {"topic": "hours"}


async def test_the_published_version_and_an_active_agent_are_required(served: MediaApp) -> None:
    api = served.api
    tenant = await api.tenant()
    missing = await api.client.post("/v2/calls/web", json={"agent_id": 999999}, headers=tenant.headers)
    assert missing.status_code == 404
    draft = (await api.client.post("/v2/agents", json={"name": "Draft", "prompt": "Hi"},
                                   headers=tenant.headers)).json()["data"]
    refused = await api.client.post("/v2/calls/web", json={"agent_id": draft["id"]}, headers=tenant.headers)
    assert refused.status_code == 409, refused.text
    unknown_field = await api.client.post("/v2/calls/web", json={"agent_id": draft["id"], "phone": "+1"},
                                          headers=tenant.headers)
    assert unknown_field.status_code == 400


async def test_the_web_protocol_runs_the_agents_conversation_and_the_call_log_shows_it(served: MediaApp) -> None:
    tenant, data = await _web_call(served)
    path = data["websocket_url"].removeprefix("ws://parley.test")
    socket = await AsgiWebSocket.connect(served.app, path)
    await socket.to_app.put({"type": "websocket.receive",
                             "text": json.dumps({"event": "start", "encoding": "pcm_s16le", "sample_rate": 16000})})
    started = json.loads(await socket.receive_text())
    assert started == {"event": "started", "call_id": data["call_id"], "sample_rate": 16000}
    audio, marks = 0, []
    loop = asyncio.get_running_loop()
    until = loop.time() + 20
    while not marks and loop.time() < until:  # the greeting, synthesized offline, then its mark
        message = await asyncio.wait_for(socket.from_app.get(), timeout=20)
        if message.get("bytes"):
            assert len(message["bytes"]) == 640  # 20 ms of 16 kHz PCM
            audio += 1
        elif message.get("text"):
            event = json.loads(message["text"])
            if event["event"] == "mark":
                marks.append(event["name"])
                await socket.send_text(json.dumps({"event": "mark", "name": event["name"]}))
    assert audio > 25 and marks
    # the caller's microphone: half a second of silence, then the caller hangs up
    await socket.to_app.put({"type": "websocket.receive", "bytes": bytes(640 * 25)})
    await socket.send_text(json.dumps({"event": "stop"}))
    with pytest.raises(WebSocketClosed):
        while True:
            await asyncio.wait_for(socket.receive_text(), timeout=10)
    await socket.close()
    for _ in range(200):
        call = (await served.api.client.get(f"/v2/calls/{data['call_id']}", headers=tenant.headers)).json()["data"]
        if call["status"] not in ("ringing", "in_progress"):
            break
        await asyncio.sleep(0.05)
    assert call["status"] == "completed", call
    log = (await served.api.client.get(f"/v2/call-logs/{call['call_log_id']}", headers=tenant.headers)).json()["data"]
    assert log["direction"] == "web"
    assert log["transcript"][0]["role"] == "agent"
    assert "front desk" in log["transcript"][0]["text"]


async def test_a_token_of_a_web_call_opens_one_stream(served: MediaApp) -> None:
    _, data = await _web_call(served)
    path = data["websocket_url"].removeprefix("ws://parley.test")
    first = await AsgiWebSocket.connect(served.app, path)
    await first.send_text(json.dumps({"event": "start", "encoding": "pcm_s16le", "sample_rate": 8000}))
    with pytest.raises(WebSocketClosed) as unsupported:
        while True:
            await asyncio.wait_for(first.receive_text(), timeout=10)
    assert unsupported.value.code == 1003
    second = await AsgiWebSocket.connect(served.app, path)
    with pytest.raises(WebSocketClosed) as used:
        await asyncio.wait_for(second.receive_text(), timeout=10)
    assert used.value.code == 1008


async def test_the_dashboard_starts_a_web_call_for_the_signed_in_users_organization(any_api: Api) -> None:
    user = await new_user(any_api)
    agent = await active_agent(any_api, user.tenant)
    session, csrf = await login(any_api, user)
    page = await any_api.client.get(f"/dashboard/agents/{agent['id']}", headers=cookie(session))
    assert page.status_code == 200
    assert "Talk to this agent" in page.text and "/dashboard/static/webcall.js" in page.text
    policy = page.headers["content-security-policy"]
    host = any_api.client.base_url.host  # type: ignore[attr-defined]
    assert policy.endswith(f"connect-src 'self' ws://{host}"), policy
    forged = await any_api.client.post(f"/dashboard/agents/{agent['id']}/web-call", headers=cookie(session))
    assert forged.status_code == 403
    started = await any_api.client.post(f"/dashboard/agents/{agent['id']}/web-call",
                                        headers={**cookie(session), "X-CSRF-Token": csrf})
    assert started.status_code == 201, started.text
    data = started.json()
    assert data["websocket_url"].startswith("ws://") and "/v2/media-streams/" in data["websocket_url"]
    call = await any_api.client.get(f"/v2/calls/{data['call_id']}", headers=user.tenant.headers)
    assert call.json()["data"]["direction"] == "web"
    other_session, other_csrf = await login(any_api, await new_user(any_api))
    theirs = await any_api.client.post(f"/dashboard/agents/{agent['id']}/web-call",
                                       headers={**cookie(other_session), "X-CSRF-Token": other_csrf})
    assert theirs.status_code == 404
    script = await any_api.client.get("/dashboard/static/webcall.js", headers=cookie(session))
    assert script.status_code == 200 and "ParleyWebCall" in script.text


async def test_the_widget_talks_now_within_its_hourly_caps(any_api: Api) -> None:
    t = await any_api.tenant(plan="enterprise")
    agent = await active_agent(any_api, t)
    campaign = (await any_api.client.post("/v2/campaigns", json={
        "name": "Spring", "agent_id": agent["id"], "widget_max_contacts_per_hour": 2}, headers=t.headers)).json()
    minted = await any_api.client.post("/v2/widget/tokens", json={
        "campaign_id": campaign["data"]["id"], "allowed_origins": ["https://shop.example"]}, headers=t.headers)
    token = minted.json()["data"]["token"]
    headers = {"Authorization": f"Widget {token}", "Origin": "https://shop.example"}
    body = {"custom_data": {"contact_name": "Ada"}}
    for _ in range(2):
        talk = await any_api.client.post("/v2/widget/web-calls", json=body, headers=headers)
        assert talk.status_code == 201, talk.text
        assert talk.headers["access-control-allow-origin"] == "https://shop.example"
    limited = await any_api.client.post("/v2/widget/web-calls", json=body, headers=headers)
    assert limited.status_code == 429
    assert limited.json()["error"]["code"] == "widget_intake_limited"
    script = await any_api.client.get("/v2/webcall.js")
    assert script.status_code == 200 and "getUserMedia" in script.text
    widget = await any_api.client.get("/v2/widget.js")
    assert "Talk now" in widget.text and "/widget/web-calls" in widget.text
