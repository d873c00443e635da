"""The conversation runtime under load, in one process, on real time: N concurrent conversations on fake media
sessions with engines of fixed latency (asyncio.sleep), so everything measured beyond those latencies is Parley's.

Each fake session is what the media endpoint would be: a 20 ms ticker that delivers the caller's audio frame and sends
one 20 ms frame of queued agent audio (marks come back when their audio has gone). The caller asks a question,
waits for most of the answer, and interrupts one answer in three (barge-in). Measured:

  parley_ms        per turn, the runtime's own share of end-of-speech -> first audio, p50/p95/max
  frame gaps       between consecutive ticks of every session (ideal 20 ms): p50/p99/max: are frames on time?
  barge-in         real time from the caller's first speech frame to the session's clear(), p50/p95/max
  CPU              process CPU seconds per conversation-minute

With ``--engines offline`` the engines are the real offline ones (PocketSphinx, the deterministic model, espeak-ng,
WebRTC's voice activity detector as the turn detector) and the caller speaks questions synthesized by espeak-ng
(the knowledge passage that answers them given by an in-memory search). Measured per answered turn:

  end of speech -> first audio   real time from the caller's last speech frame to the agent's first audio:
                                 the end-of-turn silence (``end_of_turn_silence_ms``, 500 ms) + the turn's
                                 ``end_of_speech_to_first_audio_ms`` (from the end-of-turn decision)
  engines_ms / parley_ms         that turn's engine waits (speech to text, first token, first synthesized audio)
                                 and Parley's own share of it
  barge-in                       the caller's first speech frame over the agent's audio -> clear(), with the real
                                 turn detector deciding that speech started

    .venv/bin/python bench/conversation.py [--sessions 50] [--seconds 30]
    .venv/bin/python bench/conversation.py --engines offline [--sessions 2] [--seconds 40]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import struct
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from application.conversation.config import END_CALL, ConversationConfig
from application.conversation.session import AgentConversation
from application.ports.engines import (
    ChatRequest,
    Engines,
    Finished,
    LlmEvent,
    TextDelta,
    Transcript,
)
from application.ports.knowledge import SearchHit
from application.ports.media import (
    AudioIn,
    ConversationOutcome,
    MarkPlayed,
    MediaEvent,
    SessionInfo,
    StreamClosed,
)
from tests.support.conversation import FakeTurnDetectors, heard_text, silence_frame, speech_frame

RATE = 8000
FRAME = 0.02
FRAME_BYTES = RATE * 2 // 50
STT_MS, FIRST_TOKEN_MS, TOKEN_MS, TTS_MS, WORD_MS = 150, 250, 15, 80, 220
ANSWER = ("Our clinic is open from nine until five on weekdays. On Saturdays we open at ten and close at two. "
          "Parking is free behind the building.")
QUESTIONS = ["When are you open?", "Is there parking?", "Can I come on Saturday?", "Do you take new patients?"]
CONFIG = ConversationConfig(call_id="bench", organization_id=1, agent_id=1, agent_name="Ava",
                            prompt="You are Ava, the front desk of a dental clinic.",
                            first_message="Hello! This is Ava from the clinic. How can I help?",
                            built_in_tools=(END_CALL,), silence_timeout_ms=120_000)


class Stt:
    async def transcribe(self, pcm: bytes, sample_rate: int, *, language: str | None = None) -> Transcript:
        await asyncio.sleep(STT_MS / 1000)
        return Transcript(heard_text(pcm))


class Llm:
    async def stream(self, request: ChatRequest) -> AsyncIterator[LlmEvent]:
        if request.response_format_json:
            yield TextDelta('{"summary": "A question about the clinic.", "successful": true, "data": {}}')
            yield Finished()
            return
        await asyncio.sleep(FIRST_TOKEN_MS / 1000)
        for index, word in enumerate(ANSWER.split(" ")):
            if index:
                await asyncio.sleep(TOKEN_MS / 1000)
            yield TextDelta(word if index == 0 else " " + word)
        yield Finished()


class Tts:
    async def synthesize(self, text: str, *, voice_id: str | None, speed: float,
                         sample_rate: int) -> AsyncIterator[bytes]:
        await asyncio.sleep(TTS_MS / 1000)
        tone = struct.pack("<h", 500) * (sample_rate * WORD_MS // 1000)
        for _ in text.split():
            yield tone


class Factory:
    def build(self, **_: Any) -> Engines:
        return Engines(stt=Stt(), llm=Llm(), tts=Tts(), turns=FakeTurnDetectors())


class RealtimeSession:
    """A media endpoint's view on real time (module docstring). ``spoken``: each question's real audio (16-bit PCM),
    played frame by frame instead of the fake engines' coded frames."""

    def __init__(self, index: int, seconds: float, barge_in_every: int = 3,
                 spoken: dict[str, bytes] | None = None, questions: list[str] | None = None) -> None:
        self.index, self.seconds, self.barge_in_every = index, seconds, barge_in_every
        self.spoken, self.questions = spoken, questions or QUESTIONS
        self.speech_ended: list[float] = []
        self.first_audio: list[float] = []
        self._waiting_since: float | None = None
        self.started = time.monotonic()
        self._info = SessionInfo(call_id=f"bench-{index}", organization_id=1, direction="outbound",
                                 channel="simulator", sample_rate=RATE, started_at=datetime.now(UTC),
                                 answered_by="human")
        self.queued = 0  # bytes of agent audio queued, and sent
        self.sent = 0
        self.sent_at_clear = 0
        self.marks: list[tuple[int, str]] = []
        self.gaps: list[float] = []
        self.barge_ins: list[float] = []
        self.speech_began: float | None = None
        self.closed = False

    @property
    def info(self) -> SessionInfo:
        return self._info

    def now_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def sent_ms(self) -> int:
        return self.sent * 1000 // (2 * RATE)

    async def play(self, pcm: bytes) -> None:
        if self._waiting_since is not None:  # the first agent audio since the caller stopped speaking
            self.first_audio.append((time.monotonic() - self._waiting_since) * 1000)
            self._waiting_since = None
        self.queued += len(pcm)

    async def mark(self, name: str) -> None:
        self.marks.append((self.queued, name))

    async def clear(self) -> int:
        if self.speech_began is not None:
            self.barge_ins.append((time.monotonic() - self.speech_began) * 1000)
        sent = (self.sent - self.sent_at_clear) * 1000 // (2 * RATE)
        self.queued = self.sent_at_clear = self.sent
        self.marks = []
        return sent

    async def transfer(self, to_phone: str) -> None:
        self.closed = True

    async def hang_up(self) -> None:
        self.closed = True

    def _caller(self) -> list[tuple[str | None, int]]:
        """(question or None for silence, frames): a question, then listening to (part of) the answer."""
        script: list[tuple[str | None, int]] = [(None, 250)]  # the greeting
        turn = 0
        while sum(frames for _, frames in script) * FRAME < self.seconds:
            interrupt = turn % self.barge_in_every == self.barge_in_every - 1
            question = self.questions[(self.index + turn) % len(self.questions)]
            frames = 60 if self.spoken is None else len(self.spoken[question]) // FRAME_BYTES
            listen = (110 if interrupt else 400) if self.spoken is None else (110 if interrupt else 250)
            script += [(question, frames), (None, listen)]
            turn += 1
        return script

    async def events(self) -> AsyncIterator[MediaEvent]:
        deadline = time.monotonic()
        last = deadline
        for phrase, frames in self._caller():
            if phrase is None and self.speech_began is not None and self._waiting_since is None:
                self._waiting_since = time.monotonic()  # the caller's last speech frame has gone
            for frame in range(frames):
                deadline += FRAME
                await asyncio.sleep(max(0.0, deadline - time.monotonic()))
                now = time.monotonic()
                self.gaps.append((now - last) * 1000)
                last = now
                if self.queued > self.sent:  # the endpoint sends one frame of agent audio
                    self.sent = min(self.queued, self.sent + FRAME_BYTES)
                while self.marks and self.marks[0][0] <= self.sent:
                    yield MarkPlayed(self.marks.pop(0)[1], self.now_ms())
                if phrase is not None and frame == 0:
                    self.speech_began = now
                if phrase is None:
                    pcm = silence_frame(RATE)
                elif self.spoken is not None:
                    pcm = self.spoken[phrase][frame * FRAME_BYTES:(frame + 1) * FRAME_BYTES]
                else:
                    pcm = speech_frame(phrase, RATE)
                yield AudioIn(pcm, self.now_ms())
                if self.closed or now - self.started >= self.seconds:
                    yield StreamClosed(self.now_ms())
                    return
        yield StreamClosed(self.now_ms())


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def run(sessions: int, seconds: float) -> dict[str, Any]:
    class Configs:
        async def for_call(self, organization_id: int, call_id: str) -> ConversationConfig:
            return CONFIG

    runtime = AgentConversation(Configs(), Factory())
    fakes = [RealtimeSession(i, seconds) for i in range(sessions)]
    cpu, wall = time.process_time(), time.monotonic()
    outcomes: list[ConversationOutcome] = await asyncio.gather(*(runtime.run(s) for s in fakes))
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    parley = [float(t["parley_ms"]) for o in outcomes for t in o.turns]
    first_audio = [float(t["end_of_speech_to_first_audio_ms"]) for o in outcomes for t in o.turns]
    gaps = [g for s in fakes for g in s.gaps[1:]]
    barge = [b for s in fakes for b in s.barge_ins]
    minutes = sessions * seconds / 60
    return {
        "sessions": sessions, "seconds": seconds, "turns": len(parley),
        "parley_ms": {"p50": percentile(parley, 50), "p95": percentile(parley, 95), "max": max(parley, default=0)},
        "end_of_speech_to_first_audio_ms": {"p50": percentile(first_audio, 50), "p95": percentile(first_audio, 95),
                                            "engines_ms": STT_MS + FIRST_TOKEN_MS + 9 * TOKEN_MS + TTS_MS},
        "frame_gap_ms": {"p50": round(percentile(gaps, 50), 2), "p99": round(percentile(gaps, 99), 2),
                         "max": round(max(gaps, default=0), 2)},
        "barge_in_to_clear_ms": {"count": len(barge), "p50": round(percentile(barge, 50), 2),
                                 "p95": round(percentile(barge, 95), 2), "max": round(max(barge, default=0), 2)},
        "cpu_seconds": round(cpu, 2), "wall_seconds": round(wall, 2),
        "cpu_seconds_per_conversation_minute": round(cpu / minutes, 3),
        "end_reasons": sorted({o.end_reason for o in outcomes}),
    }


OFFLINE_QUESTIONS = ["where is the parking", "when are you open"]
OFFLINE_PROMPT = ("You answer questions about the clinic, such as where is the parking, or when are you open, and "
                  "book visits.")
OFFLINE_PASSAGE = "The parking is behind the building. The clinic is open from nine to five on weekdays."


class OfflinePassages:
    """The knowledge search's answer, from memory (the search itself is not what this mode measures)."""

    async def retrieve(self, organization_id: int, knowledge_base_ids: Any, text: str, limit: int) -> list[SearchHit]:
        return [SearchHit(1, 1, 1, OFFLINE_PASSAGE, 1.0)]


async def run_offline(sessions: int, seconds: float) -> dict[str, Any]:
    from dataclasses import replace

    from adapters.engines.factory import EngineBuilder
    from adapters.engines.offline.stt import recognizer
    from application.conversation.config import EngineChoice
    from tests.support.emulators.media_client import caller_speech

    config = replace(CONFIG, prompt=OFFLINE_PROMPT, first_message="Hello, this is the clinic.",
                     knowledge_base_ids=(1,), end_of_turn_silence_ms=500,
                     transcriber=EngineChoice(provider_type="offline",
                                              vocabulary=(OFFLINE_PROMPT, "Hello, this is the clinic.")))

    class Configs:
        async def for_call(self, organization_id: int, call_id: str) -> ConversationConfig:
            return config

    spoken = {q: caller_speech(q, words_per_minute=140) for q in OFFLINE_QUESTIONS}
    spoken = {q: pcm + b"\0" * (-len(pcm) % FRAME_BYTES) for q, pcm in spoken.items()}
    recognizer(config.transcriber.vocabulary)  # loaded once per process, before the calls (as after a first call)
    runtime = AgentConversation(Configs(), EngineBuilder(http=None),  # type: ignore[arg-type]  # offline: no HTTP
                                passages=OfflinePassages())
    fakes = [RealtimeSession(i, seconds, barge_in_every=2, spoken=spoken, questions=OFFLINE_QUESTIONS)
             for i in range(sessions)]
    cpu, wall = time.process_time(), time.monotonic()
    outcomes: list[ConversationOutcome] = await asyncio.gather(*(runtime.run(s) for s in fakes))
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    turns = [t for o in outcomes for t in o.turns]
    after_decision = [float(t["end_of_speech_to_first_audio_ms"]) for t in turns]
    parley = [float(t["parley_ms"]) for t in turns]
    engines = [float(t["end_of_speech_to_first_audio_ms"] - t["parley_ms"]) for t in turns]
    stt = [float(t["stt_ms"] or 0) for t in turns]
    llm = [float(t["llm_first_token_ms"] or 0) for t in turns]
    tts = [float(t["tts_first_audio_ms"] or 0) for t in turns]
    from_speech = [a for s in fakes for a in s.first_audio]
    barge = [b for s in fakes for b in s.barge_ins]
    heard = [e["text"] for o in outcomes for e in o.transcript if e["role"] == "user"]

    def spread(values: list[float]) -> dict[str, float]:
        return {"p50": round(percentile(values, 50), 1), "p95": round(percentile(values, 95), 1),
                "max": round(max(values, default=0), 1)}

    return {
        "engines": "offline", "sessions": sessions, "seconds": seconds, "turns": len(turns),
        "end_of_speech_to_first_audio_ms": spread(from_speech),
        "end_of_turn_decision_to_first_audio_ms": spread(after_decision),
        "engines_ms": spread(engines), "stt_ms": spread(stt), "llm_first_token_ms": spread(llm),
        "tts_first_audio_ms": spread(tts), "parley_ms": spread(parley),
        "barge_in_to_clear_ms": {"count": len(barge), **spread(barge)},
        "cpu_seconds": round(cpu, 2), "wall_seconds": round(wall, 2),
        "heard": sorted(set(heard))[:6],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=None, help="50 with fake engines, 2 offline")
    parser.add_argument("--seconds", type=float, default=None, help="30 with fake engines, 40 offline")
    parser.add_argument("--engines", choices=("fake", "offline"), default="fake")
    args = parser.parse_args()
    if args.engines == "offline":
        print(json.dumps(asyncio.run(run_offline(args.sessions or 2, args.seconds or 40))))
    else:
        print(json.dumps(asyncio.run(run(args.sessions or 50, args.seconds or 30))))


if __name__ == "__main__":
    main()
