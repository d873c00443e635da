"""Engines over OpenAI's wire format: ``/chat/completions`` (streamed, with tools), ``/audio/transcriptions`` and
``/audio/speech``. OpenAI itself, Azure's OpenAI-compatible endpoints, vLLM, Ollama and llama.cpp's server speak it.

Every request goes through the egress (:class:`application.ports.egress.SafeHttp`): the provider's base URL is
checked at each use like any outbound URL. What goes wrong becomes :class:`EngineError`, ``retryable`` for a
rate limit (429), a server error (5xx), a time-out or a dropped connection.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from adapters.engines.audio import LinearResampler, WavFormatError, mono, parse_wav_header, wav
from application.ports.egress import RequestFailed, SafeHttp
from application.ports.engines import (
    ChatMessage,
    ChatRequest,
    EngineError,
    Finished,
    LlmEvent,
    TextDelta,
    ToolCall,
    ToolCallRequest,
    Transcript,
)
from domain.errors import DomainError

OPENAI_PCM_RATE = 24_000
"""OpenAI's ``response_format: pcm`` is 24 kHz 16-bit signed little-endian mono."""
DEFAULT_TRANSCRIPTION_MODEL = "whisper-1"
DEFAULT_SPEECH_MODEL = "tts-1"
DEFAULT_VOICE = "alloy"
ERROR_BODY_LIMIT = 16_384

_FINISH_REASONS: dict[str, Any] = {"stop": "stop", "tool_calls": "tool_calls", "function_call": "tool_calls",
                                   "length": "length"}


@dataclass(frozen=True, slots=True)
class OpenAiEndpoint:
    """A provider's base URL (``https://api.openai.com/v1``, ``http://127.0.0.1:11434/v1``) and key."""

    base_url: str
    api_key: str | None = field(default=None, repr=False)
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    """The longest wait for the next piece of an answer (the first token included)."""

    def url(self, path: str) -> str:
        return self.base_url.rstrip("/") + path

    def headers(self, content_type: str | None = "application/json") -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream"}
        if content_type:
            headers["Content-Type"] = content_type
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers


def _retryable(status: int) -> bool:
    return status == 429 or status >= 500


def _error_message(status: int, body: bytes) -> str:
    """OpenAI's ``{"error": {"message": ...}}`` (or ``{"error": "..."}``, as some servers send), else the status."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        document = None
    if isinstance(document, dict):
        error = document.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return f"the model server answered {status}: {error['message']}"
        if isinstance(error, str):
            return f"the model server answered {status}: {error}"
        if isinstance(document.get("message"), str):
            return f"the model server answered {status}: {document['message']}"
    return f"the model server answered {status}"


def _failed(exc: Exception) -> EngineError:
    if isinstance(exc, RequestFailed):
        return EngineError(f"the model server could not be reached: {exc.message}", retryable=True)
    return EngineError(f"the model server's address is refused: {exc}", retryable=False)


def _message(message: ChatMessage) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        wire["content"] = message.content or None
        wire["tool_calls"] = [
            {"id": call.id, "type": "function",
             "function": {"name": call.name, "arguments": json.dumps(call.arguments, separators=(",", ":"))}}
            for call in message.tool_calls
        ]
    if message.tool_call_id is not None:
        wire["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        wire["name"] = message.name
    return wire


def chat_body(request: ChatRequest) -> dict[str, Any]:
    """The ``/chat/completions`` request for ``request``, streamed."""
    body: dict[str, Any] = {"model": request.model, "messages": [_message(m) for m in request.messages],
                            "stream": True}
    if request.tools:
        body["tools"] = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                           "parameters": t.parameters}} for t in request.tools]
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    if request.response_format_json:
        body["response_format"] = {"type": "json_object"}
    return body


@dataclass(slots=True)
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


class _ToolCallAssembler:
    """Tool calls arrive as deltas keyed by ``index``: the id and name once, the arguments' JSON in pieces."""

    def __init__(self) -> None:
        self.calls: dict[int, _PartialCall] = {}

    def add(self, deltas: Any) -> None:
        if not isinstance(deltas, list):
            return
        for position, delta in enumerate(deltas):
            if not isinstance(delta, dict):
                continue
            index = delta.get("index", position)
            partial = self.calls.setdefault(index if isinstance(index, int) else position, _PartialCall())
            if isinstance(delta.get("id"), str) and delta["id"]:
                partial.id = delta["id"]
            function = delta.get("function")
            if isinstance(function, dict):
                if isinstance(function.get("name"), str):
                    partial.name += function["name"]
                arguments = function.get("arguments")
                if isinstance(arguments, str):
                    partial.arguments += arguments
                elif isinstance(arguments, dict):  # some servers send the object itself
                    partial.arguments += json.dumps(arguments)

    def complete(self) -> tuple[ToolCall, ...]:
        calls: list[ToolCall] = []
        for index in sorted(self.calls):
            partial = self.calls[index]
            if not partial.name:
                raise EngineError("the model asked for a tool without naming it", retryable=True)
            try:
                arguments = json.loads(partial.arguments) if partial.arguments.strip() else {}
            except ValueError:
                raise EngineError(f"the model's arguments for {partial.name} are not JSON", retryable=True) from None
            if not isinstance(arguments, dict):
                raise EngineError(f"the model's arguments for {partial.name} are not a JSON object", retryable=True)
            calls.append(ToolCall(partial.id or f"call_{index}_{secrets.token_hex(4)}", partial.name, arguments))
        return tuple(calls)


async def _error_body(chunks: AsyncIterator[bytes]) -> bytes:
    body = b""
    async for chunk in chunks:
        body += chunk
        if len(body) >= ERROR_BODY_LIMIT:
            break
    return body[:ERROR_BODY_LIMIT]


class OpenAiLanguageModel:
    """:class:`application.ports.engines.LanguageModel` over ``POST {base_url}/chat/completions``, ``stream: true``:
    server-sent events ``data: {chunk}`` up to ``data: [DONE]``."""

    def __init__(self, http: SafeHttp, endpoint: OpenAiEndpoint) -> None:
        self.http, self.endpoint = http, endpoint

    async def stream(self, request: ChatRequest) -> AsyncIterator[LlmEvent]:
        body = json.dumps(chat_body(request)).encode()
        try:
            async with self.http.stream("POST", self.endpoint.url("/chat/completions"), headers=self.endpoint.headers(),
                                        body=body, connect_timeout=self.endpoint.connect_timeout,
                                        read_timeout=self.endpoint.read_timeout) as response:
                if response.status >= 300:
                    message = _error_message(response.status, await _error_body(response.chunks()))
                    raise EngineError(message, retryable=_retryable(response.status))
                async for event in self._events(response.lines()):
                    yield event
        except (RequestFailed, DomainError) as exc:
            raise _failed(exc) from None

    async def _events(self, lines: AsyncIterator[str]) -> AsyncIterator[LlmEvent]:
        tools = _ToolCallAssembler()
        reason: str | None = None
        usage: dict[str, int] = {}
        done = False
        async for raw in lines:
            line = raw.strip()
            if not line.startswith("data:"):
                continue  # blank separators, comments (": keep-alive"), event names
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            try:
                chunk = json.loads(data)
            except ValueError:
                raise EngineError("the model server sent a malformed event", retryable=True) from None
            if not isinstance(chunk, dict):
                continue
            if "error" in chunk:
                raise EngineError(_error_message(200, data.encode()).replace(" answered 200", " failed"),
                                  retryable=True)
            if isinstance(chunk.get("usage"), dict):
                usage = {k: v for k, v in chunk["usage"].items() if isinstance(v, int)}
            choices = chunk.get("choices")
            if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
                continue
            choice = choices[0]
            delta = choice.get("delta") or {}
            if isinstance(delta, dict):
                content = delta.get("content")
                if isinstance(content, str) and content:
                    yield TextDelta(content)
                if delta.get("tool_calls"):
                    tools.add(delta["tool_calls"])
            if choice.get("finish_reason"):
                reason = str(choice["finish_reason"])
        if not done and reason is None:
            raise EngineError("the model server's answer ended before it was complete", retryable=True)
        if tools.calls:
            yield ToolCallRequest(tools.complete())
            yield Finished("tool_calls", usage)
            return
        yield Finished(_FINISH_REASONS.get(reason or "stop", "stop"), usage)


def _language_code(language: str | None) -> str | None:
    """ISO-639-1, as ``/audio/transcriptions`` takes it: ``en-US`` -> ``en``."""
    if not language:
        return None
    return language.split("-")[0].split("_")[0].lower() or None


def multipart_body(fields: Mapping[str, str], file_field: str, filename: str, content_type: str,
                   content: bytes) -> tuple[bytes, str]:
    """A ``multipart/form-data`` body and its Content-Type."""
    boundary = "parley-" + secrets.token_hex(16)
    parts: list[bytes] = []
    for name, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{file_field}"; filename="{filename}"\r\n'
                 f"Content-Type: {content_type}\r\n\r\n".encode() + content + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


class OpenAiSpeechToText:
    """:class:`application.ports.engines.SpeechToText` over ``POST {base_url}/audio/transcriptions``: the utterance
    sent as a WAV file, the answer's ``text`` read."""

    def __init__(self, http: SafeHttp, endpoint: OpenAiEndpoint, *, model: str | None = None,
                 language: str | None = None) -> None:
        self.http, self.endpoint = http, endpoint
        self.model = model or DEFAULT_TRANSCRIPTION_MODEL
        self.language = language

    async def transcribe(self, pcm: bytes, sample_rate: int, *, language: str | None = None) -> Transcript:
        fields = {"model": self.model, "response_format": "json"}
        code = _language_code(language or self.language)
        if code:
            fields["language"] = code
        body, content_type = multipart_body(fields, "file", "utterance.wav", "audio/wav", wav(pcm, sample_rate))
        try:
            response = await self.http.request(
                "POST", self.endpoint.url("/audio/transcriptions"), headers=self.endpoint.headers(content_type),
                body=body, timeout=self.endpoint.connect_timeout + self.endpoint.read_timeout)
        except (RequestFailed, DomainError) as exc:
            raise _failed(exc) from None
        if response.status >= 300:
            raise EngineError(_error_message(response.status, response.body), retryable=_retryable(response.status))
        try:
            document = json.loads(response.body)
        except (ValueError, UnicodeDecodeError):
            raise EngineError("the transcription is not JSON", retryable=True) from None
        if not isinstance(document, dict) or not isinstance(document.get("text"), str):
            raise EngineError("the transcription has no text", retryable=True)
        found = document.get("language")
        return Transcript(document["text"].strip(), found if isinstance(found, str) else code)


class OpenAiTextToSpeech:
    """:class:`application.ports.engines.TextToSpeech` over ``POST {base_url}/audio/speech`` with
    ``response_format: pcm`` (24 kHz 16-bit mono), resampled to the asked rate as it streams in. A server that
    answers WAV instead (its header says so) is read as WAV at the rate the header gives."""

    def __init__(self, http: SafeHttp, endpoint: OpenAiEndpoint, *, model: str | None = None,
                 pcm_rate: int = OPENAI_PCM_RATE) -> None:
        self.http, self.endpoint = http, endpoint
        self.model = model or DEFAULT_SPEECH_MODEL
        self.pcm_rate = pcm_rate

    async def synthesize(self, text: str, *, voice_id: str | None, speed: float,
                         sample_rate: int) -> AsyncIterator[bytes]:
        body = json.dumps({"model": self.model, "input": text, "voice": voice_id or DEFAULT_VOICE,
                           "speed": speed, "response_format": "pcm"}).encode()
        try:
            async with self.http.stream("POST", self.endpoint.url("/audio/speech"), headers=self.endpoint.headers(),
                                        body=body, connect_timeout=self.endpoint.connect_timeout,
                                        read_timeout=self.endpoint.read_timeout) as response:
                if response.status >= 300:
                    message = _error_message(response.status, await _error_body(response.chunks()))
                    raise EngineError(message, retryable=_retryable(response.status))
                async for pcm in self._audio(response.chunks(), sample_rate):
                    yield pcm
        except (RequestFailed, DomainError) as exc:
            raise _failed(exc) from None

    async def _audio(self, chunks: AsyncIterator[bytes], sample_rate: int) -> AsyncIterator[bytes]:
        resampler: LinearResampler | None = None
        channels = 1
        head = b""
        frame_rest = b""
        async for chunk in chunks:
            if resampler is None:
                head += chunk
                if len(head) < 12 and head == b"RIFF"[: len(head)]:
                    continue
                if head.startswith(b"RIFF"):
                    try:
                        parsed = parse_wav_header(head)
                    except WavFormatError as exc:
                        raise EngineError(f"the synthesized audio cannot be read: {exc}") from None
                    if parsed is None:
                        continue
                    rate, channels, offset = parsed
                    resampler, chunk = LinearResampler(rate, sample_rate), head[offset:]
                else:
                    resampler, chunk = LinearResampler(self.pcm_rate, sample_rate), head
            if channels > 1:
                data = frame_rest + chunk
                whole = len(data) - len(data) % (2 * channels)
                frame_rest, chunk = data[whole:], mono(data[:whole], channels)
            out = resampler.feed(chunk)
            if out:
                yield out
        if resampler is None and head:
            out = LinearResampler(self.pcm_rate, sample_rate).feed(head)
            if out:
                yield out
