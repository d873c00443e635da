"""The caller's side of a media stream, for the tests and the benches: what a carrier sends to Parley's media
endpoint and what it does with what Parley sends back, in Twilio's or Telnyx's protocol.

``MediaStreamCaller`` opens the stream (``connected``, then ``start``), plays a caller's audio (16-bit PCM, sent as
μ-law in 20 ms ``media`` frames, at real-time pace or as fast as asked), keeps what Parley sends (``media`` decoded
to PCM with each frame's arrival time, ``mark`` names, which it echoes as a carrier does once the audio before them
has been played, ``clear`` times) and ends it (``stop``). The carrier emulators use it for their calls' audio.

``StreamingCallers`` is the emulators' media side: when an emulated carrier answers a call that asked for a stream,
it opens the stream's URL (``ws://`` to a loopback host, the URL's path into an in-process app otherwise), plays a
caller's audio (speech made offline by espeak-ng when it is installed, a tone otherwise), keeps what Parley sends
back and hangs up after ``hang_up_after`` seconds unless Parley closed the stream first. Given a ``script`` instead
(``Say``, ``Pause``, ``Listen``, ``Interrupt``, ``HangUp`` steps), the caller holds a timed conversation: it sends
silence frames between its utterances as a carrier does (the line is never quiet), waits for the agent to speak
and stop, or speaks over the agent's audio; ``MediaStreamCaller.said`` keeps when each utterance went out.

Two transports: ``AsgiWebSocket`` drives an ASGI app in the test's own event loop (no server), ``TcpWebSocket`` a
real server over TCP (RFC 6455, client side: masked frames, text and close; enough for the media protocols).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import itertools
import json
import os
import struct
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

FRAME_BYTES = 160  # 20 ms of μ-law at 8 kHz
SILENT_FRAME = b"\xff" * FRAME_BYTES  # μ-law silence


# ---------------------------------------------------------------------------------------------- μ-law (reference)


def _ulaw_decode(code: int) -> int:
    code = ~code & 0xFF
    magnitude = ((((code & 0x0F) << 3) + 0x84) << ((code >> 4) & 0x07)) - 0x84
    return -magnitude if code & 0x80 else magnitude


_DECODE = [_ulaw_decode(code) for code in range(256)]


def _ulaw_encode(sample: int) -> int:
    sign = 0x80 if sample < 0 else 0
    magnitude = min(-sample if sign else sample, 32635) + 0x84
    exponent = max(0, magnitude.bit_length() - 8)
    return ~(sign | (exponent << 4) | ((magnitude >> (exponent + 3)) & 0x0F)) & 0xFF


def ulaw_from_pcm(pcm: bytes) -> bytes:
    """The emulator's own encoder (independent of Parley's), sample by sample."""
    return bytes(_ulaw_encode(s) for (s,) in struct.iter_unpack("<h", pcm[: len(pcm) & ~1]))


def pcm_from_ulaw(ulaw: bytes) -> bytes:
    return struct.pack(f"<{len(ulaw)}h", *(_DECODE[b] for b in ulaw))


# ---------------------------------------------------------------------------------------------- transports


class WebSocketClosed(Exception):
    def __init__(self, code: int | None) -> None:
        super().__init__(f"closed with {code}")
        self.code = code


class ClientSocket(Protocol):
    close_code: int | None

    async def send_text(self, text: str) -> None: ...

    async def receive_text(self) -> str:
        """The next text frame; WebSocketClosed once the server closed."""
        ...

    async def close(self, code: int = 1000) -> None: ...


class AsgiWebSocket:
    """A websocket to an ASGI app, in this event loop. ``await AsgiWebSocket.connect(app, path)``; a refused
    handshake raises WebSocketClosed with the server's close code."""

    def __init__(self, app: Any, path: str) -> None:
        self.app, self.path = app, path
        self.to_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.from_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.close_code: int | None = None
        self.task: asyncio.Task[None] | None = None

    @classmethod
    async def connect(cls, app: Any, path: str) -> AsgiWebSocket:
        socket = cls(app, path)
        await socket._handshake()
        return socket

    async def _handshake(self) -> None:
        path, _, query = self.path.partition("?")
        scope = {"type": "websocket", "asgi": {"version": "3.0"}, "http_version": "1.1", "scheme": "ws",
                 "path": path, "raw_path": path.encode(), "query_string": query.encode(), "root_path": "",
                 "headers": [(b"host", b"parley.test")], "client": ("127.0.0.1", 40000),
                 "server": ("parley.test", 80), "subprotocols": [], "state": {}}
        self.task = asyncio.create_task(self._run(scope))
        await self.to_app.put({"type": "websocket.connect"})
        message = await self.from_app.get()
        if message["type"] == "websocket.close":
            self.close_code = message.get("code", 1000)
            raise WebSocketClosed(self.close_code)
        assert message["type"] == "websocket.accept", message

    async def _run(self, scope: dict[str, Any]) -> None:
        try:
            await self.app(scope, self.to_app.get, self.from_app.put)
        finally:
            await self.from_app.put({"type": "websocket.close", "code": self.close_code or 1006})

    async def send_text(self, text: str) -> None:
        if self.close_code is not None:
            raise WebSocketClosed(self.close_code)
        await self.to_app.put({"type": "websocket.receive", "text": text})

    async def receive_text(self) -> str:
        if self.close_code is not None:
            raise WebSocketClosed(self.close_code)
        message = await self.from_app.get()
        if message["type"] == "websocket.close":
            self.close_code = message.get("code", 1000)
            raise WebSocketClosed(self.close_code)
        return str(message.get("text") or (message.get("bytes") or b"").decode())

    async def close(self, code: int = 1000) -> None:
        if self.close_code is None:
            self.close_code = code
        await self.to_app.put({"type": "websocket.disconnect", "code": code})
        if self.task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.task, timeout=10)


def _masked(payload: bytes, mask: bytes) -> bytes:
    """RFC 6455 masking, as one big-integer XOR (no per-byte Python)."""
    if not payload:
        return payload
    key = (mask * (len(payload) // 4 + 1))[: len(payload)]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(len(payload), "big")


class TcpWebSocket:
    """A websocket client over TCP (``ws://host:port/path``): RFC 6455's client side, text frames only."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.close_code: int | None = None

    @classmethod
    async def connect(cls, url: str) -> TcpWebSocket:
        parts = urlsplit(url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port or 80)
        key = base64.b64encode(os.urandom(16)).decode()
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        writer.write((f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            writer.close()
            raise WebSocketClosed(None)
        return cls(reader, writer)

    async def send_text(self, text: str) -> None:
        await self._send(0x1, text.encode())

    async def _send(self, opcode: int, payload: bytes) -> None:
        if self.close_code is not None:
            raise WebSocketClosed(self.close_code)
        mask = os.urandom(4)
        length = len(payload)
        header = bytes([0x80 | opcode])
        if length < 126:
            header += bytes([0x80 | length])
        elif length < 65536:
            header += bytes([0x80 | 126]) + struct.pack("!H", length)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", length)
        self.writer.write(header + mask + _masked(payload, mask))
        await self.writer.drain()

    async def receive_text(self) -> str:
        while True:
            if self.close_code is not None:
                raise WebSocketClosed(self.close_code)
            try:
                first, second = await self.reader.readexactly(2)
            except (asyncio.IncompleteReadError, ConnectionError):
                self.close_code = 1006
                raise WebSocketClosed(1006) from None
            length = second & 0x7F
            if length == 126:
                (length,) = struct.unpack("!H", await self.reader.readexactly(2))
            elif length == 127:
                (length,) = struct.unpack("!Q", await self.reader.readexactly(8))
            payload = await self.reader.readexactly(length)
            opcode = first & 0x0F
            if opcode == 0x8:
                self.close_code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                with contextlib.suppress(Exception):
                    await self._send_close(self.close_code)
                raise WebSocketClosed(self.close_code)
            if opcode == 0x9:
                await self._send(0xA, payload)
                continue
            if opcode in (0x1, 0x2):
                return payload.decode()

    async def _send_close(self, code: int) -> None:
        mask = os.urandom(4)
        payload = struct.pack("!H", code)
        self.writer.write(bytes([0x88, 0x80 | len(payload)]) + mask + _masked(payload, mask))
        await self.writer.drain()

    async def close(self, code: int = 1000) -> None:
        if self.close_code is None:
            self.close_code = code
            with contextlib.suppress(Exception):
                await self._send_close(code)
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()


# ---------------------------------------------------------------------------------------------- the caller


@dataclass
class Received:
    media: list[tuple[float, bytes]] = field(default_factory=list)
    """(arrival time on time.monotonic, the frame's μ-law)."""
    marks: list[str] = field(default_factory=list)
    clears: list[float] = field(default_factory=list)
    other: list[dict[str, Any]] = field(default_factory=list)

    @property
    def agent_pcm(self) -> bytes:
        return pcm_from_ulaw(b"".join(frame for _, frame in self.media))

    def gaps_ms(self) -> list[float]:
        times = [at for at, _ in self.media]
        return [(b - a) * 1000 for a, b in itertools.pairwise(times)]


class MediaStreamCaller:
    """A carrier's side of one media stream (module docstring). ``echo_marks``: answer each ``mark`` as a carrier
    does once everything sent before it has been played."""

    def __init__(self, socket: ClientSocket, carrier: Literal["twilio", "telnyx"] = "twilio", *,
                 call_sid: str | None = None, parameters: dict[str, str] | None = None,
                 echo_marks: bool = True) -> None:
        self.socket, self.carrier, self.echo_marks = socket, carrier, echo_marks
        self.stream_id = ("MZ" if carrier == "twilio" else "") + uuid.uuid4().hex
        self.call_sid = call_sid or ("CA" + uuid.uuid4().hex if carrier == "twilio" else "v3:" + uuid.uuid4().hex)
        self.parameters = parameters or {}
        self.received = Received()
        self.closed: WebSocketClosed | None = None
        self.sequence = 0
        self.sent_ms = 0
        self._reader: asyncio.Task[None] | None = None
        self._playout_until = 0.0
        self._echoes: set[asyncio.Future[None]] = set()
        self.said: list[tuple[float, float, str]] = []
        """(first frame sent, last frame sent, on time.monotonic; what was said) of each scripted utterance."""

    # -- what the carrier sends

    def _message(self, event: str, body: dict[str, Any]) -> str:
        self.sequence += 1
        if self.carrier == "twilio":
            return json.dumps({"event": event, "sequenceNumber": str(self.sequence), "streamSid": self.stream_id,
                               **body})
        return json.dumps({"event": event, "sequence_number": str(self.sequence), "stream_id": self.stream_id,
                           **body})

    async def start(self) -> None:
        if self.carrier == "twilio":
            await self.socket.send_text(json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}))
            await self.socket.send_text(self._message("start", {"start": {
                "streamSid": self.stream_id, "accountSid": "AC" + "0" * 32, "callSid": self.call_sid,
                "tracks": ["inbound"], "customParameters": self.parameters,
                "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}}}))
        else:
            await self.socket.send_text(json.dumps({"event": "connected", "version": "1.0.0"}))
            await self.socket.send_text(self._message("start", {"start": {
                "user_id": str(uuid.uuid4()), "call_control_id": self.call_sid, "client_state": "",
                "custom_parameters": self.parameters,
                "media_format": {"encoding": "PCMU", "sample_rate": 8000, "channels": 1}}}))
        self._reader = asyncio.create_task(self._read())

    async def send_media(self, ulaw: bytes) -> None:
        payload = base64.b64encode(ulaw).decode()
        chunk = str(self.sent_ms // 20 + 1)
        if self.carrier == "twilio":
            body = {"media": {"track": "inbound", "chunk": chunk, "timestamp": str(self.sent_ms), "payload": payload}}
        else:
            body = {"media": {"track": "inbound", "chunk": chunk, "timestamp": str(self.sent_ms), "payload": payload}}
        await self.socket.send_text(self._message("media", body))
        self.sent_ms += len(ulaw) * 1000 // 8000

    async def play(self, pcm: bytes, *, realtime: bool = True) -> None:
        """The caller speaks: ``pcm`` (16-bit mono 8 kHz) in 20 ms frames, at real-time pace unless told not to."""
        await self.play_ulaw(ulaw_from_pcm(pcm), realtime=realtime)

    async def play_ulaw(self, ulaw: bytes, *, realtime: bool = True) -> None:
        """``play`` for audio already in μ-law (a bench's callers share one encoding)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        for index, offset in enumerate(range(0, len(ulaw), FRAME_BYTES)):
            if realtime:
                delay = started + index * 0.02 - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            await self.send_media(ulaw[offset:offset + FRAME_BYTES])

    async def silence_until(self, done: Any, within: float, what: str = "the condition") -> bool:
        """Silence frames at real-time pace until ``done()`` holds (True) or Parley closed the stream (False);
        AssertionError after ``within`` seconds."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        index = 0
        while not done():
            if self.closed is not None:
                return False
            if loop.time() - started > within:
                raise AssertionError(f"{what}: not within {within} s ({self.received.marks=}, "
                                     f"{len(self.received.media)=}, {self.received.clears=})")
            delay = started + index * 0.02 - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await self.send_media(SILENT_FRAME)
            index += 1
        return True

    def agent_quiet(self, since_frames: int, quiet: float) -> bool:
        """The agent has sent audio beyond its first ``since_frames`` frames, and none for ``quiet`` seconds after
        it was played out."""
        media = self.received.media
        if len(media) <= since_frames:
            return False
        now = time.monotonic()
        return now - media[-1][0] >= quiet and now >= self._playout_until + quiet

    async def perform(self, steps: Any) -> None:
        """Play a script (``Say``, ``Pause``, ``Listen``, ``Interrupt``, ``HangUp``); stops early once Parley closed
        the stream."""
        loop = asyncio.get_running_loop()
        for step in steps:
            if self.closed is not None:
                return
            if isinstance(step, Say):
                await self._say(step.text, step.words_per_minute)
            elif isinstance(step, Pause):
                until = loop.time() + step.seconds
                await self.silence_until(lambda until=until: loop.time() >= until, step.seconds + 5, "a pause")
            elif isinstance(step, Listen):
                seen = len(self.received.media)
                await self.silence_until(lambda seen=seen, step=step: self.agent_quiet(seen, step.quiet),
                                         step.within, "the agent to speak and stop")
            elif isinstance(step, Interrupt):
                seen = len(self.received.media)
                frames = seen + int(step.after / 0.02)
                if await self.silence_until(lambda frames=frames: len(self.received.media) >= frames, step.within,
                                            "the agent's audio to interrupt"):
                    await self._say(step.text, step.words_per_minute)
            elif isinstance(step, HangUp):
                await self.hang_up()
                return

    async def _say(self, text: str, words_per_minute: int) -> None:
        pcm = caller_speech(text, words_per_minute=words_per_minute)
        first = time.monotonic()
        await self.play(pcm)
        self.said.append((first, time.monotonic(), text))

    async def stop(self) -> None:
        await self.socket.send_text(self._message("stop", {"stop": {"callSid": self.call_sid}}
                                                  if self.carrier == "twilio" else {"stop": {}}))

    async def hang_up(self) -> None:
        """Stop, then close the socket (what a carrier does when the caller hangs up)."""
        with contextlib.suppress(WebSocketClosed):
            await self.stop()
        await self.socket.close(1000)
        await self.finished(10)

    # -- what Parley sends

    async def _read(self) -> None:
        try:
            while True:
                message = json.loads(await self.socket.receive_text())
                event = message.get("event")
                now = time.monotonic()
                if event == "media":
                    frame = base64.b64decode(message["media"]["payload"])
                    self.received.media.append((now, frame))
                    self._playout_until = max(self._playout_until, now) + len(frame) / 8000
                elif event == "mark":
                    name = message["mark"]["name"]
                    self.received.marks.append(name)
                    if self.echo_marks:
                        asyncio.get_running_loop().call_later(max(0.0, self._playout_until - now),
                                                              self._echo, name)
                elif event == "clear":
                    self.received.clears.append(now)
                    self._playout_until = now
                else:
                    self.received.other.append(message)
        except WebSocketClosed as closed:
            self.closed = closed

    def _echo(self, name: str) -> None:
        if self.closed is None:
            task = asyncio.ensure_future(self._send_quietly(self._message("mark", {"mark": {"name": name}})))
            self._echoes.add(task)
            task.add_done_callback(self._echoes.discard)

    async def _send_quietly(self, text: str) -> None:
        with contextlib.suppress(WebSocketClosed, ConnectionError):
            await self.socket.send_text(text)

    async def finished(self, within: float = 10.0) -> WebSocketClosed | None:
        """Until Parley closed the stream (or ``within`` seconds)."""
        if self._reader is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._reader), within)
        return self.closed

    async def wait_for(self, predicate: Any, within: float = 10.0) -> None:
        """Until ``predicate(self.received)`` holds (AssertionError after ``within`` seconds)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + within
        while not predicate(self.received):
            if loop.time() > until:
                raise AssertionError(f"not received in {within} s: {self.received.marks=}, "
                                     f"{len(self.received.media)=}, {self.closed=}")
            await asyncio.sleep(0.01)


# ---------------------------------------------------------------------------------------------- the emulators' callers

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@dataclass(frozen=True)
class Say:
    """The caller says ``text`` (espeak-ng, real-time pace)."""

    text: str
    words_per_minute: int = 150


@dataclass(frozen=True)
class Pause:
    """Silence frames for ``seconds``."""

    seconds: float


@dataclass(frozen=True)
class Listen:
    """Silence frames until the agent has spoken and stopped: new agent audio since the step began, then nothing
    for ``quiet`` seconds after it was played out (AssertionError after ``within`` seconds)."""

    within: float = 20.0
    quiet: float = 0.8


@dataclass(frozen=True)
class Interrupt:
    """Silence frames until ``after`` seconds of new agent audio have arrived, then say ``text`` over it."""

    text: str
    after: float = 0.6
    within: float = 20.0
    words_per_minute: int = 150


@dataclass(frozen=True)
class HangUp:
    """The caller hangs up (``stop``, then the socket closes)."""


@functools.lru_cache(maxsize=64)
def caller_speech(text: str = "Hello, I would like to book an appointment please.", *,
                  words_per_minute: int = 160) -> bytes:
    """What the emulated caller says: 16-bit mono PCM at 8 kHz, spoken by espeak-ng when it is installed (offline),
    else a 1.5 s tone."""
    import array
    import math
    import shutil
    import subprocess
    import wave
    from io import BytesIO

    if shutil.which("espeak-ng"):
        made = subprocess.run(["espeak-ng", "-v", "en-us", "--stdout", "-s", str(words_per_minute), text],
                              capture_output=True, timeout=30, check=False)
        if made.returncode == 0 and made.stdout:
            with wave.open(BytesIO(made.stdout)) as spoken:
                rate, pcm = spoken.getframerate(), spoken.readframes(spoken.getnframes())
            samples = array.array("h", pcm)
            step = rate / 8000  # espeak-ng speaks at 22 050 Hz: pick the nearest sample (enough for a test)
            return array.array("h", (samples[int(i * step)] for i in range(int(len(samples) / step)))).tobytes()
    return array.array("h", (int(7000 * math.sin(2 * math.pi * 350 * i / 8000)) for i in range(12000))).tobytes()


class StreamingCallers:
    """The emulators' media side (module docstring). ``app``: the ASGI app that serves a non-loopback stream URL
    (a test's in-process Parley). ``callers`` by the carrier's call id; ``ended(call_id)`` waits until that
    call's stream is over."""

    def __init__(self, *, app: Any = None, audio: bytes | None = None, hang_up_after: float = 4.0,
                 realtime: bool = True, script: Any = None) -> None:
        """``script``: steps the caller plays instead of ``audio`` (module docstring), then silence frames until
        Parley closes the stream or ``hang_up_after`` seconds pass."""
        self.app, self.hang_up_after, self.realtime, self.script = app, hang_up_after, realtime, script
        self.audio = audio if audio is not None else caller_speech()
        self.callers: dict[str, MediaStreamCaller] = {}
        self.hung_up: dict[str, bool] = {}
        self._done: dict[str, asyncio.Event] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def open(self, carrier: Literal["twilio", "telnyx"], url: str, call_id: str,
                   parameters: dict[str, str] | None = None) -> MediaStreamCaller:
        parts = urlsplit(url)
        socket: ClientSocket
        if parts.hostname in LOOPBACK:
            socket = await TcpWebSocket.connect(url.replace("wss://", "ws://", 1))
        else:
            assert self.app is not None, f"no app serves {url}"
            socket = await AsgiWebSocket.connect(self.app, parts.path + (f"?{parts.query}" if parts.query else ""))
        caller = MediaStreamCaller(socket, carrier, call_sid=call_id, parameters=parameters)
        self.callers[call_id] = caller
        self._done[call_id] = asyncio.Event()
        await caller.start()
        task = asyncio.ensure_future(self._talk(call_id, caller))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return caller

    async def connect(self, call: Any) -> None:
        """The Telnyx emulator's ``MediaHook``."""
        await self.open("telnyx", call.stream_url, call.call_control_id)

    async def _talk(self, call_id: str, caller: MediaStreamCaller) -> None:
        try:
            with contextlib.suppress(WebSocketClosed, ConnectionError):
                if self.script is not None:
                    await caller.perform(self.script)
                    loop = asyncio.get_running_loop()
                    until = loop.time() + self.hang_up_after
                    await caller.silence_until(lambda: loop.time() >= until, self.hang_up_after + 5, "the end")
                else:
                    await caller.play(self.audio, realtime=self.realtime)
            waited = self.hang_up_after if self.script is None else 0.5
            if await caller.finished(waited) is None:  # Parley did not close it: the caller hangs up
                self.hung_up[call_id] = True
                with contextlib.suppress(WebSocketClosed, ConnectionError):
                    await caller.hang_up()
            else:
                self.hung_up[call_id] = False
        finally:
            self._done[call_id].set()

    async def ended(self, call_id: str, within: float = 20.0) -> MediaStreamCaller:
        loop = asyncio.get_running_loop()
        until = loop.time() + within
        while call_id not in self._done:
            assert loop.time() < until, f"no media stream was opened for {call_id}"
            await asyncio.sleep(0.02)
        await asyncio.wait_for(self._done[call_id].wait(), max(0.1, until - loop.time()))
        return self.callers[call_id]
