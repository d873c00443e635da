"""A local server speaking OpenAI's wire format, for the engine adapters' tests: ``POST /v1/chat/completions``
(streamed server-sent events, tool-call deltas split across chunks, error bodies, a slow first token, a connection
dropped mid-answer), ``POST /v1/audio/transcriptions`` (multipart, a WAV file) and ``POST /v1/audio/speech``
(``pcm``: 24 kHz 16-bit mono, or ``wav``).

Answers are queued with the ``reply_*`` methods and served in order; with none queued, a chat answer echoes the
last user message. Every request is recorded in ``requests``.
"""

from __future__ import annotations

import json
import math
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PCM_RATE = 24_000


@dataclass
class SeenRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any = None
    form: dict[str, str] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)


@dataclass
class ChatReply:
    """One scripted ``/chat/completions`` answer."""

    text: str = ""
    tool_calls: list[tuple[str, str, str]] = field(default_factory=list)
    """(id, name, arguments JSON) of each call the model makes."""
    status: int = 200
    error_message: str | None = None
    first_token_delay: float = 0.0
    chunk_size: int = 4
    drop_after_chunks: int | None = None
    """Close the connection after this many chunks, without ``[DONE]`` or a finish reason."""
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    error_event: str | None = None
    """An ``{"error": ...}`` event in the stream after the text, as servers send a failure mid-answer."""


@dataclass
class SpeechReply:
    status: int = 200
    error_message: str | None = None
    as_wav_rate: int | None = None
    """Answer WAV at this rate instead of raw 24 kHz PCM."""


def tone(duration_ms: int, rate: int = PCM_RATE, frequency: float = 440.0) -> bytes:
    count = rate * duration_ms // 1000
    return struct.pack(f"<{count}h", *(int(8000 * math.sin(2 * math.pi * frequency * i / rate))
                                       for i in range(count)))


def wav_file(pcm: bytes, rate: int) -> bytes:
    return (b"RIFF" + struct.pack("<I", 36 + len(pcm)) + b"WAVE" + b"fmt "
            + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16) + b"data" + struct.pack("<I", len(pcm)) + pcm)


class OpenAiEmulator:
    def __init__(self, port: int, *, api_key: str | None = None) -> None:
        self.port = port
        self.api_key = api_key
        self.requests: list[SeenRequest] = []
        self.chat_replies: deque[ChatReply] = deque()
        self.speech_replies: deque[SpeechReply] = deque()
        self.transcripts: deque[str] = deque()
        self.transcription_error: tuple[int, str] | None = None
        self.ms_per_character = 60
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def clear(self) -> None:
        with self.lock:
            self.requests.clear()
            self.chat_replies.clear()
            self.speech_replies.clear()
            self.transcripts.clear()
            self.transcription_error = None
            self.api_key = None

    def reply(self, reply: ChatReply) -> None:
        self.chat_replies.append(reply)

    def reply_text(self, text: str, **options: Any) -> None:
        self.reply(ChatReply(text=text, **options))

    def reply_tool_calls(self, *calls: tuple[str, str, str], **options: Any) -> None:
        self.reply(ChatReply(tool_calls=list(calls), **options))

    def reply_error(self, status: int, message: str) -> None:
        self.reply(ChatReply(status=status, error_message=message))


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-emulated", "object": "chat.completion.chunk", "created": 0, "model": "emulated",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}


def _chat_events(reply: ChatReply) -> Iterator[str]:
    """The ``data:`` payloads of a streamed answer, in order."""
    yield json.dumps(_chunk({"role": "assistant", "content": ""}))
    for start in range(0, len(reply.text), max(1, reply.chunk_size)):
        yield json.dumps(_chunk({"content": reply.text[start:start + reply.chunk_size]}))
    if reply.error_event is not None:
        yield json.dumps({"error": {"message": reply.error_event, "type": "server_error"}})
        return
    for index, (call_id, name, arguments) in enumerate(reply.tool_calls):
        yield json.dumps(_chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                                 "function": {"name": name, "arguments": ""}}]}))
        # the arguments' JSON split into small pieces, as models stream them
        for start in range(0, len(arguments), 5):
            yield json.dumps(_chunk({"tool_calls": [{"index": index,
                                                     "function": {"arguments": arguments[start:start + 5]}}]}))
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    yield json.dumps(_chunk({}, finish))
    if reply.usage is not None:
        yield json.dumps({"id": "chatcmpl-emulated", "object": "chat.completion.chunk", "choices": [],
                          "usage": reply.usage})
    yield "[DONE]"


def _parse_multipart(content_type: str, body: bytes) -> tuple[dict[str, str], dict[str, bytes]]:
    message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    form: dict[str, str] = {}
    files: dict[str, bytes] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        if part.get_filename():
            files[str(name)] = payload
        else:
            form[str(name)] = payload.decode()
    return form, files


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    @property
    def emulator(self) -> OpenAiEmulator:
        return self.server.emulator

    def _json(self, status: int, document: Any) -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        self._json(status, {"error": {"message": message, "type": kind, "param": None, "code": None}})

    def _start_chunked(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _drop(self) -> None:
        self.wfile.flush()
        self.close_connection = True
        self.connection.close()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        seen = SeenRequest("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        content_type = self.headers.get("Content-Type", "")
        if content_type.startswith("application/json"):
            try:
                seen.json = json.loads(body)
            except ValueError:
                self._error(400, "We could not parse the JSON body of your request.")
                return
        elif content_type.startswith("multipart/form-data"):
            seen.form, seen.files = _parse_multipart(content_type, body)
        with self.emulator.lock:
            self.emulator.requests.append(seen)
        if self.emulator.api_key is not None and seen.headers.get("authorization") != f"Bearer {self.emulator.api_key}":
            self._error(401, "Incorrect API key provided.")
            return
        if self.path == "/v1/chat/completions":
            self._chat(seen)
        elif self.path == "/v1/audio/transcriptions":
            self._transcription(seen)
        elif self.path == "/v1/audio/speech":
            self._speech(seen)
        else:
            self._error(404, f"Unknown request URL: POST {self.path}.")

    def _chat(self, seen: SeenRequest) -> None:
        request = seen.json or {}
        emulator = self.emulator
        if not isinstance(request.get("messages"), list) or not request.get("model"):
            self._error(400, "'model' and 'messages' are required properties")
            return
        with emulator.lock:
            reply = emulator.chat_replies.popleft() if emulator.chat_replies else None
        if reply is None:
            users = [m.get("content") for m in request["messages"] if m.get("role") == "user"]
            reply = ChatReply(text=f"You said: {users[-1] if users else ''}")
        if reply.status >= 400:
            kind = "rate_limit_exceeded" if reply.status == 429 else "server_error"
            self._error(reply.status, reply.error_message or "error", kind)
            return
        if not request.get("stream"):
            self._json(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": reply.text},
                                          "finish_reason": "stop"}]})
            return
        self._start_chunked("text/event-stream")
        if reply.first_token_delay:
            time.sleep(reply.first_token_delay)
        try:
            for count, event in enumerate(_chat_events(reply)):
                if reply.drop_after_chunks is not None and count >= reply.drop_after_chunks:
                    self._drop()
                    return
                self._write_chunk(f"data: {event}\n\n".encode())
            self._end_chunked()
        except OSError:  # the client went away
            self.close_connection = True

    def _transcription(self, seen: SeenRequest) -> None:
        emulator = self.emulator
        if emulator.transcription_error is not None:
            self._error(*emulator.transcription_error)
            return
        audio = seen.files.get("file", b"")
        if not seen.form.get("model") or audio[:4] != b"RIFF" or audio[8:12] != b"WAVE":
            self._error(400, "Invalid file format. Supported formats: ['wav', 'mp3', ...]")
            return
        with emulator.lock:
            text = emulator.transcripts.popleft() if emulator.transcripts else ""
        if not text:
            rate = struct.unpack("<I", audio[24:28])[0]
            text = f"{(len(audio) - 44) * 1000 // (2 * rate)} ms of audio"
        self._json(200, {"text": text})

    def _speech(self, seen: SeenRequest) -> None:
        request = seen.json or {}
        emulator = self.emulator
        if not request.get("input") or not request.get("model") or not request.get("voice"):
            self._error(400, "'input', 'model' and 'voice' are required")
            return
        with emulator.lock:
            reply = emulator.speech_replies.popleft() if emulator.speech_replies else SpeechReply()
        if reply.status >= 400:
            self._error(reply.status, reply.error_message or "error", "server_error")
            return
        speed = float(request.get("speed") or 1.0)
        duration = int(len(request["input"]) * emulator.ms_per_character / speed)
        rate = reply.as_wav_rate or PCM_RATE
        audio = tone(duration, rate)
        if reply.as_wav_rate is not None:
            audio = wav_file(audio, rate)
            content_type = "audio/wav"
        else:
            content_type = "application/octet-stream"
        self._start_chunked(content_type)
        try:
            for start in range(0, len(audio), 4801):  # odd sizes: a chunk may split a sample
                self._write_chunk(audio[start:start + 4801])
            self._end_chunked()
        except OSError:
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    emulator: OpenAiEmulator

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):  # a client that went away (the tests' time-outs and drops)
            return
        super().handle_error(request, client_address)


def serve(*, api_key: str | None = None) -> Iterator[OpenAiEmulator]:
    """A running emulator on a free loopback port (use as a pytest fixture's body: ``yield from serve()``)."""
    server = _Server(("127.0.0.1", 0), _Handler)
    emulator = OpenAiEmulator(server.server_address[1], api_key=api_key)
    server.emulator = emulator
    # shutdown() waits for the loop to look at its flag: every 50 ms, not the standard library's 0.5 s
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield emulator
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
