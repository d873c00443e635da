"""The conversation loop: the agent's side of one live call, on a :class:`MediaSession`.

One task reads the session's events in order. Caller audio goes to the turn detector; when a turn ends, a response
task runs: speech to text, the turn's knowledge passages, the model streamed, its text cut into sentences as they
complete, each sentence synthesized and played (a ``mark`` after each), tool calls run and the model continued. When
the caller starts speaking while the agent's audio is playing (or while the agent prepares an answer), the reading
task clears the session's audio at once (barge-in), cancels the response task and cuts the agent's line to the words
the caller heard (``clear`` says how much audio went out). Time is the session's clock (``now_ms``): the loop never
sleeps, so silence and the maximum duration are checked as audio frames arrive (carriers and browsers send them
continuously, silence included).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Coroutine
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, TypeVar

from application.conversation import analysis
from application.conversation.config import TRANSFER_CALL, ConversationConfig, ConversationConfigs
from application.conversation.knowledge import Passages, context_block
from application.conversation.text import SentenceSplitter, heard_part
from application.conversation.tools import Toolbox, ToolOutcome, failed
from application.ports.conversation import ToolSecrets
from application.ports.egress import SafeHttp
from application.ports.engines import (
    ChatMessage,
    ChatRequest,
    EngineError,
    EngineFactory,
    Engines,
    TextDelta,
    ToolCall,
    ToolCallRequest,
    TurnDetector,
)
from application.ports.media import (
    SAMPLE_WIDTH,
    AudioIn,
    ConversationOutcome,
    MarkPlayed,
    MediaEvent,
    MediaSession,
    SessionControl,
    StreamClosed,
)
from application.ports.platform import Units
from domain.timezones import zone_of

log = logging.getLogger("parley.conversation")
T = TypeVar("T")

SILENCE_GOODBYE = "I haven't heard from you for a while, so I'll end the call now. Goodbye!"
TROUBLE = "Sorry, I'm having trouble right now. Could you say that again?"
TRANSFER_FAILED = "I'm sorry, I couldn't transfer you right now."
ANALYSIS_TIMEOUT_SECONDS = 4.0
"""How long the after-call analysis may take (the media session waits a few seconds for the runtime after its
stream closed); a slower answer leaves the analysis empty."""
FRAME_MS = 20
PRE_ROLL_MS = 300
"""The caller's audio just before the detector says speech started, kept with the utterance: the detector needs a
few voiced frames to be sure, and a soft first sound ("wh", "h") may be below its threshold."""
MS_PER_WORD_GUESS = 300
"""How long a word takes to say, for a sentence whose synthesis was cut short (its full length unknown)."""
VOICE_RULES = ("You are speaking on a phone call: answer in short, plain spoken sentences, without lists, markdown "
               "or emoji. Use the tools you are given when they help; say what you are doing before a tool call.")


# ---------------------------------------------------------------------------------------------- the agent's lines


@dataclass(slots=True, eq=False)
class Segment:
    """One synthesized sentence: its text, the audio queued so far, and (after a barge-in) how much was heard."""

    text: str
    audio_ms: float = 0.0
    complete: bool = False
    heard_ms: float | None = None

    def length_ms(self) -> float:
        if self.complete:
            return self.audio_ms
        return max(self.audio_ms, len(self.text.split()) * MS_PER_WORD_GUESS)

    def heard(self) -> str:
        if self.heard_ms is None:
            return self.text
        length = self.length_ms()
        if self.heard_ms >= length - FRAME_MS:  # sent whole (the session counts in 20 ms frames)
            return self.text
        return heard_part(self.text, int(self.heard_ms), int(length))


@dataclass(slots=True, eq=False)
class AgentLine:
    """What the agent said in one stretch (one transcript entry, one assistant message): its sentences, as heard."""

    at_ms: int | None = None
    segments: list[Segment] = field(default_factory=list)

    def text(self) -> str:
        return " ".join(part for part in (s.heard() for s in self.segments) if part)


@dataclass(slots=True)
class ToolSlot:
    """A tool call's place in the history; its result fills in when the tool finishes (even after a barge-in)."""

    call: ToolCall
    content: str = '{"ok":false,"error":"the caller interrupted before the tool answered"}'


@dataclass(slots=True)
class TurnMetrics:
    """One caller turn's latency, on the session's clock. Engine waits are summed until the first audio."""

    ended_ms: int
    stt_ms: int | None = None
    llm_first_token_ms: int | None = None
    tts_first_audio_ms: int | None = None
    first_audio_ms: int | None = None
    waited_ms: int = 0

    def record(self) -> dict[str, Any]:
        total = (self.first_audio_ms or self.ended_ms) - self.ended_ms
        return {"end_of_speech_to_first_audio_ms": total, "stt_ms": self.stt_ms,
                "llm_first_token_ms": self.llm_first_token_ms, "tts_first_audio_ms": self.tts_first_audio_ms,
                "parley_ms": max(0, total - self.waited_ms)}


class _Ended(Exception):
    """The agent's turn is over (it hung up, transferred, or said a transfer failed): nothing more is said in it."""


# ---------------------------------------------------------------------------------------------- the runtime


class AgentConversation:
    """The :class:`~application.ports.media.ConversationRuntime`: loads the call's configuration (its published
    agent version), builds its engines and runs the conversation until the session ends."""

    def __init__(self, configs: ConversationConfigs, engines: EngineFactory, *, units: Units | None = None,
                 http: SafeHttp | None = None, passages: Passages | None = None,
                 tool_secrets: ToolSecrets | None = None, analysis_timeout_seconds: float = ANALYSIS_TIMEOUT_SECONDS,
                 silence_timeout_ms: int | None = None) -> None:
        """``silence_timeout_ms``: how long without caller speech ends a call (the process's setting; None: each
        configuration's own, ``SILENCE_TIMEOUT_MS`` by default)."""
        self.configs, self.engines, self.units, self.http, self.passages = configs, engines, units, http, passages
        self.tool_secrets, self.analysis_timeout_seconds = tool_secrets, analysis_timeout_seconds
        self.silence_timeout_ms = silence_timeout_ms

    async def run(self, session: MediaSession) -> ConversationOutcome:
        info = session.info
        try:
            config = await self.configs.for_call(info.organization_id, info.call_id)
            if self.silence_timeout_ms is not None:
                config = replace(config, silence_timeout_ms=self.silence_timeout_ms)
            engines = self.engines.build(llm=config.llm, voice=config.voice, transcriber=config.transcriber)
        except Exception as error:
            log.exception("call %s: the conversation could not start", info.call_id)
            await session.hang_up()
            return ConversationOutcome(end_reason="error", details={"error": str(error) or type(error).__name__})
        toolbox = Toolbox(config, self.units, self.http, self.tool_secrets)
        return await Conversation(config, engines, session, toolbox, self.passages,
                                  analysis_timeout_seconds=self.analysis_timeout_seconds).run()


class Conversation:
    """One call's conversation (see the module)."""

    def __init__(self, config: ConversationConfig, engines: Engines, session: MediaSession, toolbox: Toolbox,
                 passages: Passages | None = None, *,
                 analysis_timeout_seconds: float = ANALYSIS_TIMEOUT_SECONDS) -> None:
        self.config, self.engines, self.session, self.toolbox, self.passages = (
            config, engines, session, toolbox, passages)
        self.analysis_timeout_seconds = analysis_timeout_seconds
        self.rate = session.info.sample_rate
        self.history: list[ChatMessage | AgentLine | ToolSlot] = []
        self.transcript: list[tuple[str, Any]] = []  # ("agent", AgentLine) | ("user", dict)
        self.turns: list[dict[str, Any]] = []
        self.since_clear: list[Segment] = []
        self.marks: list[str] = []
        self.mark_count = 0
        self.drained = asyncio.Event()
        self.drained.set()
        self.queue_end_ms = 0
        self.last_heard_ms = 0
        self.response: asyncio.Task[None] | None = None
        self.background: set[asyncio.Task[Any]] = set()
        self.end_reason: str | None = None
        self.hanging_up: str | None = None
        """Why the agent is hanging up, while it does: the stream may close before the hang-up returns."""
        self.transferred_to: str | None = None
        self.booking: dict[str, Any] | None = None
        self.documents: list[int] = []
        self.tool_log: list[dict[str, Any]] = []
        self.engine_errors = 0
        self.voicemail = False
        self.tools = toolbox.specs()

    # -- the reading loop

    async def run(self) -> ConversationOutcome:
        session, config = self.session, self.config
        detector = self.engines.turns.create(self.rate, config.end_of_turn_silence_ms)
        if session.info.answered_by == "machine":
            self.voicemail = True
            self._start(self._leave_voicemail())
        elif config.first_message:
            self._start(self._greet(config.first_message))
        events = session.events()
        try:
            await self._read(events, detector)
        except Exception:
            log.exception("call %s: the conversation failed", config.call_id)
            self._end("error")
            with contextlib.suppress(Exception):
                await session.hang_up()
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()
            await self._stop_tasks()
        return await self._outcome()

    async def _read(self, events: AsyncIterator[MediaEvent], detector: TurnDetector) -> None:
        collecting: list[bytes] | None = None
        started_ms = 0
        recent: collections.deque[bytes] = collections.deque()  # the caller's last frames (PRE_ROLL_MS or more)
        recent_bytes, keep = 0, self.rate * PRE_ROLL_MS // 1000 * SAMPLE_WIDTH
        async for event in events:
            if isinstance(event, StreamClosed):
                # closed by the agent's own hang-up (a browser closes its websocket at once): the agent's reason
                self._end(self.hanging_up or event.reason or "hangup")
                return
            if isinstance(event, MarkPlayed):
                self._mark_played(event.name)
            elif isinstance(event, SessionControl):
                await self._control(event)
            elif isinstance(event, AudioIn) and not self.voicemail and self.end_reason is None:
                activity = detector.feed(event.pcm, event.at_ms)
                if activity.speaking:
                    self.last_heard_ms = event.at_ms
                if activity.speech_started:
                    collecting, started_ms = [b"".join(recent)[-keep:]], event.at_ms
                    if self._agent_active():
                        await self._barge_in()
                if collecting is not None:
                    collecting.append(event.pcm)
                    recent.clear()
                    recent_bytes = 0
                else:
                    recent.append(event.pcm)
                    recent_bytes += len(event.pcm)
                    while recent_bytes - len(recent[0]) >= keep:
                        recent_bytes -= len(recent.popleft())
                if activity.turn_ended and collecting is not None:
                    utterance, collecting = b"".join(collecting), None
                    self.last_heard_ms = event.at_ms
                    self._start(self._respond(utterance, started_ms, TurnMetrics(self.session.now_ms())))
            if self.end_reason is not None:
                return
            now = self.session.now_ms()
            if now >= config_ms(self.config.max_call_duration_seconds):
                self._end("max_duration")
                await self._cancel_response()
                await self.session.hang_up()
                return
            if (collecting is None and not self._agent_active() and not self.voicemail
                    and now - max(self.last_heard_ms, self.queue_end_ms) >= self.config.silence_timeout_ms):
                self.last_heard_ms = now  # once
                self._start(self._say_and_end(SILENCE_GOODBYE, "silence_timeout"))

    async def _control(self, event: SessionControl) -> None:
        if event.command == "machine_detected":
            if event.details.get("answered_by", "machine") != "human" and not self.voicemail:
                await self._cancel_response()
                if self._audio_queued():
                    self._cut(await self.session.clear())
                self.voicemail = True
                self._start(self._leave_voicemail())
        elif event.command == "transferred":
            self.transferred_to = event.details.get("to") or self.transferred_to
            self._end("transferred")
        elif event.command == "hang_up":
            self._end(str(event.details.get("end_reason") or "hangup"))
            await self._cancel_response()
            await self.session.hang_up()

    # -- the agent's audio: playing, marks, barge-in

    def _agent_active(self) -> bool:
        return bool(self.marks) or (self.response is not None and not self.response.done())

    def _mark_played(self, name: str) -> None:
        if name in self.marks:
            del self.marks[:self.marks.index(name) + 1]
        if not self.marks:
            self.queue_end_ms = min(self.queue_end_ms, self.session.now_ms())
            self.drained.set()

    async def _barge_in(self) -> None:
        """The caller speaks over the agent: the queued audio is dropped at once, the answer being prepared is
        cancelled, and the agent's lines keep only the words that were sent."""
        if self.response is not None and not self.response.done():
            self.response.cancel()
        if self._audio_queued():
            self._cut(await self.session.clear())

    def _audio_queued(self) -> bool:
        """Whether agent audio may still be playing: a mark not yet played, or a sentence still being queued."""
        return bool(self.marks) or any(not segment.complete for segment in self.since_clear[-1:])

    def _cut(self, sent_ms: int) -> None:
        remaining = float(sent_ms)
        for segment in self.since_clear:
            length = segment.length_ms()
            segment.heard_ms = min(remaining, length)
            remaining -= segment.heard_ms
        self.since_clear = []
        self.marks.clear()
        self.queue_end_ms = self.session.now_ms()
        self.drained.set()

    async def _speak(self, line: AgentLine, text: str, metrics: TurnMetrics | None = None) -> None:
        """Synthesize one sentence and queue its audio, then a mark."""
        segment = Segment(text)
        asked = self.session.now_ms()
        chunks = self.engines.tts.synthesize(text, voice_id=self.config.voice.voice_id,
                                             speed=self.config.voice.speed, sample_rate=self.rate)
        first = True
        try:
            while True:
                try:
                    chunk = await self._waited(metrics, _anext(chunks))
                except StopAsyncIteration:
                    break
                if not chunk:
                    continue
                if first:
                    first = False
                    now = self.session.now_ms()
                    if line.at_ms is None:
                        line.at_ms = max(now, self.queue_end_ms)
                        self.transcript.append(("agent", line))
                        self.history.append(line)
                    line.segments.append(segment)
                    self.since_clear.append(segment)
                    self.queue_end_ms = max(now, self.queue_end_ms)
                    if metrics is not None and metrics.first_audio_ms is None:
                        metrics.tts_first_audio_ms = now - asked
                        metrics.first_audio_ms = now
                        self.turns.append(metrics.record())
                segment.audio_ms += len(chunk) * 1000 / (SAMPLE_WIDTH * self.rate)
                self.queue_end_ms += int(len(chunk) * 1000 / (SAMPLE_WIDTH * self.rate))
                await self.session.play(chunk)
        finally:
            close = getattr(chunks, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()
        segment.complete = True
        if not first:
            self.mark_count += 1
            name = f"s{self.mark_count}"
            self.marks.append(name)
            self.drained.clear()
            await self.session.mark(name)

    async def _waited(self, metrics: TurnMetrics | None, work: Awaitable[T]) -> T:
        """Await an engine, counting the wait against the turn (until its first audio)."""
        before = self.session.now_ms()
        try:
            return await work
        finally:
            if metrics is not None and metrics.first_audio_ms is None:
                metrics.waited_ms += self.session.now_ms() - before

    # -- the agent's turns

    def _start(self, work: Coroutine[Any, Any, None]) -> None:
        previous = self.response

        async def after_previous() -> None:
            try:
                if previous is not None and not previous.done():
                    await asyncio.wait([previous])
            except asyncio.CancelledError:
                work.close()
                raise
            try:
                await work
            except _Ended:
                pass
            except Exception:  # an agent turn that fails ends that turn, never the call
                log.exception("call %s: an agent turn failed", self.config.call_id)

        self.response = asyncio.create_task(after_previous())

    async def _cancel_response(self) -> None:
        task = self.response
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def _greet(self, text: str) -> None:
        await self._say(text)

    async def _say(self, text: str, metrics: TurnMetrics | None = None) -> AgentLine:
        line = AgentLine()
        splitter = SentenceSplitter()
        for sentence in [*splitter.feed(text), splitter.flush()]:
            if sentence:
                await self._speak(line, sentence, metrics)
        return line

    async def _say_and_end(self, text: str, end_reason: str) -> None:
        with contextlib.suppress(EngineError):
            await self._say(text)
        await self._hang_up(end_reason)

    async def _hang_up(self, end_reason: str) -> None:
        """Once the agent's audio has been played: hang up, then end (ending first would let the reader stop and
        cancel this task in the middle of the hang-up)."""
        await self.drained.wait()
        if self.end_reason is None:
            self.hanging_up = end_reason
            try:
                await self.session.hang_up()
            except Exception:
                log.exception("call %s: hanging up failed", self.config.call_id)
            self._end(end_reason)

    async def _leave_voicemail(self) -> None:
        self.voicemail = True
        message = self.config.voicemail_message
        if self.config.voicemail_action == "leave_message" and message:
            with contextlib.suppress(EngineError):
                await self._say(message)
            await self._hang_up("voicemail_message_left")
        else:
            await self._hang_up("voicemail_hangup")

    async def _respond(self, utterance: bytes, started_ms: int, metrics: TurnMetrics) -> None:
        config = self.config
        try:
            heard = await self._waited(metrics, self.engines.stt.transcribe(utterance, self.rate,
                                                                             language=config.transcriber.language))
        except EngineError as error:
            log.warning("call %s: speech to text failed: %s", config.call_id, error.message)
            self.engine_errors += 1
            await self._say(TROUBLE, metrics)
            return
        metrics.stt_ms = metrics.waited_ms
        text = heard.text.strip()
        if not text:
            return
        entry: dict[str, Any] = {"role": "user", "text": text, "at_ms": started_ms}
        self.transcript.append(("user", entry))
        self.history.append(ChatMessage("user", text))
        passages = []
        if self.passages is not None and config.knowledge_base_ids:
            passages = await self.passages.retrieve(config.organization_id, config.knowledge_base_ids, text,
                                                    config.knowledge_top_k)
        if passages:
            used = sorted({hit.document_id for hit in passages})
            entry["knowledge_documents"] = used
            self.documents += [d for d in used if d not in self.documents]
        try:
            await self._answer(metrics, context_block(passages) if passages else None)
        except EngineError as error:
            log.warning("call %s: the language model failed: %s", config.call_id, error.message)
            self.engine_errors += 1
            with contextlib.suppress(EngineError):
                await self._say(TROUBLE, metrics)

    async def _answer(self, metrics: TurnMetrics, passages: str | None) -> None:
        """The model's answer, spoken sentence by sentence as it streams; tool calls run and the model continued
        (at most ``max_tool_rounds`` times; the last round offers no tools)."""
        config = self.config
        for round_ in range(config.max_tool_rounds + 1):
            tools = self.tools if round_ < config.max_tool_rounds else []
            request = ChatRequest(model=config.llm.model or "", messages=self._messages(passages), tools=tools,
                                  temperature=config.llm.temperature)
            line = AgentLine()
            splitter = SentenceSplitter()
            calls: tuple[ToolCall, ...] = ()
            asked = self.session.now_ms()
            stream = self.engines.llm.stream(request)
            try:
                while True:
                    try:
                        event = await self._waited(metrics, _anext(stream))
                    except StopAsyncIteration:
                        break
                    if metrics.llm_first_token_ms is None and isinstance(event, TextDelta | ToolCallRequest):
                        metrics.llm_first_token_ms = self.session.now_ms() - asked
                    if isinstance(event, TextDelta):
                        for sentence in splitter.feed(event.text):
                            await self._speak(line, sentence, metrics)
                    elif isinstance(event, ToolCallRequest):
                        calls += event.calls
            finally:
                close = getattr(stream, "aclose", None)
                if close is not None:
                    with contextlib.suppress(Exception):
                        await close()
            rest = splitter.flush()
            if rest:
                await self._speak(line, rest, metrics)
            if not calls:
                return
            await self._run_tools(calls, metrics)

    async def _run_tools(self, calls: tuple[ToolCall, ...], metrics: TurnMetrics) -> None:
        self.history.append(ChatMessage("assistant", "", tool_calls=calls))
        action: ToolOutcome | None = None
        action_slot: ToolSlot | None = None
        for call in calls:
            slot = ToolSlot(call)
            self.history.append(slot)
            now = self._wall_now()
            task = asyncio.ensure_future(self.toolbox.run(call, now))
            task.add_done_callback(functools.partial(self._tool_done, slot, self.session.now_ms()))
            self.background.add(task)
            # a barge-in cancels the answer, not the tool: a booking under way finishes and the model learns of it
            outcome = await self._waited(metrics if call.name in self.toolbox.http_tools else None,
                                         asyncio.shield(task))
            if outcome.action is not None and action is None:
                action, action_slot = outcome, slot
        if action is None:
            return
        if action.action == "transfer" and action.transfer_to:
            await self.drained.wait()
            if self.end_reason is not None:
                raise _Ended
            try:
                await self.session.transfer(action.transfer_to)
            except Exception:
                log.exception("call %s: the transfer failed", self.config.call_id)
                if action_slot is not None:  # the model learns of it next turn
                    action_slot.content = failed(TRANSFER_CALL, "the carrier could not transfer the call").content
                await self._say(TRANSFER_FAILED)
                raise _Ended from None
            self.transferred_to = action.transfer_to
            self._end("transferred")
        else:
            await self._hang_up("agent_hangup")
        raise _Ended

    def _tool_done(self, slot: ToolSlot, at_ms: int, task: asyncio.Future[ToolOutcome]) -> None:
        self.background.discard(task)
        if task.cancelled() or task.exception() is not None:
            return
        outcome = task.result()
        slot.content = outcome.content
        if outcome.booking is not None:
            self.booking = outcome.booking
        self.tool_log.append({"name": slot.call.name, "arguments": slot.call.arguments, "ok": outcome.ok,
                              "at_ms": at_ms})

    def _wall_now(self) -> datetime:
        return self.session.info.started_at + timedelta(milliseconds=self.session.now_ms())

    def _messages(self, passages: str | None) -> list[ChatMessage]:
        config = self.config
        now = self._wall_now()
        try:
            local = now.astimezone(zone_of(config.timezone))
            zone = config.timezone
        except Exception:
            local, zone = now, "UTC"
        system = (f"{config.prompt}\n\n{VOICE_RULES}\nYour name is {config.agent_name}. Speak {config.language}. "
                  f"It is now {local:%A, %Y-%m-%d, %H:%M} ({zone}).")
        messages = [ChatMessage("system", system)]
        for item in self.history:
            if isinstance(item, AgentLine):
                said = item.text()
                if said:
                    messages.append(ChatMessage("assistant", said))
            elif isinstance(item, ToolSlot):
                messages.append(ChatMessage("tool", item.content, tool_call_id=item.call.id, name=item.call.name))
            else:
                messages.append(item)
        if passages:
            last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=len(messages))
            messages.insert(last_user, ChatMessage("system", passages))
        return messages

    # -- the end

    def _end(self, reason: str) -> None:
        if self.end_reason is None:
            self.end_reason = reason

    async def _stop_tasks(self) -> None:
        await self._cancel_response()
        if self.background:  # tools already running finish (a booking is not abandoned half-way)
            await asyncio.gather(*list(self.background), return_exceptions=True)

    async def _outcome(self) -> ConversationOutcome:
        transcript: list[dict[str, Any]] = []
        for role, item in self.transcript:
            if role == "agent":
                said = item.text()
                if said:
                    transcript.append({"role": "agent", "text": said, "at_ms": item.at_ms or 0})
            else:
                transcript.append(dict(item))
        transcript.sort(key=lambda entry: entry["at_ms"])
        found = None
        if any(entry["role"] == "user" for entry in transcript):
            try:  # a deadline on the model server's answer (input/output), not on business time
                async with asyncio.timeout(self.analysis_timeout_seconds):
                    found = await analysis.analyse(self.engines.llm, self.config.llm.model or "",
                                                   self.config.prompt, transcript, self.config.analysis_schema)
            except TimeoutError:
                log.warning("call %s: the after-call analysis took too long; left empty", self.config.call_id)
        return ConversationOutcome(
            end_reason=self.end_reason or "hangup", transcript=transcript, turns=list(self.turns),
            transferred_to=self.transferred_to, booking=self.booking, knowledge_documents=list(self.documents),
            analysis=found or analysis.empty(),
            details={"duration_ms": self.session.now_ms(), "tool_calls": list(self.tool_log),
                     "engine_errors": self.engine_errors, "agent_version": self.config.agent_version},
        )


def config_ms(seconds: int) -> int:
    return seconds * 1000


async def _anext(iterator: AsyncIterator[T]) -> T:
    return await iterator.__anext__()
