"""A carrier call end to end through its media stream, against the real app on SQLite and PostgreSQL: the Twilio
and Telnyx emulators dial or take the call, answer, open the ``<Connect><Stream>`` / ``stream_url`` media stream
(tests/support/emulators/media_client.StreamingCallers: a caller's speech made offline, what Parley sends back
kept), and the call's session finishes it: the agent's audio paced, a stereo recording with both legs, a
transcript; the caller hanging up mid-stream ends it once; a transfer from the session reaches the carrier (Twilio's
call updated with ``<Dial>``, Telnyx's ``transfer`` command); an inbound call reaches its agent's session as
``inbound``."""

from __future__ import annotations

import asyncio
import io
import struct
import wave
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from application.ports.media import ConversationOutcome, StreamClosed
from entrypoints.features.carriers import CarrierSettings
from entrypoints.features.media import MediaSettings
from tests.e2e import telnyx_support
from tests.http.calls_support import active_agent, drive, place, unique_phone
from tests.http.media_support import (
    MediaApp,
    RingingCall,
    RuntimeOverride,
    ScriptRuntime,
    ended_call,
    media_app,
    outbox_of,
)
from tests.http.twilio_support import PUBLIC, REQUEST_TIMEOUT, Line, twilio_line
from tests.support.apps import AppPool
from tests.support.emulators.media_client import StreamingCallers
from tests.support.emulators.telnyx import TelnyxEmulator
from tests.support.emulators.twilio import TwilioEmulator

# carrier calls through their media streams at real time, end to end (make test runs it; make test-fast leaves it out)
pytestmark = pytest.mark.slow

SECTIONS = (CarrierSettings(request_timeout_seconds=REQUEST_TIMEOUT), MediaSettings(media_runtime="first_message"))


@pytest.fixture
def emulator() -> Iterator[TwilioEmulator]:
    emulator = TwilioEmulator().start()
    yield emulator
    emulator.stop()


@pytest.fixture
async def served(app_pool: AppPool, tmp_root: Path, sql_url: str) -> AsyncIterator[MediaApp]:
    async with media_app(app_pool, tmp_root, sql_url, public_base_url=PUBLIC, sections=SECTIONS) as app:
        yield app


async def wired(served: MediaApp, emulator: TwilioEmulator, *, hang_up_after: float = 6.0, **agent: Any
                ) -> tuple[Line, dict[str, Any], StreamingCallers]:
    line, made = await twilio_line(served.api, None, emulator, **agent)  # type: ignore[arg-type]
    emulator.media = media = StreamingCallers(app=served.app, hang_up_after=hang_up_after)
    return line, made, media


async def dialled(line: Line, agent: dict[str, Any]) -> tuple[RingingCall, str]:
    placed = await place(line.api, line.tenant, agent, "+14155550123")
    assert placed.status_code == 201, placed.text
    await drive(line.api, line.tenant.organization_id)
    return RingingCall(line.tenant, placed.json()["data"]["id"], ""), line.emulator.only_call().sid


async def recording(served: MediaApp, call: RingingCall, call_log_id: int) -> tuple[list[int], list[int]]:
    link = await served.api.client.get(f"/v2/call-logs/{call_log_id}/recording", headers=call.tenant.headers)
    assert link.status_code == 200, link.text
    parts = urlsplit(link.json()["data"]["url"])
    download = await served.api.client.get(parts.path + (f"?{parts.query}" if parts.query else ""))
    assert download.status_code == 200, download.text
    with wave.open(io.BytesIO(download.content)) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (2, 2, 8000)
        pcm = wav.readframes(wav.getnframes())
    samples = list(struct.unpack(f"<{len(pcm) // 2}h", pcm))
    return samples[0::2], samples[1::2]


async def test_an_outbound_twilio_call_reaches_its_media_session_and_ends_completed(
        served: MediaApp, emulator: TwilioEmulator) -> None:
    line, agent, media = await wired(served, emulator, first_message="Hello {{contact_name}}, this is Parley.")
    call, sid = await dialled(line, agent)
    await emulator.ring(sid)
    await emulator.answer(sid)  # Twilio opens <Connect><Stream>; the caller speaks
    caller = await media.ended(sid)
    assert media.hung_up[sid] is False and caller.closed is not None  # Parley hung up, after its first message
    assert [u.get("Status") for u in emulator.calls[sid].updates] == ["completed"]  # through Twilio's API
    frames = caller.received.media
    assert len(frames) >= 50 and all(len(frame) == 160 for _, frame in frames)
    assert frames[-1][0] - frames[0][0] >= 0.8 * len(frames) * 0.02  # paced, not a burst
    await emulator.complete(sid, duration=3)  # Twilio's completed callback: the session finished the call
    data = await ended_call(served, call)
    assert (data["status"], data["end_reason"]) == ("completed", "agent_hangup")
    log = await served.api.client.get(f"/v2/call-logs/{data['call_log_id']}", headers=line.tenant.headers)
    transcript = log.json()["data"]["transcript"]
    assert transcript[0]["role"] == "agent" and "Parley" in transcript[0]["text"], transcript
    left, right = await recording(served, call, data["call_log_id"])
    assert max(map(abs, left)) > 2000 and max(map(abs, right)) > 2000  # the caller left, the agent right
    assert len(await outbox_of(served, call, "call.ended")) == 1


async def test_the_caller_hanging_up_mid_stream_ends_the_call_once(served: MediaApp,
                                                                    emulator: TwilioEmulator) -> None:
    line, agent, media = await wired(served, emulator, hang_up_after=0.5,
                                     first_message=" ".join(["Hello there, this is a long first message."] * 5))
    media.audio = media.audio[:8000]  # half a second of speech, then the caller hangs up
    call, sid = await dialled(line, agent)
    await emulator.answer(sid)
    await media.ended(sid)
    assert media.hung_up[sid] is True
    await emulator.complete(sid, duration=1)  # the carrier's word, before or after the session's finish
    data = await ended_call(served, call)
    assert (data["status"], data["end_reason"]) == ("completed", "hangup")
    await asyncio.sleep(0.3)
    assert len(await outbox_of(served, call, "call.ended")) == 1


async def test_a_transfer_from_the_session_reaches_twilio(app_pool: AppPool, tmp_root: Path, sql_url: str,
                                                          emulator: TwilioEmulator) -> None:
    async def script(session: Any) -> ConversationOutcome:
        await session.transfer("+14155550199")
        async for event in session.events():
            if isinstance(event, StreamClosed):
                break
        return ConversationOutcome(end_reason="transferred", transferred_to="+14155550199",
                                   transcript=[{"role": "agent", "text": "Transferring you now.", "at_ms": 0}])

    async with media_app(app_pool, tmp_root, sql_url, RuntimeOverride(ScriptRuntime(script)),
                         public_base_url=PUBLIC, sections=SECTIONS) as served:
        line, agent, media = await wired(served, emulator)
        call, sid = await dialled(line, agent)
        await emulator.answer(sid)
        await media.ended(sid)
        assert "<Dial>+14155550199</Dial>" in emulator.calls[sid].twiml.replace("\n", "")
        data = await ended_call(served, call)
        assert (data["status"], data["end_reason"], data["transferred_to"]) == (
            "transferred", "transferred", "+14155550199")
        assert len(await outbox_of(served, call, "call.transferred")) == 1
        assert len(await outbox_of(served, call, "call.ended")) == 1


async def test_a_transfer_from_the_session_reaches_telnyx(app_pool: AppPool, tmp_root: Path, sql_url: str) -> None:
    async def script(session: Any) -> ConversationOutcome:
        await session.transfer("+14155550199")
        async for event in session.events():
            if isinstance(event, StreamClosed):
                break
        return ConversationOutcome(end_reason="transferred", transferred_to="+14155550199",
                                   transcript=[{"role": "agent", "text": "Transferring you now.", "at_ms": 0}])

    emulator = await TelnyxEmulator().start(thread=True)
    try:
        async with media_app(app_pool, tmp_root, sql_url, RuntimeOverride(ScriptRuntime(script)),
                             public_base_url=telnyx_support.PUBLIC, sections=SECTIONS) as served:
            async def deliver(url: str, headers: dict[str, str], body: bytes) -> int:
                return await telnyx_support.deliver_to(served.api, url, headers, body)

            emulator.deliver = deliver
            emulator.media = media = StreamingCallers(app=served.app)
            tenant = await served.api.tenant()
            provider = await served.api.client.post("/v2/telephony/providers", headers=tenant.headers, json={
                "name": "Telnyx", "type": "telnyx", "credentials": emulator.credentials(),
                "settings": {"api_base_url": emulator.base_url}, "is_default": True})
            assert provider.status_code == 201, provider.text
            bought = await served.api.client.post("/v2/telephony/phone-numbers", headers=tenant.headers, json={
                "provider_id": provider.json()["data"]["id"], "phone_number": unique_phone(), "purchase": True})
            assert bought.status_code == 201, bought.text
            placed = await place(served.api, tenant, await active_agent(served.api, tenant), "+14155550123")
            assert placed.status_code == 201, placed.text
            await drive(served.api, tenant.organization_id)
            dialled = await emulator.wait_for_call()
            await emulator.answer(dialled.call_control_id)  # Telnyx opens the stream_url; the session transfers
            await media.ended(dialled.call_control_id)
            assert dialled.transferred_to == ["+14155550199"]  # Call Control's transfer command
            assert [name for name, _ in dialled.commands] == ["transfer"]
            call = RingingCall(tenant, placed.json()["data"]["id"], "")
            data = await ended_call(served, call)
            assert (data["status"], data["end_reason"], data["transferred_to"]) == (
                "transferred", "transferred", "+14155550199")
            assert len(await outbox_of(served, call, "call.transferred")) == 1
            assert len(await outbox_of(served, call, "call.ended")) == 1
    finally:
        await emulator.close()


async def test_an_inbound_twilio_call_reaches_its_agents_session_as_inbound(
        app_pool: AppPool, tmp_root: Path, sql_url: str, emulator: TwilioEmulator) -> None:
    infos: list[Any] = []

    async def script(session: Any) -> ConversationOutcome:
        infos.append(session.info)
        await session.hang_up()
        return ConversationOutcome(end_reason="agent_hangup")

    async with media_app(app_pool, tmp_root, sql_url, RuntimeOverride(ScriptRuntime(script)),
                         public_base_url=PUBLIC, sections=SECTIONS) as served:
        line, agent, media = await wired(served, emulator)
        patched = await served.api.client.patch(f"/v2/telephony/phone-numbers/{line.number['id']}",
                                                headers=line.tenant.headers, json={"inbound_agent_id": agent["id"]})
        assert patched.status_code == 200, patched.text
        inbound, answered = await emulator.inbound_call("+14155550142", line.number["phone_number"])
        assert answered.status_code == 200
        await media.ended(inbound.sid)
        assert [(i.direction, i.channel) for i in infos] == [("inbound", "twilio")]
        calls = (await served.api.client.get("/v2/calls", headers=line.tenant.headers)).json()["data"]
        (taken,) = [c for c in calls if c["direction"] == "inbound"]
        data = await ended_call(served, RingingCall(line.tenant, taken["id"], ""))
        assert data["status"] == "completed"
