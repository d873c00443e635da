"""Calls end to end through the real HTTP API: each simulator test number, events, call logs, transcripts,
recordings, idempotency, the concurrency limit, cancel, the sweeper and fail-closed DNC screening."""

from __future__ import annotations

import io
import logging
import wave
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from dishka import Provider, Scope, provide

from adapters.memory.clock import ManualClock
from application.calls import PlaceCall, PlaceCallCommand
from application.context import Actor
from application.ports.dnc import DncScreener
from application.ports.platform import UnitOfWork
from application.ports.telephony import DialHandle, DialRequest, PollResult, Telephony
from application.ports.usage import CALL_SECONDS, UsageRecorder
from entrypoints.ioc import build_container
from tests.http import calls_support
from tests.http.calls_support import (
    ApiWith,
    active_agent,
    drive,
    events_of,
    finish_calls,
    outbox,
    place,
)
from tests.support.apps import Api, ApiFactory, AppPool

START = datetime(2026, 1, 5, 9, tzinfo=UTC)


@pytest.fixture
async def api_with(tmp_root: Path, app_pool: AppPool) -> AsyncIterator[ApiWith]:
    async for factory in calls_support.apps_with_providers(tmp_root, app_pool):
        yield factory


@pytest.fixture(autouse=True)
async def close_workers() -> AsyncIterator[None]:
    yield
    await calls_support.close_workers()


def _path(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


async def test_each_test_number_reaches_its_final_state_with_events_log_and_recording(
        make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant()
    agent = await active_agent(api, t, transfer_phone="+14155550199",
                               voicemail={"action": "leave_message", "message": "Hi {{contact_name}}, call us back."})
    expected = {
        "+1555010000": ("completed", "hangup", ["call.started", "call.answered", "call.ended", "call.completed"]),
        "+1555010001": ("busy", "busy", ["call.started", "call.ended", "call.failed"]),
        "+1555010002": ("no_answer", "no_answer", ["call.started", "call.ended", "call.failed"]),
        "+1555010003": ("failed", "carrier_error", ["call.started", "call.ended", "call.failed"]),
        "+1555010004": ("voicemail", "voicemail_message_left", ["call.started", "call.ended", "call.failed"]),
        "+1555010005": ("transferred", "transferred",
                        ["call.started", "call.answered", "call.transferred", "call.ended"]),
        "+14155550100": ("completed", "hangup", ["call.started", "call.answered", "call.ended", "call.completed"]),
    }
    ids = {}
    for number in expected:
        created = await place(api, t, agent, number)
        assert created.status_code == 201, created.text
        assert created.json()["data"]["status"] == "queued"
        ids[number] = created.json()["data"]["id"]
    await finish_calls(api, t.organization_id)
    events = await outbox(api, t.organization_id)
    for number, (status, reason, kinds) in expected.items():
        call = (await api.client.get(f"/v2/calls/{ids[number]}", headers=t.headers)).json()["data"]
        assert (call["status"], call["end_reason"]) == (status, reason), number
        assert call["call_log_id"] is not None and call["ended_at"] is not None and call["started_at"] is not None
        assert events_of(events, ids[number]) == kinds, number
        final = [data for kind, data in events if data["id"] == ids[number]][-1]
        assert final == call  # event data is the call record as the API shows it
        log = (await api.client.get(f"/v2/call-logs/{call['call_log_id']}", headers=t.headers)).json()["data"]
        assert (log["call_id"], log["status"], log["to"], log["direction"]) == (ids[number], status, number,
                                                                               "outbound")
        assert log["duration_seconds"] == call["duration_seconds"] and log["summary"]
        recording = await api.client.get(f"/v2/call-logs/{log['id']}/recording", headers=t.headers)
        if status in ("completed", "transferred", "voicemail"):
            assert log["recording_available"] and log["transcript"], number
            link = recording.json()["data"]
            assert link["url"].startswith("http://testserver.local/v2/recordings/")  # the server asked
            audio = await api.client.get(_path(link["url"]))
            assert audio.status_code == 200 and audio.headers["content-type"].startswith("audio/wav")
            with wave.open(io.BytesIO(audio.content)) as wav:
                assert wav.getframerate() == 4000 and wav.getnframes() > 0
                # the recording lasts as long as the call, read from the WAV header the URL serves
                assert wav.getnframes() / wav.getframerate() == call["duration_seconds"], number
        else:
            assert not log["recording_available"] and log["transcript"] == [] and recording.status_code == 404
    transferred = (await api.client.get(f"/v2/calls/{ids['+1555010005']}", headers=t.headers)).json()["data"]
    assert transferred["transferred_to"] == "+14155550199"
    voicemail = (await api.client.get(f"/v2/calls/{ids['+1555010004']}", headers=t.headers)).json()["data"]
    log = (await api.client.get(f"/v2/call-logs/{voicemail['call_log_id']}/transcript", headers=t.headers)).json()
    assert log["data"] == [{"role": "agent", "text": "Hi Ada, call us back.", "at_ms": 2000}]


async def test_conversation_follows_the_agent_and_custom_data(make_api: ApiFactory, sqlite_url: str) -> None:
    api = await make_api(sqlite_url, clock=ManualClock(START))
    t = await api.tenant()
    agent = await active_agent(api, t, prompt="You help {{contact_name}} with their {{product}} order. Be kind.",
                               first_message="Good morning {{contact_name}}!")
    created = await place(api, t, agent, "+14155550100", custom_data={"product": "solar panel", "order_id": "A-17"})
    await finish_calls(api, t.organization_id)
    call = (await api.client.get(f"/v2/calls/{created.json()['data']['id']}", headers=t.headers)).json()["data"]
    turns = (await api.client.get(f"/v2/call-logs/{call['call_log_id']}/transcript", headers=t.headers)).json()["data"]
    texts = [turn["text"] for turn in turns]
    # the agent's side is the conversation runtime's (the offline model): the scripted caller asks, it answers
    assert texts[:3] == ["Good morning Ada!", "Hi, this is Ada. What is this call about?",
                         "I'm calling about the following: You help Ada with their solar panel order."]
    assert [turn["role"] for turn in turns] == ["agent", "user", "agent", "user", "agent"]
    assert [turn["at_ms"] for turn in turns] == sorted(turn["at_ms"] for turn in turns)
    assert call["outcome"] == "conversation_completed" and call["duration_seconds"] > 5
    log = (await api.client.get(f"/v2/call-logs/{call['call_log_id']}", headers=t.headers)).json()["data"]
    assert len(log["turns"]) == 2 and all(turn["parley_ms"] is not None for turn in log["turns"])
    assert log["analysis"]["summary"] == "The caller spoke 2 times." and log["analysis"]["successful"] is True


async def test_custom_data_values_are_spoken_as_people_read_them(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant()
    agent = await active_agent(api, t, prompt="Confirm the order. Be brief.",
                               first_message="Hi {{contact_name}}: {{count}} items, {{total}} dollars, rate {{rate}}, "
                                             "vip {{vip}}, tags {{tags}}, address {{address}}, note {{note}}.")
    created = await place(api, t, agent, "+14155550100", custom_data={
        "count": 3, "total": 3.0, "rate": 2.5, "vip": True, "tags": ["red", 2, None, False],
        "address": {"city": "Paris", "zip": "75001"}, "note": ""})
    assert created.status_code == 201, created.text
    await finish_calls(api, t.organization_id)
    call = (await api.client.get(f"/v2/calls/{created.json()['data']['id']}", headers=t.headers)).json()["data"]
    turns = (await api.client.get(f"/v2/call-logs/{call['call_log_id']}/transcript", headers=t.headers)).json()["data"]
    assert turns[0]["text"] == ('Hi Ada: 3 items, 3 dollars, rate 2.5, vip true, tags red, 2, false, '
                                'address {"city":"Paris","zip":"75001"}, note .')
    refused = await place(api, t, agent, "+14155550100", custom_data={
        "count": None, "total": 1, "rate": 1, "vip": False, "tags": [], "address": {}, "note": "n"})
    assert refused.status_code == 400 and refused.json()["error"]["details"]["missing_placeholders"] == ["count"]


async def test_max_call_duration_ends_the_call(make_api: ApiFactory, sqlite_url: str) -> None:
    api = await make_api(sqlite_url, clock=ManualClock(START))
    t = await api.tenant()
    agent = await active_agent(api, t, max_call_duration_seconds=10)
    created = await place(api, t, agent, "+1555010000")
    await finish_calls(api, t.organization_id)
    call = (await api.client.get(f"/v2/calls/{created.json()['data']['id']}", headers=t.headers)).json()["data"]
    assert call["status"] == "completed" and call["end_reason"] == "max_duration" and call["duration_seconds"] == 10


async def test_duplicate_post_with_the_same_idempotency_key_places_one_call(api: Api) -> None:
    t = await api.tenant()
    agent = await active_agent(api, t)
    headers = {**t.headers, "Idempotency-Key": "call-ada-1"}
    body = {"bot_id": str(agent["id"]), "destination_phone": "+1555010000", "contact_name": "Ada"}
    first = await api.client.post("/v2/calls", json=body, headers=headers)
    second = await api.client.post("/v2/calls", json=body, headers=headers)
    assert first.status_code == second.status_code == 201
    assert second.headers["idempotency-replayed"] == "true" and second.content == first.content
    listed = (await api.client.get("/v2/calls", headers=t.headers)).json()
    assert listed["meta"]["total"] == 1 and listed["data"][0]["id"] == first.json()["data"]["id"]


async def test_only_an_active_agent_can_call(api: Api) -> None:
    t = await api.tenant()
    draft = (await api.client.post("/v2/agents", json={"name": "Draft"}, headers=t.headers)).json()["data"]
    refused = await place(api, t, draft, "+1555010000")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "invalid_transition"
    unknown = await place(api, t, {"id": 999_999}, "+1555010000")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
    other = await api.tenant()
    theirs = await active_agent(api, other)
    assert (await place(api, t, theirs, "+1555010000")).status_code == 404
    bad = await api.client.post("/v2/calls", json={"bot_id": "abc", "destination_phone": "+1555010000"},
                                headers=t.headers)
    assert bad.status_code == 400 and "bot_id" in bad.json()["error"]["details"]["validation_errors"]
    assert (await api.client.get("/v2/calls", headers=t.headers)).json()["meta"]["total"] == 0


async def test_unresolved_placeholders_are_listed(api: Api) -> None:
    t = await api.tenant()
    agent = await active_agent(api, t, prompt="Call {{contact_name}} about {{product}} in {{city}}.")
    refused = await api.client.post("/v2/calls", json={"bot_id": str(agent["id"]), "destination_phone": "+1555010000",
                                                       "custom_data": {"city": "Oslo"}}, headers=t.headers)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "bad_request" and error["details"]["missing_placeholders"] == ["contact_name", "product"]
    # each missing value is named under the field that fills it
    assert set(error["details"]["validation_errors"]) == {"contact_name", "custom_data"}
    assert "product" in error["details"]["validation_errors"]["custom_data"]
    assert "send contact_name" in error["message"] and "the others in custom_data" in error["message"]
    ok = await place(api, t, agent, "+1555010000", custom_data={"product": "x", "city": "Oslo"})
    assert ok.status_code == 201


async def test_invalid_bodies_are_rejected(api: Api) -> None:
    t = await api.tenant()
    agent = await active_agent(api, t)
    for number in ("12", "not a number", "+1555"):
        bad = await place(api, t, agent, number)
        assert bad.status_code == 400 and "destination_phone" in bad.json()["error"]["details"]["validation_errors"]
    extra = await api.client.post("/v2/calls", json={"bot_id": "1", "destination_phone": "+1555010000", "x": 1},
                                  headers=t.headers)
    assert extra.status_code == 400
    formatted = await place(api, t, agent, "+1 (415) 555-0100")
    assert formatted.status_code == 201 and formatted.json()["data"]["destination_phone"] == "+14155550100"


async def test_queued_calls_wait_for_a_free_line(make_api: ApiFactory, sqlite_url: str) -> None:
    api = await make_api(sqlite_url, clock=ManualClock(START))
    t = await api.tenant(plan="starter")  # max_concurrent_calls 2
    agent = await active_agent(api, t)
    ids = [(await place(api, t, agent, "+1555010000")).json()["data"]["id"] for _ in range(5)]
    await drive(api, t.organization_id)

    async def statuses() -> list[str]:
        return [(await api.client.get(f"/v2/calls/{i}", headers=t.headers)).json()["data"]["status"] for i in ids]

    assert await statuses() == ["ringing", "ringing", "queued", "queued", "queued"]
    seen_active = []
    for _ in range(8):
        api.clock.advance(seconds=0.3)  # type: ignore[union-attr]
        await drive(api, t.organization_id)
        current = await statuses()
        seen_active.append(sum(s in ("ringing", "in_progress") for s in current))
    assert max(seen_active) <= 2
    await finish_calls(api, t.organization_id)
    assert await statuses() == ["completed"] * 5
    started = [(await api.client.get(f"/v2/calls/{i}", headers=t.headers)).json()["data"]["started_at"] for i in ids]
    assert started == sorted(started)  # oldest first


async def test_cancel_while_queued_or_ringing_but_not_later(make_api: ApiFactory, sqlite_url: str) -> None:
    api = await make_api(sqlite_url, clock=ManualClock(START))
    t = await api.tenant(plan="starter")
    agent = await active_agent(api, t)
    ringing, other_ringing, queued = [(await place(api, t, agent, "+1555010000")).json()["data"]["id"]
                                      for _ in range(3)]
    await drive(api, t.organization_id)
    cancelled = await api.client.post(f"/v2/calls/{queued}/cancel", headers=t.headers)
    assert cancelled.status_code == 200
    data = cancelled.json()["data"]
    assert (data["status"], data["end_reason"], data["call_log_id"]) == ("cancelled", "cancelled", None)
    hung_up = (await api.client.post(f"/v2/calls/{ringing}/cancel", headers=t.headers)).json()["data"]
    assert hung_up["status"] == "cancelled" and hung_up["call_log_id"] is not None
    await finish_calls(api, t.organization_id)
    assert (await api.client.get(f"/v2/calls/{ringing}", headers=t.headers)).json()["data"]["status"] == "cancelled"
    late = await api.client.post(f"/v2/calls/{other_ringing}/cancel", headers=t.headers)
    assert late.status_code == 409 and late.json()["error"]["code"] == "invalid_transition"
    events = await outbox(api, t.organization_id)
    assert events_of(events, queued) == ["call.ended"]
    assert events_of(events, ringing) == ["call.started", "call.ended"]
    missing = await api.client.post("/v2/calls/00000000-0000-4000-8000-000000000000/cancel", headers=t.headers)
    assert missing.status_code == 404


class StuckTelephony:
    """A carrier that accepts the call and then never reports anything again."""

    async def dial(self, request: DialRequest, now: datetime) -> DialHandle:
        return DialHandle(f"stuck-{request.call_id}", {"stuck": True}, None)

    async def poll(self, handle: DialHandle, now: datetime) -> PollResult:
        return PollResult([], handle)

    async def resume(self, handle: DialHandle, tool: str, result: Any) -> DialHandle:
        return handle

    async def hang_up(self, handle: DialHandle, now: datetime) -> DialHandle:
        return DialHandle(handle.reference, {**handle.state, "hung_up": True}, None)


class StuckTelephonyProvider(Provider):
    @provide(scope=Scope.APP)
    def telephony(self) -> Telephony:
        return StuckTelephony()


async def test_sweeper_ends_a_stuck_call_with_timeout_and_one_final_event(api_with: ApiWith, sql_url: str) -> None:
    api = await api_with(sql_url, StuckTelephonyProvider(), clock=ManualClock(START))
    t = await api.tenant()
    agent = await active_agent(api, t, max_call_duration_seconds=60)
    call_id = (await place(api, t, agent, "+1555010000")).json()["data"]["id"]
    await drive(api, t.organization_id)
    api.clock.advance(seconds=60 + 119)  # type: ignore[union-attr]
    assert (await drive(api, t.organization_id)).swept == 0
    assert (await api.client.get(f"/v2/calls/{call_id}", headers=t.headers)).json()["data"]["status"] == "ringing"
    api.clock.advance(seconds=2)  # type: ignore[union-attr]
    assert (await drive(api, t.organization_id)).swept == 1
    assert (await drive(api, t.organization_id)).swept == 0
    call = (await api.client.get(f"/v2/calls/{call_id}", headers=t.headers)).json()["data"]
    assert (call["status"], call["end_reason"], call["outcome"]) == ("failed", "timeout", "timeout")
    assert events_of(await outbox(api, t.organization_id), call_id) == ["call.started", "call.ended", "call.failed"]


async def test_a_call_queued_for_a_day_times_out(api_with: ApiWith, sqlite_url: str) -> None:
    api = await api_with(sqlite_url, FailingScreenerProvider(), clock=ManualClock(START))
    t = await api.tenant()
    agent = await active_agent(api, t)
    # placed while screening still worked (a container without the failing screener), then screening fails
    container = build_container(api.settings, *api.overrides[:1])
    try:
        async with container() as r:
            call = await (await r.get(PlaceCall)).execute(PlaceCallCommand(
                Actor.system(t.organization_id), str(agent["id"]), "+1555010000", "Ada"))
            await (await r.get(UnitOfWork)).commit()
    finally:
        await container.close()
    await drive(api, t.organization_id)  # screening fails at dial time: nothing is dialled
    assert (await api.client.get(f"/v2/calls/{call.id}", headers=t.headers)).json()["data"]["status"] == "queued"
    api.clock.advance(hours=24, seconds=1)  # type: ignore[union-attr]
    await drive(api, t.organization_id)
    data = (await api.client.get(f"/v2/calls/{call.id}", headers=t.headers)).json()["data"]
    assert (data["status"], data["end_reason"], data["started_at"]) == ("failed", "timeout", None)
    assert events_of(await outbox(api, t.organization_id), call.id) == ["call.ended", "call.failed"]


class FailingScreener:
    async def screen(self, organization_id: int, numbers: list[str]) -> dict[str, list[int]]:
        raise ConnectionError("the DNC store is unreachable")


class FailingScreenerProvider(Provider):
    @provide(scope=Scope.REQUEST)
    def screener(self) -> DncScreener:
        return FailingScreener()


async def test_dnc_screening_failure_dials_nothing(api_with: ApiWith, sql_url: str) -> None:
    api = await api_with(sql_url, FailingScreenerProvider(), clock=ManualClock(START))
    t = await api.tenant()
    agent = await active_agent(api, t)
    refused = await place(api, t, agent, "+1555010000")
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "dnc_unavailable" and refused.headers["retry-after"] == "5"
    keyed = {**t.headers, "Idempotency-Key": "retry-me"}
    body = {"bot_id": str(agent["id"]), "destination_phone": "+1555010000", "contact_name": "Ada"}
    for _ in range(2):  # a 503 is not stored: the retry runs again (and fails closed again)
        again = await api.client.post("/v2/calls", json=body, headers=keyed)
        assert again.status_code == 503 and "idempotency-replayed" not in again.headers
    assert (await api.client.get("/v2/calls", headers=t.headers)).json()["meta"]["total"] == 0
    await drive(api, t.organization_id)
    assert await outbox(api, t.organization_id) == []
    check = await api.client.post("/v2/dnc/check", json={"phone_numbers": ["+14155550100"]}, headers=t.headers)
    assert check.status_code == 503 and check.json()["error"]["code"] == "dnc_unavailable"


async def test_a_listed_number_is_refused_and_nothing_is_dialled(api: Api) -> None:
    t = await api.tenant()
    agent = await active_agent(api, t)
    dnc = (await api.client.post("/v2/dnc/lists", json={"name": "Opt-outs"}, headers=t.headers)).json()["data"]
    await api.client.post(f"/v2/dnc/lists/{dnc['id']}/entries", json={"phone_numbers": ["+1 415 555 0100"]},
                          headers=t.headers)
    blocked = await place(api, t, agent, "+14155550100")
    assert blocked.status_code == 422
    error = blocked.json()["error"]
    assert error["code"] == "dnc_blocked" and error["details"]["list_ids"] == [dnc["id"]]
    assert (await api.client.get("/v2/calls", headers=t.headers)).json()["meta"]["total"] == 0
    assert (await place(api, t, agent, "+14155550101")).status_code == 201


async def test_a_number_listed_after_queueing_is_not_dialled(make_api: ApiFactory, sqlite_url: str) -> None:
    api = await make_api(sqlite_url, clock=ManualClock(START))
    t = await api.tenant()
    agent = await active_agent(api, t)
    call_id = (await place(api, t, agent, "+14155550100")).json()["data"]["id"]
    dnc = (await api.client.post("/v2/dnc/lists", json={"name": "Late"}, headers=t.headers)).json()["data"]
    await api.client.post(f"/v2/dnc/lists/{dnc['id']}/entries", json={"phone_numbers": ["+14155550100"]},
                          headers=t.headers)
    await drive(api, t.organization_id)
    call = (await api.client.get(f"/v2/calls/{call_id}", headers=t.headers)).json()["data"]
    assert (call["status"], call["end_reason"], call["started_at"]) == ("failed", "dnc_blocked", None)


async def test_recording_links_are_signed_and_expire(make_api: ApiFactory, sqlite_url: str) -> None:
    clock = ManualClock(START)
    api = await make_api(sqlite_url, clock=clock)
    t = await api.tenant()
    agent = await active_agent(api, t)
    call_id = (await place(api, t, agent, "+1555010000")).json()["data"]["id"]
    await finish_calls(api, t.organization_id)
    log_id = (await api.client.get(f"/v2/calls/{call_id}", headers=t.headers)).json()["data"]["call_log_id"]
    link = (await api.client.get(f"/v2/call-logs/{log_id}/recording", headers=t.headers)).json()["data"]
    expires_at = datetime.fromisoformat(link["expires_at"])
    assert expires_at - clock.now() <= timedelta(minutes=15) and expires_at - clock.now() > timedelta(minutes=14)
    url = _path(link["url"])
    assert (await api.client.get(url)).status_code == 200
    assert (await api.client.get(url.replace("/v2/", "/api/v2/"))).status_code == 200  # either host prefix
    signature = url.split("signature=")[1]
    tampered = [
        url.replace(f"signature={signature}", f"signature={signature[::-1]}"),
        url.replace("expires=", "expires=1"),
        url.replace(f"/{log_id}.wav", f"/{log_id + 1}.wav"),
        url.split("?")[0],
        url.replace(".wav", ".mp3"),
    ]
    for bad in tampered:
        refused = await api.client.get(bad)
        assert refused.status_code == 403, bad
        assert refused.json()["error"]["code"] == "forbidden" and refused.json()["success"] is False
    clock.advance(minutes=15)
    assert (await api.client.get(url)).status_code == 403
    other = await api.tenant()
    assert (await api.client.get(f"/v2/call-logs/{log_id}/recording", headers=other.headers)).status_code == 404


async def _recorded_log(api: Api) -> tuple[Any, int]:
    t = await api.tenant()
    agent = await active_agent(api, t)
    call_id = (await place(api, t, agent, "+1555010000")).json()["data"]["id"]
    await finish_calls(api, t.organization_id)
    return t, (await api.client.get(f"/v2/calls/{call_id}", headers=t.headers)).json()["data"]["call_log_id"]


async def test_recording_links_point_at_the_server_and_prefix_the_client_used(make_api: ApiFactory,
                                                                                sql_url: str) -> None:
    """Without PARLEY_PUBLIC_BASE_URL a link goes back to the server that handed it out (e.g.
    `parley serve --port 9000`), under the prefix the client used, and works as given."""
    api = await make_api(sql_url, clock=ManualClock(START))
    t, log_id = await _recorded_log(api)
    for base in ("http://parley.internal:9000/api/v2", "https://calls.example.test/v2"):
        got = await api.client.get(f"{base}/call-logs/{log_id}/recording", headers=t.headers)
        url = got.json()["data"]["url"]
        assert url.startswith(f"{base}/recordings/{log_id}.wav?expires="), url
        downloaded = await api.client.get(url)
        assert downloaded.status_code == 200 and downloaded.content[:4] == b"RIFF"


async def test_recording_links_use_the_public_base_url_when_set(make_api: ApiFactory, sqlite_url: str) -> None:
    api = await make_api(sqlite_url, clock=ManualClock(START), public_base_url="https://calls.example.com/parley/")
    t, log_id = await _recorded_log(api)
    got = await api.client.get(f"http://parley.internal:9000/api/v2/call-logs/{log_id}/recording", headers=t.headers)
    url = got.json()["data"]["url"]
    assert url.startswith(f"https://calls.example.com/parley/v2/recordings/{log_id}.wav?expires="), url
    assert (await api.client.get(_path(url).removeprefix("/parley"))).status_code == 200


async def test_call_logs_list_filters_and_scopes(make_api: ApiFactory, sqlite_url: str) -> None:
    api = await make_api(sqlite_url, clock=ManualClock(START))
    t = await api.tenant()
    first, second = await active_agent(api, t), await active_agent(api, t, name="Second")
    for agent, number in [(first, "+1555010000"), (first, "+1555010001"), (second, "+1555010000")]:
        assert (await place(api, t, agent, number)).status_code == 201
    await finish_calls(api, t.organization_id)
    logs = (await api.client.get("/v2/call-logs?limit=2", headers=t.headers)).json()
    assert logs["meta"] == {"total": 3, "limit": 2, "offset": 0}
    by_agent = (await api.client.get(f"/v2/call-logs?agent_id={first['id']}", headers=t.headers)).json()
    assert by_agent["meta"]["total"] == 2
    busy = (await api.client.get("/v2/call-logs?status=busy", headers=t.headers)).json()["data"]
    assert [x["status"] for x in busy] == ["busy"]
    window = await api.client.get("/v2/call-logs?start=2026-01-05T08:00:00Z&end=2026-01-05T09:30:00%2B00:00",
                                  headers=t.headers)
    assert window.json()["meta"]["total"] == 3
    later = (await api.client.get("/v2/call-logs?start=2026-01-06T00:00:00Z", headers=t.headers)).json()
    assert later["meta"]["total"] == 0
    naive = await api.client.get("/v2/call-logs?start=2026-01-05T08:00:00", headers=t.headers)
    assert naive.status_code == 400 and "start" in naive.json()["error"]["details"]["validation_errors"]
    calls = (await api.client.get(f"/v2/calls?status=busy&agent_id={first['id']}", headers=t.headers)).json()
    assert calls["meta"]["total"] == 1
    reader = await api.key_for(t.organization_id, ("calls:read",))
    log_id = logs["data"][0]["id"]
    assert (await api.client.get(f"/v2/call-logs/{log_id}", headers=reader.headers)).status_code == 200
    denied = await api.client.get(f"/v2/call-logs/{log_id}/recording", headers=reader.headers)
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "INSUFFICIENT_SCOPE"
    assert (await place(api, reader, first, "+1555010000")).status_code == 403
    cancel_only = await api.key_for(t.organization_id, ("calls:schedule",))
    assert (await api.client.get("/v2/calls", headers=cancel_only.headers)).status_code == 403


async def test_finished_calls_record_billable_seconds(make_api: ApiFactory, sqlite_url: str) -> None:
    api = await make_api(sqlite_url, clock=ManualClock(START))
    t = await api.tenant()
    agent = await active_agent(api, t)
    ids = [(await place(api, t, agent, n)).json()["data"]["id"] for n in ("+1555010000", "+1555010001")]
    await finish_calls(api, t.organization_id)
    durations = [(await api.client.get(f"/v2/calls/{i}", headers=t.headers)).json()["data"]["duration_seconds"]
                 for i in ids]
    assert durations[0] > 0 and durations[1] == 0
    container = build_container(api.settings, *api.overrides)
    try:
        async with container() as r:
            total = await (await r.get(UsageRecorder)).total(t.organization_id, CALL_SECONDS, START,
                                                            START + timedelta(days=1))
    finally:
        await container.close()
    assert total == sum(durations)
    stats = (await api.client.get("/v2/telephony/stats?start=2026-01-05T00:00:00Z&end=2026-01-06T00:00:00Z",
                                  headers=t.headers)).json()["data"]
    assert stats["total_calls"] == 2 and stats["by_status"] == {"busy": 1, "completed": 1}
    assert stats["answer_rate"] == 0.5 and stats["average_duration_seconds"] == durations[0]
    assert stats["total_minutes"] == round(sum(durations) / 60, 2)


async def test_the_booking_is_confirmed_in_the_calendars_local_time(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(datetime(2026, 3, 2, 9, tzinfo=UTC)))  # Monday 10:00 in Berlin
    t = await api.tenant()
    calendar = await api.client.post("/v2/scheduling/calendars", json={
        "name": "Berlin", "timezone": "Europe/Berlin", "slot_duration_minutes": 30}, headers=t.headers)
    calendar_id = calendar.json()["data"]["id"]
    rule = await api.client.post(f"/v2/scheduling/calendars/{calendar_id}/rules", json={
        "weekday": 1, "start_time": "14:30", "end_time": "16:00"}, headers=t.headers)  # Tuesdays
    assert rule.status_code == 201, rule.text
    agent = await active_agent(api, t, calendar_id=calendar_id)
    call_id = (await place(api, t, agent, "+1555010006")).json()["data"]["id"]
    await finish_calls(api, t.organization_id)
    call = (await api.client.get(f"/v2/calls/{call_id}", headers=t.headers)).json()["data"]
    assert call["outcome"] == "appointment_booked"
    booked = (await api.client.get("/v2/scheduling/appointments", headers=t.headers)).json()["data"][0]
    assert booked["slot_start"] == "2026-03-03T13:30:00Z"
    turns = (await api.client.get(f"/v2/call-logs/{call['call_log_id']}/transcript", headers=t.headers)).json()["data"]
    said = [turn["text"] for turn in turns if turn["role"] == "agent"]
    assert "I have Tuesday, March 3 at 2:30 PM" in said[3]  # the slots check_availability found, in Berlin time
    assert said[4:6] == ["I'll book Tuesday, March 3 at 2:30 PM for you.",
                         "You're booked for Tuesday, March 3 at 2:30 PM. Is there anything else I can help you with?"]


async def test_number_06_books_the_next_open_slot(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant()
    calendar = await api.client.post("/v2/scheduling/calendars", json={
        "name": "Sales", "timezone": "UTC", "slot_duration_minutes": 30}, headers=t.headers)
    assert calendar.status_code == 201, calendar.text
    calendar_id = calendar.json()["data"]["id"]
    for weekday in range(7):
        rule = await api.client.post(f"/v2/scheduling/calendars/{calendar_id}/rules", json={
            "weekday": weekday, "start_time": "10:00", "end_time": "12:00"}, headers=t.headers)
        assert rule.status_code == 201, rule.text
    agent = await active_agent(api, t, calendar_id=calendar_id)
    call_id = (await place(api, t, agent, "+1555010006")).json()["data"]["id"]
    no_calendar = await active_agent(api, t, name="No calendar")
    plain_id = (await place(api, t, no_calendar, "+1555010006")).json()["data"]["id"]
    await finish_calls(api, t.organization_id)
    call = (await api.client.get(f"/v2/calls/{call_id}", headers=t.headers)).json()["data"]
    assert call["status"] == "completed" and call["outcome"] == "appointment_booked"
    appointments = (await api.client.get("/v2/scheduling/appointments", headers=t.headers)).json()["data"]
    assert len(appointments) == 1
    booked = appointments[0]
    assert booked["status"] == "confirmed" and booked["slot_start"].startswith("2026-01-05T10:00")
    assert booked["attendee_name"] == "Ada" and booked["attendee_phone"] == "+1555010006"
    log = (await api.client.get(f"/v2/call-logs/{call['call_log_id']}", headers=t.headers)).json()["data"]
    assert any("booked for Monday, January 5 at 10:00 AM." in turn["text"] for turn in log["transcript"])
    assert "appointment was booked" in log["summary"]
    kinds = [kind for kind, data in await outbox(api, t.organization_id, prefix="")
             if data.get("id") == call_id or kind == "appointment.booked"]
    booked_at = kinds.index("appointment.booked")
    assert kinds.index("call.answered") < booked_at < kinds.index("call.completed")
    plain = (await api.client.get(f"/v2/calls/{plain_id}", headers=t.headers)).json()["data"]
    assert plain["status"] == "completed" and plain["outcome"] == "conversation_completed"


async def test_a_calendar_deleted_before_the_booking_is_a_warning_not_an_error(
        make_api: ApiFactory, sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """A handled fallback (the mid-call booking cannot be made: the calendar is gone, the call goes on
    without it) logs one WARNING without a traceback; ERROR with a traceback is for bugs."""
    api = await make_api(sqlite_url, clock=ManualClock(START))
    t = await api.tenant()
    calendar = (await api.client.post("/v2/scheduling/calendars", json={
        "name": "Sales", "timezone": "UTC", "slot_duration_minutes": 30}, headers=t.headers)).json()["data"]
    agent = await active_agent(api, t, calendar_id=calendar["id"])
    deleted = await api.client.delete(f"/v2/scheduling/calendars/{calendar['id']}", headers=t.headers)
    assert deleted.status_code == 204, deleted.text
    call_id = (await place(api, t, agent, "+1555010006")).json()["data"]["id"]
    caplog.set_level(logging.INFO)
    await finish_calls(api, t.organization_id)
    call = (await api.client.get(f"/v2/calls/{call_id}", headers=t.headers)).json()["data"]
    assert call["status"] == "completed" and call["outcome"] == "conversation_completed"
    mine = [r for r in caplog.records if r.name.startswith("parley")]
    assert not [r for r in mine if r.levelno >= logging.ERROR or r.exc_info], [r.getMessage() for r in mine]
    warnings = [r.getMessage() for r in mine if r.levelno == logging.WARNING]
    assert warnings and all(str(call_id) in text and "calendar" in text for text in warnings), warnings
