"""A fake microphone for the browser tests of web calls: chromium plays a WAV file as the microphone
(``--use-file-for-fake-audio-capture``, looped), the caller's words synthesized offline by eSpeak NG."""

from __future__ import annotations

import io
import shutil
import subprocess
import wave
from pathlib import Path

from tests.browser.conftest import _unavailable, chromium_executable

RATE = 22_050
"""eSpeak NG's rate (mono, 16-bit): the rate of a script without words too."""


def spoken(text: str, *, words_per_minute: int = 140) -> bytes:
    """``text`` in eSpeak NG's US English voice: 16-bit mono frames at ``RATE``."""
    if shutil.which("espeak-ng") is None:
        _unavailable("espeak-ng is not installed (apt-get install espeak-ng)")
    out = subprocess.run(["espeak-ng", "-v", "en-us", "-s", str(words_per_minute), "--stdout", text],
                         capture_output=True, check=True, timeout=30).stdout
    with wave.open(io.BytesIO(out)) as source:
        assert (source.getframerate(), source.getsampwidth(), source.getnchannels()) == (RATE, 2, 1)
        return source.readframes(source.getnframes())


def script_wav(path: Path, *parts: str | float, words_per_minute: int = 140) -> Path:
    """The caller's microphone: ``parts`` in order, a number being that many seconds of silence and a text the
    caller's words (chromium loops the file: end it with enough silence)."""
    frames = b"".join(b"\0\0" * int(RATE * part) if isinstance(part, int | float)
                      else spoken(part, words_per_minute=words_per_minute) for part in parts)
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(RATE)
        out.writeframes(frames)
    return path


def caller_wav(path: Path, text: str, *, lead_seconds: float = 6.0, tail_seconds: float = 12.0,
               words_per_minute: int = 140) -> Path:
    """Silence while the agent greets, the question, then silence."""
    return script_wav(path, lead_seconds, text, tail_seconds, words_per_minute=words_per_minute)


def launch_arguments(wav: Path) -> dict[str, object]:
    """``playwright.chromium.launch`` arguments: Debian's chromium, headless, its microphone playing ``wav``
    (permission granted without asking) and audio playing without a gesture."""
    executable = chromium_executable()
    if executable is None:
        _unavailable("chromium is not installed (apt-get install chromium)")
    return {"executable_path": executable, "headless": True, "args": [
        "--no-sandbox", "--disable-dev-shm-usage", "--use-fake-ui-for-media-stream",
        "--use-fake-device-for-media-stream", f"--use-file-for-fake-audio-capture={wav}",
        "--autoplay-policy=no-user-gesture-required"]}
