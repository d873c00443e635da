"""Small, real WAV files for simulated recordings: 8 kHz, mono, 16-bit PCM tones (stdlib only)."""

from __future__ import annotations

import functools
import io
import math
import sys
import wave
from array import array
from typing import Any

SAMPLE_RATE = 8000
MAX_SECONDS = 8.0
_TONE = {"agent": 440.0, "user": 660.0}


@functools.lru_cache(maxsize=64)
def _burst(frequency: float, length: int) -> array[int]:
    """One tone burst with a 25 ms fade in and out. A turn's burst depends only on its pitch and its length
    (at most 9 lengths a pitch), so each is synthesised once per process: every recording after the first few
    is assembled from copies, not computed sample by sample."""
    step = 2 * math.pi * frequency / SAMPLE_RATE
    return array("h", (int(9000 * min(1.0, i / 200, (length - i) / 200) * math.sin(step * i)) for i in range(length)))


def tones(transcript: list[dict[str, Any]], *, max_seconds: float = MAX_SECONDS) -> bytes:
    """A tone burst per transcript turn (agent 440 Hz, contact 660 Hz), its length following the turn's
    words, with short pauses; at most ``max_seconds`` long and never empty."""
    samples = array("h")
    budget = int(max_seconds * SAMPLE_RATE)
    for turn in transcript or [{"role": "agent", "text": "beep"}]:
        words = max(1, len(str(turn.get("text", "")).split()))
        length = int(min(0.12 * words + 0.15, 1.2) * SAMPLE_RATE)
        frequency = _TONE.get(str(turn.get("role")), 550.0)
        samples.extend(_burst(frequency, length)[:max(0, budget - len(samples))])
        pause = min(int(0.12 * SAMPLE_RATE), budget - len(samples))
        samples.extend([0] * max(0, pause))
        if len(samples) >= budget:
            break
    if sys.byteorder == "big":  # WAV samples are little-endian
        samples.byteswap()
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SAMPLE_RATE)
        out.writeframes(samples.tobytes())
    return buffer.getvalue()
