"""The seam between the phone network and the conversation: a call's live audio session.

A carrier's media stream (Twilio Media Streams, Telnyx streaming: JSON over a websocket, μ-law 8 kHz) or a
browser's web call arrives at Parley's media endpoint, which turns it into a :class:`MediaSession` and hands it to
the :class:`ConversationRuntime`. The runtime never sees the wire protocol: it reads :data:`MediaEvent` values and
plays linear PCM; the endpoint decodes and encodes (μ-law for carriers), paces outbound audio in 20 ms frames,
records both legs (caller left, agent right) and speaks the carrier's ``mark`` and ``clear``.

Commands that arrive elsewhere (an API hang-up, a transfer, a carrier callback saying the line is gone) reach the
live session as :class:`SessionControl` events, whichever process holds it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

SAMPLE_WIDTH = 2
"""Bytes per sample of the PCM a session reads and plays: 16-bit signed little-endian, mono."""


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """What the runtime knows about the call when the session starts."""

    call_id: str
    organization_id: int
    direction: Literal["outbound", "inbound", "web"]
    channel: Literal["twilio", "telnyx", "web", "simulator"]
    sample_rate: int
    """Of the PCM in :class:`AudioIn` and of what :meth:`MediaSession.play` takes (8000 for carriers, 16000 for
    browsers)."""
    started_at: datetime
    answered_by: Literal["human", "machine", "unknown"] = "unknown"
    """The carrier's answering-machine detection, when it had answered before the stream started."""
    parameters: dict[str, str] = field(default_factory=dict)
    """Custom parameters the stream carried (never secrets)."""


@dataclass(frozen=True, slots=True)
class AudioIn:
    """Caller audio: ``pcm`` (16-bit mono at the session's rate) that began ``at_ms`` after the session started."""

    pcm: bytes
    at_ms: int


@dataclass(frozen=True, slots=True)
class MarkPlayed:
    """The carrier (or the browser) played the agent audio queued before :meth:`MediaSession.mark` ``name``."""

    name: str
    at_ms: int


@dataclass(frozen=True, slots=True)
class SessionControl:
    """A command from outside the media stream: ``hang_up`` (the API, a time-out), ``machine_detected`` (the
    carrier's AMD finished after the stream began; ``details['answered_by']``), ``transferred`` (the carrier
    moved the call away)."""

    command: Literal["hang_up", "machine_detected", "transferred"]
    at_ms: int
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StreamClosed:
    """The caller hung up or the stream ended; no event follows."""

    at_ms: int
    reason: str = "hangup"


MediaEvent = AudioIn | MarkPlayed | SessionControl | StreamClosed


class MediaSession(Protocol):
    """A live, bidirectional audio session (module docstring). One runtime task owns it."""

    @property
    def info(self) -> SessionInfo: ...

    def events(self) -> AsyncIterator[MediaEvent]:
        """Caller audio and control, in order, until :class:`StreamClosed`."""
        ...

    async def play(self, pcm: bytes) -> None:
        """Queue agent audio (16-bit mono at the session's rate). Returns at once; the endpoint sends it in 20 ms
        frames at real-time pace and records it."""
        ...

    async def mark(self, name: str) -> None:
        """Ask to be told (:class:`MarkPlayed`) when everything queued so far has been played."""
        ...

    async def clear(self) -> int:
        """Barge-in: drop the queued, unsent agent audio at once and tell the carrier to drop what it buffered.
        Returns how many milliseconds of agent audio were actually sent since the last ``clear`` (what the caller
        heard)."""
        ...

    def sent_ms(self) -> int:
        """Milliseconds of agent audio sent since the session began."""
        ...

    def now_ms(self) -> int:
        """Milliseconds since the session began, on the session's monotonic clock."""
        ...

    async def transfer(self, to_phone: str) -> None:
        """Move the caller to ``to_phone`` at the carrier (``call.transferred``); the stream then closes."""
        ...

    async def hang_up(self) -> None:
        """End the call from our side; the stream then closes."""
        ...


@dataclass(frozen=True, slots=True)
class ConversationOutcome:
    """What the runtime reports when the session ends; the call is finished with it.

    ``transcript``: ``[{role: agent|user, text, at_ms, ...}]``; ``turns``: one latency breakdown per agent turn
    (end_of_speech_to_first_audio_ms, stt_ms, llm_first_token_ms, tts_first_audio_ms, parley_ms).
    ``end_reason``: hangup (the caller), agent_hangup (end_call), transferred, silence_timeout, max_duration,
    voicemail_message_left, voicemail_hangup, error.
    """

    end_reason: str
    transcript: list[dict[str, Any]] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    transferred_to: str | None = None
    booking: dict[str, Any] | None = None
    knowledge_documents: list[int] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    analysis: dict[str, Any] | None = None
    """``{summary, successful, data}``, ``data`` following the agent's ``analysis_schema``; None when the
    conversation did not reach the analysis."""


class ConversationRuntime(Protocol):
    """Runs the agent's side of a call on a live session until it ends."""

    async def run(self, session: MediaSession) -> ConversationOutcome: ...


@dataclass(frozen=True, slots=True)
class StreamGrant:
    """What a single-use media token admits: this call's stream, once, before ``expires_at``."""

    call_id: str
    organization_id: int
    expires_at: datetime


class MediaStreamTokens(Protocol):
    """Single-use tokens in the media-stream URL, checked before the first frame is read."""

    async def issue(self, call_id: str, organization_id: int, now: datetime) -> str:
        """A token for this call's stream (URL-safe); the stream URL is
        ``wss://<public host>/v2/media-streams/<token>``."""
        ...

    async def redeem(self, token: str, now: datetime) -> StreamGrant | None:
        """The grant, once: a second redeem of the same token, an expired or a forged one gives None."""
        ...

    async def purge(self, before: datetime) -> int:
        """Forget the tokens that expired before ``before`` (used or not: a used one expires as any other);
        how many (housekeeping)."""
        ...


class LiveMediaSession(MediaSession, Protocol):
    """The endpoint's side of a :class:`MediaSession`: what the use case that runs it needs besides the runtime's
    view (controls from outside, the recording, closing)."""

    def deliver(self, control: SessionControl) -> None:
        """Queue a control among the session's events (its ``at_ms`` is set to the session's time on arrival)."""
        ...

    def recording(self) -> bytes | None:
        """The stereo WAV of the session so far (caller left, agent right), or None when it recorded nothing."""
        ...

    async def close(self, reason: str) -> None:
        """End the stream from Parley's side (idempotent): nothing more is sent, :class:`StreamClosed` follows."""
        ...

    @property
    def closed(self) -> bool:
        """The stream has ended (either side)."""
        ...

    async def wait_closed(self) -> None:
        """Until the stream has ended."""
        ...


class LiveCallControl(Protocol):
    """Send a :class:`SessionControl` to call X's live session, whichever process holds it.

    PostgreSQL: a notification sent in the caller's transaction (delivered when it commits) to every serve process;
    the one that holds the session delivers it. SQLite and memory: in-process. A call with no live session ignores
    it. The control's ``at_ms`` is set by the session when it arrives.

    A carrier callback that reports the end of a call whose media stream is live (``telephony_state['media'] ==
    'live'``) sends ``hang_up`` here instead of finishing the call: the session finishes it with its transcript and
    recording (``media`` becomes ``ended``); the sweeper ends a call whose session never finished."""

    async def send(self, organization_id: int, call_id: str, control: SessionControl) -> None: ...


class CallLine(Protocol):
    """The carrier's side of a live call, for :meth:`MediaSession.hang_up` and :meth:`MediaSession.transfer`
    (the carriers' feature provides it over :class:`application.ports.carriers.Carrier`). Raises on failure; the
    session then ends the stream itself."""

    async def hang_up(self, organization_id: int, call_id: str) -> None: ...

    async def transfer(self, organization_id: int, call_id: str, to_phone: str) -> None: ...
