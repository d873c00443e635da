"""Small, real WAV files for simulated recordings: 4 kHz, mono, 8-bit PCM (stdlib only), as long as the call.

A call's recording lasts the call's duration: silence, with a tone burst where each transcript turn is spoken
(agent 440 Hz, contact 660 Hz). At 4,000 one-byte samples a second a minute of call is 240 KB.
"""

from __future__ import annotations

import functools
import io
import math
import wave
from typing import Any

SAMPLE_RATE = 4000
SAMPLE_WIDTH = 1  # 8-bit PCM: unsigned bytes, silence at 128
SILENCE = 128
_TONE = {"agent": 440.0, "user": 660.0}


@functools.lru_cache(maxsize=64)
def _burst(frequency: float, length: int) -> bytes:
    """One tone burst with a 25 ms fade in and out. A turn's burst depends only on its pitch and its length
    (at most 9 lengths a pitch), so each is synthesised once per process: every recording after the first few
    is assembled from copies, not computed sample by sample."""
    step = 2 * math.pi * frequency / SAMPLE_RATE
    fade = SAMPLE_RATE // 40
    return bytes(SILENCE + int(90 * min(1.0, i / fade, (length - i) / fade) * math.sin(step * i))
                 for i in range(length))


def tones(transcript: list[dict[str, Any]], *, seconds: int) -> bytes:
    """A recording ``seconds`` long (at least one): a tone burst at each transcript turn's ``at_ms``, its length
    following the turn's words, silence between them."""
    total = max(1, seconds) * SAMPLE_RATE
    samples = bytearray([SILENCE]) * total
    for turn in transcript or [{"role": "agent", "text": "beep", "at_ms": 0}]:
        start = int(max(0, turn.get("at_ms") or 0) * SAMPLE_RATE / 1000)
        if start >= total:
            continue
        words = max(1, len(str(turn.get("text", "")).split()))
        burst = _burst(_TONE.get(str(turn.get("role")), 550.0), int(min(0.12 * words + 0.15, 1.2) * SAMPLE_RATE))
        end = min(total, start + len(burst))
        samples[start:end] = burst[:end - start]
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(SAMPLE_WIDTH)
        out.setframerate(SAMPLE_RATE)
        out.writeframes(bytes(samples))
    return buffer.getvalue()
