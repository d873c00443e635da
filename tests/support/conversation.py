"""Fakes for the conversation runtime: a media session scripted with caller speech, silence and control events on
virtual time, and engines of fixed latency on that same time.

Time moves only as the fake session delivers caller audio, 20 ms a frame (a carrier's pace), and between frames the
event loop is given turns until the work the runtime started has run as far as virtual time allows. Engines wait on
the virtual clock, so their latency is exact and a test never sleeps (but for a ``Wait`` step's frames, which give
work outside virtual time, a real HTTP server, real time to run in).

Caller speech is PCM whose samples carry a phrase number (``PHRASES``): the fake speech-to-text maps it back to the
words, the fake turn detector hears any non-zero sample as speech.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import struct
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from application.ports.engines import (
    ChatRequest,
    EngineError,
    Engines,
    Finished,
    LlmEvent,
    TextDelta,
    ToolCall,
    ToolCallRequest,
    Transcript,
    VoiceActivity,
)
from application.ports.media import (
    AudioIn,
    MarkPlayed,
    MediaEvent,
    SessionControl,
    SessionInfo,
    StreamClosed,
)

FRAME_MS = 20
STARTED = datetime(2026, 3, 2, 12, tzinfo=UTC)


class VirtualTime:
    """Milliseconds that move only when told to; ``sleep`` waits until the clock passes its deadline."""

    def __init__(self) -> None:
        self.now = 0
        self.waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self.order = itertools.count()

    async def sleep(self, ms: float) -> None:
        if ms <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self.waiters, (self.now + int(ms), next(self.order), future))
        await future

    def advance_to(self, at: int) -> None:
        self.now = at
        while self.waiters and self.waiters[0][0] <= at:
            _, _, future = heapq.heappop(self.waiters)
            if not future.done():
                future.set_result(None)


async def settle(turns: int = 60) -> None:
    """Give every ready task turns until the work virtual time allows has run."""
    for _ in range(turns):
        await asyncio.sleep(0)


# ---------------------------------------------------------------------------------------------- caller audio

PHRASES: list[str] = []


def phrase_code(text: str) -> int:
    if text not in PHRASES:
        PHRASES.append(text)
    return 1000 + PHRASES.index(text)


def speech_frame(text: str, rate: int) -> bytes:
    samples = rate * FRAME_MS // 1000
    return struct.pack("<h", phrase_code(text)) * samples


def silence_frame(rate: int) -> bytes:
    return b"\x00\x00" * (rate * FRAME_MS // 1000)


def heard_text(pcm: bytes) -> str:
    for (sample,) in struct.iter_unpack("<h", pcm[: len(pcm) - len(pcm) % 2]):
        if sample >= 1000:
            return PHRASES[sample - 1000]
    return ""


@dataclass(frozen=True)
class Say:
    text: str
    ms: int = 1000


@dataclass(frozen=True)
class Silence:
    ms: int


@dataclass(frozen=True)
class Wait:
    """Silence until ``done()`` holds (looked at before each frame), at most ``ms``, each frame given ``real_ms`` of
    real time too: for work outside virtual time (a real HTTP server) that the rest of the script must not outrun."""
    done: Callable[[], bool]
    ms: int
    real_ms: float = 2.0


@dataclass(frozen=True)
class Control:
    command: Literal["hang_up", "machine_detected", "transferred"]
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Close:
    reason: str = "hangup"


Step = Say | Silence | Wait | Control | Close


# ---------------------------------------------------------------------------------------------- the session


class FakeMediaSession:
    """A :class:`~application.ports.media.MediaSession` playing ``script`` as the caller on virtual time.

    Agent audio is "sent" at real-time pace from the moment it is queued (``sent_total`` grows 20 ms a frame while
    audio is queued); marks come back when the audio queued before them has been sent; ``clear`` drops the rest.
    After the script, silence follows until the runtime hangs up or transfers (or ``tail_ms`` passes)."""

    def __init__(self, script: Sequence[Step], *, rate: int = 8000, time: VirtualTime | None = None,
                 answered_by: Literal["human", "machine", "unknown"] = "human", call_id: str = "call-1",
                 organization_id: int = 1, tail_ms: int = 60_000) -> None:
        self.script, self.rate, self.time, self.tail_ms = list(script), rate, time or VirtualTime(), tail_ms
        self._info = SessionInfo(call_id=call_id, organization_id=organization_id, direction="outbound",
                                 channel="simulator", sample_rate=rate, started_at=STARTED, answered_by=answered_by)
        self.played: list[tuple[int, bytes]] = []
        self.marks: list[tuple[int, str]] = []  # (queued ms at the mark, name)
        self.marks_played: list[tuple[int, str]] = []
        self.clears: list[tuple[int, int]] = []  # (at ms, ms reported sent)
        self.hung_up_at: int | None = None
        self.transferred_to: str | None = None
        self.queued_total = 0.0
        self.sent_total = 0.0
        self.sent_at_clear = 0.0
        self.speech_frames: list[int] = []  # at_ms of each caller speech frame

    @property
    def info(self) -> SessionInfo:
        return self._info

    def now_ms(self) -> int:
        return self.time.now

    def sent_ms(self) -> int:
        return int(self.sent_total)

    async def play(self, pcm: bytes) -> None:
        self.played.append((self.time.now, pcm))
        self.queued_total += len(pcm) * 1000 / (2 * self.rate)

    async def mark(self, name: str) -> None:
        self.marks.append((int(self.queued_total), name))

    async def clear(self) -> int:
        sent = int(self.sent_total - self.sent_at_clear)
        self.clears.append((self.time.now, sent))
        self.queued_total = self.sent_total
        self.sent_at_clear = self.sent_total
        self.marks = []
        return sent

    async def transfer(self, to_phone: str) -> None:
        self.transferred_to = to_phone

    async def hang_up(self) -> None:
        if self.hung_up_at is None:
            self.hung_up_at = self.time.now

    @property
    def ended(self) -> bool:
        return self.hung_up_at is not None or self.transferred_to is not None

    def agent_audio_ms(self) -> float:
        return sum(len(pcm) for _, pcm in self.played) * 1000 / (2 * self.rate)

    async def _tick(self, real_ms: float = 0.0) -> list[MediaEvent]:
        """One frame of time: agent audio sent, marks reached, engines woken (and ``real_ms`` of real time given)."""
        await settle()
        if real_ms:
            await asyncio.sleep(real_ms / 1000)
        self.time.advance_to(self.time.now + FRAME_MS)
        self.sent_total = min(self.queued_total, self.sent_total + FRAME_MS)
        out: list[MediaEvent] = []
        while self.marks and self.marks[0][0] <= self.sent_total + 0.5:
            _, name = self.marks.pop(0)
            self.marks_played.append((self.time.now, name))
            out.append(MarkPlayed(name, self.time.now))
        await settle()
        return out

    async def events(self) -> AsyncIterator[MediaEvent]:
        for step in self.script:
            if self.ended:
                break
            if isinstance(step, Close):
                yield StreamClosed(self.time.now, step.reason)
                return
            if isinstance(step, Control):
                await settle()
                yield SessionControl(step.command, self.time.now, dict(step.details))
                continue
            frames = step.ms // FRAME_MS
            for _ in range(frames):
                if isinstance(step, Wait) and step.done():
                    break
                for event in await self._tick(step.real_ms if isinstance(step, Wait) else 0.0):
                    yield event
                if isinstance(step, Say):
                    self.speech_frames.append(self.time.now)
                    yield AudioIn(speech_frame(step.text, self.rate), self.time.now)
                else:
                    yield AudioIn(silence_frame(self.rate), self.time.now)
                if self.ended:
                    break
        end = self.time.now + self.tail_ms
        while not self.ended and self.time.now < end:
            for event in await self._tick():
                yield event
            yield AudioIn(silence_frame(self.rate), self.time.now)
        await settle()
        yield StreamClosed(self.time.now, "hangup")


# ---------------------------------------------------------------------------------------------- the engines


class FakeTurnDetector:
    """Any non-zero sample is speech; an utterance starts at the ``start_frames``-th speech frame in a row (a real
    detector wants a few before it is sure) and ends after ``end_of_turn_silence_ms`` of silence."""

    def __init__(self, end_of_turn_silence_ms: int, start_frames: int = 1) -> None:
        self.silence_ms, self.start_frames = end_of_turn_silence_ms, start_frames
        self.in_speech = False
        self.voiced = 0
        self.last_speech = 0

    def feed(self, pcm: bytes, at_ms: int) -> VoiceActivity:
        speaking = any(pcm[i:i + 2] != b"\x00\x00" for i in range(0, min(len(pcm), 8), 2))
        if speaking:
            self.voiced += 1
            if not self.in_speech and self.voiced < self.start_frames:
                return VoiceActivity(speaking=False)
            started = not self.in_speech
            self.in_speech, self.last_speech = True, at_ms
            return VoiceActivity(speaking=True, speech_started=started)
        self.voiced = 0
        if self.in_speech and at_ms - self.last_speech >= self.silence_ms:
            self.in_speech = False
            return VoiceActivity(speaking=False, turn_ended=True)
        return VoiceActivity(speaking=False)

    def reset(self) -> None:
        self.in_speech, self.voiced = False, 0


class FakeTurnDetectors:
    def __init__(self, start_frames: int = 1) -> None:
        self.start_frames = start_frames

    def create(self, sample_rate: int, end_of_turn_silence_ms: int) -> FakeTurnDetector:
        return FakeTurnDetector(end_of_turn_silence_ms, self.start_frames)


class FakeSpeechToText:
    def __init__(self, time: VirtualTime, latency_ms: int = 100) -> None:
        self.time, self.latency_ms = time, latency_ms
        self.heard: list[str] = []

    async def transcribe(self, pcm: bytes, sample_rate: int, *, language: str | None = None) -> Transcript:
        await self.time.sleep(self.latency_ms)
        text = heard_text(pcm)
        self.heard.append(text)
        return Transcript(text)


class FakeTextToSpeech:
    """``word_ms`` of a constant tone per word, in one chunk per word, the first after ``latency_ms``."""

    def __init__(self, time: VirtualTime, latency_ms: int = 50, word_ms: int = 200) -> None:
        self.time, self.latency_ms, self.word_ms = time, latency_ms, word_ms
        self.spoken: list[str] = []

    async def synthesize(self, text: str, *, voice_id: str | None, speed: float,
                         sample_rate: int) -> AsyncIterator[bytes]:
        self.spoken.append(text)
        await self.time.sleep(self.latency_ms)
        for _ in text.split():
            yield struct.pack("<h", 500) * (sample_rate * self.word_ms // 1000)


Reply = Sequence[str | ToolCall] | Exception
"""What the scripted model answers: text pieces and tool calls, in order (or an error it raises)."""


class ScriptedModel:
    """Answers conversation requests from ``replies`` (or ``reply(request)``) in order; the after-call analysis
    request (``response_format_json``) gets ``analysis``. Every request is kept."""

    def __init__(self, time: VirtualTime, replies: Sequence[Reply] = (), *,
                 reply: Callable[[ChatRequest], Reply] | None = None, first_token_ms: int = 200,
                 token_ms: int = 10, analysis: str = '{"summary": "A call.", "successful": true, "data": {}}') -> None:
        self.time, self.replies, self.reply = time, list(replies), reply
        self.first_token_ms, self.token_ms, self.analysis = first_token_ms, token_ms, analysis
        self.requests: list[ChatRequest] = []

    async def stream(self, request: ChatRequest) -> AsyncIterator[LlmEvent]:
        self.requests.append(request)
        if request.response_format_json:
            yield TextDelta(self.analysis)
            yield Finished()
            return
        if self.reply is not None:
            answer: Reply = self.reply(request)
        else:
            answer = self.replies.pop(0) if self.replies else ["Okay."]
        await self.time.sleep(self.first_token_ms)
        if isinstance(answer, Exception):
            raise answer
        calls: list[ToolCall] = []
        for piece in answer:
            if isinstance(piece, ToolCall):
                calls.append(piece)
                continue
            for index, word in enumerate(piece.split(" ")):
                if index:
                    await self.time.sleep(self.token_ms)
                yield TextDelta(word if index == 0 else " " + word)
        if calls:
            yield ToolCallRequest(tuple(calls))
            yield Finished("tool_calls")
        else:
            yield Finished("stop")

    def conversation_requests(self) -> list[ChatRequest]:
        return [r for r in self.requests if not r.response_format_json]


def fake_engines(time: VirtualTime, model: ScriptedModel, *, stt_ms: int = 100, tts_ms: int = 50,
                 word_ms: int = 200) -> Engines:
    return Engines(stt=FakeSpeechToText(time, stt_ms), llm=model, tts=FakeTextToSpeech(time, tts_ms, word_ms),
                   turns=FakeTurnDetectors())


class FixedEngineFactory:
    def __init__(self, engines: Engines) -> None:
        self.engines = engines
        self.choices: list[dict[str, Any]] = []

    def build(self, **choices: Any) -> Engines:
        self.choices.append(choices)
        return self.engines


class FailingLanguageModel:
    async def stream(self, request: ChatRequest) -> AsyncIterator[LlmEvent]:
        raise EngineError("the model server is down", retryable=True)
        yield Finished()  # pragma: no cover - makes this an async generator
