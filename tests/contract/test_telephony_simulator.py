"""SimulatedTelephony: the line by test number, the scripted caller it asks the conversation for, the end at the
pick-up plus the conversation's length, a conversation asked for again, limits and real WAV files."""

from __future__ import annotations

import io
import wave
from datetime import UTC, datetime, timedelta
from typing import Any

from adapters.memory.blobs import InMemoryBlobStorage
from adapters.telephony.simulator import OFFER_AGAIN_SECONDS, SimulatedTelephony, SimulatorConfig
from application.ports.telephony import CONVERSATION, DialHandle, DialRequest

T0 = datetime(2026, 1, 5, 9, tzinfo=UTC)
LATER = T0 + timedelta(hours=1)
TRANSCRIPT = [{"role": "agent", "text": "Hello Ada!", "at_ms": 0},
              {"role": "user", "text": "Hi, this is Ada. What is this call about?", "at_ms": 2000}]


def request(to: str, **overrides: object) -> DialRequest:
    values: dict[str, object] = dict(
        call_id="call-1", organization_id=5, from_phone="+1555010099", to_phone=to, agent_name="Desk",
        prompt="You are calling Ada about her solar panel enquiry. Be brief.", first_message="Hello Ada!",
        contact_name="Ada", custom_data={"city": "Oslo"}, max_duration_seconds=600,
    )
    values.update(overrides)
    return DialRequest(**values)  # type: ignore[arg-type]


def result(attempt: int = 1, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {"attempt": attempt, "status": "completed", "end_reason": "hangup", "duration_ms": 16_400,
                              "transcript": TRANSCRIPT, "turns": [{"parley_ms": 0}], "analysis": {"summary": "A call."},
                              "booking": None, "transferred_to": None, "message_left": False}
    values.update(overrides)
    return values


async def run(sim: SimulatedTelephony, to: str, **overrides: object) -> list:
    handle = await sim.dial(request(to, **overrides), T0)
    return (await sim.poll(handle, LATER)).signals


async def test_an_answered_line_asks_for_the_conversation_then_ends_with_its_result_and_a_recording() -> None:
    blobs = InMemoryBlobStorage()
    sim = SimulatedTelephony(blobs, SimulatorConfig())
    handle = await sim.dial(request("+14155550100"), T0)
    assert handle.next_check_at == T0 + timedelta(seconds=4 / 20)
    assert (await sim.poll(handle, T0)).signals == []
    first = await sim.poll(handle, LATER)
    assert [s.kind for s in first.signals] == ["answered", CONVERSATION]
    asked = first.signals[-1]
    assert asked.at == T0 + timedelta(seconds=4 / 20) and asked.details == {"attempt": 1}
    assert asked.caller is not None and asked.caller.lines[0] == "Hi, this is Ada. What is this call about?"
    assert asked.caller.hangs_up and asked.caller.answered_by == "human" and asked.caller.max_duration_seconds == 600
    assert (await sim.poll(first.handle, LATER)).signals == []  # nothing moves until the result comes back
    resumed = await sim.resume(first.handle, CONVERSATION, result())
    assert resumed.next_check_at == T0 + timedelta(seconds=(4 + 16.4) / 20)  # the pick-up plus the conversation
    [ended] = (await sim.poll(resumed, LATER)).signals
    assert (ended.status, ended.end_reason, ended.duration_seconds) == ("completed", "hangup", 17)
    assert ended.transcript == TRANSCRIPT and ended.details["turns"] == [{"parley_ms": 0}]
    assert ended.details["analysis"] == {"summary": "A call."} and ended.details["booking"] is None
    audio = await blobs.get(ended.recording_key or "")
    with wave.open(io.BytesIO(audio or b"")) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (4000, 1, 1)
        assert wav.getnframes() / 4000 == ended.duration_seconds  # the recording lasts the call


async def test_the_callers_by_test_number() -> None:
    sim = SimulatedTelephony(InMemoryBlobStorage(), SimulatorConfig())
    book = (await run(sim, "+1555010006"))[-1].caller
    assert book is not None and "Can I book an appointment?" in book.lines
    transfer = (await run(sim, "+1555010005"))[-1].caller
    assert transfer is not None and "Can I speak to a person, please?" in transfer.lines
    nameless = (await run(sim, "+1555010000", contact_name=None))[-1].caller
    assert nameless is not None and nameless.lines[0] == "Hi. What is this call about?"
    box = await run(sim, "+1555010004", max_duration_seconds=30)
    assert [s.kind for s in box] == [CONVERSATION]  # a voicemail box picks up: nobody answers
    assert box[0].at == T0 + timedelta(seconds=15 / 20)
    assert box[0].caller is not None and (box[0].caller.lines, box[0].caller.answered_by, box[0].caller.start_ms,
                                          box[0].caller.max_duration_seconds) == ((), "machine", 2000, 30)


async def test_outcomes_without_a_conversation_by_test_number() -> None:
    sim = SimulatedTelephony(InMemoryBlobStorage(), SimulatorConfig())
    for number, status, reason in [("+1555010001", "busy", "busy"), ("+1555010002", "no_answer", "no_answer"),
                                   ("+1555010003", "failed", "carrier_error")]:
        signals = await run(sim, number)
        assert [(s.kind, s.status, s.end_reason, s.duration_seconds, s.recording_key) for s in signals] == [
            ("ended", status, reason, 0, None)]


async def test_the_result_decides_the_end_and_a_call_without_words_has_no_recording() -> None:
    sim = SimulatedTelephony(InMemoryBlobStorage(), SimulatorConfig())
    handle = await sim.dial(request("+1555010005"), T0)
    asked = await sim.poll(handle, LATER)
    moved = await sim.resume(asked.handle, CONVERSATION, result(status="transferred", end_reason="transferred",
                                                                transferred_to="+14155550199"))
    [ended] = (await sim.poll(moved, LATER)).signals
    assert (ended.status, ended.transferred_to) == ("transferred", "+14155550199")
    box = await sim.dial(request("+1555010004"), T0)
    asked = await sim.poll(box, LATER)
    hung = await sim.resume(asked.handle, CONVERSATION, result(status="voicemail", end_reason="voicemail_hangup",
                                                               duration_ms=2000, transcript=[]))
    [ended] = (await sim.poll(hung, LATER)).signals
    assert (ended.status, ended.duration_seconds, ended.transcript, ended.recording_key) == (
        "voicemail", 2, [], None)


async def test_a_conversation_not_handed_back_is_asked_for_again_and_a_stale_result_is_ignored() -> None:
    sim = SimulatedTelephony(InMemoryBlobStorage(), SimulatorConfig())
    handle = await sim.dial(request("+1555010000"), T0)
    first = await sim.poll(handle, LATER)
    assert first.handle.next_check_at == LATER + timedelta(seconds=OFFER_AGAIN_SECONDS)
    again = await sim.poll(first.handle, LATER + timedelta(seconds=OFFER_AGAIN_SECONDS))
    assert [(s.kind, s.details) for s in again.signals] == [(CONVERSATION, {"attempt": 2})]
    stale = await sim.resume(again.handle, CONVERSATION, result(attempt=1))
    assert stale == again.handle
    assert await sim.resume(again.handle, "book_appointment", result(attempt=2)) == again.handle
    done = await sim.resume(again.handle, CONVERSATION, result(attempt=2))
    assert [s.kind for s in (await sim.poll(done, LATER + timedelta(hours=1))).signals] == ["ended"]


async def test_the_call_finishes_within_about_a_second_and_a_half_at_the_default_speed() -> None:
    for speed, within in ((1.0, 1.5), (4.0, 0.4)):
        sim = SimulatedTelephony(InMemoryBlobStorage(), SimulatorConfig(speed=speed))
        handle = await sim.dial(request("+1555010000"), T0)
        asked = await sim.poll(handle, LATER)
        done = await sim.resume(asked.handle, CONVERSATION, result(duration_ms=20_000))
        [ended] = (await sim.poll(done, LATER)).signals
        assert ended.at - T0 <= timedelta(seconds=within)


async def test_hang_up_stops_the_line() -> None:
    sim = SimulatedTelephony(InMemoryBlobStorage(), SimulatorConfig())
    handle = await sim.hang_up(await sim.dial(request("+1555010000"), T0), T0)
    polled = await sim.poll(handle, LATER)
    assert polled.signals == [] and polled.handle.next_check_at is None
    assert await sim.resume(handle, CONVERSATION, result()) == handle


async def test_a_call_dialled_before_the_conversation_ran_ends_with_its_own_transcript() -> None:
    sim = SimulatedTelephony(InMemoryBlobStorage(), SimulatorConfig())
    old = {"simulator": 1, "scenario": "complete", "dialed_at": T0.isoformat(), "scale": 0.05, "cursor": 1,
           "events": [{"kind": "answered", "t": 4.0}, {"kind": "ended", "t": 20.0, "status": "completed",
                                                          "end_reason": "hangup", "duration": 16, "record": True}],
           "turns": [{"role": "agent", "text": "Hello!", "at_ms": 0}], "tool_results": {}, "organization_id": 5,
           "call_id": "call-0", "hung_up": False}
    [ended] = (await sim.poll(DialHandle("sim-call-0", old, T0), LATER)).signals
    assert ended.status == "completed" and ended.transcript == [{"role": "agent", "text": "Hello!", "at_ms": 0}]
