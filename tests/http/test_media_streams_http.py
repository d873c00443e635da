"""The media-stream websocket against the real app (SQLite and PostgreSQL): tokens, both carriers' protocols,
pacing, marks, clear, the recording and the call's end."""

from __future__ import annotations

import asyncio
import io
import struct
import wave
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from application.calls import CallFinisher
from application.media_session import EchoRuntime
from application.ports.calls import CallRepository
from application.ports.media import ConversationOutcome, LiveCallControl, MarkPlayed, SessionControl, StreamClosed
from application.ports.platform import UnitOfWork
from entrypoints.features.media import MediaSettings
from tests.http.media_support import (
    MediaApp,
    RuntimeOverride,
    ScriptRuntime,
    ended_call,
    media_app,
    open_stream,
    outbox_of,
    recording_of,
    ringing_call,
    sine,
)
from tests.support.apps import AppPool
from tests.support.emulators.media_client import AsgiWebSocket, WebSocketClosed

# media streams paced at real time, end to end (make test runs it; make test-fast leaves it out)
pytestmark = pytest.mark.slow


@pytest.fixture
async def served(app_pool: AppPool, tmp_root: Path, sql_url: str) -> AsyncIterator[MediaApp]:
    # the runtime that says the first message and hangs up (the agent's conversation is tested with web calls)
    async with media_app(app_pool, tmp_root, sql_url, sections=(
            MediaSettings(media_runtime="first_message"),)) as app:
        yield app


async def _refused(served: MediaApp, path: str) -> int | None:
    """The close code of a stream whose first frame is never even looked at."""
    try:
        socket = await AsgiWebSocket.connect(served.app, path)
    except WebSocketClosed as closed:
        return closed.code
    try:
        await socket.receive_text()
    except WebSocketClosed as closed:
        return closed.code
    return None


async def test_a_forged_token_is_refused_with_policy_violation(served: MediaApp, caplog: pytest.LogCaptureFixture
                                                                ) -> None:
    assert await _refused(served, "/v2/media-streams/forged-token") == 1008
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


async def test_the_greeting_plays_and_the_call_completes(served: MediaApp) -> None:
    call = await ringing_call(served, first_message="Hello there, this is Parley calling")
    caller = await open_stream(served, call.path)
    closed = await caller.finished(20)
    assert closed is not None
    assert caller.received.marks == ["first_message"]
    assert len(caller.received.media) >= 50
    data = await ended_call(served, call)
    assert data["status"] == "completed"
    assert data["end_reason"] == "agent_hangup"


async def test_a_token_opens_one_stream_only(served: MediaApp) -> None:
    call = await ringing_call(served)
    caller = await open_stream(served, call.path)
    await caller.finished(20)
    assert await _refused(served, call.path) == 1008


async def test_an_expired_token_is_refused(served: MediaApp) -> None:
    call = await ringing_call(served, token_at=datetime.now(UTC) - timedelta(hours=1))
    assert await _refused(served, call.path) == 1008
    assert (await ended_call(served, call, within=0))["status"] == "ringing"  # nothing happened to the call


async def test_the_telnyx_protocol_is_spoken_back_in_its_own_shape(served: MediaApp) -> None:
    call = await ringing_call(served, first_message="Hi")
    caller = await open_stream(served, call.path, "telnyx")
    await caller.finished(20)
    assert caller.received.marks == ["first_message"]
    assert caller.received.media
    data = await ended_call(served, call)
    assert (data["status"], data["end_reason"]) == ("completed", "agent_hangup")


@pytest.fixture
async def echo(app_pool: AppPool, tmp_root: Path, sql_url: str) -> AsyncIterator[MediaApp]:
    async with media_app(app_pool, tmp_root, sql_url, RuntimeOverride(EchoRuntime())) as app:
        yield app


@pytest.mark.parametrize("carrier", ["twilio", "telnyx"])
async def test_caller_audio_reaches_the_runtime_and_comes_back_paced_and_recorded(echo: MediaApp,
                                                                                  carrier: str) -> None:
    call = await ringing_call(echo)
    caller = await open_stream(echo, call.path, carrier)  # type: ignore[arg-type]
    spoken = sine(2000)
    await caller.play(spoken, realtime=False)  # a burst: the echo still goes out at real-time pace
    await caller.wait_for(lambda got: len(got.media) >= 100)
    await caller.hang_up()
    frames = caller.received.media
    assert frames[-1][0] - frames[0][0] >= 1.6  # 2 s of audio took about 2 s to arrive, not a burst
    assert all(len(frame) == 160 for _, frame in frames)
    back = caller.received.agent_pcm
    heard, said = struct.unpack(f"<{len(back) // 2}h", back), struct.unpack(f"<{len(spoken) // 2}h", spoken)
    assert max(abs(a - b) for a, b in zip(heard, said, strict=False)) < 700  # two μ-law passes, within a step
    data = await ended_call(echo, call)
    assert (data["status"], data["end_reason"]) == ("completed", "hangup")
    assert data["duration_seconds"] >= 2
    with wave.open(io.BytesIO(await recording_of(echo, call, data["call_log_id"]))) as recording:
        assert (recording.getnchannels(), recording.getsampwidth(), recording.getframerate()) == (2, 2, 8000)
        pcm = recording.readframes(recording.getnframes())
    samples = struct.unpack(f"<{len(pcm) // 2}h", pcm)
    left, right = samples[0::2], samples[1::2]
    assert max(map(abs, left)) > 4000 and max(map(abs, right)) > 4000  # the caller left, the agent right
    first_left = next(i for i, v in enumerate(left) if abs(v) > 1000)
    first_right = next(i for i, v in enumerate(right) if abs(v) > 1000)
    assert first_left < first_right  # the echo follows the caller on the session's clock


async def test_a_mark_is_told_when_the_carrier_played_it_and_clear_stops_playback(
        app_pool: AppPool, tmp_root: Path, sql_url: str) -> None:
    seen: dict[str, Any] = {}

    async def script(session: Any) -> ConversationOutcome:
        await session.play(sine(600))
        await session.mark("short")
        await session.play(sine(10_000))
        await session.mark("long")
        async for event in session.events():
            if isinstance(event, MarkPlayed):
                seen.setdefault("marks", []).append((event.name, session.sent_ms()))
                if event.name == "short":
                    seen["heard"] = await session.clear()  # barge-in: the long one stops
            elif isinstance(event, StreamClosed):
                break
        return ConversationOutcome(end_reason="hangup")

    async with media_app(app_pool, tmp_root, sql_url, RuntimeOverride(ScriptRuntime(script))) as served:
        call = await ringing_call(served)
        caller = await open_stream(served, call.path)
        await caller.wait_for(lambda got: got.clears)
        await asyncio.sleep(0.3)
        await caller.hang_up()
        names = [name for name, _ in seen["marks"]]
        assert names == ["short", "long"]  # the cleared mark is told too, as the carriers do
        assert caller.received.marks[0] == "short"
        assert 600 <= seen["heard"] < 2000  # what was sent before the clear
        assert len(caller.received.media) * 20 < 2500  # the 10 s never went out
        data = await ended_call(served, call)
        assert data["status"] == "completed"


async def test_a_runtime_that_fails_ends_the_call_failed_and_the_server_lives_on(
        app_pool: AppPool, tmp_root: Path, sql_url: str) -> None:
    async def script(session: Any) -> ConversationOutcome:
        await session.play(sine(100))
        raise RuntimeError("the conversation broke")

    async with media_app(app_pool, tmp_root, sql_url, RuntimeOverride(ScriptRuntime(script))) as served:
        call = await ringing_call(served)
        caller = await open_stream(served, call.path)
        assert await caller.finished(10) is not None
        data = await ended_call(served, call)
        assert (data["status"], data["end_reason"]) == ("failed", "error")
        second = await ringing_call(served)
        assert (await open_stream(served, second.path)).received is not None  # the endpoint still serves


async def test_the_call_is_finished_once_when_a_callback_ended_it_first(
        app_pool: AppPool, tmp_root: Path, sql_url: str) -> None:
    async def script(session: Any) -> ConversationOutcome:
        async for event in session.events():
            if isinstance(event, StreamClosed):
                break
        return ConversationOutcome(end_reason="hangup", transcript=[{"role": "user", "text": "hi", "at_ms": 5}])

    async with media_app(app_pool, tmp_root, sql_url, RuntimeOverride(ScriptRuntime(script))) as served:
        call = await ringing_call(served)
        caller = await open_stream(served, call.path)
        await caller.play(sine(200), realtime=False)
        await ended_call(served, call, within=0.3)  # the session answered the call meanwhile
        async with served.api.worker()() as unit:  # the carrier's status callback ends the call first
            calls = await unit.get(CallRepository)
            live = await calls.get_for_update(call.tenant.organization_id, call.call_id)
            assert live is not None and live.status == "in_progress"
            assert live.telephony_state["media"] == "live"
            await (await unit.get(CallFinisher)).finish(live, "complete", datetime.now(UTC), end_reason="hangup",
                                                        duration_seconds=1)
            await (await unit.get(UnitOfWork)).commit()
        await caller.hang_up()
        await asyncio.sleep(0.3)
        data = await ended_call(served, call)
        assert (data["status"], data["duration_seconds"]) == ("completed", 1)  # as the callback left it
        ended = await outbox_of(served, call, "call.ended")
        answered = await outbox_of(served, call, "call.answered")
        assert (len(ended), len(answered)) == (1, 1)


async def test_a_hang_up_sent_from_another_process_reaches_the_session(
        app_pool: AppPool, tmp_root: Path, sql_url: str) -> None:
    """Two app instances on one database: the stream is on the first, the hang-up sent through the second
    (PostgreSQL: NOTIFY; SQLite: in-process)."""
    async with media_app(app_pool, tmp_root, sql_url, RuntimeOverride(EchoRuntime())) as holder, \
            media_app(app_pool, tmp_root, sql_url, RuntimeOverride(EchoRuntime())) as other:
        call = await ringing_call(holder)
        caller = await open_stream(holder, call.path)
        await caller.play(sine(100), realtime=False)
        await caller.wait_for(lambda got: got.media)
        async with other.api.worker()() as unit:
            await (await unit.get(LiveCallControl)).send(call.tenant.organization_id, call.call_id,
                                                         SessionControl("hang_up", 0))
            await (await unit.get(UnitOfWork)).commit()
        assert await caller.finished(10) is not None
        data = await ended_call(holder, call)
        assert (data["status"], data["end_reason"]) == ("completed", "agent_hangup")
