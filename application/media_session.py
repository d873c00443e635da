"""A call's live media session: admit its stream, run the conversation on it, finish the call with the outcome.

The media endpoint redeems the stream's single-use token (:class:`RedeemMediaStream`) before it reads a frame, then
hands the session to :class:`RunMediaSession`, which marks the call answered (when the carrier has not said so),
runs the :class:`ConversationRuntime` until the session ends, stores the stereo recording and finishes the call in
a unit of its own, once: a call another path already ended (a status callback, the sweeper) is left as it is.

:class:`LiveSessions` is the process's registry of live sessions: controls from elsewhere
(:class:`application.ports.media.LiveCallControl`) reach a session through it, and a process that drains stops
admitting sessions and lets the live ones finish up to a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from dataclasses import dataclass, replace

from application.calls import CallFinisher
from application.ports.blobs import BlobStorage
from application.ports.calls import CallRepository
from application.ports.carriers import CarrierError
from application.ports.media import (
    AudioIn,
    ConversationOutcome,
    ConversationRuntime,
    LiveMediaSession,
    MediaSession,
    MediaStreamTokens,
    SessionControl,
    StreamClosed,
    StreamGrant,
)
from application.ports.platform import Clock, Unit, UnitOfWork, Units
from domain import recordings
from domain.calls import Call, CallStatus
from domain.events import EventType

log = logging.getLogger("parley.media")

RUNTIME_GRACE_SECONDS = 5.0
"""How long a runtime may go on after its stream closed before it is cancelled."""
MEDIA_LIVE, MEDIA_ENDED = "live", "ended"
"""``telephony_state['media']`` while the call's stream is live, and after its session finished."""

_TRIGGERS = {"transferred": "transfer", "voicemail_message_left": "voicemail", "voicemail_hangup": "voicemail",
             "error": "fail"}


# ---------------------------------------------------------------------------------------------- live sessions


class LiveSessions:
    """The live media sessions of this process, by call id."""

    def __init__(self) -> None:
        self._sessions: dict[str, LiveMediaSession] = {}
        self._changed = asyncio.Event()
        self.draining = False

    def admit(self, call_id: str, session: LiveMediaSession) -> bool:
        """Register a session; False while the process drains, or when the call already has one here."""
        if self.draining or call_id in self._sessions:
            return False
        self._sessions[call_id] = session
        return True

    def release(self, call_id: str, session: LiveMediaSession) -> None:
        if self._sessions.get(call_id) is session:
            del self._sessions[call_id]
            self._changed.set()

    def deliver(self, call_id: str, control: SessionControl) -> bool:
        """Hand the control to the call's session when this process holds it."""
        session = self._sessions.get(call_id)
        if session is None:
            return False
        session.deliver(control)
        return True

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, call_id: object) -> bool:
        return call_id in self._sessions

    async def drain(self, deadline_seconds: float, hang_up_grace_seconds: float = 5.0) -> int:
        """Stop admitting sessions; wait up to ``deadline_seconds`` for the live ones to end, then ask those left
        to hang up and wait ``hang_up_grace_seconds`` more. Returns how many were still live at the end."""
        self.draining = True
        try:
            await self._wait_empty(deadline_seconds)
            if self._sessions:
                log.warning("draining: %d media session(s) still live at the deadline; hanging them up",
                            len(self._sessions))
                for call_id in list(self._sessions):
                    self.deliver(call_id, SessionControl("hang_up", 0, {"reason": "shutdown"}))
                await self._wait_empty(hang_up_grace_seconds)
            return len(self._sessions)
        finally:  # the server stops after its drain; a registry shared by several apps (tests) serves on
            self.draining = False

    async def _wait_empty(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        until = loop.time() + seconds
        while self._sessions and loop.time() < until:
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout=max(0.0, until - loop.time()))


class InProcessCallControl:
    """:class:`application.ports.media.LiveCallControl` within one process (SQLite, memory)."""

    def __init__(self, sessions: LiveSessions) -> None:
        self.sessions = sessions

    async def send(self, organization_id: int, call_id: str, control: SessionControl) -> None:
        self.sessions.deliver(call_id, control)


# ---------------------------------------------------------------------------------------------- use cases


@dataclass(frozen=True, slots=True)
class RedeemMediaStreamCommand:
    token: str


class RedeemMediaStream:
    """The stream's grant, once (None: a forged, expired or already used token)."""

    def __init__(self, tokens: MediaStreamTokens, clock: Clock) -> None:
        self.tokens, self.clock = tokens, clock

    async def execute(self, command: RedeemMediaStreamCommand) -> StreamGrant | None:
        if not command.token or len(command.token) > 200:
            return None
        return await self.tokens.redeem(command.token, self.clock.now())


@dataclass(frozen=True, slots=True)
class RunMediaSessionCommand:
    grant: StreamGrant
    session: LiveMediaSession


@dataclass(frozen=True, slots=True)
class MediaSessionResult:
    call_id: str
    ran: bool
    """The runtime ran (False: the call was gone or already over, or the process was draining)."""
    status: str | None = None
    """The call's status afterwards (None when the call is gone)."""
    end_reason: str | None = None


def _record(uow: UnitOfWork, call: Call, kinds: list[EventType]) -> None:
    view = call.view()
    for kind in kinds:
        event = kind(call.organization_id, view)
        uow.record(replace(event, depth=call.cause_depth) if call.cause_depth else event)


class RunMediaSession:
    """Runs one call's session from its first frame to the call's end (module docstring)."""

    def __init__(self, units: Units, sessions: LiveSessions, runtime: ConversationRuntime, blobs: BlobStorage,
                 clock: Clock) -> None:
        self.units, self.sessions, self.runtime, self.blobs, self.clock = units, sessions, runtime, blobs, clock

    async def execute(self, command: RunMediaSessionCommand) -> MediaSessionResult:
        grant, session = command.grant, command.session
        call = await self.units.run(lambda unit: self._answer(unit, grant))
        if call is None or call.is_final:
            await session.close("call_ended")
            return MediaSessionResult(grant.call_id, False, call.status if call else None)
        if not self.sessions.admit(grant.call_id, session):
            await session.close("draining")
            return MediaSessionResult(grant.call_id, False, call.status)
        try:  # the session stays registered until its call is finished: a process that drains waits for that
            outcome = await self._converse(session)
            if not session.closed:
                await session.hang_up()
            key = await self._store_recording(grant, session)
            duration = math.ceil(session.now_ms() / 1000)
            try:
                finished = await self.units.run(lambda unit: self._finish(unit, grant, outcome, duration, key))
            except Exception:
                log.exception("finishing call %s after its media session failed; the sweeper will end it",
                              grant.call_id)
                return MediaSessionResult(grant.call_id, True, None, outcome.end_reason)
            return MediaSessionResult(grant.call_id, True, finished.status if finished else None, outcome.end_reason)
        finally:
            self.sessions.release(grant.call_id, session)

    async def _answer(self, unit: Unit, grant: StreamGrant) -> Call | None:
        calls = await unit.get(CallRepository)
        call = await calls.get_for_update(grant.organization_id, grant.call_id)
        if call is None or call.is_final:
            return call
        now = self.clock.now()
        state = {**call.telephony_state, "media": MEDIA_LIVE}
        if call.status == CallStatus.RINGING:  # the stream is the proof the line is up, whatever callbacks say later
            call, events = call.move("answer", now, telephony_state=state)
            _record(await unit.get(UnitOfWork), call, events)
        else:
            call = replace(call, telephony_state=state, updated_at=now)
        return await calls.update(call)

    async def _converse(self, session: LiveMediaSession) -> ConversationOutcome:
        task = asyncio.ensure_future(self.runtime.run(session))
        closed = asyncio.ensure_future(session.wait_closed())
        try:
            await asyncio.wait({task, closed}, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():  # the stream ended: the runtime has a moment to wrap up
                await asyncio.wait({task}, timeout=RUNTIME_GRACE_SECONDS)
            if not task.done():
                task.cancel()
                log.warning("call %s: the conversation did not end with its stream; cancelled", session.info.call_id)
                with contextlib.suppress(BaseException):
                    await task
                return ConversationOutcome(end_reason="hangup")
            return task.result()
        except asyncio.CancelledError:
            task.cancel()
            raise
        except Exception:
            log.exception("call %s: the conversation runtime failed", session.info.call_id)
            return ConversationOutcome(end_reason="error")
        finally:
            closed.cancel()

    async def _store_recording(self, grant: StreamGrant, session: LiveMediaSession) -> str | None:
        wav = session.recording()
        if wav is None:
            return None
        key = recordings.recording_key(grant.organization_id, grant.call_id)
        try:
            await self.blobs.put(key, wav, "audio/wav")
        except Exception as exc:
            log.warning("call %s: storing its recording failed: %s", grant.call_id, exc)
            return None
        return key

    async def _finish(self, unit: Unit, grant: StreamGrant, outcome: ConversationOutcome, duration: int,
                      key: str | None) -> Call | None:
        calls = await unit.get(CallRepository)
        call = await calls.get_for_update(grant.organization_id, grant.call_id)
        if call is None or call.is_final:  # ended another way meanwhile: forward only
            return call
        now = self.clock.now()
        if call.status == CallStatus.RINGING:
            call, events = call.move("answer", now)
            _record(await unit.get(UnitOfWork), call, events)
        call = replace(call, telephony_state={**call.telephony_state, "media": MEDIA_ENDED})
        trigger = _TRIGGERS.get(outcome.end_reason, "complete")
        finisher = await unit.get(CallFinisher)
        return await finisher.finish(
            call, trigger, now, end_reason=outcome.end_reason, duration_seconds=duration,
            transcript=list(outcome.transcript), recording_key=key, transferred_to=outcome.transferred_to,
            booking=outcome.booking, message_left=outcome.end_reason == "voicemail_message_left",
            turns=list(outcome.turns), analysis=outcome.analysis)


# ---------------------------------------------------------------------------------------------- runtimes


def tone(sample_rate: int, milliseconds: int, frequency: float = 440.0, amplitude: int = 6000) -> bytes:
    """A sine tone, 16-bit mono PCM (what the greeting plays while no speech synthesis is wired)."""
    import array

    count = sample_rate * milliseconds // 1000
    step = 2 * math.pi * frequency / sample_rate
    fade = max(1, sample_rate // 100)
    samples = array.array("h", (int(amplitude * min(1.0, i / fade, (count - i) / fade) * math.sin(step * i))
                                for i in range(count)))
    return samples.tobytes()


class FirstMessageRuntime:
    """The runtime until the conversation's own lands: says the call's first message (a tone as long as its words
    while no speech synthesis is wired), waits until the carrier has played it, and hangs up. The transcript holds
    the first message."""

    def __init__(self, units: Units, max_wait_seconds: float = 30.0) -> None:
        self.units, self.max_wait_seconds = units, max_wait_seconds

    async def run(self, session: MediaSession) -> ConversationOutcome:
        info = session.info

        async def first_message(unit: Unit) -> str | None:
            call = await (await unit.get(CallRepository)).get(info.organization_id, info.call_id)
            return call.first_message if call is not None else None

        text = await self.units.run(first_message)
        transcript = []
        if text:
            transcript.append({"role": "agent", "text": text, "at_ms": session.now_ms()})
            words = max(1, len(text.split()))
            await session.play(tone(info.sample_rate, min(300 * words, 10_000)))
        await session.mark("first_message")
        loop = asyncio.get_running_loop()
        until = loop.time() + self.max_wait_seconds
        events = session.events()
        try:
            while True:
                remaining = until - loop.time()
                if remaining <= 0:
                    break
                event = await asyncio.wait_for(anext(events), timeout=remaining)
                if isinstance(event, StreamClosed):
                    return ConversationOutcome(end_reason="hangup", transcript=transcript)
                if isinstance(event, SessionControl) and event.command in ("hang_up", "transferred"):
                    break
                if getattr(event, "name", None) == "first_message":
                    break
        except (TimeoutError, StopAsyncIteration):
            pass
        await session.hang_up()
        return ConversationOutcome(end_reason="agent_hangup", transcript=transcript)


class EchoRuntime:
    """Plays the caller's audio back (the media bench's runtime), until the stream closes or a control ends it.
    The first ``prime_ms`` of caller audio are held before playback starts, as a jitter buffer: from then on the
    session's sender has audio queued and paces it by its own clock, not by the caller's arrivals."""

    def __init__(self, prime_ms: int = 100) -> None:
        self.prime_ms = prime_ms

    async def run(self, session: MediaSession) -> ConversationOutcome:
        held: list[bytes] = []
        held_ms = 0
        async for event in session.events():
            if isinstance(event, AudioIn):
                if held is not None and held_ms < self.prime_ms:
                    held.append(event.pcm)
                    held_ms += len(event.pcm) * 1000 // (2 * session.info.sample_rate)
                    if held_ms >= self.prime_ms:
                        await session.play(b"".join(held))
                        held = []
                    continue
                await session.play(event.pcm)
            elif isinstance(event, SessionControl) and event.command == "hang_up":
                await session.hang_up()
                return ConversationOutcome(end_reason="agent_hangup")
            elif isinstance(event, StreamClosed):
                return ConversationOutcome(end_reason="hangup")
        return ConversationOutcome(end_reason="hangup")


class StreamOnlyLine:
    """:class:`application.ports.media.CallLine` where no carrier adapter is wired: hanging up is closing the stream
    (a Twilio ``<Connect><Stream>`` call ends with it); a transfer cannot be made."""

    async def hang_up(self, organization_id: int, call_id: str) -> None:
        return None

    async def transfer(self, organization_id: int, call_id: str, to_phone: str) -> None:
        raise CarrierError("Transfers need the call's carrier, which is not connected to this media session")
