"""Idle cost: start a real `parley serve` (with its in-process worker) or `parley worker`, let it settle,
then read the CPU time it spends over a window while nobody talks to it.

    .venv/bin/python bench/idle_cpu.py --seconds 40                     # serve and worker on SQLite
    .venv/bin/python bench/idle_cpu.py --seconds 40 --database postgresql://postgres@127.0.0.1:5432/test

With PostgreSQL a private database is created and dropped. Prints one JSON line per process:
CPU seconds over the window and the share of one core.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its children still running (from /proc)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(p) for p in children.read_text().split()]
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _admin(admin_url: str, statement: str) -> None:
    import asyncio

    import asyncpg

    async def run() -> None:
        conn = await asyncpg.connect(admin_url)
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(run())


def _postgres_database(admin_url: str) -> tuple[str, str]:
    name = f"idle_{uuid.uuid4().hex[:8]}"
    _admin(admin_url, f'CREATE DATABASE "{name}"')
    base = admin_url.rsplit("/", 1)[0]
    return name, f"{base.replace('postgresql://', 'postgresql+asyncpg://')}/{name}"


def _drop(admin_url: str, name: str) -> None:
    _admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def measure(command: list[str], env: dict[str, str], cwd: Path, settle: float, seconds: float) -> dict[str, float]:
    proc = subprocess.Popen([sys.executable, "-m", "entrypoints.cli", *command], env=env, cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(settle)
        assert proc.poll() is None, f"{command} exited with {proc.returncode}"
        start = _cpu_seconds(proc.pid)
        time.sleep(seconds)
        used = _cpu_seconds(proc.pid) - start
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return {"cpu_seconds": round(used, 2), "window_seconds": seconds, "core_percent": round(100 * used / seconds, 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--settle", type=float, default=8.0)
    parser.add_argument("--database", default="sqlite", help="sqlite, or a PostgreSQL admin URL")
    parser.add_argument("--only", choices=["serve", "worker"], default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        dropped = None
        if args.database == "sqlite":
            url = f"sqlite+aiosqlite:///{work / 'parley.db'}"
        else:
            dropped, url = _postgres_database(args.database)
        env = {**os.environ, "PARLEY_DATABASE_URL": url, "PARLEY_VAR_DIR": str(work / "var"),
               "PYTHONPATH": str(ROOT), "PARLEY_LOG_LEVEL": "WARNING"}
        try:
            subprocess.run([sys.executable, "-m", "entrypoints.cli", "migrate"], env=env, cwd=work, check=True,
                           capture_output=True)
            runs = {"serve": ["serve", "--port", str(_free_port())], "worker": ["worker"]}
            for name, command in runs.items():
                if args.only and args.only != name:
                    continue
                result = measure(command, env, work, args.settle, args.seconds)
                print(json.dumps({"process": name, "database": url.split(":")[0], **result}), flush=True)
        finally:
            if dropped:
                _drop(args.database, dropped)


if __name__ == "__main__":
    main()
