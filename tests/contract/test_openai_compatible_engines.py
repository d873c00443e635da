"""The openai_compatible engines against a local server speaking OpenAI's wire format, through the real egress."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from adapters.egress import HttpxSafeHttp
from adapters.engines.audio import samples
from adapters.engines.openai_compatible import (
    OpenAiEndpoint,
    OpenAiLanguageModel,
    OpenAiSpeechToText,
    OpenAiTextToSpeech,
)
from application.ports.egress import ResolutionFailed
from application.ports.engines import (
    ChatMessage,
    ChatRequest,
    EngineError,
    Finished,
    LlmEvent,
    TextDelta,
    ToolCall,
    ToolCallRequest,
    ToolSpec,
)
from tests.support.emulators.openai import ChatReply, OpenAiEmulator, SpeechReply, serve


class _NoNames:
    async def resolve(self, host: str, port: int) -> list[str]:
        raise ResolutionFailed(host)


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAiEmulator]:
    yield from serve()


@pytest.fixture
def emulator(server: OpenAiEmulator) -> OpenAiEmulator:
    server.clear()
    return server


def http() -> HttpxSafeHttp:
    return HttpxSafeHttp(_NoNames(), allow_loopback=True, user_agent="ParleyTest/1.0")


def endpoint(emulator: OpenAiEmulator, **options: object) -> OpenAiEndpoint:
    return OpenAiEndpoint(emulator.base_url, **options)  # type: ignore[arg-type]


def llm(emulator: OpenAiEmulator, **options: object) -> OpenAiLanguageModel:
    return OpenAiLanguageModel(http(), endpoint(emulator, **options))


def chat(*messages: ChatMessage, **options: object) -> ChatRequest:
    return ChatRequest("gpt-4o-mini", messages or (ChatMessage("user", "hello"),), **options)  # type: ignore[arg-type]


async def collect(model: OpenAiLanguageModel, request: ChatRequest) -> list[LlmEvent]:
    return [event async for event in model.stream(request)]


def text_of(events: list[LlmEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


# -- /chat/completions ----------------------------------------------------------------------------------------

async def test_a_streamed_answer_arrives_as_text_deltas_then_finished(emulator: OpenAiEmulator) -> None:
    emulator.api_key = "sk-test"
    emulator.reply_text("Our opening hours are nine to five.", chunk_size=3, usage={"total_tokens": 42})
    events = await collect(llm(emulator, api_key="sk-test"), chat(
        ChatMessage("system", "You are the front desk."), ChatMessage("user", "When are you open?"),
        temperature=0.2, max_tokens=100))
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 5 and text_of(events) == "Our opening hours are nine to five."
    assert events[-1] == Finished("stop", {"total_tokens": 42})
    [seen] = emulator.requests
    assert seen.headers["authorization"] == "Bearer sk-test"
    assert seen.json == {"model": "gpt-4o-mini", "stream": True, "temperature": 0.2, "max_tokens": 100, "messages": [
        {"role": "system", "content": "You are the front desk."}, {"role": "user", "content": "When are you open?"}]}


async def test_tool_call_deltas_split_across_chunks_become_complete_calls(emulator: OpenAiEmulator) -> None:
    emulator.reply_tool_calls(
        ("call_a", "check_availability", '{"date": "2026-12-01", "timezone": "Europe/Paris"}'),
        ("call_b", "lookup_order", '{"order": {"id": 17, "items": ["a", "b"]}}'),
    )
    tools = (ToolSpec("check_availability", "Free slots on a day",
                      {"type": "object", "properties": {"date": {"type": "string"}}}),)
    events = await collect(llm(emulator), chat(tools=tools))
    assert events == [
        ToolCallRequest((ToolCall("call_a", "check_availability", {"date": "2026-12-01", "timezone": "Europe/Paris"}),
                         ToolCall("call_b", "lookup_order", {"order": {"id": 17, "items": ["a", "b"]}}))),
        Finished("tool_calls"),
    ]
    assert emulator.requests[0].json["tools"] == [{"type": "function", "function": {
        "name": "check_availability", "description": "Free slots on a day",
        "parameters": {"type": "object", "properties": {"date": {"type": "string"}}}}}]


async def test_tool_results_go_back_in_openai_shape(emulator: OpenAiEmulator) -> None:
    emulator.reply_text("Ten o'clock is free.")
    call = ToolCall("call_a", "check_availability", {"date": "2026-12-01"})
    events = await collect(llm(emulator), chat(
        ChatMessage("user", "Anything tomorrow?"), ChatMessage("assistant", tool_calls=(call,)),
        ChatMessage("tool", '{"slots": ["10:00"]}', tool_call_id="call_a", name="check_availability")))
    assert text_of(events) == "Ten o'clock is free."
    assert emulator.requests[0].json["messages"][1:] == [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_a", "type": "function", "function": {
            "name": "check_availability", "arguments": '{"date":"2026-12-01"}'}}]},
        {"role": "tool", "content": '{"slots": ["10:00"]}', "tool_call_id": "call_a", "name": "check_availability"},
    ]


async def test_a_json_answer_is_asked_with_response_format(emulator: OpenAiEmulator) -> None:
    emulator.reply_text('{"summary": "booked", "successful": true}')
    events = await collect(llm(emulator), chat(response_format_json=True))
    assert json.loads(text_of(events)) == {"summary": "booked", "successful": True}
    assert emulator.requests[0].json["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize(("status", "retryable"), [(400, False), (401, False), (404, False), (429, True),
                                                   (500, True), (503, True)])
async def test_an_error_status_is_an_engine_error_with_the_servers_message(
        emulator: OpenAiEmulator, status: int, retryable: bool) -> None:
    emulator.reply_error(status, f"the reason for {status}")
    with pytest.raises(EngineError) as raised:
        await collect(llm(emulator), chat())
    assert raised.value.retryable is retryable
    assert f"the reason for {status}" in raised.value.message and str(status) in raised.value.message


async def test_a_wrong_key_is_refused_and_not_retryable(emulator: OpenAiEmulator) -> None:
    emulator.api_key = "sk-right"
    with pytest.raises(EngineError) as raised:
        await collect(llm(emulator, api_key="sk-wrong"), chat())
    assert not raised.value.retryable and "Incorrect API key" in raised.value.message


async def test_an_error_event_inside_the_stream_is_an_engine_error(emulator: OpenAiEmulator) -> None:
    emulator.reply(ChatReply(text="Let me", error_event="The server had an error while processing your request."))
    model = llm(emulator)
    seen: list[LlmEvent] = []
    with pytest.raises(EngineError) as raised:
        async for event in model.stream(chat()):
            seen.append(event)
    assert text_of(seen) == "Let me" and raised.value.retryable
    assert "processing your request" in raised.value.message


async def test_a_slow_first_token_is_waited_for_within_the_read_timeout(emulator: OpenAiEmulator) -> None:
    emulator.reply_text("Sorry for the wait.", first_token_delay=0.4)
    assert text_of(await collect(llm(emulator, read_timeout=5), chat())) == "Sorry for the wait."


async def test_a_first_token_slower_than_the_read_timeout_is_a_retryable_error(emulator: OpenAiEmulator) -> None:
    emulator.reply_text("Too late.", first_token_delay=1.0)
    with pytest.raises(EngineError) as raised:
        await collect(llm(emulator, read_timeout=0.2), chat())
    assert raised.value.retryable


async def test_a_connection_dropped_mid_answer_is_a_retryable_error_after_the_text_so_far(
        emulator: OpenAiEmulator) -> None:
    emulator.reply(ChatReply(text="The answer is forty-two and", chunk_size=4, drop_after_chunks=4))
    model = llm(emulator)
    seen: list[LlmEvent] = []
    with pytest.raises(EngineError) as raised:
        async for event in model.stream(chat()):
            seen.append(event)
    assert raised.value.retryable
    assert text_of(seen) == "The answer i"  # the three text chunks sent after the role chunk
    assert not any(isinstance(e, Finished) for e in seen)


async def test_a_connection_dropped_in_the_middle_of_tool_arguments_yields_no_call(emulator: OpenAiEmulator) -> None:
    emulator.reply(ChatReply(tool_calls=[("call_a", "book_appointment", '{"start": "2026-12-01T10:00:00"}')],
                             drop_after_chunks=4))
    seen: list[LlmEvent] = []
    with pytest.raises(EngineError):
        async for event in llm(emulator).stream(chat()):
            seen.append(event)
    assert seen == []


async def test_an_unreachable_server_is_a_retryable_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAiLanguageModel(http(), OpenAiEndpoint(f"http://127.0.0.1:{port}/v1"))
    with pytest.raises(EngineError) as raised:
        await collect(model, chat())
    assert raised.value.retryable


async def test_a_private_address_is_refused_by_the_egress() -> None:
    model = OpenAiLanguageModel(http(), OpenAiEndpoint("http://10.0.0.5/v1"))
    with pytest.raises(EngineError) as raised:
        await collect(model, chat())
    assert not raised.value.retryable and "refused" in raised.value.message


# -- /audio/transcriptions ------------------------------------------------------------------------------------

async def test_a_transcription_sends_a_wav_file_with_the_model_and_language(emulator: OpenAiEmulator) -> None:
    emulator.transcripts.append(" I would like to book for tomorrow. ")
    stt = OpenAiSpeechToText(http(), endpoint(emulator, api_key="sk-1"), model="whisper-large-v3")
    pcm = b"\x01\x00" * 8000
    transcript = await stt.transcribe(pcm, 8000, language="en-US")
    assert transcript.text == "I would like to book for tomorrow." and transcript.language == "en"
    [seen] = emulator.requests
    assert seen.path == "/v1/audio/transcriptions" and seen.headers["authorization"] == "Bearer sk-1"
    assert seen.form == {"model": "whisper-large-v3", "response_format": "json", "language": "en"}
    audio = seen.files["file"]
    assert audio[:4] == b"RIFF" and audio[44:] == pcm and int.from_bytes(audio[24:28], "little") == 8000


async def test_a_failed_transcription_is_an_engine_error(emulator: OpenAiEmulator) -> None:
    emulator.transcription_error = (503, "overloaded")
    with pytest.raises(EngineError) as raised:
        await OpenAiSpeechToText(http(), endpoint(emulator)).transcribe(b"\0\0" * 100, 16000)
    assert raised.value.retryable and "overloaded" in raised.value.message


# -- /audio/speech --------------------------------------------------------------------------------------------

async def test_speech_is_streamed_as_pcm_and_resampled_to_the_asked_rate(emulator: OpenAiEmulator) -> None:
    tts = OpenAiTextToSpeech(http(), endpoint(emulator), model="tts-1-hd")
    chunks = [c async for c in tts.synthesize("Hello there, caller.", voice_id="nova", speed=1.25, sample_rate=8000)]
    assert len(chunks) > 1 and all(len(c) % 2 == 0 for c in chunks)
    duration_ms = int(len("Hello there, caller.") * emulator.ms_per_character / 1.25)
    assert abs(len(b"".join(chunks)) - duration_ms * 8 * 2) <= 4  # 8 kHz, 2 bytes a sample
    assert max(abs(s) for s in samples(b"".join(chunks))) > 7000  # the tone survived the resampling
    assert emulator.requests[0].json == {"model": "tts-1-hd", "input": "Hello there, caller.", "voice": "nova",
                                         "speed": 1.25, "response_format": "pcm"}


async def test_speech_answered_as_wav_is_read_at_the_rate_its_header_gives(emulator: OpenAiEmulator) -> None:
    emulator.speech_replies.append(SpeechReply(as_wav_rate=16000))
    tts = OpenAiTextToSpeech(http(), endpoint(emulator))
    audio = b"".join([c async for c in tts.synthesize("Hi.", voice_id=None, speed=1.0, sample_rate=8000)])
    assert abs(len(audio) - 3 * emulator.ms_per_character * 8 * 2) <= 4
    assert emulator.requests[0].json["voice"] == "alloy"


async def test_failed_speech_is_an_engine_error(emulator: OpenAiEmulator) -> None:
    emulator.speech_replies.append(SpeechReply(status=500, error_message="voice model crashed"))
    with pytest.raises(EngineError) as raised:
        async for _ in OpenAiTextToSpeech(http(), endpoint(emulator)).synthesize(
                "Hi.", voice_id="alloy", speed=1.0, sample_rate=8000):
            pass
    assert raised.value.retryable and "voice model crashed" in raised.value.message
