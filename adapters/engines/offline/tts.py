"""Offline speech synthesis with eSpeak NG (Debian's ``espeak-ng``: ``apt-get install espeak-ng``), run as a
process per utterance: ``espeak-ng --stdout -v <voice> -s <words a minute>`` reads the text on its standard input
and writes a WAV file (22 050 Hz) that is streamed back, resampled to the asked rate, as it is produced."""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import AsyncIterator

from adapters.engines.audio import LinearResampler, WavFormatError, parse_wav_header
from application.ports.engines import EngineError

DEFAULT_VOICE = "en-us"
BASE_WORDS_PER_MINUTE = 175
SPEED_RANGE = (0.5, 2.0)
READ_SIZE = 4096
_VOICE = re.compile(r"^[A-Za-z0-9_+-]{1,40}$")


def espeak_path() -> str | None:
    return shutil.which("espeak-ng")


_languages: dict[str, frozenset[str]] = {}


async def installed_languages(executable: str) -> frozenset[str]:
    """The languages eSpeak NG has voices for (``espeak-ng --voices``; MBROLA voices left out: their databases are
    separate packages). An unknown voice makes espeak-ng crash, so a voice is checked against this first."""
    found = _languages.get(executable)
    if found is None:
        process = await asyncio.create_subprocess_exec(executable, "--voices", stdout=asyncio.subprocess.PIPE,
                                                       stderr=asyncio.subprocess.DEVNULL)
        out, _ = await process.communicate()
        names = set()
        for line in out.decode(errors="replace").splitlines()[1:]:
            columns = line.split()
            if len(columns) >= 5 and not columns[4].startswith("mb/"):
                names.add(columns[1].lower())
        found = _languages[executable] = frozenset(names)
    return found


def voice_for(voice_id: str | None, language: str | None, languages: frozenset[str]) -> str:
    """An eSpeak voice: ``voice_id`` when its language is installed (``en-us``, ``en-gb+f3``: a language and a
    variant), else the agent's language (``en-US`` -> ``en-us``, else ``en``), else US English."""
    base = (language or "").lower()
    for candidate in (voice_id, base, base.split("-")[0]):
        if candidate and _VOICE.match(candidate) and candidate.lower().split("+")[0] in languages:
            return candidate.lower()
    return DEFAULT_VOICE


class EspeakTextToSpeech:
    """:class:`application.ports.engines.TextToSpeech`, offline (see the module)."""

    def __init__(self, *, language: str | None = None, executable: str | None = None) -> None:
        self.language = language
        self.executable = executable

    async def synthesize(self, text: str, *, voice_id: str | None, speed: float,
                         sample_rate: int) -> AsyncIterator[bytes]:
        executable = self.executable or espeak_path()
        if executable is None:
            raise EngineError("offline speech synthesis needs espeak-ng (apt-get install espeak-ng)")
        words_per_minute = round(BASE_WORDS_PER_MINUTE * min(max(speed, SPEED_RANGE[0]), SPEED_RANGE[1]))
        process = await asyncio.create_subprocess_exec(
            executable, "--stdout", "-v", voice_for(voice_id, self.language, await installed_languages(executable)),
            "-s", str(words_per_minute),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(" ".join(text.split()).encode())
            await process.stdin.drain()
            process.stdin.close()
            head = b""
            resampler: LinearResampler | None = None
            while True:
                chunk = await process.stdout.read(READ_SIZE)
                if not chunk:
                    break
                if resampler is None:
                    head += chunk
                    try:
                        parsed = parse_wav_header(head)
                    except WavFormatError as exc:
                        raise EngineError(f"espeak-ng's audio cannot be read: {exc}") from None
                    if parsed is None:
                        continue
                    rate, _channels, offset = parsed
                    resampler, chunk = LinearResampler(rate, sample_rate), head[offset:]
                out = resampler.feed(chunk)
                if out:
                    yield out
            if await process.wait() != 0:
                raise EngineError(f"espeak-ng failed (exit status {process.returncode})")
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
