"""Small PCM helpers shared by the engines: 16-bit signed little-endian mono samples."""

from __future__ import annotations

import struct
import sys
from array import array

SAMPLE_WIDTH = 2


def samples(pcm: bytes) -> array[int]:
    """The samples of ``pcm`` (an odd trailing byte is ignored)."""
    values = array("h")
    values.frombytes(pcm[: len(pcm) - len(pcm) % 2])
    if sys.byteorder == "big":
        values.byteswap()
    return values


def to_bytes(values: array[int]) -> bytes:
    if sys.byteorder == "big":
        values = array("h", values)
        values.byteswap()
    return values.tobytes()


class LinearResampler:
    """Changes the sample rate of a stream of PCM chunks by linear interpolation, keeping its place across chunks
    (a chunk may end on an odd byte or between two output samples)."""

    def __init__(self, source_rate: int, target_rate: int) -> None:
        if source_rate <= 0 or target_rate <= 0:
            raise ValueError("sample rates must be positive")
        self.source_rate, self.target_rate = source_rate, target_rate
        self._step = source_rate / target_rate
        self._position = 0.0  # the next output sample's time, in source samples from the first held sample
        self._held: list[int] = []  # the last source sample of the previous chunk
        self._odd = b""

    def feed(self, pcm: bytes) -> bytes:
        data = self._odd + pcm
        self._odd = data[len(data) - len(data) % 2:] if len(data) % 2 else b""
        if self.source_rate == self.target_rate:
            return data[: len(data) - len(self._odd)]
        values = self._held + list(samples(data))
        if not values:
            return b""
        out = array("h")
        last = len(values) - 1
        position, step = self._position, self._step
        while position <= last:
            index = int(position)
            fraction = position - index
            here: float = values[index]
            if fraction and index < last:
                here = here + (values[index + 1] - here) * fraction
            out.append(max(-32768, min(32767, round(here))))
            position += step
        self._position = position - last
        self._held = [values[last]]
        return to_bytes(out)


def resample(pcm: bytes, source_rate: int, target_rate: int) -> bytes:
    """One whole buffer at another rate."""
    return LinearResampler(source_rate, target_rate).feed(pcm)


def wav(pcm: bytes, sample_rate: int) -> bytes:
    """A RIFF/WAVE file holding ``pcm`` (16-bit mono)."""
    header = b"RIFF" + struct.pack("<I", 36 + len(pcm)) + b"WAVE"
    fmt = b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, sample_rate * SAMPLE_WIDTH, SAMPLE_WIDTH, 16)
    return header + fmt + b"data" + struct.pack("<I", len(pcm)) + pcm


class WavFormatError(ValueError):
    pass


def parse_wav_header(data: bytes) -> tuple[int, int, int] | None:
    """(sample_rate, channels, offset of the samples) once ``data`` holds the whole header, None while it may still
    be incomplete. Raises :class:`WavFormatError` for a file that is not 16-bit PCM WAVE."""
    if len(data) < 12:
        return None
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise WavFormatError("not a WAVE file")
    offset, rate, channels = 12, 0, 0
    while len(data) >= offset + 8:
        chunk_id, size = data[offset:offset + 4], struct.unpack("<I", data[offset + 4:offset + 8])[0]
        body = offset + 8
        if chunk_id == b"fmt ":
            if len(data) < body + 16:
                return None
            audio_format, channels, rate, _byte_rate, _align, bits = struct.unpack("<HHIIHH", data[body:body + 16])
            if audio_format not in (1, 0xFFFE) or bits != 16:
                raise WavFormatError("only 16-bit PCM WAVE is read")
        elif chunk_id == b"data":
            if not rate:
                raise WavFormatError("the data chunk comes before the format chunk")
            return rate, channels, body
        offset = body + size + (size % 2)
    return None


def mono(pcm: bytes, channels: int) -> bytes:
    """The first channel of interleaved 16-bit PCM."""
    if channels <= 1:
        return pcm
    values = samples(pcm)
    return to_bytes(array("h", values[::channels]))
