"""A carrier call whose media session is live, against the real app (SQLite and PostgreSQL): the carrier's end of
the call reaches the session, which finishes it once with its transcript; past a deadline without a session the
carrier's word ends it; an answering machine detected after the stream began reaches the session; the session's
direction comes from the stream (Twilio's parameter, Telnyx's URL)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import pytest

from application.calls import SESSION_FINISH_DEADLINE, CarrierVoiceUpdates
from application.ports.calls import CallRepository
from application.ports.carriers import VoiceUpdate
from application.ports.media import ConversationOutcome, SessionControl, StreamClosed
from application.ports.platform import UnitOfWork
from tests.http.media_support import (
    MediaApp,
    RingingCall,
    RuntimeOverride,
    ScriptRuntime,
    ended_call,
    media_app,
    open_stream,
    outbox_of,
    ringing_call,
    sine,
)
from tests.support.apps import AppPool

# end to end through a carrier's protocol (make test runs it; make test-fast leaves it out)
pytestmark = pytest.mark.slow


async def carrier_says(served: MediaApp, call: RingingCall, state: Literal["completed", "answered"],
                       at: datetime, answered_by: Literal["human", "machine", "unknown"] | None = None
                       ) -> dict[str, Any]:
    """What a verified status callback (or a reconciliation) applies to the call: its telephony state after."""
    async with served.api.worker()() as unit:
        live = await (await unit.get(CallRepository)).get_for_update(call.tenant.organization_id, call.call_id)
        assert live is not None
        after = await (await unit.get(CarrierVoiceUpdates)).apply(
            live, VoiceUpdate("CAtest", state, at, answered_by=answered_by, duration_seconds=3), at)
        await (await unit.get(UnitOfWork)).commit()
        return {"status": after.status, **after.telephony_state}


def until_closed(seen: list[Any]) -> Any:
    async def script(session: Any) -> ConversationOutcome:
        async for event in session.events():
            seen.append(event)
            if isinstance(event, SessionControl) and event.command == "hang_up":
                await session.hang_up()
                return ConversationOutcome(end_reason=event.details.get("end_reason", "hangup"),
                                           transcript=[{"role": "user", "text": "bye", "at_ms": 10}])
            if isinstance(event, StreamClosed):
                break
        return ConversationOutcome(end_reason="hangup")

    return script


async def test_the_carriers_end_of_a_live_call_is_finished_by_its_session_once(
        app_pool: AppPool, tmp_root: Path, sql_url: str) -> None:
    seen: list[Any] = []
    async with media_app(app_pool, tmp_root, sql_url, RuntimeOverride(ScriptRuntime(until_closed(seen)))) as served:
        call = await ringing_call(served)
        caller = await open_stream(served, call.path)
        await caller.play(sine(200), realtime=False)
        await ended_call(served, call, within=0.3)  # answered by the stream meanwhile
        state = await carrier_says(served, call, "completed", datetime.now(UTC))
        assert state["status"] == "in_progress" and state["media"] == "live" and "line_ended_at" in state
        assert await caller.finished(10) is not None  # the session hung up
        data = await ended_call(served, call)
        assert (data["status"], data["end_reason"]) == ("completed", "hangup")
        assert next(c for c in seen if isinstance(c, SessionControl)).command == "hang_up"
        again = await carrier_says(served, call, "completed", datetime.now(UTC))  # a replay changes nothing
        assert again["status"] == "completed"
        assert len(await outbox_of(served, call, "call.ended")) == 1


async def test_a_live_call_no_session_finishes_ends_by_the_carriers_word_after_the_deadline(
        app_pool: AppPool, tmp_root: Path, sql_url: str) -> None:
    async with media_app(app_pool, tmp_root, sql_url) as served:
        call = await ringing_call(served)
        async with served.api.worker()() as unit:  # a session went live in a process that died since
            calls = await unit.get(CallRepository)
            live = await calls.get_for_update(call.tenant.organization_id, call.call_id)
            assert live is not None
            live, _ = live.move("answer", datetime.now(UTC), telephony_state={"media": "live"})
            await calls.update(live)
            await (await unit.get(UnitOfWork)).commit()
        now = datetime.now(UTC)
        first = await carrier_says(served, call, "completed", now)
        assert first["status"] == "in_progress"
        assert (await carrier_says(served, call, "completed", now + timedelta(seconds=5)))["status"] == "in_progress"
        late = await carrier_says(served, call, "completed", now + SESSION_FINISH_DEADLINE)
        assert late["status"] == "completed"
        assert len(await outbox_of(served, call, "call.ended")) == 1


async def test_a_machine_detected_after_the_stream_began_reaches_the_session(
        app_pool: AppPool, tmp_root: Path, sql_url: str) -> None:
    seen: list[Any] = []
    async with media_app(app_pool, tmp_root, sql_url, RuntimeOverride(ScriptRuntime(until_closed(seen)))) as served:
        call = await ringing_call(served)
        caller = await open_stream(served, call.path)
        await caller.play(sine(100), realtime=False)
        await ended_call(served, call, within=0.3)
        state = await carrier_says(served, call, "answered", datetime.now(UTC), answered_by="machine")
        assert state["status"] == "in_progress" and state["answered_by"] == "machine"  # not hung up: the session
        for _ in range(200):
            if any(isinstance(e, SessionControl) for e in seen):
                break
            await asyncio.sleep(0.02)
        control = next(e for e in seen if isinstance(e, SessionControl))
        assert (control.command, control.details) == ("machine_detected", {"answered_by": "machine"})
        await caller.hang_up()
        assert (await ended_call(served, call))["status"] == "completed"


@pytest.mark.parametrize("carrier", ["twilio", "telnyx"])
async def test_an_inbound_stream_gives_its_session_the_inbound_direction(
        app_pool: AppPool, tmp_root: Path, sqlite_url: str, carrier: Literal["twilio", "telnyx"]) -> None:
    infos: list[Any] = []

    async def script(session: Any) -> ConversationOutcome:
        infos.append(session.info)
        await session.hang_up()
        return ConversationOutcome(end_reason="agent_hangup")

    async with media_app(app_pool, tmp_root, sqlite_url, RuntimeOverride(ScriptRuntime(script))) as served:
        call = await ringing_call(served)
        if carrier == "twilio":  # <Parameter name="direction" value="inbound"/> in the answer's TwiML
            caller = await open_stream(served, call.path, "twilio", parameters={"direction": "inbound"})
        else:  # Telnyx's stream_url carries it
            caller = await open_stream(served, call.path + "?direction=inbound", "telnyx")
        assert await caller.finished(10) is not None
        assert [(i.direction, i.channel) for i in infos] == [("inbound", carrier)]
