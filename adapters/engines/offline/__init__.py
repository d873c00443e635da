"""The built-in ``offline`` engines: no network, no model download at run time. Speech recognition by PocketSphinx
(its model ships in the pip package), synthesis by eSpeak NG (Debian's ``espeak-ng``), end of turn by WebRTC's voice
activity detector, and a deterministic language model."""

import asyncio

from adapters.engines.offline import stt
from adapters.engines.offline.llm import OfflineLanguageModel
from adapters.engines.offline.stt import PocketsphinxSpeechToText
from adapters.engines.offline.tts import EspeakTextToSpeech, espeak_path, installed_languages
from adapters.engines.offline.vad import EnergyTurnDetectors, FramedTurnDetector, WebRtcTurnDetectors


def _load() -> None:
    stt.warm_up()
    WebRtcTurnDetectors().create(16000, 500)


async def warm_up() -> None:
    """Loads once, in a worker thread, what a process's first conversation would otherwise wait for: PocketSphinx,
    its pronouncing dictionary and acoustic model, WebRTC's voice activity detector, and the list of eSpeak NG's
    voices. The event loop keeps serving meanwhile."""
    await asyncio.to_thread(_load)
    executable = espeak_path()
    if executable is not None:
        await installed_languages(executable)


__all__ = ["EnergyTurnDetectors", "EspeakTextToSpeech", "FramedTurnDetector", "OfflineLanguageModel",
           "PocketsphinxSpeechToText", "WebRtcTurnDetectors", "espeak_path", "warm_up"]
