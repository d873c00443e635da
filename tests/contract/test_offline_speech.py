"""The offline speech engines: eSpeak NG's synthesis heard by PocketSphinx, and the end-of-turn detector.

eSpeak NG is Debian's espeak-ng: CI installs it (.ci/run); elsewhere these tests are skipped, saying so, when it is
missing. Under CI=true a missing espeak-ng fails them."""

from __future__ import annotations

import asyncio
import gc
import math
import os
import struct
import time

import pytest

from adapters.engines.audio import samples
from adapters.engines.offline import (
    EnergyTurnDetectors,
    EspeakTextToSpeech,
    PocketsphinxSpeechToText,
    WebRtcTurnDetectors,
    espeak_path,
)
from adapters.engines.offline import stt as offline_stt
from adapters.engines.offline.stt import arpa_bigram, arpa_unigram, recognizer, sentences_of, vocabulary_of
from adapters.engines.offline.tts import voice_for

if espeak_path() is None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        raise RuntimeError("espeak-ng is required in CI (.ci/run installs it) and is missing")
    pytestmark = pytest.mark.skip(reason="espeak-ng is not installed (apt-get install espeak-ng)")

KNOWLEDGE = "The clinic is open from nine to five on weekdays. Parking is free behind the building."


async def speak(text: str, rate: int, speed: float = 1.0, voice: str | None = None) -> bytes:
    chunks = [c async for c in EspeakTextToSpeech().synthesize(text, voice_id=voice, speed=speed, sample_rate=rate)]
    assert all(len(c) % 2 == 0 for c in chunks)
    return b"".join(chunks)


@pytest.mark.parametrize(("sentence", "key_words", "speed"), [
    ("yes please", {"yes", "please"}, 1.0),
    ("goodbye", {"bye"}, 1.0),
    ("what are your opening hours", {"opening", "hours"}, 1.0),
    ("can I speak to a human", {"human"}, 1.0),
    ("is parking free", {"parking"}, 1.0),
    ("tomorrow at ten please", {"tomorrow", "ten"}, 1.0),
    ("friday at two pm", {"friday", "two", "pm"}, 0.8),
    ("I want to book an appointment", {"book", "appointment"}, 0.8),
])
async def test_synthesized_speech_is_recognized_by_its_key_words(sentence: str, key_words: set[str],
                                                                 speed: float) -> None:
    stt = PocketsphinxSpeechToText([KNOWLEDGE])
    heard = await stt.transcribe(await speak(sentence, 16000, speed), 16000, language="en-US")
    assert all(word in heard.text for word in key_words), heard.text
    assert heard.language == "en"


async def test_telephone_rate_speech_is_recognized_too() -> None:
    stt = PocketsphinxSpeechToText()
    assert "bye" in (await stt.transcribe(await speak("goodbye", 8000), 8000)).text
    heard = await stt.transcribe(await speak("can I book tomorrow at eleven", 8000), 8000)
    assert {"book", "tomorrow", "eleven"} <= set(heard.text.split()), heard.text
    again = await stt.transcribe(await speak("can I book tomorrow at eleven", 8000), 8000)
    assert again == heard  # the same audio, the same words, whatever was heard before


@pytest.mark.slow
async def test_the_first_recognizer_of_a_process_is_made_without_stalling_the_event_loop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A process's first recognizer reads PocketSphinx's pronouncing dictionary (135,000 words). Made in a worker
    thread, it must still leave the event loop (other calls' audio, paced in 20 ms frames) running: read as lists
    it made half a million objects for the garbage collector, whose full pass over a loaded process's heap holds
    every thread for hundreds of milliseconds."""
    recognizer(("A recognizer made before: the library and its acoustic model are loaded.",))
    monkeypatch.setattr(offline_stt, "_pronunciations", None)
    monkeypatch.setattr(offline_stt, "_recognizers", {})
    heap = [[n] for n in range(600_000)]  # a serve process's objects (routes, schemas, pools, caches)
    gc.collect()
    gaps: list[float] = []
    stopped = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not stopped.is_set():
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            gaps.append(now - last - 0.01)
            last = now

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    engine = PocketsphinxSpeechToText(["Welcome to the bakery: we sell bread, croissants and cakes."])
    heard = await engine.transcribe(b"\0" * 16000, 16000)  # waits for the recognizer being made
    stopped.set()
    await ticking
    assert heard.text == "" and len(heap) == 600_000
    assert max(gaps) < 0.1, f"the event loop stalled for {max(gaps) * 1000:.0f} ms"


async def test_a_recognizer_being_made_is_waited_for_not_made_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[str, ...]] = []

    class Slow:
        def __init__(self, texts: tuple[str, ...]) -> None:
            time.sleep(0.2)
            made.append(texts)

    monkeypatch.setattr(offline_stt, "_Recognizer", Slow)
    monkeypatch.setattr(offline_stt, "_recognizers", {})
    first, second = await asyncio.gather(asyncio.to_thread(recognizer, ("a",)), asyncio.to_thread(recognizer, ("a",)))
    assert first is second and made == [("a",)]


async def test_synthesis_follows_rate_and_speed() -> None:
    slow = await speak("Your appointment is booked for tomorrow at ten.", 8000, speed=0.8)
    fast = await speak("Your appointment is booked for tomorrow at ten.", 8000, speed=1.6)
    wide = await speak("Your appointment is booked for tomorrow at ten.", 24000, speed=0.8)
    assert 1.5 < len(fast) / 16000 < len(slow) / 16000 < 6  # seconds at 8 kHz
    assert abs(len(wide) / 48000 - len(slow) / 16000) < 0.05  # the same speech at another rate
    assert max(abs(s) for s in samples(slow)) > 3000


async def test_an_unknown_voice_falls_back_to_the_language_then_to_us_english() -> None:
    languages = frozenset({"en-us", "en-gb", "fr-fr", "fr"})
    assert voice_for("en-gb+f3", None, languages) == "en-gb+f3"
    assert voice_for("alloy", "fr-FR", languages) == "fr-fr"
    assert voice_for("default", "fr-CA", languages) == "fr"
    assert voice_for("--help", "xx", languages) == "en-us"
    assert await speak("Hello.", 8000, voice="alloy")  # espeak-ng itself crashes on an unknown voice


def test_the_vocabulary_holds_the_given_words_the_dictionary_knows() -> None:
    found = vocabulary_of(["Parking is free behind the building, says Zxqwv."])
    assert {"parking", "behind", "building", "book", "tomorrow"} <= found and "zxqwv" not in found
    model = arpa_unigram({"yes", "no"})
    assert "ngram 1=4" in model and model.rstrip().endswith("\\end\\")
    sentences = sentences_of(["Parking is free. Call Zxqwv!"])
    assert ["parking", "is", "free"] in sentences and ["call"] in sentences
    bigrams = arpa_bigram([["yes", "please"], ["yes"]], {"no"})
    assert "ngram 1=5" in bigrams and "ngram 2=4" in bigrams and " yes please\n" in bigrams


# -- end of turn ----------------------------------------------------------------------------------------------

def frames(pcm: bytes, rate: int, ms: int = 20) -> list[bytes]:
    size = rate * ms // 1000 * 2
    return [pcm[i:i + size] for i in range(0, len(pcm), size)]


@pytest.mark.parametrize("rate", [8000, 16000, 24000])
async def test_speech_starts_then_the_turn_ends_after_the_silence(rate: int) -> None:
    detector = WebRtcTurnDetectors().create(rate, end_of_turn_silence_ms=500)
    speech = await speak("I would like to book an appointment.", rate)
    silence = b"\0\0" * (rate // 50)
    at = 0
    started, ended_at = [], []
    for piece in [*frames(speech, rate), *[silence] * 40]:
        activity = detector.feed(piece, at)
        if activity.speech_started:
            started.append(at)
        if activity.turn_ended:
            ended_at.append(at)
        at += 20
    speech_ms = len(speech) * 1000 // (2 * rate)
    assert len(started) >= 1 and started[0] < 400
    # once, after the silence (espeak-ng's audio ends with some of it), never at a pause between words
    assert len(ended_at) == 1 and speech_ms + 100 <= ended_at[0] <= speech_ms + 500 + 40


def test_the_energy_detector_frames_any_chunk_size_and_needs_sixty_ms_of_sound() -> None:
    rate = 8000
    tone = struct.pack("<800h", *(int(6000 * math.sin(2 * math.pi * 300 * i / rate)) for i in range(800)))
    detector = EnergyTurnDetectors().create(rate, end_of_turn_silence_ms=200)
    assert not detector.feed(tone[:640], 0).speech_started  # 40 ms: not yet
    assert detector.feed(tone[640:1000], 40).speech_started  # odd sizes are framed
    assert detector.feed(b"", 62).speaking
    results = [detector.feed(b"\0" * 160, 100 + 10 * i) for i in range(30)]
    assert sum(r.turn_ended for r in results) == 1
    detector.reset()
    assert not detector.feed(b"\0" * 320, 0).speaking
