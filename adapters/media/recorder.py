"""A call's stereo recording: the caller on the left channel, the agent on the right, 16-bit PCM, aligned on the
session's clock (silence where a leg is quiet).

Each leg is kept as μ-law while the call lasts (one byte a sample: a 10-minute call holds 4.8 MB a leg) and written
at the sample where its audio began; the WAV is assembled once, at the end, by slice assignment (no per-sample
Python).
"""

from __future__ import annotations

import io
import wave

from adapters.media import mulaw


class _Leg:
    def __init__(self, rate: int) -> None:
        self.rate = rate
        self.samples = bytearray()

    def write(self, ulaw: bytes, at_ms: int) -> None:
        start = max(0, at_ms) * self.rate // 1000
        if start > len(self.samples):
            self.samples.extend(bytes([mulaw.SILENCE]) * (start - len(self.samples)))
        # audio that arrives a little early (carrier jitter) goes on where the leg is, never over it
        self.samples.extend(ulaw)


class StereoRecorder:
    """``caller(ulaw, at_ms)`` and ``agent(ulaw, at_ms)`` as the audio passes; ``wav()`` at the end."""

    def __init__(self, sample_rate: int = 8000) -> None:
        self.rate = sample_rate
        self.left, self.right = _Leg(sample_rate), _Leg(sample_rate)

    def caller(self, ulaw: bytes, at_ms: int) -> None:
        self.left.write(ulaw, at_ms)

    def agent(self, ulaw: bytes, at_ms: int) -> None:
        self.right.write(ulaw, at_ms)

    @property
    def duration_ms(self) -> int:
        return max(len(self.left.samples), len(self.right.samples)) * 1000 // self.rate

    def wav(self) -> bytes:
        """The recording: a WAV file, 2 channels, 16-bit, at the session's rate."""
        frames = max(len(self.left.samples), len(self.right.samples))
        left = mulaw.decode(bytes(self.left.samples.ljust(frames, bytes([mulaw.SILENCE]))))
        right = mulaw.decode(bytes(self.right.samples.ljust(frames, bytes([mulaw.SILENCE]))))
        stereo = bytearray(4 * frames)
        stereo[0::4], stereo[1::4] = left[0::2], left[1::2]
        stereo[2::4], stereo[3::4] = right[0::2], right[1::2]
        buffer = io.BytesIO()
        with wave.open(buffer, "wb") as out:
            out.setnchannels(2)
            out.setsampwidth(2)
            out.setframerate(self.rate)
            out.writeframes(bytes(stereo))
        return buffer.getvalue()
