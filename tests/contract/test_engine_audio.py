"""The engines' PCM helpers: the linear resampler (whole buffers and streamed chunks) and WAV files."""

from __future__ import annotations

import math
import struct

import pytest

from adapters.engines.audio import LinearResampler, WavFormatError, mono, parse_wav_header, resample, samples, wav


def sine(rate: int, ms: int, frequency: float = 200.0) -> bytes:
    count = rate * ms // 1000
    return struct.pack(f"<{count}h", *(round(10000 * math.sin(2 * math.pi * frequency * i / rate))
                                       for i in range(count)))


@pytest.mark.parametrize(("source", "target"), [(24000, 8000), (24000, 16000), (8000, 16000), (16000, 24000),
                                                (22050, 8000)])
def test_resampling_keeps_the_duration_and_the_waveform(source: int, target: int) -> None:
    out = samples(resample(sine(source, 500), source, target))
    assert abs(len(out) - target // 2) <= 1
    expected = samples(sine(target, 500))
    # linear interpolation of a 200 Hz tone: within a few percent of the tone sampled at the new rate
    assert max(abs(a - b) for a, b in zip(out, expected, strict=False)) < 400


def test_a_stream_resampled_in_odd_chunks_equals_the_whole_buffer() -> None:
    pcm = sine(24000, 300)
    whole = resample(pcm, 24000, 8000)
    streamed = LinearResampler(24000, 8000)
    pieces = [streamed.feed(pcm[start:start + 777]) for start in range(0, len(pcm), 777)]
    assert all(len(p) % 2 == 0 for p in pieces)
    assert b"".join(pieces) == whole


def test_the_same_rate_passes_through_and_keeps_an_odd_byte_for_the_next_chunk() -> None:
    same = LinearResampler(8000, 8000)
    assert same.feed(b"\x01\x02\x03") == b"\x01\x02"
    assert same.feed(b"\x04") == b"\x03\x04"


def test_interpolation_lies_between_neighbours() -> None:
    pcm = struct.pack("<3h", 0, 1000, 2000)
    assert list(samples(resample(pcm, 8000, 16000))) == [0, 500, 1000, 1500, 2000]


def test_wav_round_trip_and_refusals() -> None:
    pcm = sine(16000, 20)
    document = wav(pcm, 16000)
    rate, channels, offset = parse_wav_header(document) or (0, 0, 0)
    assert (rate, channels, document[offset:]) == (16000, 1, pcm)
    assert parse_wav_header(document[:30]) is None  # not all of the header yet
    with pytest.raises(WavFormatError):
        parse_wav_header(b"OggS" + b"\0" * 40)
    assert mono(struct.pack("<4h", 1, 2, 3, 4), 2) == struct.pack("<2h", 1, 3)
