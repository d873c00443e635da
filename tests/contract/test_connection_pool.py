"""The connection pool (adapters/sql/engine.py FairQueuePool) keeps its overflow connections open while a load
uses them, instead of closing each one as it comes back, and closes those idle for longer than it keeps them."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from adapters.sql.engine import FairQueuePool, create_engine


async def _backends(engine: sa.ext.asyncio.AsyncEngine, holders: int) -> set[int]:
    """The backend pids of ``holders`` connections held at the same time."""
    async def hold(started: asyncio.Event, release: asyncio.Event, pids: list[int]) -> None:
        async with engine.connect() as conn:
            pids.append((await conn.execute(sa.text("SELECT pg_backend_pid()"))).scalar_one())
            started.set()
            await release.wait()

    release, pids = asyncio.Event(), []
    starts = [asyncio.Event() for _ in range(holders)]
    tasks = [asyncio.create_task(hold(s, release, pids)) for s in starts]
    await asyncio.gather(*(s.wait() for s in starts))
    release.set()
    await asyncio.gather(*tasks)
    return set(pids)


async def test_overflow_connections_are_kept_while_used_and_closed_once_idle(
        postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = create_engine(postgres_url, pool_size=2)  # and 2 of overflow
    pool = engine.sync_engine.pool
    try:
        first = await _backends(engine, 4)
        assert len(first) == 4
        assert pool.checkedin() == 4  # the two overflow connections came back to the pool, open
        assert await _backends(engine, 4) == first  # the next burst reuses them: no backend started

        monkeypatch.setattr(FairQueuePool, "SPARE_IDLE_SECONDS", 0.0)  # every idle spare is now stale
        async with engine.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))
        assert pool.checkedin() == 2  # the spares beyond the pool size were closed on that return
        assert pool.checkedout() == 0
        again = await _backends(engine, 4)
        assert len(again & first) == 2 and len(again) == 4  # two kept, two opened anew
    finally:
        await engine.dispose()
