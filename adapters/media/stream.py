"""A carrier's media stream as a :class:`application.ports.media.LiveMediaSession`.

The stream's websocket is a :class:`Transport` (the HTTP side adapts its websocket to it). Two tasks serve one
session: the reader turns the carrier's frames into events (caller audio decoded from μ-law and recorded on the
left channel, echoed marks, the end of the stream), and the sender sends the agent's audio in 20 ms μ-law frames at
real-time pace (each frame recorded on the right channel at the moment it is sent), with the ``mark`` messages the
runtime asked for in their place between the frames. ``clear`` drops what is still queued and tells the carrier to
drop what it buffered.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Protocol

from adapters.media import mulaw, protocols
from adapters.media.recorder import StereoRecorder
from application.ports.media import (
    AudioIn,
    CallLine,
    MarkPlayed,
    MediaEvent,
    SessionControl,
    SessionInfo,
    StreamClosed,
)

log = logging.getLogger("parley.media")

FRAME_SECONDS = protocols.FRAME_MS / 1000
BEHIND_LIMIT = 0.2
"""When the sender finds itself this far behind its schedule (a stalled loop), it starts a new schedule from now
instead of sending the missed frames in a burst."""
_SILENT_FRAME_TAIL = bytes([mulaw.SILENCE])


class Transport(Protocol):
    async def send(self, text: str) -> None: ...

    async def receive(self) -> str | bytes | None:
        """The next frame; None once the peer closed the connection."""
        ...

    async def close(self, code: int = 1000) -> None: ...


class _Mark:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class CarrierStreamSession:
    """One call's carrier media stream (module docstring). ``start()`` starts its reader and sender, ``stop()``
    ends them; the runtime uses the :class:`MediaSession` methods in between."""

    def __init__(self, info: SessionInfo, start: protocols.Start, transport: Transport, line: CallLine, *,
                 monotonic: Callable[[], float] = time.monotonic,
                 frame_gap: Callable[[float], object] | None = None) -> None:
        """``frame_gap(seconds)``: told the time between two consecutive outbound frames while audio plays."""
        self._info, self.start_message, self.transport, self.line = info, start, transport, line
        self.dialect = protocols.Dialect(start)
        self.recorder = StereoRecorder(protocols.MULAW_RATE)
        self._monotonic = monotonic
        self._frame_gap = frame_gap
        self._t0 = monotonic()
        self._events: asyncio.Queue[MediaEvent] = asyncio.Queue()
        self._queue: collections.deque[bytes | _Mark] = collections.deque()
        self._wake = asyncio.Event()
        self._ended = asyncio.Event()
        self._remainder = b""
        self._frames_sent = 0
        self._frames_since_clear = 0
        self._generation = 0
        self._closed = False
        self._end_announced = False
        self._tasks: list[asyncio.Task[None]] = []
        self.frames_received = 0

    # -- the runtime's view (MediaSession)

    @property
    def info(self) -> SessionInfo:
        return self._info

    async def events(self) -> AsyncIterator[MediaEvent]:
        while True:
            event = await self._events.get()
            yield event
            if isinstance(event, StreamClosed):
                return

    async def play(self, pcm: bytes) -> None:
        if self._closed or not pcm:
            return
        ulaw = self._remainder + mulaw.encode(pcm)
        whole = len(ulaw) - len(ulaw) % protocols.FRAME_BYTES
        frames = [ulaw[i:i + protocols.FRAME_BYTES] for i in range(0, whole, protocols.FRAME_BYTES)]
        tail = ulaw[whole:]
        if tail:  # the last few samples go out as a frame padded with silence (at most 20 ms)
            frames.append(tail.ljust(protocols.FRAME_BYTES, _SILENT_FRAME_TAIL))
        self._remainder = b""
        self._queue.extend(frames)
        self._wake.set()

    async def mark(self, name: str) -> None:
        if self._closed:
            return
        self._queue.append(_Mark(name))
        self._wake.set()

    async def clear(self) -> int:
        dropped = [item for item in self._queue if isinstance(item, _Mark)]
        self._queue.clear()
        self._generation += 1
        heard = self._frames_since_clear * protocols.FRAME_MS
        self._frames_since_clear = 0
        for item in dropped:  # as the carriers do for the marks they had buffered
            self._events.put_nowait(MarkPlayed(item.name, self.now_ms()))
        if not self._closed:
            await self._send(self.dialect.clear())
        return heard

    def sent_ms(self) -> int:
        return self._frames_sent * protocols.FRAME_MS

    def now_ms(self) -> int:
        return int((self._monotonic() - self._t0) * 1000)

    async def transfer(self, to_phone: str) -> None:
        await self.line.transfer(self._info.organization_id, self._info.call_id, to_phone)
        await self.close("transferred")

    async def hang_up(self) -> None:
        try:
            await self.line.hang_up(self._info.organization_id, self._info.call_id)
        except Exception as exc:  # the stream is ended on our side whatever the carrier says
            log.warning("hanging up call %s at the carrier failed: %s", self._info.call_id, exc)
        await self.close("agent_hangup")

    # -- the endpoint's side (LiveMediaSession)

    def deliver(self, control: SessionControl) -> None:
        if not self._end_announced:
            self._events.put_nowait(replace(control, at_ms=self.now_ms()))

    def recording(self) -> bytes | None:
        if not self.recorder.left.samples and not self.recorder.right.samples:
            return None
        return self.recorder.wav()

    async def close(self, reason: str) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.clear()
        self._wake.set()
        with contextlib.suppress(Exception):
            await self.transport.close(1000)
        self._announce_end(reason)

    @property
    def closed(self) -> bool:
        return self._closed

    async def wait_closed(self) -> None:
        await self._ended.wait()

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._read(), name=f"media-read-{self._info.call_id}"),
                       asyncio.create_task(self._send_paced(), name=f"media-send-{self._info.call_id}")]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    # -- inside

    def _announce_end(self, reason: str) -> None:
        self._ended.set()
        if not self._end_announced:
            self._end_announced = True
            self._events.put_nowait(StreamClosed(self.now_ms(), reason))

    async def _send(self, text: str) -> None:
        try:
            await self.transport.send(text)
        except Exception:  # the peer is gone: the reader sees the connection close
            self._closed = True
            self._wake.set()

    async def _read(self) -> None:
        """Read frames until the stream ends; each frame goes to :meth:`_on_frame` (True: the peer said stop)."""
        reason = "hangup"
        try:
            while True:
                frame = await self.transport.receive()
                if frame is None or self._on_frame(frame):
                    break
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reason = "stream_error"
            log.warning("call %s: the media stream broke: %s", self._info.call_id, exc)
        self._closed = True
        self._queue.clear()
        self._wake.set()
        self._announce_end(reason)

    def _on_frame(self, frame: str | bytes) -> bool:
        try:
            message = protocols.read(frame if isinstance(frame, str) else frame.decode("utf-8", "replace"))
        except protocols.StreamProtocolError as exc:
            log.warning("call %s: a media-stream frame ignored (%s)", self._info.call_id, exc)
            return False
        if isinstance(message, protocols.Media):
            if message.track in ("inbound", "inbound_track"):
                self.frames_received += 1
                at_ms = message.timestamp_ms if message.timestamp_ms is not None else self.now_ms()
                self.recorder.caller(message.payload, at_ms)
                self._events.put_nowait(AudioIn(mulaw.decode(message.payload), at_ms))
        elif isinstance(message, protocols.Mark):
            self._events.put_nowait(MarkPlayed(message.name, self.now_ms()))
        return isinstance(message, protocols.Stop)

    async def _send_paced(self) -> None:
        loop = asyncio.get_running_loop()
        next_at: float | None = None
        last_sent: float | None = None
        while not self._closed:
            if not self._queue:
                self._wake.clear()
                next_at = last_sent = None
                await self._wake.wait()
                continue
            head = self._queue[0]
            if isinstance(head, _Mark):
                self._queue.popleft()
                await self._send(self.dialect.mark(head.name))
                continue
            now = loop.time()
            if next_at is None or now - next_at > BEHIND_LIMIT:
                next_at = now  # a new schedule (after a stall: the gap still counts, the burst is avoided)
            if next_at > now:
                generation = self._generation
                await asyncio.sleep(next_at - now)
                if generation != self._generation or not self._queue:  # cleared (or closed) while waiting
                    continue
                head = self._queue[0]
                if isinstance(head, _Mark):
                    continue
            self._queue.popleft()
            assert isinstance(head, bytes)
            self.recorder.agent(head, self.now_ms())
            sent_at = loop.time()
            if last_sent is not None and self._frame_gap is not None:
                self._frame_gap(sent_at - last_sent)
            last_sent = sent_at
            await self._send(self.dialect.media(head))
            self._frames_sent += 1
            self._frames_since_clear += 1
            next_at += FRAME_SECONDS
