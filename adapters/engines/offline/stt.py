"""Offline speech recognition with PocketSphinx (pip ``pocketsphinx``, which ships its US English acoustic model and
pronouncing dictionary: nothing is downloaded at run time).

PocketSphinx's general language model recognizes synthesized or telephone speech poorly and slowly; a small one
does much better (docs/agents.md has the figures). The recognizer listens for the words of a phone conversation
(greetings, yes and no, days, times, booking, transfer, goodbye) plus the words of the texts it is given: the
agent's prompt, first message and knowledge (``EngineChoice.vocabulary``). Its language model is a bigram model of
typical callers' phrases and of the texts' sentences, backing off to every word (ARPA text written for PocketSphinx,
with a dictionary of just those words, so a recognizer loads in a fraction of a second). Recognizers are kept per
set of texts; decoding runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import os
import re
import tempfile
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from adapters.engines.audio import resample
from application.ports.engines import EngineError, Transcript

MODEL_RATE = 16_000
CHUNK_BYTES = MODEL_RATE // 10 * 2
"""100 ms of the recognizer's audio: what it decodes between two chances for the event loop to run."""
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


def model_dir() -> Path:
    from pocketsphinx import get_model_path  # imported where used: the package is only needed to recognize
    return Path(get_model_path()) / "en-us"


_pronunciations: dict[str, str] | None = None
_pronunciations_lock = threading.Lock()


def pronunciations() -> dict[str, str]:
    """The shipped pronouncing dictionary: word -> its dictionary lines (alternates ``word(2)`` included, one a line),
    read once per process (a second asker waits for the first). Its 135,000 entries are strings only: objects the
    garbage collector does not track, so reading it starts no collection pass. As lists of lines it made half a
    million tracked objects, enough for a full pass over a serve process's heap, which holds every thread (the
    event loop's included) for hundreds of milliseconds."""
    global _pronunciations
    with _pronunciations_lock:
        if _pronunciations is None:
            entries: dict[str, str] = {}
            text = (model_dir() / "cmudict-en-us.dict").read_text(encoding="utf-8")
            for line in text.splitlines():
                head = line.partition(" ")[0]
                word = head.partition("(")[0]
                found = entries.get(word)
                entries[word] = line if found is None else f"{found}\n{line}"
            _pronunciations = entries
        return _pronunciations


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
    """A uniform unigram model over ``vocabulary`` (ARPA text)."""
    entries = sorted(vocabulary)
    probability = math.log10(1 / (len(entries) + 1))
    lines = ["\\data\\", f"ngram 1={len(entries) + 2}", "", "\\1-grams:", f"{probability:.4f} </s>",
             "-99.0000 <s>"]
    lines += [f"{probability:.4f} {word}" for word in entries]
    return "\n".join([*lines, "", "\\end\\", ""])


_PHRASES = """hello|hi|yes|yes please|yeah|no|no thank you|thank you|thanks|okay|sure
goodbye|bye|bye bye|goodbye|thank you goodbye|thanks bye|okay bye|okay goodbye|goodbye thank you
that works|that works for me|that sounds good|i would like to book an appointment|i'd like to book an appointment
i want to book an appointment|can i book an appointment|book an appointment|i would like to schedule an appointment
do you have any availability|do you have anything available|is there anything available|what times do you have
what are your opening hours|when are you open|where are you located|how much does it cost
can i speak to a human|can i speak to someone|i want to talk to a person|transfer me to an agent
can you transfer me|i need help|i have a question|the first one|the second one|is there anything later
is there anything earlier|that's all|that is all thank you"""
_HOURS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "today", "tomorrow")


def phrases() -> list[str]:
    """What callers of a phone agent typically say: greetings, yes and no, booking a day and a time, questions,
    asking for a person, goodbye."""
    said = [line for row in _PHRASES.splitlines() for line in row.split("|")]
    for hour in _HOURS:
        said += [f"at {hour}", hour, f"{hour} o'clock", f"{hour} thirty", f"{hour} am", f"{hour} pm",
                 f"at {hour} please", f"{hour} please", f"yes {hour}", f"book {hour}"]
    for day in _DAYS:
        said += [day, f"book {day}", f"i would like to book an appointment {day}"]
        for hour in _HOURS:
            said += [f"{day} at {hour}", f"{day} at {hour} am", f"{day} at {hour} pm", f"{day} at {hour} thirty",
                     f"book {day} at {hour}", f"i would like to book an appointment {day} at {hour}"]
    return said


def sentences_of(texts: Iterable[str]) -> list[list[str]]:
    """The phrases and the sentences of ``texts`` as words the dictionary can pronounce."""
    known = pronunciations()
    found = [[w for w in line.split() if w in known] for line in phrases()]
    for text in texts:
        for sentence in re.split(r"[.!?;:\n]+", text.lower()):
            words = [w for w in _WORD.findall(sentence) if w in known]
            if words:
                found.append(words)
    return [words for words in found if words]


def arpa_bigram(sentences: list[list[str]], vocabulary: Iterable[str], discount: float = 0.5) -> str:
    """A bigram model (ARPA text) of ``sentences`` with absolute discounting, backing off to add-one unigrams
    over ``vocabulary`` and the sentences' words: the typical phrases are likely, any known word possible."""
    unigrams: Counter[str] = Counter()
    bigrams: Counter[tuple[str, str]] = Counter()
    for words in sentences:
        tokens = ["<s>", *words, "</s>"]
        unigrams.update(tokens[1:])
        bigrams.update(itertools.pairwise(tokens))
    entries = sorted(set(vocabulary) | {w for words in sentences for w in words})
    total = sum(unigrams.values())
    size = len(entries) + 1
    unigram = {w: (unigrams[w] + 1) / (total + size) for w in [*entries, "</s>"]}
    contexts: Counter[str] = Counter()
    for (first, _second), count in bigrams.items():
        contexts[first] += count
    bigram = {pair: (count - discount) / contexts[pair[0]] for pair, count in bigrams.items()}
    seen_mass: defaultdict[str, float] = defaultdict(float)
    seen_unigram: defaultdict[str, float] = defaultdict(float)
    for (first, second), probability in bigram.items():
        seen_mass[first] += probability
        seen_unigram[first] += unigram[second]
    backoff = {first: (1 - seen_mass[first]) / max(1e-9, 1 - seen_unigram[first]) for first in contexts}
    lines = ["\\data\\", f"ngram 1={len(entries) + 2}", f"ngram 2={len(bigram)}", "", "\\1-grams:",
             f"{math.log10(unigram['</s>']):.4f} </s>", f"-99.0000 <s> {math.log10(backoff.get('<s>', 1.0)):.4f}"]
    lines += [f"{math.log10(unigram[w]):.4f} {w} {math.log10(backoff.get(w, 1.0)):.4f}" for w in entries]
    lines += ["", "\\2-grams:"]
    lines += [f"{math.log10(p):.4f} {first} {second}" for (first, second), p in sorted(bigram.items())]
    return "\n".join([*lines, "", "\\end\\", ""])


class _Recognizer:
    """One PocketSphinx decoder for one vocabulary; one utterance at a time."""

    def __init__(self, texts: tuple[str, ...]) -> None:
        from pocketsphinx import Decoder

        known = pronunciations()
        sentences = sentences_of(texts)
        vocabulary = vocabulary_of(texts) | {w for words in sentences for w in words}
        with tempfile.TemporaryDirectory(prefix="parley-sphinx-") as folder:
            lm, dictionary = os.path.join(folder, "words.lm"), os.path.join(folder, "words.dict")
            Path(lm).write_text(arpa_bigram(sentences, vocabulary), encoding="utf-8")
            Path(dictionary).write_text("\n".join(known[word] for word in sorted(vocabulary)) + "\n", encoding="utf-8")
            self.decoder: Any = Decoder(hmm=str(model_dir() / "en-us"), lm=lm, dict=dictionary,
                                        samprate=MODEL_RATE, loglevel="FATAL")
        self.initial_mean = self.decoder.get_cmn(False)
        self.lock = threading.Lock()

    def recognize(self, pcm: bytes) -> str:
        """PocketSphinx holds the GIL while it decodes: fed 100 ms at a time, it lets the event loop (and the other
        conversations' audio) run between pieces instead of stalling for the whole utterance. Decoded piece by piece
        it would estimate the cepstral mean as it goes, from where the previous utterance left it; a first pass
        (features only, a few milliseconds) measures the utterance's own mean, so the same audio always gives the
        same words, as well as decoding the utterance whole does."""
        with self.lock:
            self.decoder.set_cmn(self.initial_mean)
            self.decoder.start_utt()
            for start in range(0, len(pcm), CHUNK_BYTES):
                self.decoder.process_raw(pcm[start:start + CHUNK_BYTES], no_search=True, full_utt=False)
            mean = self.decoder.get_cmn(True)
            self.decoder.end_utt()
            self.decoder.set_cmn(mean)
            self.decoder.start_utt()
            for start in range(0, len(pcm), CHUNK_BYTES):
                self.decoder.process_raw(pcm[start:start + CHUNK_BYTES], no_search=False, full_utt=False)
            self.decoder.end_utt()
            hypothesis = self.decoder.hyp()
        return hypothesis.hypstr if hypothesis is not None else ""


_recognizers: dict[tuple[str, ...], _Recognizer] = {}
_building: dict[tuple[str, ...], Future[_Recognizer]] = {}
_recognizers_lock = threading.Lock()


def recognizer(texts: tuple[str, ...]) -> _Recognizer:
    """The recognizer of ``texts``' words, made once per process (the most recent few are kept): an asker while it
    is being made waits for it instead of making another. Blocking: call it from a worker thread, never on the event
    loop (the first of a process reads the dictionary, each loads the acoustic model: tens to hundreds of ms)."""
    with _recognizers_lock:
        found = _recognizers.get(texts)
        if found is not None:
            return found
        pending = _building.get(texts)
        building = pending is None
        if pending is None:
            pending = _building[texts] = Future()
    if not building:
        return pending.result()
    try:
        made = _Recognizer(texts)
    except BaseException as exc:
        with _recognizers_lock:
            _building.pop(texts, None)
        pending.set_exception(exc)
        raise
    with _recognizers_lock:
        _building.pop(texts, None)
        if len(_recognizers) >= CACHE_SIZE:
            _recognizers.pop(next(iter(_recognizers)))
        _recognizers[texts] = made
    pending.set_result(made)
    return made


def _prepare(texts: tuple[str, ...]) -> None:
    with contextlib.suppress(Exception):  # the first transcription reports it, as an EngineError
        recognizer(texts)


def warm_up() -> None:
    """Blocking (a worker thread's work): what the first conversation of a process would otherwise wait for, done
    once: PocketSphinx loaded, its pronouncing dictionary read, its acoustic model in the page cache (a recognizer
    of the base vocabulary made)."""
    recognizer(())


class PocketsphinxSpeechToText:
    """:class:`application.ports.engines.SpeechToText`, offline (see the module). English only: another language is
    recognized with the English model."""

    def __init__(self, vocabulary: Iterable[str] = (), *, prepare: bool = True) -> None:
        self.texts = tuple(vocabulary)
        if prepare:  # the recognizer loads in a worker thread (about 50 ms; the first of a process reads the
            # dictionary too, unless the process warmed up) while the agent greets
            threading.Thread(target=_prepare, args=(self.texts,), daemon=True).start()

    def _recognize(self, pcm: bytes, sample_rate: int) -> str:
        audio = pcm if sample_rate == MODEL_RATE else resample(pcm, sample_rate, MODEL_RATE)
        return recognizer(self.texts).recognize(audio)

    async def transcribe(self, pcm: bytes, sample_rate: int, *, language: str | None = None) -> Transcript:
        try:
            text = await asyncio.to_thread(self._recognize, pcm, sample_rate)
        except ImportError:
            raise EngineError("offline speech recognition needs the pocketsphinx package") from None
        except RuntimeError as exc:
            raise EngineError(f"offline speech recognition failed: {exc}") from None
        return Transcript(text, "en")
