"""The conversation loop on a scripted media session and engines of fixed latency, all on virtual time: the
greeting, turns and their latency, barge-in, transfer, ending the call, silence, the maximum duration, voicemail,
engine failures, and the after-call analysis."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from application.conversation.config import END_CALL, TRANSFER_CALL, ConversationConfig
from application.conversation.session import SILENCE_GOODBYE, TRANSFER_FAILED, TROUBLE, AgentConversation
from application.ports.engines import EngineError, ToolCall
from application.ports.media import ConversationOutcome, MediaEvent, StreamClosed
from tests.support.conversation import (
    Close,
    Control,
    FakeMediaSession,
    FakeTurnDetectors,
    FixedEngineFactory,
    Say,
    ScriptedModel,
    Silence,
    Step,
    VirtualTime,
    fake_engines,
)

CONFIG = ConversationConfig(call_id="call-1", organization_id=1, agent_id=7, agent_name="Ava",
                            prompt="You are Ava, the front desk of Parley Dental.",
                            first_message="Hello Ada! How can I help you today?", transfer_phone="+15550100999",
                            built_in_tools=(TRANSFER_CALL, END_CALL))
FIRST_SENTENCE = "We are open from nine in the morning until five in the afternoon on weekdays."
SECOND_SENTENCE = "On Saturdays we open at ten and close at two, so there is plenty of time to visit us."
LONG_ANSWER = f"{FIRST_SENTENCE} {SECOND_SENTENCE}"


class Run:
    def __init__(self, script: list[Step], replies: list[Any] | None = None, *, config: ConversationConfig = CONFIG,
                 **session: Any) -> None:
        self.time = VirtualTime()
        self.model = ScriptedModel(self.time, replies or [])
        self.engines = fake_engines(self.time, self.model)
        self.session = FakeMediaSession(script, time=self.time, **session)
        self.config = config

    async def __call__(self) -> ConversationOutcome:
        config = self.config

        class Configs:
            async def for_call(self, organization_id: int, call_id: str) -> ConversationConfig:
                return config

        return await AgentConversation(Configs(), FixedEngineFactory(self.engines)).run(self.session)

    @property
    def tts(self) -> Any:
        return self.engines.tts


async def test_the_agent_greets_first_and_marks_each_sentence() -> None:
    run = Run([Silence(4000), Close()])
    outcome = await run()
    assert outcome.end_reason == "hangup"
    assert run.tts.spoken == ["Hello Ada! How can I help you today?"]
    # the first audio after the synthesis latency (50 ms, seen at the next 20 ms frame); 8 words of 200 ms
    assert outcome.transcript == [{"role": "agent", "text": "Hello Ada! How can I help you today?", "at_ms": 60}]
    assert run.session.agent_audio_ms() == 8 * 200
    assert [name for _, name in run.session.marks_played] == ["s1"]
    assert outcome.turns == []  # no caller turn
    assert outcome.analysis == {"summary": "", "successful": None, "data": {}}  # nothing to analyse


async def test_a_caller_turn_is_transcribed_answered_sentence_by_sentence_and_timed() -> None:
    run = Run([Silence(2000), Say("What are your opening hours?", 1000), Silence(4000), Close()],
              [[LONG_ANSWER]])
    outcome = await run()
    assert run.engines.stt.heard == ["What are your opening hours?"]
    request = run.model.conversation_requests()[0]
    assert request.messages[0].role == "system" and "Parley Dental" in request.messages[0].content
    assert [(m.role, m.content) for m in request.messages[1:]] == [
        ("assistant", "Hello Ada! How can I help you today?"), ("user", "What are your opening hours?")]
    # two sentences, synthesized as each completed
    assert run.tts.spoken[1:] == [FIRST_SENTENCE, SECOND_SENTENCE]
    user = outcome.transcript[1]
    assert user == {"role": "user", "text": "What are your opening hours?", "at_ms": 2020}
    agent = outcome.transcript[2]
    assert agent["role"] == "agent" and agent["text"] == LONG_ANSWER
    # the turn ends 500 ms after the last speech frame; then STT 100 ms, the first token 200 ms, the first sentence
    # complete 14 tokens later (10 ms each), its first audio 50 ms later: engines only (time moves in 20 ms frames)
    assert outcome.turns == [{"end_of_speech_to_first_audio_ms": 660, "stt_ms": 100, "llm_first_token_ms": 200,
                              "tts_first_audio_ms": 60, "parley_ms": 0}]
    assert agent["at_ms"] == 3000 + 500 + 660
    assert outcome.analysis == {"summary": "A call.", "successful": True, "data": {}}


async def test_the_words_before_the_detector_is_sure_are_transcribed_with_the_utterance() -> None:
    # the detector starts the utterance at the 8th speech frame (160 ms), inside "parking": the 300 ms before it
    # are kept, so the recognizer hears the question from its first word
    run = Run([Silence(1000), Say("Where is the", 100), Say("parking?", 600), Silence(2000), Close()],
              [["Behind the building."]], config=replace(CONFIG, first_message=None))
    run.engines = replace(run.engines, turns=FakeTurnDetectors(start_frames=8))
    outcome = await run()
    assert run.engines.stt.heard == ["Where is the"]
    assert outcome.transcript[0] == {"role": "user", "text": "Where is the", "at_ms": 1160}


async def test_only_the_last_300_ms_before_the_utterance_go_with_it() -> None:
    # a murmur too short to start an utterance (7 frames of the 8), then 600 ms of silence: not the caller's words
    run = Run([Silence(1000), Say("Mm", 140), Silence(600), Say("Where is the", 100), Say("parking?", 600),
               Silence(2000), Close()], [["Behind the building."]], config=replace(CONFIG, first_message=None))
    run.engines = replace(run.engines, turns=FakeTurnDetectors(start_frames=8))
    await run()
    assert run.engines.stt.heard == ["Where is the"]


async def test_barge_in_clears_in_the_same_frame_and_cuts_the_agent_line_to_what_was_heard() -> None:
    run = Run([Silence(500), Say("When are you open?", 600), Silence(2000), Say("Sorry, on Saturday?", 600),
               Silence(3000), Close()], [[LONG_ANSWER], ["On Saturdays from ten to two."]],
              config=replace(CONFIG, first_message=None))
    outcome = await run()
    second_utterance = next(at for at in run.session.speech_frames if at > 2000)
    [(cleared_at, sent)] = run.session.clears
    assert cleared_at == second_utterance  # the same frame that began the caller's speech
    cut = next(e for e in outcome.transcript if e["role"] == "agent")["text"]
    assert LONG_ANSWER.startswith(cut) and 0 < len(cut.split()) < len(LONG_ANSWER.split())
    assert len(cut.split()) == sent // 200  # 200 ms a word: only words sent whole count
    # the model is told what the caller heard, not what it wrote
    follow_up = run.model.conversation_requests()[1]
    assert [m.content for m in follow_up.messages if m.role == "assistant"] == [cut]
    assert [e["text"] for e in outcome.transcript if e["role"] == "agent"][1] == "On Saturdays from ten to two."


async def test_speech_while_the_agent_is_still_thinking_cancels_that_answer() -> None:
    run = Run([Silence(300), Say("Hi", 400), Silence(520), Say("I mean hello there", 600), Silence(3000), Close()],
              [["Hello! How can I help?"]], config=replace(CONFIG, first_message=None))
    outcome = await run()
    assert run.session.clears == []  # nothing was playing yet
    assert len(run.model.conversation_requests()) == 1  # the first turn never reached the model
    assert [e["text"] for e in outcome.transcript if e["role"] == "agent"] == ["Hello! How can I help?"]


async def test_transfer_waits_for_the_words_before_it_then_moves_the_caller() -> None:
    run = Run([Silence(200), Say("Can I talk to a person?", 800), Silence(8000)],
              [["Of course, let me transfer you now.", ToolCall("t1", "transfer_call", {})]],
              config=replace(CONFIG, first_message=None))
    outcome = await run()
    assert outcome.end_reason == "transferred" and outcome.transferred_to == "+15550100999"
    assert run.session.transferred_to == "+15550100999"
    assert outcome.transcript[-1]["text"] == "Of course, let me transfer you now."
    assert outcome.details["tool_calls"][0]["name"] == "transfer_call"


async def test_a_transfer_the_carrier_refuses_is_told_to_the_caller_and_the_call_goes_on() -> None:
    run = Run([Silence(200), Say("Put me through please", 800), Silence(8000), Close()],
              [["Sure, one moment.", ToolCall("t1", "transfer_call", {})]],
              config=replace(CONFIG, first_message=None))

    async def refuse(to_phone: str) -> None:
        raise RuntimeError("the carrier said no")

    run.session.transfer = refuse  # type: ignore[method-assign]
    outcome = await run()
    assert outcome.end_reason == "hangup" and outcome.transferred_to is None
    assert [e["text"] for e in outcome.transcript if e["role"] == "agent"] == ["Sure, one moment.", TRANSFER_FAILED]


async def test_end_call_hangs_up_after_the_goodbye_is_heard() -> None:
    run = Run([Silence(200), Say("That is all, thanks", 800), Silence(8000)],
              [["You're welcome, goodbye!", ToolCall("e1", "end_call", {})]],
              config=replace(CONFIG, first_message=None))
    outcome = await run()
    assert outcome.end_reason == "agent_hangup"
    last_mark_at = run.session.marks_played[-1][0]
    assert run.session.hung_up_at is not None and run.session.hung_up_at >= last_mark_at


@pytest.mark.slow
async def test_thirty_seconds_of_silence_end_the_call_with_a_goodbye() -> None:
    run = Run([Silence(40_000)])
    outcome = await run()
    assert outcome.end_reason == "silence_timeout"
    greeting_end = 60 + 8 * 200
    assert run.session.hung_up_at is not None and run.session.hung_up_at >= greeting_end + 30_000
    assert outcome.transcript[-1]["text"] == SILENCE_GOODBYE


@pytest.mark.slow
async def test_the_silence_timeout_is_the_reason_when_hanging_up_closes_the_stream_at_once() -> None:
    """A browser closes its websocket as soon as Parley hangs up, before the hang-up returns: the stream's end is
    the agent's hang-up, for the agent's reason, not the caller hanging up."""
    run = Run([Silence(40_000)])
    session = run.session
    closed, read = asyncio.Event(), asyncio.Event()
    hang_up, events = session.hang_up, session.events

    async def hang_up_closing() -> None:
        await hang_up()
        closed.set()
        await asyncio.wait_for(read.wait(), 5)  # the peer's close is read before the hang-up returns

    async def events_closing() -> AsyncIterator[MediaEvent]:
        async for event in events():
            if closed.is_set():
                read.set()
                yield StreamClosed(run.time.now, "hangup")
                return
            yield event

    session.hang_up = hang_up_closing  # type: ignore[method-assign]
    session.events = events_closing  # type: ignore[method-assign]
    outcome = await run()
    assert outcome.end_reason == "silence_timeout"
    assert outcome.transcript[-1]["text"] == SILENCE_GOODBYE


async def test_the_maximum_duration_ends_the_call() -> None:
    run = Run([Say("Tell me everything", 600), Silence(20_000)], [[LONG_ANSWER]],
              config=replace(CONFIG, max_call_duration_seconds=10, silence_timeout_ms=60_000, first_message=None))
    outcome = await run()
    assert outcome.end_reason == "max_duration"
    assert run.session.hung_up_at == 10_000


async def test_a_machine_gets_the_voicemail_message_then_the_call_ends() -> None:
    config = replace(CONFIG, voicemail_action="leave_message",
                     voicemail_message="Hi Ada, this is Ava from Parley Dental. Please call us back.")
    run = Run([Say("You have reached the voicemail of Ada", 2000), Silence(10_000)], config=config,
              answered_by="machine")
    outcome = await run()
    assert outcome.end_reason == "voicemail_message_left"
    assert run.tts.spoken == ["Hi Ada, this is Ava from Parley Dental.", "Please call us back."]
    assert [e["role"] for e in outcome.transcript] == ["agent"]  # the machine's greeting is not a caller turn
    assert run.model.requests == []


async def test_machine_detected_mid_greeting_clears_it_and_hangs_up_when_told_to() -> None:
    run = Run([Silence(400), Control("machine_detected", {"answered_by": "machine"}), Silence(5000)])
    outcome = await run()
    assert outcome.end_reason == "voicemail_hangup"
    assert len(run.session.clears) == 1
    assert run.session.hung_up_at is not None


async def test_an_api_hang_up_ends_the_conversation() -> None:
    run = Run([Silence(1000), Control("hang_up"), Silence(5000)])
    outcome = await run()
    assert outcome.end_reason == "hangup" and run.session.hung_up_at == 1000


async def test_a_failing_model_is_told_to_the_caller_and_the_call_goes_on() -> None:
    run = Run([Silence(100), Say("Hello?", 400), Silence(5000), Say("Are you there?", 600), Silence(3000), Close()],
              [EngineError("the model server is down"), ["Yes, I am here."]],
              config=replace(CONFIG, first_message=None))
    outcome = await run()
    assert [e["text"] for e in outcome.transcript if e["role"] == "agent"] == [TROUBLE, "Yes, I am here."]
    assert outcome.details["engine_errors"] == 1
    assert outcome.end_reason == "hangup"


async def test_the_analysis_follows_the_schema_or_is_left_empty() -> None:
    schema = {"type": "object", "required": ["wants_callback"],
              "properties": {"wants_callback": {"type": "boolean"}}}
    config = replace(CONFIG, analysis_schema=schema)
    script: list[Step] = [Say("Call me back tomorrow", 800), Silence(2000), Close()]
    run = Run(script, [["Sure, we will call you back."]], config=config)
    run.model.analysis = '{"summary": "Wants a call back.", "successful": true, "data": {"wants_callback": true}}'
    outcome = await run()
    assert outcome.analysis == {"summary": "Wants a call back.", "successful": True, "data": {"wants_callback": True}}
    assert '"wants_callback"' in next(r for r in run.model.requests if r.response_format_json).messages[0].content
    bad = Run(script, [["Sure."]], config=config)
    bad.model.analysis = '{"summary": "Odd.", "successful": true, "data": {"wants_callback": "yes"}}'
    assert (await bad()).analysis == {"summary": "Odd.", "successful": None, "data": {}}
    broken = Run(script, [["Sure."]], config=config)
    broken.model.analysis = "not json"
    assert (await broken()).analysis == {"summary": "", "successful": None, "data": {}}


async def test_a_configuration_that_cannot_load_ends_the_call_as_an_error() -> None:
    class Missing:
        async def for_call(self, organization_id: int, call_id: str) -> ConversationConfig:
            raise LookupError("no such call")

    time = VirtualTime()
    session = FakeMediaSession([Silence(100)], time=time)
    outcome = await AgentConversation(Missing(), FixedEngineFactory(fake_engines(time, ScriptedModel(time)))).run(
        session)
    assert outcome.end_reason == "error" and session.hung_up_at == 0
