"""The media session's use case and registry on the in-memory backend, with a scripted session in place of a
carrier's stream: the call answered, the first message said, the call finished once with the outcome and the
recording; controls delivered; draining."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from application.media_session import (
    EchoRuntime,
    FirstMessageRuntime,
    InProcessCallControl,
    LiveSessions,
    RunMediaSession,
    RunMediaSessionCommand,
)
from application.ports.agents import AgentRepository
from application.ports.blobs import BlobStorage
from application.ports.calls import CallLogRepository, CallRepository
from application.ports.media import (
    AudioIn,
    MarkPlayed,
    MediaEvent,
    SessionControl,
    SessionInfo,
    StreamClosed,
    StreamGrant,
)
from application.ports.platform import Clock, UnitOfWork, Units
from domain.agents import Agent
from domain.calls import Call
from tests.application.conftest import NOW, App


class ScriptedSession:
    """A LiveMediaSession without a carrier: marks are played at once, hang_up and close end it."""

    def __init__(self, call_id: str, organization_id: int) -> None:
        self._info = SessionInfo(call_id, organization_id, "outbound", "twilio", 8000, NOW)
        self.queue: asyncio.Queue[MediaEvent] = asyncio.Queue()
        self.played: list[bytes] = []
        self.hung_up = False
        self._closed = asyncio.Event()
        self.ms = 0

    @property
    def info(self) -> SessionInfo:
        return self._info

    async def events(self) -> Any:
        while True:
            event = await self.queue.get()
            yield event
            if isinstance(event, StreamClosed):
                return

    async def play(self, pcm: bytes) -> None:
        self.played.append(pcm)
        self.ms += len(pcm) // 16

    async def mark(self, name: str) -> None:
        self.queue.put_nowait(MarkPlayed(name, self.ms))

    async def clear(self) -> int:
        return 0

    def sent_ms(self) -> int:
        return self.ms

    def now_ms(self) -> int:
        return self.ms + 1500

    async def transfer(self, to_phone: str) -> None:
        await self.close("transferred")

    async def hang_up(self) -> None:
        self.hung_up = True
        await self.close("agent_hangup")

    def deliver(self, control: SessionControl) -> None:
        self.queue.put_nowait(control)

    def recording(self) -> bytes | None:
        return b"RIFF-fake" if self.played else None

    async def close(self, reason: str) -> None:
        if not self._closed.is_set():
            self._closed.set()
            self.queue.put_nowait(StreamClosed(self.ms, reason))

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    async def wait_closed(self) -> None:
        await self._closed.wait()


async def _ringing(app: App, first_message: str | None = "Hello from the agent") -> Call:
    org = await app.organization()
    async with app.container() as r:
        agent = await (await r.get(AgentRepository)).add(Agent(None, org, "A", created_at=NOW, updated_at=NOW))
        call = await (await r.get(CallRepository)).add(Call(
            id=f"call-{org}", organization_id=org, agent_id=agent.id or 0, destination_phone="+15005550006",
            from_phone="+15005550001", status="ringing", first_message=first_message, created_at=NOW,
            updated_at=NOW, started_at=NOW, deadline_at=NOW + timedelta(hours=1), telephony_ref="CA1"))
        await (await r.get(UnitOfWork)).commit()
    return call


async def _run(app: App, call: Call, session: ScriptedSession, runtime: Any, sessions: LiveSessions | None = None
               ) -> Any:
    units = await app.container.get(Units)
    registry = sessions if sessions is not None else LiveSessions()  # an empty registry is falsy (len 0)
    case = RunMediaSession(units, registry, runtime, await app.container.get(BlobStorage),
                           await app.container.get(Clock))
    return await case.execute(RunMediaSessionCommand(
        StreamGrant(call.id, call.organization_id, NOW + timedelta(minutes=15)), session))


async def test_the_first_message_is_said_then_the_call_completes_with_transcript_and_recording(app: App) -> None:
    call = await _ringing(app)
    session = ScriptedSession(call.id, call.organization_id)
    result = await _run(app, call, session, FirstMessageRuntime(await app.container.get(Units)))
    assert (result.ran, result.status, result.end_reason) == (True, "completed", "agent_hangup")
    assert session.hung_up and session.played
    async with app.container() as r:
        done = await (await r.get(CallRepository)).get(call.organization_id, call.id)
        assert done is not None and done.telephony_state["media"] == "ended"
        assert done.duration_seconds == 3  # 1.2 s of greeting, 1.5 s more: 2.7 s, rounded up
        log = await (await r.get(CallLogRepository)).get(call.organization_id, done.call_log_id or 0)
    assert log is not None and log.transcript[0]["text"] == "Hello from the agent"
    assert log.recording_key == f"recordings/{call.organization_id}/{call.id}.wav"
    assert await (await app.container.get(BlobStorage)).get(log.recording_key) == b"RIFF-fake"
    kinds = [kind for kind, _ in await app.events(call.organization_id)]
    assert kinds == ["call.answered", "call.ended", "call.completed"]


async def test_a_call_already_over_runs_no_conversation(app: App) -> None:
    call = await _ringing(app)
    async with app.container() as r:
        calls = await r.get(CallRepository)
        live = await calls.get_for_update(call.organization_id, call.id)
        assert live is not None
        await calls.update(live.move("busy", NOW)[0])
        await (await r.get(UnitOfWork)).commit()
    session = ScriptedSession(call.id, call.organization_id)
    result = await _run(app, call, session, EchoRuntime())
    assert (result.ran, result.status) == (False, "busy")
    assert session.closed


async def test_controls_reach_the_session_through_the_registry(app: App) -> None:
    call = await _ringing(app)
    sessions = LiveSessions()
    session = ScriptedSession(call.id, call.organization_id)
    running = asyncio.ensure_future(_run(app, call, session, EchoRuntime(prime_ms=0), sessions))
    for _ in range(10_000):  # until the session is registered (a few turns of the loop)
        if call.id in sessions or running.done():
            break
        await asyncio.sleep(0)
    assert not running.done(), running.result()
    session.queue.put_nowait(AudioIn(b"\x01\x00" * 160, 0))
    await InProcessCallControl(sessions).send(call.organization_id, call.id, SessionControl("hang_up", 0))
    result = await asyncio.wait_for(running, 5)
    assert result.end_reason == "agent_hangup" and session.played == [b"\x01\x00" * 160]
    assert call.id not in sessions
    assert not sessions.deliver(call.id, SessionControl("hang_up", 0))  # gone: nobody to tell


async def test_draining_refuses_new_sessions_and_hangs_up_those_left_at_the_deadline() -> None:
    sessions = LiveSessions()
    lingering = ScriptedSession("c1", 1)
    finishing = ScriptedSession("c2", 1)
    assert sessions.admit("c1", lingering) and sessions.admit("c2", finishing)
    assert not sessions.admit("c2", finishing)  # one session per call

    async def release_later() -> None:
        await asyncio.sleep(0.01)
        sessions.release("c2", finishing)

    async def obey_hang_up() -> None:
        async for event in lingering.events():
            if isinstance(event, SessionControl):
                sessions.release("c1", lingering)
                return

    helpers = [asyncio.ensure_future(release_later()), asyncio.ensure_future(obey_hang_up())]
    draining = asyncio.ensure_future(sessions.drain(0.1, hang_up_grace_seconds=1))
    await asyncio.sleep(0)
    assert not sessions.admit("c3", ScriptedSession("c3", 1))  # refused while it drains
    left = await draining
    await asyncio.gather(*helpers)
    assert left == 0 and len(sessions) == 0
