"""The offline engines on this machine: what each costs per utterance, against audio length (real-time factor).

  (a) eSpeak NG synthesis (a process per sentence)       time to the first chunk and to the last
  (b) PocketSphinx with Parley's small bigram model        the recognizer's load, and decoding at 8 and 16 kHz
  (c) PocketSphinx with its shipped general model          the same, for comparison (what the small model replaced)
  (d) WebRTC's voice activity detector, and the energy one  CPU per 20 ms frame

    .venv/bin/python bench/offline_engines_bench.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from adapters.engines.audio import resample
from adapters.engines.offline import EnergyTurnDetectors, EspeakTextToSpeech, WebRtcTurnDetectors
from adapters.engines.offline.stt import MODEL_RATE, model_dir, recognizer

SENTENCES = ("I would like to book an appointment tomorrow at ten.", "What are your opening hours?",
             "Yes please.", "Can I speak to a human?")
KNOWLEDGE = ("The clinic is open from nine to five on weekdays. Parking is free behind the building.",)


async def synthesize(text: str, rate: int) -> tuple[bytes, float, float]:
    started = time.perf_counter()
    first = 0.0
    chunks = []
    async for chunk in EspeakTextToSpeech().synthesize(text, voice_id=None, speed=1.0, sample_rate=rate):
        if not chunks:
            first = time.perf_counter() - started
        chunks.append(chunk)
    return b"".join(chunks), first, time.perf_counter() - started


def decode(decoder: object, pcm: bytes) -> float:
    started = time.perf_counter()
    decoder.start_utt()  # type: ignore[attr-defined]
    decoder.process_raw(pcm, full_utt=True)  # type: ignore[attr-defined]
    decoder.end_utt()  # type: ignore[attr-defined]
    return time.perf_counter() - started


async def main(repeat: int) -> None:
    audio: dict[int, list[bytes]] = {8000: [], 16000: []}
    firsts, totals, seconds = [], [], 0.0
    for _ in range(repeat):
        for text in SENTENCES:
            for rate in audio:
                pcm, first, total = await synthesize(text, rate)
                audio[rate].append(pcm)
                firsts.append(first)
                totals.append(total)
                seconds += len(pcm) / (2 * rate)
    print(f"(a) espeak-ng: first chunk p50 {statistics.median(firsts) * 1000:.0f} ms, whole sentence p50 "
          f"{statistics.median(totals) * 1000:.0f} ms, real-time factor {sum(totals) / seconds:.3f}")

    started = time.perf_counter()
    small = recognizer(KNOWLEDGE)
    load = time.perf_counter() - started
    from pocketsphinx import Decoder

    started = time.perf_counter()
    general = Decoder(hmm=str(model_dir() / "en-us"), samprate=MODEL_RATE, loglevel="FATAL")
    general_load = time.perf_counter() - started
    def recognize(pcm: bytes) -> float:  # as the engine does it: two passes, 100 ms at a time
        started = time.perf_counter()
        small.recognize(pcm)
        return time.perf_counter() - started

    for name, run, loaded in (("(b) small bigram", recognize, load),
                              ("(c) general", lambda pcm: decode(general, pcm), general_load)):
        for rate, clips in audio.items():
            wide = [resample(pcm, rate, MODEL_RATE) if rate != MODEL_RATE else pcm for pcm in clips]
            spent = sum(run(pcm) for pcm in wide)
            length = sum(len(pcm) for pcm in clips) / (2 * rate)
            print(f"{name} model (load {loaded * 1000:.0f} ms) at {rate} Hz: real-time factor {spent / length:.2f}")

    frames = audio[8000][0]
    for name, factory in (("webrtc", WebRtcTurnDetectors()), ("energy", EnergyTurnDetectors())):
        detector = factory.create(8000, 500)
        count = len(frames) // 320
        started = time.perf_counter()
        for index in range(count):
            detector.feed(frames[index * 320:(index + 1) * 320], index * 20)
        print(f"(d) {name} detector: {(time.perf_counter() - started) / count * 1e6:.0f} us per 20 ms frame")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    asyncio.run(main(parser.parse_args().repeat))
