"""The SQL unit of work against the databases themselves: SQLite's statements and their transaction (one thread
hand-off per statement, BEGIN sent with the first), and PostgreSQL's wake-up of other processes at commit."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from adapters.memory.clock import ManualClock
from adapters.sql.engine import create_engine
from adapters.sql.jobs import listen
from adapters.sql.uow import SqlUnitOfWork

CLOCK = ManualClock(datetime(2026, 3, 1, tzinfo=UTC))


async def test_sqlite_statements_share_their_transaction_and_a_rollback_discards_them(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'uow.db'}", pool_size=2)
    try:
        setup = SqlUnitOfWork(engine, CLOCK)
        conn = await setup.connection()
        await conn.execute(sa.text("CREATE TABLE t (n INTEGER PRIMARY KEY, v TEXT NOT NULL)"))
        await setup.commit()
        await setup.close()

        uow = SqlUnitOfWork(engine, CLOCK)
        conn = await uow.connection()
        await conn.execute(sa.text("INSERT INTO t (v) VALUES ('a'), ('b')"))
        assert (await conn.execute(sa.text("SELECT count(*) FROM t"))).scalar_one() == 2
        with pytest.raises(sa.exc.IntegrityError):
            await conn.execute(sa.text("INSERT INTO t (v) VALUES (NULL)"))
        assert (await conn.execute(sa.text("SELECT count(*) FROM t"))).scalar_one() == 2  # still usable
        await uow.rollback()
        assert (await conn.execute(sa.text("SELECT count(*) FROM t"))).scalar_one() == 0
        result = await conn.execute(sa.text("INSERT INTO t (v) VALUES ('c')"))
        assert result.rowcount == 1
        await uow.commit()
        await uow.commit()  # nothing open: nothing sent, nothing fails
        await uow.close()

        other = SqlUnitOfWork(engine, CLOCK, write=False)
        rows = (await (await other.connection()).execute(sa.text("SELECT v FROM t ORDER BY n"))).all()
        assert [r[0] for r in rows] == ["c"]
        await other.close()
    finally:
        await engine.dispose()


async def test_postgres_commit_that_created_work_wakes_listeners_a_rollback_does_not(postgres_url: str) -> None:
    engine = create_engine(postgres_url, pool_size=3)
    woken: asyncio.Queue[None] = asyncio.Queue()
    listener = await listen(engine, lambda: woken.put_nowait(None))
    try:
        rolled_back = SqlUnitOfWork(engine, CLOCK)
        await (await rolled_back.connection()).execute(sa.text("SELECT 1"))
        rolled_back.created_work()
        await rolled_back.rollback()
        await rolled_back.commit()
        await rolled_back.close()

        committed = SqlUnitOfWork(engine, CLOCK)
        await (await committed.connection()).execute(sa.text("SELECT 1"))
        committed.created_work()
        await committed.commit()
        await committed.close()

        await asyncio.wait_for(woken.get(), 10)
        assert woken.empty()  # one commit created work: one wake-up
    finally:
        await listener.close()
        await engine.dispose()
