"""The telephony simulator's calls run the one conversation: :class:`AgentConversation` with a scripted text caller.

Plan (one conversation path, not two). The simulator used to write each call's transcript itself
(``adapters/telephony/conversation.py``) and asked the calls' pass for one tool, the booking. Now:

1. The simulator (``adapters/telephony/simulator.py``) keeps what a carrier knows: from the test number, when the
   line rings, answers, is busy, fails or reaches a voicemail box, and the call's wall-clock pacing. When a line is
   up it reports a ``conversation`` signal carrying a :class:`~application.ports.telephony.ScriptedCaller` (what
   the caller will say, in order; a voicemail box says nothing) and waits, as it waited for a tool, until it is
   handed the conversation's outcome (``Telephony.resume(handle, "conversation", result)``); it then reports the
   end at the answer plus the conversation's length, with its transcript, and writes the recording.
2. ``AdvanceCall`` records ``call.answered`` and returns the request (``Advanced.conversation``); the calls' pass
   (``application/call_progress.py``) runs the conversation outside any unit of work (its tools, knowledge
   searches and configuration each take a unit of their own, as on a live media session, so nothing holds the
   call's row or SQLite's writer while the model thinks), then ``ResumeCall`` hands the outcome back in a unit of
   its own. ``appointment.booked`` is recorded by the booking tool's own unit: after ``call.answered``, before
   ``call.ended``. The simulator's own mid-call booking (``AppointmentBooker``) is gone.
3. This module runs it: :class:`ScriptedCallConversations` builds :class:`AgentConversation` (the runtime of live
   media sessions) on a :class:`TextCallerSession`, a :class:`~application.ports.media.MediaSession` on virtual
   time whose caller speaks text; engines that pass text through (the recognizer reads the words the frame
   carries, the voice is silence as long as the words take to say, the end of turn is the caller's scripted
   pause) and the agent's own language model (the ``offline`` one unless its AI provider names another). Greeting,
   knowledge answers, booking tools, transfer, end_call, voicemail, the analysis, the turns and the transcript all
   come from the session code.
4. Virtual time: the session moves its clock only from one scripted instant to the next (a mark played, the caller
   starts or stops speaking, the maximum duration), after the agent's work has settled: :class:`Activity` counts
   the conversation's I/O (units of work, the egress, the model) and the session waits until none is running and
   the event loop has had turns to spare. A simulated call takes milliseconds of CPU, whatever its length.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

from application.conversation.config import END_OF_TURN_SILENCE_MS, PublishedConfigs
from application.conversation.knowledge import KnowledgePassages
from application.conversation.session import AgentConversation
from application.ports.conversation import ToolSecrets
from application.ports.egress import DEFAULT_ACCEPT, FetchedPage, HttpResponse, PostResult, SafeHttp, StreamingResponse
from application.ports.engines import (
    ChatRequest,
    EngineChoice,
    Engines,
    LanguageModel,
    LanguageModels,
    LlmEvent,
    Transcript,
    VoiceActivity,
)
from application.ports.media import (
    SAMPLE_WIDTH,
    AudioIn,
    ConversationOutcome,
    MarkPlayed,
    MediaEvent,
    SessionInfo,
    StreamClosed,
)
from application.ports.platform import Unit, Units, UseCase
from application.ports.telephony import ScriptedCaller

C = TypeVar("C")
R = TypeVar("R")

SAMPLE_RATE = 8000
"""The text session's rate (a carrier's): only the agent's silent audio is measured in it."""
MS_PER_WORD = 380
"""How long a word takes to say, for the caller and the agent alike."""
PAUSE_MS = 700
"""The caller's pause before it speaks, once the agent's audio has played (and before it hangs up)."""
SILENT_TAIL_MS = 60_000
"""A caller that stays silent after its lines waits this long for the agent to end the call, then hangs up."""
SETTLE_TURNS = 20
"""Event-loop turns without any news that count as "the agent's work has settled" (no I/O running)."""
SPEECH = b"\x7fTXT"
"""The header of a text caller's speech frame: ``SPEECH``, the utterance's length in ms (uint32), the UTF-8 words."""


def speech_frame(text: str, duration_ms: int) -> bytes:
    return SPEECH + struct.pack("<I", duration_ms) + text.encode()


def frame_text(pcm: bytes) -> str:
    """The words in the speech frames of an utterance (silence frames are empty)."""
    return " ".join(part[4:].decode(errors="replace").strip() for part in pcm.split(SPEECH)[1:] if len(part) > 4)


def words_ms(text: str) -> int:
    return max(1, len(text.split())) * MS_PER_WORD


# ---------------------------------------------------------------------------------------------- settling


class Activity:
    """What the conversation is doing that takes real time (a unit of work, an HTTP request, the model's answer):
    the text session advances its virtual clock only once none runs and the loop has had turns to spare."""

    def __init__(self) -> None:
        self.running = 0
        self.changes = 0
        self._idle = asyncio.Event()
        self._idle.set()

    def touch(self) -> None:
        self.changes += 1

    @contextlib.asynccontextmanager
    async def busy(self) -> AsyncIterator[None]:
        self.running += 1
        self.changes += 1
        self._idle.clear()
        try:
            yield
        finally:
            self.running -= 1
            self.changes += 1
            if not self.running:
                self._idle.set()

    async def settled(self) -> None:
        while True:
            await self._idle.wait()
            before = self.changes
            for _ in range(SETTLE_TURNS):
                await asyncio.sleep(0)
            if not self.running and self.changes == before:
                return


class TrackedUnits:
    """:class:`Units` whose units count as activity."""

    def __init__(self, units: Units, activity: Activity) -> None:
        self.units, self.activity = units, activity

    @contextlib.asynccontextmanager
    async def begin(self) -> AsyncIterator[Unit]:
        async with self.activity.busy(), self.units.begin() as unit:
            yield unit

    async def run(self, work: Callable[[Unit], Awaitable[R]]) -> R:
        async with self.activity.busy():
            return await self.units.run(work)

    async def read(self, work: Callable[[Unit], Awaitable[R]]) -> R:
        async with self.activity.busy():
            return await self.units.read(work)

    async def execute(self, case: type[UseCase[C, R]], command: C) -> R:
        async with self.activity.busy():
            return await self.units.execute(case, command)


class TrackedHttp:
    """:class:`SafeHttp` whose requests count as activity (custom tools)."""

    def __init__(self, http: SafeHttp, activity: Activity) -> None:
        self.http, self.activity = http, activity

    async def fetch(self, url: str, *, max_bytes: int, accept: tuple[str, ...] = DEFAULT_ACCEPT) -> FetchedPage:
        async with self.activity.busy():
            return await self.http.fetch(url, max_bytes=max_bytes, accept=accept)

    async def post(self, url: str, *, body: bytes, headers: Mapping[str, str],
                   timeout: float) -> PostResult:  # noqa: ASYNC109 - the port's own deadline
        async with self.activity.busy():
            return await self.http.post(url, body=body, headers=headers, timeout=timeout)

    async def request(self, method: str, url: str, *, headers: Mapping[str, str], body: bytes | None = None,
                      timeout: float, max_bytes: int = 1_000_000) -> HttpResponse:  # noqa: ASYNC109
        async with self.activity.busy():
            return await self.http.request(method, url, headers=headers, body=body, timeout=timeout,
                                           max_bytes=max_bytes)

    @contextlib.asynccontextmanager
    async def stream(self, method: str, url: str, *, headers: Mapping[str, str], body: bytes | None = None,
                     connect_timeout: float = 5, read_timeout: float = 30) -> AsyncIterator[StreamingResponse]:
        async with self.activity.busy(), self.http.stream(method, url, headers=headers, body=body,
                                                          connect_timeout=connect_timeout,
                                                          read_timeout=read_timeout) as response:
            yield response


class TrackedModel:
    """The agent's language model, its answers counted as activity (a model server answers in real time)."""

    def __init__(self, model: LanguageModel, activity: Activity) -> None:
        self.model, self.activity = model, activity

    async def stream(self, request: ChatRequest) -> AsyncIterator[LlmEvent]:
        async with self.activity.busy():
            events = self.model.stream(request)
            try:
                async for event in events:
                    yield event
            finally:
                close = getattr(events, "aclose", None)
                if close is not None:
                    with contextlib.suppress(Exception):
                        await close()


# ---------------------------------------------------------------------------------------------- text engines


class TextSpeechToText:
    """The caller's words, read back from its speech frames."""

    async def transcribe(self, pcm: bytes, sample_rate: int, *, language: str | None = None) -> Transcript:
        return Transcript(frame_text(pcm), language)


class TextVoice:
    """The agent's voice: silence as long as the words take to say, a chunk per word."""

    async def synthesize(self, text: str, *, voice_id: str | None, speed: float,
                         sample_rate: int) -> AsyncIterator[bytes]:
        chunk = _silence(sample_rate, round(MS_PER_WORD / max(speed, 0.25)))
        for _ in text.split():
            yield chunk


_SILENCES: dict[tuple[int, int], bytes] = {}


def _silence(sample_rate: int, ms: int) -> bytes:
    key = (sample_rate, ms)
    if key not in _SILENCES:
        _SILENCES[key] = bytes(SAMPLE_WIDTH * sample_rate * ms // 1000)
    return _SILENCES[key]


class TextTurnDetector:
    """Speech is a speech frame (as long as it says); the turn ends at the first frame after the agent's
    end-of-turn silence."""

    def __init__(self, end_of_turn_silence_ms: int) -> None:
        self.silence_ms = end_of_turn_silence_ms
        self.speaking_until: int | None = None

    def feed(self, pcm: bytes, at_ms: int) -> VoiceActivity:
        if pcm.startswith(SPEECH):
            started = self.speaking_until is None
            (length,) = struct.unpack("<I", pcm[len(SPEECH):len(SPEECH) + 4])
            self.speaking_until = at_ms + length
            return VoiceActivity(speaking=True, speech_started=started)
        if self.speaking_until is not None and at_ms >= self.speaking_until + self.silence_ms:
            self.speaking_until = None
            return VoiceActivity(speaking=False, turn_ended=True)
        return VoiceActivity(speaking=self.speaking_until is not None and at_ms < self.speaking_until)

    def reset(self) -> None:
        self.speaking_until = None


class TextTurnDetectors:
    def __init__(self, session: TextCallerSession) -> None:
        self.session = session

    def create(self, sample_rate: int, end_of_turn_silence_ms: int) -> TextTurnDetector:
        self.session.end_of_turn_ms = end_of_turn_silence_ms  # the caller pauses that long after speaking
        return TextTurnDetector(end_of_turn_silence_ms)


class TextEngines:
    """:class:`~application.ports.engines.EngineFactory` of a simulated call: text in and out, the agent's own
    language model."""

    def __init__(self, models: LanguageModels, session: TextCallerSession, activity: Activity) -> None:
        self.models, self.session, self.activity = models, session, activity

    def build(self, *, llm: EngineChoice, voice: EngineChoice, transcriber: EngineChoice) -> Engines:
        return Engines(stt=TextSpeechToText(), llm=TrackedModel(self.models.llm(llm), self.activity),
                       tts=TextVoice(), turns=TextTurnDetectors(self.session))


# ---------------------------------------------------------------------------------------------- the session


class TextCallerSession:
    """A :class:`~application.ports.media.MediaSession` on virtual time whose caller follows a
    :class:`ScriptedCaller`: it waits until the agent's audio has played, pauses, says its next line (as long as its
    words take), and after its lines hangs up or stays silent. Agent audio plays from the moment it is queued; a
    mark is played when the audio queued before it has. Time never passes the call's maximum duration."""

    def __init__(self, info: SessionInfo, caller: ScriptedCaller, activity: Activity) -> None:
        self._info, self.caller, self.activity = info, caller, activity
        self.now = caller.start_ms
        self.max_ms = caller.max_duration_seconds * 1000
        self.end_of_turn_ms = END_OF_TURN_SILENCE_MS
        self.queue_end: float = self.now
        self.queued_ms = 0.0
        self.queued_since_clear = 0.0
        self.marks: list[tuple[float, str]] = []
        self.hung_up = False
        self.transferred_to: str | None = None
        self.at_limit = False

    @property
    def info(self) -> SessionInfo:
        return self._info

    @property
    def ended(self) -> bool:
        return self.hung_up or self.transferred_to is not None or self.at_limit

    def now_ms(self) -> int:
        return self.now

    def _unplayed(self) -> float:
        return max(0.0, self.queue_end - self.now)

    def sent_ms(self) -> int:
        return int(self.queued_ms - self._unplayed())

    async def play(self, pcm: bytes) -> None:
        ms = len(pcm) * 1000 / (SAMPLE_WIDTH * self._info.sample_rate)
        self.queue_end = max(self.queue_end, self.now) + ms
        self.queued_ms += ms
        self.queued_since_clear += ms
        self.activity.touch()

    async def mark(self, name: str) -> None:
        self.marks.append((self.queue_end, name))
        self.activity.touch()

    async def clear(self) -> int:
        sent = int(self.queued_since_clear - self._unplayed())
        self.queued_ms -= self._unplayed()
        self.queue_end, self.queued_since_clear, self.marks = self.now, 0.0, []
        self.activity.touch()
        return sent

    async def transfer(self, to_phone: str) -> None:
        self.transferred_to = to_phone
        self.activity.touch()

    async def hang_up(self) -> None:
        self.hung_up = True
        self.activity.touch()

    # -- the caller

    async def events(self) -> AsyncIterator[MediaEvent]:
        for line in self.caller.lines:
            async for event in self._agent_finishes():
                yield event
            async for event in self._pause():
                yield event
            if self.ended:
                break
            length = words_ms(line)
            yield AudioIn(speech_frame(line, length), self.now)
            async for event in self._advance_to(self.now + length + self.end_of_turn_ms):
                yield event
            if self.ended:
                break
            yield AudioIn(b"", self.now)  # the turn ends: the agent answers
        async for event in self._agent_finishes():
            yield event
        if self.caller.hangs_up:
            async for event in self._pause():
                yield event
        else:  # silent: the agent ends the call (its silence time-out), or the caller gives up
            until = self.now + SILENT_TAIL_MS
            while not self.ended and self.now < until:
                async for event in self._advance_to(self.now + 1000):
                    yield event
                if not self.ended:
                    yield AudioIn(b"", self.now)
                async for event in self._agent_finishes():
                    yield event
        yield StreamClosed(self.now, "hangup")

    async def _pause(self) -> AsyncIterator[MediaEvent]:
        async for event in self._advance_to(self.now + PAUSE_MS):
            yield event

    async def _agent_finishes(self) -> AsyncIterator[MediaEvent]:
        """Until the agent's work has settled and its audio has played."""
        await self.activity.settled()
        while self.marks and not self.ended:
            async for event in self._advance_to(math.ceil(self.marks[0][0])):
                yield event

    async def _advance_to(self, at: int) -> AsyncIterator[MediaEvent]:
        """Move the clock to ``at`` (at most the maximum duration), playing the marks due on the way."""
        while not self.ended:
            target = min(at, self.max_ms)
            if self.marks and self.marks[0][0] <= target:
                due, name = self.marks.pop(0)
                self.now = max(self.now, math.ceil(due))
                yield MarkPlayed(name, self.now)
                await self.activity.settled()
                continue
            self.now = max(self.now, target)
            if self.now >= self.max_ms:  # the conversation ends the call at its maximum duration
                yield AudioIn(b"", self.now)
                await self.activity.settled()
                self.at_limit = True
            return


# ---------------------------------------------------------------------------------------------- the runner


class ScriptedCallConversations:
    """:class:`~application.ports.telephony.SimulatedConversations`: the agent's conversation (the runtime of live
    media sessions, over its published version) with a scripted text caller, on virtual time."""

    def __init__(self, units: Units, models: LanguageModels, *, http: SafeHttp | None = None,
                 tool_secrets: ToolSecrets | None = None) -> None:
        self.units, self.models, self.http, self.tool_secrets = units, models, http, tool_secrets

    async def converse(self, organization_id: int, call_id: str, answered_at: datetime,
                       caller: ScriptedCaller) -> ConversationOutcome:
        activity = Activity()
        units = TrackedUnits(self.units, activity)
        session = TextCallerSession(SessionInfo(
            call_id=call_id, organization_id=organization_id, direction="outbound", channel="simulator",
            sample_rate=SAMPLE_RATE, started_at=answered_at, answered_by=caller.answered_by), caller, activity)
        runtime = AgentConversation(
            PublishedConfigs(units), TextEngines(self.models, session, activity), units=units,
            http=TrackedHttp(self.http, activity) if self.http is not None else None,
            passages=KnowledgePassages(units), tool_secrets=self.tool_secrets)
        return await runtime.run(session)


STATUS_OF_END = {"transferred": "transferred", "voicemail_message_left": "voicemail",
                 "voicemail_hangup": "voicemail", "error": "failed"}
"""The call's final status after a conversation that ended so (any other end: ``completed``)."""


def conversation_result(outcome: ConversationOutcome, attempt: int) -> dict[str, Any]:
    """What the simulator is handed back (JSON: it keeps it on the call row until the call ends)."""
    return {
        "attempt": attempt, "status": STATUS_OF_END.get(outcome.end_reason, "completed"),
        "end_reason": outcome.end_reason, "duration_ms": int(outcome.details.get("duration_ms") or 0),
        "transcript": list(outcome.transcript), "turns": list(outcome.turns), "analysis": outcome.analysis,
        "booking": outcome.booking, "transferred_to": outcome.transferred_to,
        "message_left": outcome.end_reason == "voicemail_message_left",
    }

