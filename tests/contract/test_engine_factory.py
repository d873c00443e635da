"""The engine factory: an agent's resolved choices become offline engines or OpenAI-compatible ones that reach their
server through the egress."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adapters.egress import HttpxSafeHttp
from adapters.engines.factory import EngineBuilder
from adapters.engines.offline import (
    EspeakTextToSpeech,
    OfflineLanguageModel,
    PocketsphinxSpeechToText,
    WebRtcTurnDetectors,
)
from adapters.engines.openai_compatible import OpenAiLanguageModel, OpenAiSpeechToText, OpenAiTextToSpeech
from application.ports.egress import ResolutionFailed
from application.ports.engines import ChatMessage, ChatRequest, EngineChoice, EngineError, TextDelta
from tests.support.emulators.openai import OpenAiEmulator, serve


class _NoNames:
    async def resolve(self, host: str, port: int) -> list[str]:
        raise ResolutionFailed(host)


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAiEmulator]:
    yield from serve()


def builder() -> EngineBuilder:
    return EngineBuilder(HttpxSafeHttp(_NoNames(), allow_loopback=True, user_agent="ParleyTest/1.0"))


def test_offline_choices_build_the_offline_engines() -> None:
    offline = EngineChoice("offline", language="en-US", vocabulary=("Parking is free.",))
    engines = builder().build(llm=offline, voice=offline, transcriber=offline)
    assert isinstance(engines.llm, OfflineLanguageModel) and isinstance(engines.tts, EspeakTextToSpeech)
    assert isinstance(engines.stt, PocketsphinxSpeechToText) and engines.stt.texts == ("Parking is free.",)
    assert isinstance(engines.turns, WebRtcTurnDetectors)
    detector = engines.turns.create(8000, 600)
    assert detector.end_frames == 30 and not detector.feed(b"\0" * 320, 0).speaking


async def test_openai_compatible_choices_reach_their_server_with_the_key(server: OpenAiEmulator) -> None:
    server.clear()
    server.api_key = "sk-agent"
    remote = EngineChoice("openai_compatible", server.base_url, "sk-agent", model="whisper-1", language="en-US")
    offline = EngineChoice("offline")
    engines = builder().build(llm=remote, voice=remote, transcriber=remote)
    assert isinstance(engines.llm, OpenAiLanguageModel) and isinstance(engines.stt, OpenAiSpeechToText)
    assert isinstance(engines.tts, OpenAiTextToSpeech)
    server.reply_text("Hello from the server.")
    events = [e async for e in engines.llm.stream(ChatRequest("gpt-4o-mini", [ChatMessage("user", "hi")]))]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello from the server."
    server.transcripts.append("book tomorrow")
    assert (await engines.stt.transcribe(b"\0\0" * 800, 8000)).text == "book tomorrow"
    assert server.requests[-1].form["model"] == "whisper-1"
    mixed = builder().build(llm=remote, voice=offline, transcriber=offline)
    assert isinstance(mixed.tts, EspeakTextToSpeech) and isinstance(mixed.llm, OpenAiLanguageModel)
    with pytest.raises(EngineError):
        builder().llm(EngineChoice("openai_compatible"))  # no base URL
