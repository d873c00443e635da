"""Real Parley processes for end-to-end tests: `parley` commands, a server on a free port, and waiting for it."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
PARLEY = [sys.executable, "-m", "entrypoints.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sqlite_env(directory: Path, **settings: str) -> dict[str, str]:
    """The environment of a Parley process on its own SQLite file in `directory`, plus PARLEY_* settings."""
    return {**os.environ, "PARLEY_DATABASE_URL": f"sqlite+aiosqlite:///{directory / 'parley.db'}",
            "PARLEY_VAR_DIR": str(directory / "var"), "PYTHONPATH": str(ROOT), **settings}


def parley_json(args: list[str], env: Mapping[str, str], cwd: Path) -> dict:
    """Runs a `parley` command that prints JSON and returns its last line, parsed."""
    out = subprocess.run([*PARLEY, *args], env=dict(env), cwd=cwd, capture_output=True, text=True, timeout=60,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


async def until(check: Callable[[], Awaitable[Any]], seconds: float, what: str) -> Any:
    """``check()``'s first truthy value, asked every 0.2 s of real time (these processes run on the wall clock);
    fails the test after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        value = await check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


class Server:
    """`parley serve` (with its in-process worker unless told otherwise) on a free loopback port."""

    def __init__(self, env: Mapping[str, str], cwd: Path, *args: str, log: Path | None = None) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self._log = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen([*PARLEY, "serve", "--port", str(self.port), *args], env=dict(env),
                                        cwd=cwd, stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self, seconds: float = 30) -> Server:
        deadline = time.monotonic() + seconds
        while True:
            assert self.process.poll() is None, f"the server exited with {self.process.returncode}"
            try:
                if httpx.get(f"{self.base}/v2/health", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)

    async def ready(self, seconds: float = 30) -> Server:
        return await asyncio.to_thread(self.wait_ready, seconds)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log is not subprocess.DEVNULL:
            self._log.close()
