"""Ports for the conversation's engines: speech to text, the language model, text to speech, and end of turn.

Adapters: ``openai_compatible`` (OpenAI's wire format: ``/chat/completions`` streamed with tools,
``/audio/transcriptions``, ``/audio/speech``; also Azure, vLLM, Ollama, llama.cpp servers) and ``offline`` (built
in: no network, no model download). Which one an agent uses is named by its ``llm``, ``voice`` and
``transcriber`` settings through an organization's AI provider; :class:`EngineFactory` builds them.

Audio crosses these ports as 16-bit signed little-endian mono PCM at a stated sample rate.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol


class EngineError(Exception):
    """An engine could not answer (connection, status, time-out, malformed reply). ``retryable`` when trying the
    same request again may work. The runtime tells the caller something went wrong; it never crashes the call."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.message, self.retryable = message, retryable


# ---------------------------------------------------------------------------------------------- speech to text


@dataclass(frozen=True, slots=True)
class Transcript:
    text: str
    language: str | None = None
    confidence: float | None = None


class SpeechToText(Protocol):
    async def transcribe(self, pcm: bytes, sample_rate: int, *, language: str | None = None) -> Transcript:
        """The words in one caller utterance (already cut at the end of the turn)."""
        ...


# ---------------------------------------------------------------------------------------------- language model


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A function the model may call: ``parameters`` is a JSON Schema object."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """OpenAI-shaped: role system|user|assistant|tool; an assistant message may carry ``tool_calls``; a tool
    message answers ``tool_call_id``."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the answer's text, as the model streams it."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """The model wants these tools run (complete arguments; the adapter assembles streamed deltas)."""

    calls: tuple[ToolCall, ...]


@dataclass(frozen=True, slots=True)
class Finished:
    reason: Literal["stop", "tool_calls", "length", "error"] = "stop"
    usage: dict[str, int] = field(default_factory=dict)


LlmEvent = TextDelta | ToolCallRequest | Finished


@dataclass(frozen=True, slots=True)
class ChatRequest:
    model: str
    messages: Sequence[ChatMessage]
    tools: Sequence[ToolSpec] = ()
    temperature: float | None = None
    max_tokens: int | None = None
    response_format_json: bool = False
    """Ask for a JSON object (the after-call analysis)."""


class LanguageModel(Protocol):
    def stream(self, request: ChatRequest) -> AsyncIterator[LlmEvent]:
        """The answer as it is produced: text deltas and/or one tool-call request, then :class:`Finished`.
        Raises :class:`EngineError` (before or during the stream)."""
        ...


# ---------------------------------------------------------------------------------------------- text to speech


class TextToSpeech(Protocol):
    def synthesize(self, text: str, *, voice_id: str | None, speed: float, sample_rate: int) -> AsyncIterator[bytes]:
        """Audio for ``text`` (PCM at ``sample_rate``), in chunks as soon as they are ready."""
        ...


# ---------------------------------------------------------------------------------------------- end of turn


@dataclass(frozen=True, slots=True)
class VoiceActivity:
    """The detector's view after a frame: ``speaking`` (speech in the recent frames), ``speech_started`` (this frame
    began an utterance: barge-in), ``turn_ended`` (``end_of_turn_silence_ms`` of silence after speech: the
    utterance is complete)."""

    speaking: bool
    speech_started: bool = False
    turn_ended: bool = False


class TurnDetector(Protocol):
    def feed(self, pcm: bytes, at_ms: int) -> VoiceActivity:
        """Feed caller audio in order (any length; the detector frames it)."""
        ...

    def reset(self) -> None: ...


class TurnDetectors(Protocol):
    def create(self, sample_rate: int, end_of_turn_silence_ms: int) -> TurnDetector: ...


# ---------------------------------------------------------------------------------------------- the factory


@dataclass(frozen=True, slots=True)
class EngineChoice:
    """An agent's engine settings resolved against the organization's AI providers: the provider's type
    (``offline`` or ``openai_compatible``), its base URL and opened key, and the agent's model/voice options."""

    provider_type: Literal["offline", "openai_compatible"]
    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    voice_id: str | None = None
    speed: float = 1.0
    temperature: float | None = None
    language: str | None = None
    vocabulary: tuple[str, ...] = ()
    """Texts whose words the caller may say (the agent's prompt, first message, knowledge): the offline recognizer
    listens for them; other engines may ignore them."""


@dataclass(frozen=True, slots=True)
class Engines:
    stt: SpeechToText
    llm: LanguageModel
    tts: TextToSpeech
    turns: TurnDetectors


class EngineFactory(Protocol):
    def build(self, *, llm: EngineChoice, voice: EngineChoice, transcriber: EngineChoice) -> Engines: ...


class LanguageModels(Protocol):
    """The language model alone (the telephony simulator's calls: their caller speaks text, so they need no speech
    engines); the engines feature provides it with the :class:`EngineFactory`."""

    def llm(self, choice: EngineChoice) -> LanguageModel: ...
