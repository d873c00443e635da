"""G.711 μ-law at 8 kHz, to and from 16-bit signed little-endian PCM, by table (``audioop`` is deprecated in
Python 3.11 and gone in 3.13).

Decoding is two ``bytes.translate`` passes (the low and the high byte of each sample) interleaved by slice
assignment: C speed, no per-sample Python. Encoding looks each sample up in a 65,536-entry table built once.
The tables follow the ITU-T G.711 reference (bias 0x84, clip 32,635), the values ``audioop`` gives.
"""

from __future__ import annotations

import operator
import sys
from array import array

_BIAS = 0x84
_CLIP = 32635
_SEGMENT_ENDS = (0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF)


def _decode_one(code: int) -> int:
    code = ~code & 0xFF
    exponent, mantissa = (code >> 4) & 0x07, code & 0x0F
    magnitude = (((mantissa << 3) + _BIAS) << exponent) - _BIAS
    return -magnitude if code & 0x80 else magnitude


def _encode_one(sample: int) -> int:
    value = sample >> 2  # 14 significant bits, rounded toward minus infinity as the reference does
    mask = 0x7F if value < 0 else 0xFF
    value = min(-value if value < 0 else value, _CLIP >> 2) + (_BIAS >> 2)
    segment = next((i for i, end in enumerate(_SEGMENT_ENDS) if value <= end), 8)
    if segment == 8:
        return 0x7F ^ mask
    return ((segment << 4) | ((value >> (segment + 1)) & 0x0F)) ^ mask


DECODED: tuple[int, ...] = tuple(_decode_one(code) for code in range(256))
"""The linear value of each μ-law byte."""
_LOW = bytes(value & 0xFF for value in DECODED)
_HIGH = bytes((value >> 8) & 0xFF for value in DECODED)
_BY_QUARTER = bytes(_encode_one(quarter << 2) for quarter in (*range(8192), *range(-8192, 0)))
"""The μ-law byte of each 14-bit value (a sample shifted right by two, which is all the encoding reads), in the
order of the 16-bit samples read as unsigned: 0 to 32,767, then -32,768 to -1."""
_ENCODE = bytes(_BY_QUARTER[unsigned >> 2] for unsigned in range(65536))
"""The μ-law byte of each 16-bit sample, indexed by the sample read as unsigned (built from ``_BY_QUARTER``: a
process that never encodes pays about a quarter of the 65,536 encodings at import)."""
_SWAP = sys.byteorder != "little"


def decode(ulaw: bytes) -> bytes:
    """μ-law bytes -> 16-bit signed little-endian PCM (two bytes per input byte)."""
    out = bytearray(2 * len(ulaw))
    out[0::2] = ulaw.translate(_LOW)
    out[1::2] = ulaw.translate(_HIGH)
    return bytes(out)


def encode(pcm: bytes) -> bytes:
    """16-bit signed little-endian PCM -> μ-law (an odd trailing byte is ignored). The lookups are one
    ``operator.itemgetter`` call over every sample (about twice as fast as a ``map`` of the table's
    ``__getitem__``: the agent's every outbound frame is encoded here)."""
    samples = array("H")
    samples.frombytes(pcm[: len(pcm) & ~1])
    if _SWAP:
        samples.byteswap()
    if len(samples) < 2:  # itemgetter of one index gives the item, not a tuple
        return bytes(_ENCODE[sample] for sample in samples)
    return bytes(operator.itemgetter(*samples)(_ENCODE))


SILENCE = _ENCODE[0]
"""The μ-law byte of silence (0xFF)."""
