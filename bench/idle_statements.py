"""Idle cost in statements: run the worker's job runner in this process on a fresh database, let it settle, then
count the SQL statements and transactions it issues over a window in which nobody talks to it (by statement
shape). Unlike CPU time, these counts do not depend on how busy the machine is.

    .venv/bin/python bench/idle_statements.py --seconds 30
    .venv/bin/python bench/idle_statements.py --seconds 30 --database postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.idle_cpu import _drop, _postgres_database  # noqa: E402


async def count(seconds: float, settle: float, top: int) -> dict[str, Any]:
    from sqlalchemy import event
    from sqlalchemy.ext.asyncio import AsyncEngine

    from entrypoints.ioc import build_container
    from entrypoints.settings import Settings
    from entrypoints.worker import run_jobs

    settings = Settings.from_env(dotenv=None).with_secret_key()
    container = build_container(settings)
    engine = await container.get(AsyncEngine)
    counting = False
    shapes: collections.Counter[str] = collections.Counter()
    transactions = 0

    @event.listens_for(engine.sync_engine, "before_cursor_execute")
    def _statement(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if counting:
            shapes[" ".join(statement.split())[:70]] += 1

    @event.listens_for(engine.sync_engine, "begin")
    def _begin(conn: Any) -> None:
        nonlocal transactions
        transactions += counting

    stop = asyncio.Event()
    worker = asyncio.create_task(run_jobs(container, settings, stop))
    await asyncio.sleep(settle)
    counting, cpu = True, time.process_time()
    await asyncio.sleep(seconds)
    counting, cpu = False, time.process_time() - cpu
    stop.set()
    await worker
    await container.close()
    return {"window_seconds": seconds, "statements": sum(shapes.values()), "transactions": transactions,
            "cpu_seconds": round(cpu, 3), "top": shapes.most_common(top)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--settle", type=float, default=8.0)
    parser.add_argument("--database", default="sqlite", help="sqlite, or a PostgreSQL admin URL")
    parser.add_argument("--top", type=int, default=12, help="how many statement shapes to list")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        dropped = None
        if args.database == "sqlite":
            url = f"sqlite+aiosqlite:///{Path(tmp) / 'parley.db'}"
        else:
            dropped, url = _postgres_database(args.database)
        os.environ.update(PARLEY_DATABASE_URL=url, PARLEY_VAR_DIR=str(Path(tmp) / "var"), PARLEY_LOG_LEVEL="WARNING")
        try:
            subprocess.run([sys.executable, "-m", "entrypoints.cli", "migrate"], cwd=tmp, check=True,
                           capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
            result = asyncio.run(count(args.seconds, args.settle, args.top))
            print(json.dumps({"database": url.split(":")[0], **result}))
        finally:
            if dropped:
                _drop(args.database, dropped)


if __name__ == "__main__":
    main()
