"""Offline speech recognition with PocketSphinx (pip ``pocketsphinx``, which ships its US English acoustic model and
pronouncing dictionary: nothing is downloaded at run time).

PocketSphinx's general language model recognizes synthesized or telephone speech poorly; a small vocabulary does
much better (docs/agents.md has the figures). The recognizer listens for the words of a phone conversation (greetings,
yes and no, days, times, booking, transfer, goodbye) plus the words it is given: the agent's prompt, first message
and knowledge (``EngineChoice.vocabulary``). Its language model is a uniform unigram over those words, written for
PocketSphinx as ARPA text with a dictionary of just those words (so a recognizer loads in a fraction of a second).
Recognizers are kept per vocabulary; decoding runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
import re
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from adapters.engines.audio import resample
from application.ports.engines import EngineError, Transcript

MODEL_RATE = 16_000
CACHE_SIZE = 16
MAX_VOCABULARY = 5_000

_BASE_VOCABULARY = """
hello hi hey yes yeah no nope please thank thanks you goodbye bye okay ok sure right fine great perfect good
i i'm i'd i'll me my we our you your it is are was be can could would will should do does did have has had
a an the and or but to for of at on in with about from that this there here what when where who why how which
like want need book booking appointment appointments schedule reschedule cancel reserve available availability slot
time times day days today tomorrow morning afternoon evening night week next this weekend
monday tuesday wednesday thursday friday saturday sunday
one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen twenty thirty forty fifty
o'clock half quarter past am pm noon first second third last earlier later other another
open opening hours close closed cost costs price prices much many long how located location address where
speak talk human agent person someone representative transfer operator manager help question questions
call calling called back number phone email name message text send
that works sounds good not sure maybe wait hold on sorry again repeat say
order delivery refund payment pay service services offer information parking
"""
BASE_VOCABULARY = tuple(_BASE_VOCABULARY.split())

_WORD = re.compile(r"[a-z][a-z']*")


def _model_dir() -> Path:
    from pocketsphinx import get_model_path  # imported where used: the package is only needed to recognize
    return Path(get_model_path()) / "en-us"


@functools.cache
def pronunciations() -> dict[str, list[str]]:
    """The shipped pronouncing dictionary: word -> its dictionary lines (alternates ``word(2)`` included)."""
    entries: dict[str, list[str]] = {}
    with open(_model_dir() / "cmudict-en-us.dict", encoding="utf-8") as lines:
        for line in lines:
            head = line.split(" ", 1)[0]
            word = head.split("(", 1)[0]
            entries.setdefault(word, []).append(line.rstrip("\n"))
    return entries


def vocabulary_of(texts: Iterable[str]) -> frozenset[str]:
    """The base vocabulary and the words of ``texts`` that the dictionary can pronounce."""
    known = pronunciations()
    found = {w for w in BASE_VOCABULARY if w in known}
    for text in texts:
        for word in _WORD.findall(text.lower()):
            if len(found) >= MAX_VOCABULARY:
                break
            if word in known:
                found.add(word)
    return frozenset(found)


def arpa_unigram(vocabulary: Iterable[str]) -> str:
    entries = sorted(vocabulary)
    probability = math.log10(1 / (len(entries) + 1))
    lines = ["\\data\\", f"ngram 1={len(entries) + 2}", "", "\\1-grams:", f"{probability:.4f} </s>", "-99.0000 <s>"]
    lines += [f"{probability:.4f} {word}" for word in entries]
    return "\n".join([*lines, "", "\\end\\", ""])


class _Recognizer:
    """One PocketSphinx decoder for one vocabulary; one utterance at a time."""

    def __init__(self, vocabulary: frozenset[str]) -> None:
        from pocketsphinx import Decoder

        known = pronunciations()
        with tempfile.TemporaryDirectory(prefix="parley-sphinx-") as folder:
            lm, dictionary = os.path.join(folder, "words.lm"), os.path.join(folder, "words.dict")
            Path(lm).write_text(arpa_unigram(vocabulary), encoding="utf-8")
            Path(dictionary).write_text("\n".join(line for word in sorted(vocabulary) for line in known[word]) + "\n",
                                        encoding="utf-8")
            self.decoder: Any = Decoder(hmm=str(_model_dir() / "en-us"), lm=lm, dict=dictionary,
                                        samprate=MODEL_RATE, loglevel="FATAL")
        self.lock = threading.Lock()

    def recognize(self, pcm: bytes) -> str:
        with self.lock:
            self.decoder.start_utt()
            self.decoder.process_raw(pcm, no_search=False, full_utt=True)
            self.decoder.end_utt()
            hypothesis = self.decoder.hyp()
        return hypothesis.hypstr if hypothesis is not None else ""


_recognizers: dict[frozenset[str], _Recognizer] = {}
_recognizers_lock = threading.Lock()


def recognizer(vocabulary: frozenset[str]) -> _Recognizer:
    with _recognizers_lock:
        found = _recognizers.get(vocabulary)
        if found is not None:
            return found
    made = _Recognizer(vocabulary)
    with _recognizers_lock:
        if len(_recognizers) >= CACHE_SIZE:
            _recognizers.pop(next(iter(_recognizers)))
        return _recognizers.setdefault(vocabulary, made)


class PocketsphinxSpeechToText:
    """:class:`application.ports.engines.SpeechToText`, offline (see the module). English only: another language is
    recognized with the English model."""

    def __init__(self, vocabulary: Iterable[str] = ()) -> None:
        self.texts = tuple(vocabulary)
        self._vocabulary: frozenset[str] | None = None

    def _recognize(self, pcm: bytes, sample_rate: int) -> str:
        if self._vocabulary is None:
            self._vocabulary = vocabulary_of(self.texts)
        audio = pcm if sample_rate == MODEL_RATE else resample(pcm, sample_rate, MODEL_RATE)
        return recognizer(self._vocabulary).recognize(audio)

    async def transcribe(self, pcm: bytes, sample_rate: int, *, language: str | None = None) -> Transcript:
        try:
            text = await asyncio.to_thread(self._recognize, pcm, sample_rate)
        except ImportError:
            raise EngineError("offline speech recognition needs the pocketsphinx package") from None
        except RuntimeError as exc:
            raise EngineError(f"offline speech recognition failed: {exc}") from None
        return Transcript(text, "en")
