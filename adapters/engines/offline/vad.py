"""End of turn: voice activity per frame (WebRTC's detector, pip ``webrtcvad-wheels``; or an energy threshold),
then a small state machine: an utterance starts after ``start_ms`` of speech (``speech_started``: barge-in) and
ends after ``end_of_turn_silence_ms`` of silence (``turn_ended``)."""

from __future__ import annotations

import math
from typing import Protocol

from adapters.engines.audio import resample, samples
from application.ports.engines import VoiceActivity

WEBRTC_RATES = (8000, 16000, 32000, 48000)
FRAME_MS = 20
START_MS = 60
"""Speech this long (in a row) starts an utterance: a click or a breath does not."""
ENERGY_THRESHOLD_DBFS = -40.0


class FrameClassifier(Protocol):
    def is_speech(self, frame: bytes, sample_rate: int) -> bool: ...


class WebRtcClassifier:
    """WebRTC's voice activity detector (aggressiveness 0-3: higher refuses more noise). It takes 10, 20 or 30 ms
    frames at 8, 16, 32 or 48 kHz."""

    def __init__(self, aggressiveness: int = 2) -> None:
        import webrtcvad  # the package is only needed where this classifier is used

        self.vad = webrtcvad.Vad(aggressiveness)

    def is_speech(self, frame: bytes, sample_rate: int) -> bool:
        return bool(self.vad.is_speech(frame, sample_rate))


class EnergyClassifier:
    """Speech is a frame louder than ``threshold_dbfs`` (root mean square against full scale)."""

    def __init__(self, threshold_dbfs: float = ENERGY_THRESHOLD_DBFS) -> None:
        self.threshold = 32768 * 10 ** (threshold_dbfs / 20)

    def is_speech(self, frame: bytes, sample_rate: int) -> bool:
        values = samples(frame)
        if not values:
            return False
        return math.sqrt(sum(v * v for v in values) / len(values)) >= self.threshold


class FramedTurnDetector:
    """:class:`application.ports.engines.TurnDetector`: frames the caller's audio (``frame_ms``: 10, 20 or 30),
    classifies each frame and reports the utterance's start and end."""

    def __init__(self, classifier: FrameClassifier, sample_rate: int, end_of_turn_silence_ms: int, *,
                 frame_ms: int = FRAME_MS, start_ms: int = START_MS) -> None:
        if frame_ms not in (10, 20, 30):
            raise ValueError("frames are 10, 20 or 30 ms")
        self.classifier = classifier
        self.sample_rate = sample_rate
        # WebRTC's detector takes only some rates: other audio is resampled to the nearest it takes, frame by frame
        self.vad_rate = min(WEBRTC_RATES, key=lambda rate: abs(rate - sample_rate))
        self.frame_bytes = sample_rate * frame_ms // 1000 * 2
        self.frame_ms = frame_ms
        self.start_frames = max(1, math.ceil(start_ms / frame_ms))
        self.end_frames = max(1, math.ceil(end_of_turn_silence_ms / frame_ms))
        self.reset()

    def reset(self) -> None:
        self._pending = b""
        self._speaking = False
        self._voiced = 0
        self._silent = 0

    def _classify(self, frame: bytes) -> bool:
        if self.vad_rate != self.sample_rate:
            frame = resample(frame, self.sample_rate, self.vad_rate)
            wanted = self.vad_rate * self.frame_ms // 1000 * 2
            frame = (frame + b"\0" * wanted)[:wanted]
        return self.classifier.is_speech(frame, self.vad_rate)

    def feed(self, pcm: bytes, at_ms: int) -> VoiceActivity:
        data = self._pending + pcm
        whole = len(data) - len(data) % self.frame_bytes
        self._pending = data[whole:]
        started = ended = False
        for offset in range(0, whole, self.frame_bytes):
            if self._classify(data[offset:offset + self.frame_bytes]):
                self._voiced += 1
                self._silent = 0
                if not self._speaking and self._voiced >= self.start_frames:
                    self._speaking, started = True, True
            else:
                self._voiced = 0
                if self._speaking:
                    self._silent += 1
                    if self._silent >= self.end_frames:
                        self._speaking, ended, self._silent = False, True, 0
        return VoiceActivity(speaking=self._speaking, speech_started=started, turn_ended=ended)


class WebRtcTurnDetectors:
    """:class:`application.ports.engines.TurnDetectors` over WebRTC's detector, 20 ms frames."""

    def __init__(self, aggressiveness: int = 2, frame_ms: int = FRAME_MS) -> None:
        self.aggressiveness, self.frame_ms = aggressiveness, frame_ms

    def create(self, sample_rate: int, end_of_turn_silence_ms: int) -> FramedTurnDetector:
        return FramedTurnDetector(WebRtcClassifier(self.aggressiveness), sample_rate, end_of_turn_silence_ms,
                                  frame_ms=self.frame_ms)


class EnergyTurnDetectors:
    """:class:`application.ports.engines.TurnDetectors` over an energy threshold (no dependency)."""

    def __init__(self, threshold_dbfs: float = ENERGY_THRESHOLD_DBFS, frame_ms: int = FRAME_MS) -> None:
        self.threshold_dbfs, self.frame_ms = threshold_dbfs, frame_ms

    def create(self, sample_rate: int, end_of_turn_silence_ms: int) -> FramedTurnDetector:
        return FramedTurnDetector(EnergyClassifier(self.threshold_dbfs), sample_rate, end_of_turn_silence_ms,
                                  frame_ms=self.frame_ms)
