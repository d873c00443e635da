"""Text extraction in a separate process with a time and memory limit.

Parsers of untrusted files have had infinite loops and runaway allocations (pypdf has had several), and a
thread cannot be stopped. So files and pages are parsed by worker processes (``adapters.documents.worker``,
a fresh interpreter with the parsers imported once, its address space limited). A file's time limit starts
once its worker is ready (starting one has a bound of its own); a worker that has not answered within it is
killed, the file refused as unreadable, and the next request starts a new worker. Workers are shared by every
extractor of the process (per event loop and memory limit) and exit when their parent does (their stdin
closes).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import sys
from pathlib import Path
from typing import Any

from adapters.documents.worker import HEADER, READY, frame
from application.ports.egress import FetchedPage
from application.ports.knowledge import ExtractedText, ExtractionFailed

MSG_TIMEOUT = "the file took too long to read"
MSG_CRASHED = "the file could not be read (the reader stopped)"
UNREADABLE = "unreadable_file"
STARTUP_SECONDS = 60.0
"""How long a new worker may take to start (interpreter, parsers): bounded apart from a file's own time."""
_PROJECT_ROOT = str(Path(__file__).resolve().parent.parent.parent)


class _Worker:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, memory_mb: int) -> _Worker:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [_PROJECT_ROOT,
                                                                        os.environ.get("PYTHONPATH")]))}
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "adapters.documents.worker", str(memory_mb), env=env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        worker = cls(process)
        try:
            async with asyncio.timeout(STARTUP_SECONDS):
                ready = await worker._receive()
            if ready != READY:
                raise asyncio.IncompleteReadError(ready, None)
        except BaseException:
            await worker.kill()
            raise
        return worker

    async def _receive(self) -> bytes:
        assert self.process.stdout is not None
        (size,) = HEADER.unpack(await self.process.stdout.readexactly(HEADER.size))
        return await self.process.stdout.readexactly(size)

    async def ask(self, request: bytes) -> Any:
        assert self.process.stdin is not None
        self.process.stdin.write(frame(request))
        await self.process.stdin.drain()
        return pickle.loads(await self._receive())  # our own worker's answer

    async def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        await self.process.wait()


class _Pool:
    """Idle workers of one event loop and memory limit; at most ``size`` at work at once."""

    def __init__(self, loop: asyncio.AbstractEventLoop, memory_mb: int, size: int) -> None:
        self.loop, self.memory_mb = loop, memory_mb
        self.idle: list[_Worker] = []
        self.slots = asyncio.Semaphore(size)

    async def run(self, request: bytes, seconds: float) -> Any:
        async with self.slots:
            try:  # a new worker is started before the file's time runs
                worker = self.idle.pop() if self.idle else await _Worker.start(self.memory_mb)
            except (TimeoutError, asyncio.IncompleteReadError, BrokenPipeError, ConnectionResetError):
                return ("failed", MSG_CRASHED, UNREADABLE)
            try:
                async with asyncio.timeout(seconds):
                    answer = await worker.ask(request)
            except TimeoutError:
                await worker.kill()
                return ("failed", MSG_TIMEOUT, UNREADABLE)
            except (asyncio.IncompleteReadError, BrokenPipeError, ConnectionResetError):
                await worker.kill()  # it died (its memory limit, a crash in C): the next file gets a new one
                return ("failed", MSG_CRASHED, UNREADABLE)
            except BaseException:
                await worker.kill()
                raise
            self.idle.append(worker)
            return answer


_pools: dict[tuple[int, int], _Pool] = {}


def _pool(memory_mb: int, size: int) -> _Pool:
    loop = asyncio.get_running_loop()
    key = (id(loop), memory_mb)
    pool = _pools.get(key)
    if pool is None or pool.loop is not loop:  # a new loop may reuse a closed one's id
        pool = _pools[key] = _Pool(loop, memory_mb, size)
    return pool


class IsolatedTextExtractor:
    """``TextExtractor`` that runs ``inner``'s ``extract_file_now`` / ``extract_page_now`` (``inner`` is a
    picklable ``LocalTextExtractor``) in a worker process: at most ``timeout_seconds`` per file and
    ``memory_mb`` of address space per worker (0: no limit), ``workers`` files at once."""

    def __init__(self, inner: Any, *, timeout_seconds: float = 30.0, memory_mb: int = 1024,
                 workers: int = 2) -> None:
        self.inner, self.timeout, self.memory_mb, self.workers = inner, timeout_seconds, memory_mb, workers

    async def _isolated(self, method: str, *args: Any) -> ExtractedText:
        request = pickle.dumps((self.inner, method, args))
        outcome = await _pool(self.memory_mb, self.workers).run(request, self.timeout)
        if outcome[0] == "ok":
            return outcome[1]
        raise ExtractionFailed(outcome[1], outcome[2])

    async def extract_file(self, file_name: str, data: bytes) -> ExtractedText:
        return await self._isolated("extract_file_now", file_name, data)

    async def extract_page(self, page: FetchedPage) -> ExtractedText:
        return await self._isolated("extract_page_now", page)
