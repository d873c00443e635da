"""A browser's media stream (web calls, ``POST /v2/calls/web``) as a ``LiveMediaSession``.

The web protocol, on the same ``/v2/media-streams/{token}`` websocket as the carriers' (docs/calls.md, Web calls):

- audio both ways is **binary frames** of 16-bit little-endian mono PCM at 16 kHz. The browser may send frames of
  any length (20-100 ms is usual); Parley sends 20 ms frames (640 bytes) at real-time pace.
- control is **JSON text frames**. The browser sends ``{"event": "start", "encoding": "pcm_s16le", "sample_rate":
  16000}`` first, then ``{"event": "mark", "name": ...}`` once it has played the audio sent before that mark (as a
  carrier echoes marks), and may send ``{"event": "stop"}`` to hang up (closing the socket does too). Parley sends
  ``{"event": "started", "call_id": ..., "sample_rate": 16000}``, ``{"event": "mark", "name": ...}`` after the audio
  before it, and ``{"event": "clear"}`` when the caller interrupts: drop every buffered sample not yet played.

Pacing, marks, ``clear`` and the stereo recording are the carrier session's (:class:`CarrierStreamSession`); only the
wire format differs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from adapters.media import mulaw, protocols
from adapters.media.recorder import StereoRecorder
from adapters.media.stream import CarrierStreamSession, Transport
from application.ports.media import AudioIn, CallLine, MarkPlayed, SessionInfo

log = logging.getLogger("parley.media")

WEB_RATE = 16_000
FRAME_BYTES = WEB_RATE * protocols.FRAME_MS // 1000 * 2  # 20 ms of 16-bit PCM
MAX_FRAME_BYTES = 64_000
"""A binary frame longer than this (2 s of audio) is not a browser's microphone: it is dropped."""
ENCODINGS = ("pcm_s16le", "linear16", "audio/l16")

_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()


class WebProtocolError(ValueError):
    """A frame the web protocol does not allow."""


@dataclass(frozen=True, slots=True)
class WebStart:
    encoding: str
    sample_rate: int

    @property
    def supported(self) -> bool:
        return self.encoding.lower() in ENCODINGS and self.sample_rate == WEB_RATE


def read_web_start(frame: str | bytes) -> WebStart | None:
    """The browser's ``start`` message; None when the frame is not one (a carrier's stream, or anything else)."""
    if isinstance(frame, bytes) and not frame.startswith(b"{"):
        return None
    try:
        message = _decoder.decode(frame)
    except msgspec.DecodeError:
        return None
    if not isinstance(message, dict) or message.get("event") != "start" or "start" in message:
        return None  # a carrier's start carries a ``start`` object
    rate = message.get("sample_rate", WEB_RATE)
    return WebStart(str(message.get("encoding", "pcm_s16le")), rate if isinstance(rate, int) else 0)


class _WebDialect:
    """The outbound messages of the web protocol: audio as binary frames, control as JSON."""

    carrier = "web"

    def media(self, pcm: bytes) -> bytes:
        return pcm

    def mark(self, name: str) -> str:
        return _encoder.encode({"event": "mark", "name": name}).decode()

    def clear(self) -> str:
        return '{"event":"clear"}'


class _PcmRecorder(StereoRecorder):
    """The stereo recording of 16-bit PCM legs (kept as μ-law while the call lasts, like a carrier's)."""

    def caller(self, ulaw: bytes, at_ms: int) -> None:
        """``ulaw``: here, 16-bit PCM (the name is the base class's)."""
        super().caller(mulaw.encode(ulaw), at_ms)

    def agent(self, ulaw: bytes, at_ms: int) -> None:
        super().agent(mulaw.encode(ulaw), at_ms)


def _web_start_message() -> protocols.Start:
    # the carrier session reads its stream id and format from a start message; a web stream has neither
    return protocols.Start("twilio", "web", None, "audio/x-mulaw", protocols.MULAW_RATE)


class WebAudioSession(CarrierStreamSession):
    """A browser's web call (module docstring). ``start()`` it, run it, ``stop()`` it, like a carrier's session."""

    def __init__(self, info: SessionInfo, transport: Transport, line: CallLine, *,
                 monotonic: Callable[[], float] = time.monotonic,
                 frame_gap: Callable[[float], object] | None = None) -> None:
        super().__init__(info, _web_start_message(), transport, line, monotonic=monotonic, frame_gap=frame_gap)
        self.dialect: Any = _WebDialect()
        self.recorder = _PcmRecorder(WEB_RATE)

    async def play(self, pcm: bytes) -> None:
        if self.closed or not pcm:
            return
        pcm = pcm[: len(pcm) & ~1]
        whole = len(pcm) - len(pcm) % FRAME_BYTES
        frames = [pcm[i:i + FRAME_BYTES] for i in range(0, whole, FRAME_BYTES)]
        if whole < len(pcm):  # the last samples go out as a frame padded with silence (at most 20 ms)
            frames.append(pcm[whole:].ljust(FRAME_BYTES, b"\x00"))
        self._queue.extend(frames)
        self._wake.set()

    async def _send(self, text: str | bytes) -> None:  # audio goes out as bytes
        try:
            await self.transport.send(text)  # type: ignore[arg-type]  # the web transport sends both
        except Exception:  # the peer is gone: the reader sees the connection close
            self._closed = True
            self._wake.set()

    def _on_frame(self, frame: str | bytes) -> bool:  # the web transport sends audio as bytes
        if isinstance(frame, bytes):
            self._audio(frame)
            return False
        try:
            message = _decoder.decode(frame)
        except msgspec.DecodeError:
            log.info("call %s: a web-call frame ignored (not JSON)", self.info.call_id)
            return False
        event = message.get("event") if isinstance(message, dict) else None
        if event == "mark":
            self._events.put_nowait(MarkPlayed(str(message.get("name", "")), self.now_ms()))
        return event == "stop"

    def _audio(self, frame: bytes) -> None:
        if not frame or len(frame) > MAX_FRAME_BYTES:
            return
        pcm = frame[: len(frame) & ~1]
        self.frames_received += 1
        at_ms = self.now_ms() - len(pcm) * 1000 // (2 * WEB_RATE)
        self.recorder.caller(pcm, max(0, at_ms))
        self._events.put_nowait(AudioIn(pcm, max(0, at_ms)))
