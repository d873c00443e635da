"""Outbox write benchmark: concurrent transactions that each record one event and commit, on PostgreSQL.

    .venv/bin/python bench/outbox_bench.py [--transactions 2000] [--concurrency 20] [--no-lock]

Measures commits per second and commit latency with the outbox write lock (the advisory lock that keeps
outbox ids visible in id order) and, with --no-lock, without it (for comparison only: without it a
consumer's cursor can skip an event). It creates a private database on PARLEY_BENCH_POSTGRES_URL (default
postgresql+asyncpg://postgres@127.0.0.1:5432/postgres) and drops it afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402

from adapters.sql import uow as sql_uow  # noqa: E402
from adapters.sql.engine import create_engine  # noqa: E402
from adapters.sql.schema import upgrade  # noqa: E402
from adapters.system.clock import SystemClock  # noqa: E402
from domain.events import EventType  # noqa: E402


async def run(url: str, transactions: int, concurrency: int) -> dict[str, float]:
    engine = create_engine(url, pool_size=concurrency)
    clock = SystemClock()
    async with engine.begin() as conn:
        await conn.execute(sa.text("INSERT INTO organizations (name, plan, org_type, created_at, updated_at) "
                                   "VALUES ('bench', 'enterprise', 'standard', now(), now())"))
    latencies: list[float] = []
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(transactions):
        queue.put_nowait(n)

    async def client() -> None:
        while not queue.empty():
            n = queue.get_nowait()
            uow = sql_uow.SqlUnitOfWork(engine, clock)
            start = time.perf_counter()
            await (await uow.connection()).execute(sa.text("SELECT 1"))
            uow.record(EventType.CALL_ENDED(1, {"id": f"c-{n}"}))
            await uow.commit()
            latencies.append(time.perf_counter() - start)
            await uow.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    await engine.dispose()
    latencies.sort()
    return {"commits_per_s": transactions / elapsed, "p50_ms": statistics.median(latencies) * 1000,
            "p95_ms": latencies[int(len(latencies) * 0.95)] * 1000}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transactions", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--no-lock", action="store_true")
    args = parser.parse_args()
    import asyncpg

    admin = os.environ.get("PARLEY_BENCH_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres")
    name = f"parley_bench_{uuid.uuid4().hex[:10]}"
    dsn = admin.replace("postgresql+asyncpg://", "postgresql://")
    conn = await asyncpg.connect(dsn)
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()
    url = admin.rsplit("/", 1)[0] + f"/{name}"
    try:
        await asyncio.to_thread(upgrade, url)
        if args.no_lock:
            sql_uow.SqlUnitOfWork.dialect = property(lambda self: "postgresql-without-lock")  # type: ignore[assignment]
        result = await run(url, args.transactions, args.concurrency)
        print({"lock": not args.no_lock, "transactions": args.transactions, "concurrency": args.concurrency,
               **{k: round(v, 1) for k, v in result.items()}})
    finally:
        conn = await asyncpg.connect(dsn)
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.close()


if __name__ == "__main__":
    asyncio.run(main())
