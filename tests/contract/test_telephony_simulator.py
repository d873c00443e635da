"""SimulatedTelephony: timelines by test number, the conversation, tools, limits and real WAV files."""

from __future__ import annotations

import io
import wave
from datetime import UTC, datetime, timedelta

from adapters.memory.blobs import InMemoryBlobStorage
from adapters.telephony.simulator import SimulatedTelephony, SimulatorConfig
from application.ports.telephony import DialRequest

T0 = datetime(2026, 1, 5, 9, tzinfo=UTC)
LATER = T0 + timedelta(hours=1)


def request(to: str, **overrides: object) -> DialRequest:
    values: dict[str, object] = dict(
        call_id="call-1", organization_id=5, from_phone="+1555010099", to_phone=to, agent_name="Desk",
        prompt="You are calling Ada about her solar panel enquiry. Be brief.", first_message="Hello Ada!",
        contact_name="Ada", custom_data={"city": "Oslo", "plan": "basic", "nested": {"x": 1}},
        max_duration_seconds=600,
    )
    values.update(overrides)
    return DialRequest(**values)  # type: ignore[arg-type]


async def run(sim: SimulatedTelephony, to: str, **overrides: object) -> list:
    handle = await sim.dial(request(to, **overrides), T0)
    result = await sim.poll(handle, LATER)
    return result.signals


async def test_a_normal_call_is_answered_then_completes_with_a_recording() -> None:
    blobs = InMemoryBlobStorage()
    sim = SimulatedTelephony(blobs, SimulatorConfig())
    handle = await sim.dial(request("+14155550100"), T0)
    assert handle.next_check_at == T0 + timedelta(seconds=4 / 20)
    assert (await sim.poll(handle, T0)).signals == []
    signals = (await sim.poll(handle, LATER)).signals
    assert [s.kind for s in signals] == ["answered", "ended"]
    ended = signals[-1]
    assert ended.status == "completed" and ended.end_reason == "hangup" and ended.duration_seconds > 10
    texts = [t["text"] for t in ended.transcript]
    assert texts[0] == "Hello Ada!"
    assert any("solar panel enquiry" in t for t in texts)
    assert any("city as Oslo" in t for t in texts) and not any("nested" in t for t in texts)
    assert [t["at_ms"] for t in ended.transcript] == sorted(t["at_ms"] for t in ended.transcript)
    audio = await blobs.get(ended.recording_key or "")
    with wave.open(io.BytesIO(audio or b"")) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (4000, 1, 1)
        assert wav.getnframes() / 4000 == ended.duration_seconds  # the recording lasts the call


async def test_the_call_finishes_within_about_three_seconds_at_the_default_speed() -> None:
    sim = SimulatedTelephony(InMemoryBlobStorage(), SimulatorConfig())
    ended = (await run(sim, "+1555010000"))[-1]
    assert ended.at - T0 <= timedelta(seconds=3)
    faster = SimulatedTelephony(InMemoryBlobStorage(), SimulatorConfig(speed=4))
    assert (await run(faster, "+1555010000"))[-1].at - T0 <= timedelta(seconds=0.75)


async def test_outcomes_by_test_number() -> None:
    sim = SimulatedTelephony(InMemoryBlobStorage(), SimulatorConfig())
    for number, status, reason in [("+1555010001", "busy", "busy"), ("+1555010002", "no_answer", "no_answer"),
                                   ("+1555010003", "failed", "carrier_error")]:
        signals = await run(sim, number)
        assert [(s.kind, s.status, s.end_reason, s.duration_seconds) for s in signals] == [
            ("ended", status, reason, 0)]
    transferred = await run(sim, "+1555010005", transfer_phone="+14155550199")
    assert [s.kind for s in transferred] == ["answered", "ended"]
    assert transferred[-1].status == "transferred" and transferred[-1].transferred_to == "+14155550199"


async def test_voicemail_follows_the_agent_setting() -> None:
    sim = SimulatedTelephony(InMemoryBlobStorage(), SimulatorConfig())
    left = (await run(sim, "+1555010004", voicemail_action="leave_message", voicemail_message="Call us back"))[-1]
    assert left.status == "voicemail" and left.end_reason == "voicemail_message_left"
    assert [t["text"] for t in left.transcript] == ["Call us back"] and left.recording_key
    hung = (await run(sim, "+1555010004"))[-1]
    assert hung.end_reason == "voicemail_hangup" and hung.transcript == [] and hung.recording_key is None


async def test_max_duration_cuts_the_conversation() -> None:
    sim = SimulatedTelephony(InMemoryBlobStorage(), SimulatorConfig())
    ended = (await run(sim, "+1555010000", max_duration_seconds=10))[-1]
    assert ended.end_reason == "max_duration" and ended.duration_seconds == 10
    assert all(t["at_ms"] < 10_000 for t in ended.transcript)


async def test_booking_waits_for_the_tool_and_reports_its_answer() -> None:
    sim = SimulatedTelephony(InMemoryBlobStorage(), SimulatorConfig())
    handle = await sim.dial(request("+1555010006", calendar_id=9), T0)
    first = await sim.poll(handle, LATER)
    assert [s.kind for s in first.signals] == ["answered", "tool"] and first.signals[-1].tool == "book_appointment"
    again = await sim.poll(first.handle, LATER)  # nothing moves until the tool answers
    assert [s.kind for s in again.signals] == ["tool"]
    booking = {"slot_start": "2026-01-06T10:00:00Z", "timezone": "Europe/Berlin"}
    resumed = await sim.resume(first.handle, "book_appointment", booking)
    ended = (await sim.poll(resumed, LATER)).signals[-1]
    assert ended.status == "completed" and ended.details["booking"] == booking
    assert any("booked for Tuesday, January 6 at 11:00 AM." in t["text"] for t in ended.transcript)
    without_zone = await sim.resume(first.handle, "book_appointment", {"slot_start": "2026-01-06T10:00:00Z"})
    assert any("booked for Tuesday, January 6 at 10:00 AM UTC." in t["text"]
               for t in (await sim.poll(without_zone, LATER)).signals[-1].transcript)
    no_calendar = (await run(sim, "+1555010006"))
    assert [s.kind for s in no_calendar] == ["answered", "ended"]
    assert any("couldn't find an open slot" in t["text"] for t in no_calendar[-1].transcript)


async def test_hang_up_stops_the_line() -> None:
    sim = SimulatedTelephony(InMemoryBlobStorage(), SimulatorConfig())
    handle = await sim.hang_up(await sim.dial(request("+1555010000"), T0), T0)
    result = await sim.poll(handle, LATER)
    assert result.signals == [] and result.handle.next_check_at is None
