"""The agent's real conversation on the carrier emulators, on the offline engines (PocketSphinx, espeak-ng, WebRTC's
voice activity detector, the deterministic model), through the HTTP API and the media-stream websocket: the
Twilio emulator dials, answers and opens the stream; the caller (tests/support/emulators/media_client.py) holds a
timed conversation in espeak-ng's voice, with silence frames between its utterances as a carrier sends them.

The caller asks what only an uploaded document says and the agent answers from it (the document recorded, the
call log with turns, analysis and a recording); books "tomorrow at ten" (the appointment and appointment.booked);
speaks over the agent (a ``clear``, the agent's line cut); asks for a human (the transfer reaches Twilio); stays
silent (the call ends after the process's silence timeout); has a custom tool called with the arguments it said
and survives a failing one; hears placeholders filled from custom_data and the published version, not the draft.
One call goes through the Telnyx emulator.

The offline recognizer listens for the words of the agent's texts (prompt and first message): the prompts below
name what the callers say. Conversations run in real time: these tests are slow.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading
import wave
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import sqlalchemy as sa

from entrypoints.features.carriers import CarrierSettings
from entrypoints.features.media import MediaSettings
from tests.http.calls_support import drive, place, unique_phone
from tests.http.media_support import MediaApp, RingingCall, ended_call, media_app, outbox_of
from tests.http.twilio_support import PUBLIC, REQUEST_TIMEOUT, Line, twilio_line
from tests.support.apps import AppPool
from tests.support.emulators.media_client import (
    HangUp,
    Interrupt,
    Listen,
    MediaStreamCaller,
    Pause,
    Say,
    StreamingCallers,
)
from tests.support.emulators.telnyx import TelnyxEmulator
from tests.support.emulators.twilio import TwilioEmulator

pytestmark = pytest.mark.slow

SILENCE_SECONDS = 3.0
"""The process's silence timeout in these tests (PARLEY_CONVERSATION_SILENCE_TIMEOUT_SECONDS): long enough for the
caller's pauses, short enough for the silent caller's test."""
SECTIONS = (CarrierSettings(request_timeout_seconds=REQUEST_TIMEOUT),
            MediaSettings(conversation_silence_timeout_seconds=SILENCE_SECONDS))
PROMPT = ("You answer questions about the clinic, such as where is the parking, and book visits. "
          "Callers may ask to speak to a human.")
GREETING = "Hello, this is the clinic."
ANSWER = "The parking is behind the building."
TOOLS_PROMPT = ("You tell callers the status of their order and the weather in london or paris. Callers ask what is "
                "the status of my order, or what is the weather in london.")
DOCUMENT = f"Visiting the clinic. {ANSWER} Visits last half an hour."


@pytest.fixture
def emulator() -> Iterator[TwilioEmulator]:
    emulator = TwilioEmulator().start()
    yield emulator
    emulator.stop()


@pytest.fixture
async def served(app_pool: AppPool, tmp_root: Path, sql_url: str) -> AsyncIterator[MediaApp]:
    async with media_app(app_pool, tmp_root, sql_url, public_base_url=PUBLIC, sections=SECTIONS) as app:
        yield app


@pytest.fixture
async def served_sqlite(app_pool: AppPool, tmp_root: Path, sqlite_url: str) -> AsyncIterator[MediaApp]:
    """For the tests whose database plays no part of what they show (SQLite only: the machine is shared)."""
    async with media_app(app_pool, tmp_root, sqlite_url, public_base_url=PUBLIC, sections=SECTIONS) as app:
        yield app


async def _json(served: MediaApp, line_or_headers: Any, method: str, path: str, expected: int, **kwargs: Any) -> Any:
    headers = line_or_headers.tenant.headers if isinstance(line_or_headers, Line) else line_or_headers
    response = await served.api.client.request(method, f"/v2{path}", headers=headers, **kwargs)
    assert response.status_code == expected, response.text
    return response.json()["data"]


async def _line(served: MediaApp, emulator: TwilioEmulator, script: list[Any], *, hang_up_after: float = 2.0,
                **agent: Any) -> tuple[Line, dict[str, Any], StreamingCallers]:
    """A tenant with a Twilio line on the emulator and a published agent (``agent``'s fields over the clinic's
    prompt and greeting); the emulator's caller plays ``script``."""
    fields = {"prompt": PROMPT, "first_message": GREETING, "timezone": "UTC", **agent}
    line, made = await twilio_line(served.api, None, emulator, **fields)  # type: ignore[arg-type]
    emulator.media = media = StreamingCallers(app=served.app, hang_up_after=hang_up_after, script=script)
    return line, made, media


async def _converse(served: MediaApp, line: Line, agent: dict[str, Any], media: StreamingCallers,
                    **call: Any) -> tuple[RingingCall, str, MediaStreamCaller, dict[str, Any]]:
    """Place the call, let the worker dial it, answer it at Twilio: the conversation runs until one side hangs
    up; the call once it is final."""
    placed = await place(line.api, line.tenant, agent, "+14155550123", **call)
    assert placed.status_code == 201, placed.text
    await drive(line.api, line.tenant.organization_id)
    call_ref = RingingCall(line.tenant, placed.json()["data"]["id"], "")
    sid = line.emulator.only_call().sid
    await line.emulator.answer(sid)
    caller = await media.ended(sid, within=90)
    data = await ended_call(served, call_ref, within=15)
    return call_ref, sid, caller, data


async def _log(served: MediaApp, line: Line, data: dict[str, Any]) -> dict[str, Any]:
    assert data["call_log_id"], data
    return dict(await _json(served, line, "GET", f"/call-logs/{data['call_log_id']}", 200))


def _said(transcript: list[dict[str, Any]], role: str) -> list[str]:
    return [entry["text"] for entry in transcript if entry["role"] == role]


# ---------------------------------------------------------------------------------------------- knowledge


async def test_the_agent_answers_from_an_uploaded_document_and_the_call_log_has_turns_analysis_and_recording(
        served: MediaApp, emulator: TwilioEmulator) -> None:
    script = [Listen(), Say("where is the parking", words_per_minute=140), Listen(), HangUp()]
    line, agent, media = await _line(served, emulator, script)
    kb = await _json(served, line, "POST", "/knowledge-bases", 201, json={"name": "Clinic", "agent_id": agent["id"]})
    uploaded = await _json(served, line, "POST", f"/knowledge-bases/{kb['id']}/documents", 201, files={
        "files": ("visitors.txt", DOCUMENT.encode(), "text/plain")})
    document_id = uploaded["documents"][0]["document_id"]
    _, _, caller, data = await _converse(served, line, agent, media)
    assert caller.received.clears == []  # nobody interrupted anybody
    assert (data["status"], data["end_reason"]) == ("completed", "hangup"), data
    log = await _log(served, line, data)
    transcript = log["transcript"]
    assert transcript[0]["role"] == "agent" and transcript[0]["text"] == GREETING, transcript
    (question,) = [entry for entry in transcript if entry["role"] == "user"]
    assert "parking" in question["text"], transcript
    assert question["knowledge_documents"] == [document_id], question
    assert ANSWER in _said(transcript, "agent")[1], transcript
    assert all(isinstance(entry["at_ms"], int) for entry in transcript)
    assert [entry["at_ms"] for entry in transcript] == sorted(entry["at_ms"] for entry in transcript)
    (turn,) = log["turns"]
    assert set(turn) >= {"end_of_speech_to_first_audio_ms", "stt_ms", "llm_first_token_ms", "tts_first_audio_ms",
                         "parley_ms"}, turn
    assert 0 < turn["end_of_speech_to_first_audio_ms"] < 10_000 and turn["stt_ms"] > 0, turn
    assert turn["parley_ms"] <= turn["end_of_speech_to_first_audio_ms"], turn
    assert log["analysis"]["successful"] is True and log["analysis"]["summary"], log["analysis"]
    link = await _json(served, line, "GET", f"/call-logs/{data['call_log_id']}/recording", 200)
    parts = urlsplit(link["url"])
    download = await served.api.client.get(parts.path + (f"?{parts.query}" if parts.query else ""))
    assert download.status_code == 200
    with wave.open(io.BytesIO(download.content)) as wav:
        assert (wav.getnchannels(), wav.getframerate()) == (2, 8000)
        assert wav.getnframes() / 8000 >= 3  # the greeting, the question and the answer


# ---------------------------------------------------------------------------------------------- booking


async def test_a_caller_books_tomorrow_at_ten_and_the_appointment_exists(served: MediaApp,
                                                                        emulator: TwilioEmulator) -> None:
    script = [Listen(), Say("tomorrow at ten please", words_per_minute=140), Listen(quiet=1.5), HangUp()]
    line, _, media = await _line(served, emulator, script, name="Booker")
    calendar = await _json(served, line, "POST", "/scheduling/calendars", 201, json={"name": "Desk",
                                                                                      "timezone": "UTC"})
    for weekday in range(7):
        await _json(served, line, "POST", f"/scheduling/calendars/{calendar['id']}/rules", 201,
                    json={"weekday": weekday, "start_time": "08:00", "end_time": "18:00"})
    agent = await _json(served, line, "POST", "/agents", 201, json={
        "name": "Clinic desk", "prompt": PROMPT, "first_message": GREETING, "calendar_id": calendar["id"],
        "timezone": "UTC"})
    await _json(served, line, "POST", f"/agents/{agent['id']}/publish", 200)
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date()
    call, _, _, data = await _converse(served, line, agent, media)
    found = await _json(served, line, "GET", f"/scheduling/appointments?calendar_id={calendar['id']}", 200)
    appointments = found["appointments"] if isinstance(found, dict) else found
    transcript = (await _log(served, line, data))["transcript"]
    assert len(appointments) == 1, transcript
    (booked,) = appointments
    assert datetime.fromisoformat(booked["slot_start"].replace("Z", "+00:00")) == datetime(
        tomorrow.year, tomorrow.month, tomorrow.day, 10, tzinfo=UTC), (booked, transcript)
    assert booked["call_id"] == call.call_id
    assert any("booked" in text for text in _said(transcript, "agent")), transcript
    async with served.api.worker()() as unit:
        from adapters.sql.tables import outbox_events
        from adapters.sql.uow import SqlUnitOfWork

        conn = await (await unit.get(SqlUnitOfWork)).connection()
        rows = (await conn.execute(sa.select(outbox_events.c.data).where(
            outbox_events.c.organization_id == line.tenant.organization_id,
            outbox_events.c.type == "appointment.booked"))).all()
    assert [dict(row.data)["id"] for row in rows] == [booked["id"]]


# ---------------------------------------------------------------------------------------------- barge-in


async def test_a_caller_speaking_over_the_agent_stops_it_and_the_line_is_cut(served_sqlite: MediaApp,
                                                                           emulator: TwilioEmulator) -> None:
    served = served_sqlite
    long_greeting = ("Hello, this is the clinic. We are open every day from eight in the morning to six in the "
                     "evening, and we are happy to answer your questions about the clinic or to book a visit.")
    script = [Interrupt("where is the parking", after=1.0, words_per_minute=140), Listen(), HangUp()]
    line, agent, media = await _line(served, emulator, script, first_message=long_greeting)
    kb = await _json(served, line, "POST", "/knowledge-bases", 201, json={"name": "Clinic", "agent_id": agent["id"]})
    await _json(served, line, "POST", f"/knowledge-bases/{kb['id']}/documents", 201, files={
        "files": ("visitors.txt", DOCUMENT.encode(), "text/plain")})
    _, _, caller, data = await _converse(served, line, agent, media)
    assert len(caller.received.clears) >= 1  # Twilio was told to drop the agent's buffered audio
    (spoken_at, _, _) = caller.said[0]
    assert caller.received.clears[0] - spoken_at < 1.0  # soon after the caller started speaking
    transcript = (await _log(served, line, data))["transcript"]
    greeting = _said(transcript, "agent")[0]
    assert greeting and long_greeting.startswith(greeting.rstrip(".")) and len(greeting) < len(long_greeting), (
        transcript)
    assert any(ANSWER in text for text in _said(transcript, "agent")[1:]), transcript  # the question is answered


# ---------------------------------------------------------------------------------------------- transfer and silence


async def test_a_caller_asking_for_a_human_is_transferred_at_twilio(served_sqlite: MediaApp,
                                                                    emulator: TwilioEmulator) -> None:
    served = served_sqlite
    script = [Listen(), Say("can i speak to a human", words_per_minute=140), Pause(8)]
    line, agent, media = await _line(served, emulator, script, transfer_phone="+14155550199")
    call, sid, _, data = await _converse(served, line, agent, media)
    assert "<Dial>+14155550199</Dial>" in (emulator.calls[sid].twiml or "").replace("\n", "")
    assert (data["status"], data["end_reason"], data["transferred_to"]) == (
        "transferred", "transferred", "+14155550199"), data
    assert len(await outbox_of(served, call, "call.transferred")) == 1
    transcript = (await _log(served, line, data))["transcript"]
    assert "transfer" in _said(transcript, "agent")[-1], transcript


async def test_a_silent_caller_is_told_goodbye_and_the_call_ends(served_sqlite: MediaApp,
                                                                 emulator: TwilioEmulator) -> None:
    served = served_sqlite
    script = [Listen(), Pause(SILENCE_SECONDS + 8)]  # silence frames, as a carrier sends them
    line, agent, media = await _line(served, emulator, script)
    _, sid, caller, data = await _converse(served, line, agent, media)
    assert media.hung_up[sid] is False and caller.closed is not None  # Parley hung up
    assert (data["status"], data["end_reason"]) == ("completed", "silence_timeout"), data
    transcript = (await _log(served, line, data))["transcript"]
    assert _said(transcript, "user") == [] and "haven't heard from you" in _said(transcript, "agent")[-1]
    assert [u.get("Status") for u in emulator.calls[sid].updates] == ["completed"]


# ---------------------------------------------------------------------------------------------- custom tools


class ToolServer:
    """A local HTTP server for the agent's custom tools: ``/weather`` answers a forecast, ``/order`` fails (500);
    every request's path and JSON body is kept."""

    def __init__(self) -> None:
        seen: list[tuple[str, Any, dict[str, str]]] = []
        self.seen = seen

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                seen.append((self.path, json.loads(body or b"null"), dict(self.headers)))
                status, answer = (200, {"forecast": "sunny"}) if self.path == "/weather" else (500, {"error": "down"})
                payload = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


async def test_a_custom_tool_gets_the_callers_arguments_and_a_failing_one_is_survived(
        served_sqlite: MediaApp, emulator: TwilioEmulator) -> None:
    served = served_sqlite
    tools = ToolServer()
    try:
        script = [Listen(), Say("what is the status of my order", words_per_minute=140), Listen(),
                  Say("what is the weather in london", words_per_minute=140), Listen(), HangUp()]
        line, agent, media = await _line(
            served, emulator, script,
            prompt=TOOLS_PROMPT,
            tools=[{"type": "http", "name": "order_status", "description": "Where an order is",
                    "url": f"{tools.url}/order", "timeout_ms": 2000},
                   {"type": "http", "name": "weather", "description": "The weather forecast of a city",
                    "url": f"{tools.url}/weather", "timeout_ms": 2000, "parameters": {
                        "type": "object", "required": ["city"],
                        "properties": {"city": {"type": "string", "enum": ["london", "paris"]}}}}])
        _, _, _, data = await _converse(served, line, agent, media)
    finally:
        tools.close()
    transcript = (await _log(served, line, data))["transcript"]
    assert [(path, body) for path, body, _ in tools.seen] == [("/order", {}), ("/weather", {"city": "london"})], (
        transcript)
    assert all("x-webhook-signature" in {k.lower() for k in headers} for _, _, headers in tools.seen)  # signed
    agent_said = _said(transcript, "agent")
    assert any("didn't work" in text for text in agent_said), transcript  # the failure told, the call went on
    assert any("sunny" in text for text in agent_said), transcript
    assert data["end_reason"] == "hangup"


# ---------------------------------------------------------------------------------------------- the published version


async def test_the_published_version_runs_with_placeholders_filled_from_custom_data(
        served_sqlite: MediaApp, emulator: TwilioEmulator) -> None:
    served = served_sqlite
    script = [Listen(), HangUp()]
    line, agent, media = await _line(served, emulator, script, first_message="Hello {{name}}, this is the clinic.")
    await _json(served, line, "PATCH", f"/agents/{agent['id']}", 200,
                json={"first_message": "This draft greeting is never heard."})
    _, _, _, data = await _converse(served, line, agent, media, custom_data={"name": "Grace"})
    transcript = (await _log(served, line, data))["transcript"]
    assert _said(transcript, "agent") == ["Hello Grace, this is the clinic."], transcript
    log = await _log(served, line, data)
    assert log["agent_version"] == 1


# ---------------------------------------------------------------------------------------------- Telnyx


async def test_a_telnyx_call_holds_the_same_conversation(served_sqlite: MediaApp) -> None:
    served = served_sqlite
    api = served.api
    emulator = await TelnyxEmulator().start()

    async def deliver(url: str, headers: dict[str, str], body: bytes) -> int:
        parts = urlsplit(url)
        assert url.startswith(PUBLIC), url
        response = await api.client.post(parts.path + (f"?{parts.query}" if parts.query else ""), content=body,
                                         headers=headers)
        return response.status_code

    emulator.deliver = deliver
    emulator.media = media = StreamingCallers(app=served.app, hang_up_after=2.0, script=[
        Listen(), Say("where is the parking", words_per_minute=140), Listen(), HangUp()])
    try:
        tenant = await api.tenant()
        provider = await _json(served, tenant.headers, "POST", "/telephony/providers", 201, json={
            "name": "Telnyx", "type": "telnyx", "credentials": emulator.credentials(),
            "settings": {"api_base_url": emulator.base_url}, "is_default": True})
        await _json(served, tenant.headers, "POST", "/telephony/phone-numbers", 201, json={
            "provider_id": provider["id"], "phone_number": unique_phone(), "purchase": True,
            "capabilities": {"voice": True, "sms": False}})
        agent = await _json(served, tenant.headers, "POST", "/agents", 201, json={
            "name": "Clinic", "prompt": PROMPT, "first_message": GREETING})
        await _json(served, tenant.headers, "POST", f"/agents/{agent['id']}/publish", 200)
        kb = await _json(served, tenant.headers, "POST", "/knowledge-bases", 201,
                         json={"name": "Clinic", "agent_id": agent["id"]})
        await _json(served, tenant.headers, "POST", f"/knowledge-bases/{kb['id']}/documents", 201, files={
            "files": ("visitors.txt", DOCUMENT.encode(), "text/plain")})
        placed = await place(api, tenant, agent, "+14155550123")
        assert placed.status_code == 201, placed.text
        await drive(api, tenant.organization_id)
        dialled = await emulator.wait_for_call()
        await emulator.answer(dialled.call_control_id)
        caller = await media.ended(dialled.call_control_id, within=90)
        assert caller.carrier == "telnyx"
        call = RingingCall(tenant, placed.json()["data"]["id"], "")
        await emulator.hangup(dialled.call_control_id)
        data = await ended_call(served, call, within=15)
        assert data["status"] == "completed", data
        log = await _json(served, tenant.headers, "GET", f"/call-logs/{data['call_log_id']}", 200)
        assert any(ANSWER in text for text in _said(log["transcript"], "agent")), log["transcript"]
    finally:
        await asyncio.wait_for(emulator.close(), 10)
