"""Text helpers of the conversation: the model's streamed text cut into sentences as they complete (each goes to
speech synthesis at once), and an agent line cut to what the caller actually heard after a barge-in."""

from __future__ import annotations

import re

_END = re.compile(r"[.!?…]+[\"')\]]*\s+|\n+")
_ABBREVIATIONS = frozenset({"mr.", "mrs.", "ms.", "dr.", "st.", "vs.", "e.g.", "i.e.", "etc.", "no.", "approx."})
MIN_SENTENCE_CHARS = 12
"""A shorter piece ("Hi.", "1.") waits for the next one: a fragment sounds choppy synthesized on its own."""


class SentenceSplitter:
    """Feed text deltas; get back the sentences completed so far. ``flush`` returns what remains."""

    def __init__(self) -> None:
        self.buffer = ""

    def feed(self, text: str) -> list[str]:
        self.buffer += text
        out: list[str] = []
        start = 0
        for match in _END.finditer(self.buffer):
            candidate = self.buffer[start:match.end()].strip()
            last_word = candidate.rsplit(None, 1)[-1].lower() if candidate else ""
            if len(candidate) < MIN_SENTENCE_CHARS or last_word in _ABBREVIATIONS:
                continue
            out.append(candidate)
            start = match.end()
        self.buffer = self.buffer[start:]
        return out

    def flush(self) -> str | None:
        rest, self.buffer = self.buffer.strip(), ""
        return rest or None


def heard_part(text: str, played_ms: int, duration_ms: int) -> str:
    """The words of ``text`` a caller heard when ``played_ms`` of its ``duration_ms`` of audio went out: words are
    taken as evenly spread over the audio, and a word counts when its audio was fully sent."""
    if played_ms >= duration_ms:
        return text
    words = text.split()
    if played_ms <= 0 or not words or duration_ms <= 0:
        return ""
    return " ".join(words[:len(words) * played_ms // duration_ms])
