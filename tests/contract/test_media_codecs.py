"""The media stream's codecs: μ-law against G.711's known values (and ``audioop`` where Python still ships it),
the carriers' stream messages read and written, and the stereo recorder's alignment."""

from __future__ import annotations

import array
import importlib
import io
import json
import struct
import warnings
import wave

import pytest

from adapters.media import mulaw, protocols
from adapters.media.recorder import StereoRecorder


def test_mulaw_known_values() -> None:
    assert struct.unpack("<4h", mulaw.decode(bytes([0x00, 0x80, 0xFF, 0x7F]))) == (-32124, 32124, 0, 0)
    assert struct.unpack("<2h", mulaw.decode(bytes([0xF0, 0x70]))) == (120, -120)
    pcm = struct.pack("<6h", 0, -1, 32767, -32768, 120, -120)
    assert mulaw.encode(pcm) == bytes([0xFF, 0x7E, 0x80, 0x00, 0xF0, 0x70])  # -1 rounds down, as G.711 does
    assert mulaw.SILENCE == 0xFF


def test_mulaw_round_trip_is_exact_on_codes_and_within_a_step_on_samples() -> None:
    codes = bytes(range(256))
    assert mulaw.decode(mulaw.encode(mulaw.decode(codes))) == mulaw.decode(codes)
    assert all(mulaw.encode(mulaw.decode(bytes([c]))) == bytes([c]) for c in codes if c != 0x7F)  # -0 is +0
    samples = array.array("h", range(-32768, 32768))
    back = array.array("h")
    back.frombytes(mulaw.decode(mulaw.encode(samples.tobytes())))
    for original, decoded in zip(samples, back, strict=True):
        # the quantisation step doubles with each segment: at most half the step (plus the clip at the ends)
        assert abs(original - decoded) <= max(8, abs(original) // 16 + 4) or abs(original) > 32124


def test_mulaw_agrees_with_audioop_where_it_exists() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            audioop = importlib.import_module("audioop")
        except ImportError:
            pytest.skip("this Python has no audioop (3.13+)")
    pcm = array.array("h", range(-32768, 32768)).tobytes()
    assert mulaw.encode(pcm) == audioop.lin2ulaw(pcm, 2)
    assert mulaw.decode(bytes(range(256))) == audioop.ulaw2lin(bytes(range(256)), 2)


def test_an_odd_trailing_byte_is_ignored() -> None:
    assert mulaw.encode(b"\x00\x00\x01") == b"\xff"


TWILIO_START = {"event": "start", "sequenceNumber": "1", "streamSid": "MZ1", "start": {
    "accountSid": "AC1", "streamSid": "MZ1", "callSid": "CA1", "tracks": ["inbound"],
    "customParameters": {"direction": "inbound"},
    "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}}}
TELNYX_START = {"event": "start", "sequence_number": "1", "stream_id": "s-1", "start": {
    "user_id": "u", "call_control_id": "v3:abc", "client_state": "",
    "media_format": {"encoding": "PCMU", "sample_rate": 8000, "channels": 1}}}


def test_the_start_message_tells_the_carrier() -> None:
    twilio = protocols.read(json.dumps(TWILIO_START))
    assert isinstance(twilio, protocols.Start)
    assert (twilio.carrier, twilio.stream_id, twilio.carrier_call_id, twilio.is_mulaw_8k) == ("twilio", "MZ1",
                                                                                             "CA1", True)
    assert twilio.parameters == {"direction": "inbound"}
    telnyx = protocols.read(json.dumps(TELNYX_START))
    assert isinstance(telnyx, protocols.Start)
    assert (telnyx.carrier, telnyx.stream_id, telnyx.carrier_call_id, telnyx.is_mulaw_8k) == ("telnyx", "s-1",
                                                                                             "v3:abc", True)
    wideband = dict(TELNYX_START, start={**TELNYX_START["start"],  # type: ignore[dict-item]
                                         "media_format": {"encoding": "L16", "sample_rate": 16000}})
    assert not protocols.read(json.dumps(wideband)).is_mulaw_8k  # type: ignore[union-attr]


@pytest.mark.parametrize("frame", ["not json", "[1]", '{"event": "start"}', '{"event": "start", "start": {}}',
                                   '{"event": "media", "media": {"payload": "%%%"}}'])
def test_frames_in_neither_shape_are_protocol_errors(frame: str) -> None:
    with pytest.raises(protocols.StreamProtocolError):
        protocols.read(frame)


def test_media_mark_stop_and_unknown_events_are_read() -> None:
    media = protocols.read('{"event": "media", "media": {"track": "inbound", "timestamp": "40", "payload": "/38="}}')
    assert media == protocols.Media(b"\xff\x7f", 40, "inbound")
    assert protocols.read('{"event": "mark", "mark": {"name": "m"}}') == protocols.Mark("m")
    assert protocols.read('{"event": "stop", "stop": {}}') == protocols.Stop()
    assert protocols.read('{"event": "dtmf", "dtmf": {"digit": "5"}}') == protocols.Dtmf("5")
    assert protocols.read('{"event": "connected"}') == protocols.Other("connected")


def test_outbound_messages_in_each_carriers_shape() -> None:
    twilio = protocols.Dialect(protocols.read(json.dumps(TWILIO_START)))  # type: ignore[arg-type]
    assert json.loads(twilio.media(b"\xff\x7f")) == {"event": "media", "streamSid": "MZ1",
                                                     "media": {"payload": "/38="}}
    assert json.loads(twilio.mark("m")) == {"event": "mark", "streamSid": "MZ1", "mark": {"name": "m"}}
    assert json.loads(twilio.clear()) == {"event": "clear", "streamSid": "MZ1"}
    telnyx = protocols.Dialect(protocols.read(json.dumps(TELNYX_START)))  # type: ignore[arg-type]
    assert json.loads(telnyx.media(b"\xff")) == {"event": "media", "media": {"payload": "/w=="}}
    assert json.loads(telnyx.mark("m")) == {"event": "mark", "mark": {"name": "m"}}
    assert json.loads(telnyx.clear()) == {"event": "clear"}


def test_the_recording_is_stereo_and_aligned_on_the_session_clock() -> None:
    recorder = StereoRecorder(8000)
    loud = mulaw.encode(struct.pack("<160h", *([10000] * 160)))
    recorder.caller(loud, 0)
    recorder.agent(loud, 100)  # 100 ms later: 800 samples of silence before it on the right
    recorder.caller(loud, 300)
    with wave.open(io.BytesIO(recorder.wav())) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (2, 2, 8000)
        frames = wav.getnframes()
        samples = struct.unpack(f"<{2 * frames}h", wav.readframes(frames))
    left, right = samples[0::2], samples[1::2]
    assert frames == 2400 + 160  # up to the last caller frame at 300 ms
    assert left[0] > 9000 and right[0] == 0
    assert right[799] == 0 and right[800] > 9000 and right[960] == 0
    assert left[2399] == 0 and left[2400] > 9000
    assert recorder.duration_ms == 320
