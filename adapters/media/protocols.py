"""The carriers' media-stream wire formats: Twilio Media Streams and Telnyx media streaming (JSON text frames over a
websocket, μ-law 8 kHz audio in base64).

Which one a stream speaks is read from its ``start`` message (Twilio's carries ``streamSid``, Telnyx's
``stream_id``); from then on :class:`Dialect` writes the outbound messages (``media``, ``mark``, ``clear``) in that
carrier's shape. Everything the carrier sends is read into one of the small values below; a frame that is not JSON,
or a ``start`` in neither shape, raises :class:`StreamProtocolError`.
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

MULAW_RATE = 8000
FRAME_MS = 20
FRAME_BYTES = MULAW_RATE * FRAME_MS // 1000  # μ-law: one byte a sample
_MULAW_NAMES = {"audio/x-mulaw", "pcmu", "mulaw", "ulaw", "g711_ulaw"}


class StreamProtocolError(ValueError):
    """A frame Parley cannot read as either carrier's media-stream message."""


@dataclass(frozen=True, slots=True)
class Start:
    carrier: Literal["twilio", "telnyx"]
    stream_id: str
    carrier_call_id: str | None
    encoding: str
    sample_rate: int
    channels: int = 1
    parameters: dict[str, str] = field(default_factory=dict)

    @property
    def is_mulaw_8k(self) -> bool:
        return self.encoding.lower() in _MULAW_NAMES and self.sample_rate == MULAW_RATE and self.channels == 1


@dataclass(frozen=True, slots=True)
class Media:
    payload: bytes
    """μ-law audio."""
    timestamp_ms: int | None
    """Milliseconds since the stream began, as the carrier counts them (None when it sent none)."""
    track: str = "inbound"


@dataclass(frozen=True, slots=True)
class Mark:
    name: str


@dataclass(frozen=True, slots=True)
class Stop:
    pass


@dataclass(frozen=True, slots=True)
class Dtmf:
    digit: str


@dataclass(frozen=True, slots=True)
class Other:
    event: str
    """``connected``, or an event Parley does not act on."""


Inbound = Start | Media | Mark | Stop | Dtmf | Other

_decoder = msgspec.json.Decoder()


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _start(message: dict[str, Any]) -> Start:
    start = message.get("start")
    if not isinstance(start, dict):
        raise StreamProtocolError("a start message without its start object")
    if "streamSid" in message or "streamSid" in start:
        media_format = start.get("mediaFormat") or {}
        custom = start.get("customParameters") or {}
        return Start("twilio", str(message.get("streamSid") or start.get("streamSid")),
                     start.get("callSid"), str(media_format.get("encoding", "audio/x-mulaw")),
                     _int(media_format.get("sampleRate")) or MULAW_RATE, _int(media_format.get("channels")) or 1,
                     {str(k): str(v) for k, v in custom.items()} if isinstance(custom, dict) else {})
    if "stream_id" in message or "stream_id" in start:
        media_format = start.get("media_format") or {}
        custom = start.get("custom_parameters") or {}
        return Start("telnyx", str(message.get("stream_id") or start.get("stream_id")),
                     start.get("call_control_id"), str(media_format.get("encoding", "PCMU")),
                     _int(media_format.get("sample_rate")) or MULAW_RATE, _int(media_format.get("channels")) or 1,
                     {str(k): str(v) for k, v in custom.items()} if isinstance(custom, dict) else {})
    raise StreamProtocolError("a start message of neither Twilio's nor Telnyx's shape")


def read(frame: str | bytes) -> Inbound:
    """One frame from the carrier, read (StreamProtocolError when it is not a media-stream message)."""
    try:
        message = _decoder.decode(frame)
    except msgspec.DecodeError:
        raise StreamProtocolError("a frame that is not JSON") from None
    if not isinstance(message, dict):
        raise StreamProtocolError("a frame that is not a JSON object")
    event = message.get("event")
    if event == "media":
        media = message.get("media")
        if not isinstance(media, dict):
            raise StreamProtocolError("a media message without its media object")
        try:
            payload = binascii.a2b_base64(media.get("payload") or "", strict_mode=True)
        except (binascii.Error, TypeError, ValueError):
            raise StreamProtocolError("a media payload that is not base64") from None
        return Media(payload, _int(media.get("timestamp")), str(media.get("track") or "inbound"))
    if event == "start":
        return _start(message)
    if event == "mark":
        mark = message.get("mark")
        return Mark(str(mark.get("name", ""))) if isinstance(mark, dict) else Other("mark")
    if event == "stop":
        return Stop()
    if event == "dtmf":
        dtmf = message.get("dtmf")
        return Dtmf(str(dtmf.get("digit", ""))) if isinstance(dtmf, dict) else Other("dtmf")
    return Other(str(event))


_encoder = msgspec.json.Encoder()
_PAYLOAD_SLOT = "payload-goes-here"


class Dialect:
    """The outbound messages of one stream, in its carrier's shape."""

    def __init__(self, start: Start) -> None:
        self.carrier, self.stream_id = start.carrier, start.stream_id
        self._sid = {"streamSid": start.stream_id} if start.carrier == "twilio" else {}
        # every outbound frame is the same JSON around its base64 payload (which has no character to escape): made
        # once, with a placeholder where the payload goes (the last string of the message)
        template = _encoder.encode({"event": "media", **self._sid, "media": {"payload": _PAYLOAD_SLOT}}).decode()
        at = template.rindex(_PAYLOAD_SLOT)
        self._media_prefix, self._media_suffix = template[:at], template[at + len(_PAYLOAD_SLOT):]

    def media(self, ulaw: bytes) -> str:
        return self._media_prefix + binascii.b2a_base64(ulaw, newline=False).decode("ascii") + self._media_suffix

    def mark(self, name: str) -> str:
        return _encoder.encode({"event": "mark", **self._sid, "mark": {"name": name}}).decode()

    def clear(self) -> str:
        return _encoder.encode({"event": "clear", **self._sid}).decode()
