"""The built-in ``offline`` engines: no network, no model download at run time. Speech recognition by PocketSphinx
(its model ships in the pip package), synthesis by eSpeak NG (Debian's ``espeak-ng``), end of turn by WebRTC's voice
activity detector, and a deterministic language model."""

from adapters.engines.offline.llm import OfflineLanguageModel
from adapters.engines.offline.stt import PocketsphinxSpeechToText
from adapters.engines.offline.tts import EspeakTextToSpeech, espeak_path
from adapters.engines.offline.vad import EnergyTurnDetectors, FramedTurnDetector, WebRtcTurnDetectors

__all__ = ["EnergyTurnDetectors", "EspeakTextToSpeech", "FramedTurnDetector", "OfflineLanguageModel",
           "PocketsphinxSpeechToText", "WebRtcTurnDetectors", "espeak_path"]
