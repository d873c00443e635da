"""The SQL unit of work against the databases themselves: a write unit is atomic, SQLite's writers queue (a write
unit takes the write lock with its first statement), a read-only unit reads with each statement its own
transaction, no unit leaves a connection checked out, and PostgreSQL's wake-up of other processes at commit."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from adapters.memory.clock import ManualClock
from adapters.sql.engine import create_engine
from adapters.sql.jobs import listen
from adapters.sql.uow import SqlUnitOfWork
from domain.events import EventType

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


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'uow.db'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
async def table_engine(database_url: str) -> AsyncIterator[tuple[Any, str]]:
    """An engine of each database and a table of its own on it: ``(n, v)``."""
    engine = create_engine(database_url, pool_size=3)
    table = f"t_{uuid.uuid4().hex[:8]}"
    serial = "INTEGER PRIMARY KEY AUTOINCREMENT" if engine.dialect.name == "sqlite" else "serial PRIMARY KEY"
    async with engine.begin() as conn:
        await conn.execute(sa.text(f"CREATE TABLE {table} (n {serial}, v TEXT NOT NULL)"))
    try:
        yield engine, table
    finally:
        async with engine.begin() as conn:
            await conn.execute(sa.text(f"DROP TABLE {table}"))
        await engine.dispose()


async def _values(engine: Any, table: str) -> list[str]:
    """What another request sees (a read-only unit: it waits for no writer)."""
    uow = SqlUnitOfWork(engine, CLOCK, write=False)
    try:
        return list((await (await uow.connection()).execute(sa.text(f"SELECT v FROM {table} ORDER BY n"))).scalars())
    finally:
        await uow.close()


async def test_a_write_unit_is_atomic_and_others_see_it_only_once_committed(table_engine: tuple[Any, str]) -> None:
    engine, table = table_engine
    uow = SqlUnitOfWork(engine, CLOCK)
    try:
        conn = await uow.connection()
        await conn.execute(sa.text(f"INSERT INTO {table} (v) VALUES ('a')"))
        await conn.execute(sa.text(f"INSERT INTO {table} (v) VALUES ('b')"))
        assert await _values(engine, table) == []  # not committed: nobody else sees either row
        await uow.rollback()
        assert (await conn.execute(sa.text(f"SELECT count(*) FROM {table}"))).scalar_one() == 0  # both undone

        await conn.execute(sa.text(f"INSERT INTO {table} (v) VALUES ('c')"))
        await conn.execute(sa.text(f"INSERT INTO {table} (v) VALUES ('d')"))
        await uow.commit()
        assert await _values(engine, table) == ["c", "d"]
        await conn.execute(sa.text(f"INSERT INTO {table} (v) VALUES ('e')"))
        await uow.close()  # closed without a commit: rolled back
        assert await _values(engine, table) == ["c", "d"]
    finally:
        await uow.close()


async def test_a_read_only_unit_reads_each_statement_on_its_own(table_engine: tuple[Any, str]) -> None:
    engine, table = table_engine
    reader = SqlUnitOfWork(engine, CLOCK, write=False)
    try:
        conn = await reader.connection()
        assert (await conn.execute(sa.text(f"SELECT count(*) FROM {table}"))).scalar_one() == 0

        writer = SqlUnitOfWork(engine, CLOCK)
        await (await writer.connection()).execute(sa.text(f"INSERT INTO {table} (v) VALUES ('a')"))
        await writer.commit()
        await writer.close()
        # no transaction held between its statements: the next one sees what was committed meanwhile
        assert (await conn.execute(sa.text(f"SELECT v FROM {table}"))).scalars().all() == ["a"]

        # what it writes is kept statement by statement, with no commit of its own
        await conn.execute(sa.text(f"INSERT INTO {table} (v) VALUES ('b')"))
        assert await _values(engine, table) == ["a", "b"]
        await reader.commit()
    finally:
        await reader.close()
    with pytest.raises(RuntimeError):  # events need the outbox write in the change's own transaction
        SqlUnitOfWork(engine, CLOCK, write=False).record(EventType.CALL_ENDED(1, dict(EventType.CALL_ENDED.example)))


async def test_postgres_commit_with_events_wakes_listeners_once_and_sends_no_notify_of_its_own(
        fresh_pg_url: str) -> None:
    """The outbox insert notifies (``pg_notify`` beside the write lock): a commit of several events wakes the
    runners once, and sends no separate ``NOTIFY`` statement."""
    engine = create_engine(fresh_pg_url, pool_size=3)
    woken: asyncio.Queue[None] = asyncio.Queue()
    listener = await listen(engine, lambda: woken.put_nowait(None))
    sent: list[str] = []
    try:
        uow = SqlUnitOfWork(engine, CLOCK)
        conn = await uow.connection()
        sa.event.listen(conn.sync_connection, "before_cursor_execute",
                        lambda _c, _cur, statement, *_: sent.append(statement))
        organization = (await conn.execute(sa.text(
            "INSERT INTO organizations (name, plan, org_type, created_at, updated_at) "
            "VALUES ('Wake', 'starter', 'standard', now(), now()) RETURNING id"))).scalar_one()
        for _ in range(3):
            uow.record(EventType.CALL_ENDED(organization, dict(EventType.CALL_ENDED.example)))
        await uow.commit()
        await uow.close()

        await asyncio.wait_for(woken.get(), 10)
        assert woken.empty()  # one commit: one wake-up
        assert not [s for s in sent if s.lstrip().upper().startswith("NOTIFY")]
        async with engine.connect() as check:
            assert (await check.execute(sa.text("SELECT count(*) FROM outbox_events WHERE organization_id = :o"),
                                        {"o": organization})).scalar_one() == 3
    finally:
        await listener.close()
        await engine.dispose()


async def test_a_write_units_autocommit_block_keeps_each_statement_and_then_transactions_resume(
        table_engine: tuple[Any, str]) -> None:
    """``autocommit()`` (a step of one statement: the rate-limit count, the idempotency claim): what the block
    writes is kept statement by statement, a later rollback does not undo it, it records no events, and the unit's
    next statements are one transaction again."""
    engine, table = table_engine
    uow = SqlUnitOfWork(engine, CLOCK)
    try:
        conn = await uow.connection()
        async with uow.autocommit():
            await conn.execute(sa.text(f"INSERT INTO {table} (v) VALUES ('a')"))
            assert await _values(engine, table) == ["a"]  # kept without a commit
            with pytest.raises(RuntimeError):
                uow.record(EventType.CALL_ENDED(1, dict(EventType.CALL_ENDED.example)))
        await uow.rollback()
        assert await _values(engine, table) == ["a"]
        await conn.execute(sa.text(f"INSERT INTO {table} (v) VALUES ('b')"))
        assert await _values(engine, table) == ["a"]  # a transaction again: not seen before its commit
        await uow.rollback()
        await conn.execute(sa.text(f"INSERT INTO {table} (v) VALUES ('c')"))
        await uow.commit()
        assert await _values(engine, table) == ["a", "c"]
        await conn.execute(sa.text(f"INSERT INTO {table} (v) VALUES ('d')"))
        with pytest.raises(RuntimeError):  # begun between transactions only
            async with uow.autocommit():
                pass
    finally:
        await uow.close()
    assert await _values(engine, table) == ["a", "c"]


async def test_an_autocommit_block_takes_no_connection_until_a_statement_asks_and_then_commits_it_alone(
        table_engine: tuple[Any, str]) -> None:
    """A fresh unit's ``autocommit()`` block that sends nothing (the rate limit served from the process's lease)
    takes no connection; one whose first statement comes in the block connects in autocommit (kept at once), and
    after the block the same connection is in transactions again."""
    engine, table = table_engine
    uow = SqlUnitOfWork(engine, CLOCK)
    try:
        taken = engine.pool.checkedout()
        async with uow.autocommit():
            pass
        assert engine.pool.checkedout() == taken
        async with uow.autocommit():
            conn = await uow.connection()
            await conn.execute(sa.text(f"INSERT INTO {table} (v) VALUES ('a')"))
            assert await _values(engine, table) == ["a"]  # kept without a commit
        await conn.execute(sa.text(f"INSERT INTO {table} (v) VALUES ('b')"))
        assert await _values(engine, table) == ["a"]  # a transaction again: not seen before its commit
        await uow.rollback()
        assert await _values(engine, table) == ["a"]
        await conn.execute(sa.text(f"INSERT INTO {table} (v) VALUES ('c')"))
        await uow.commit()
        assert await _values(engine, table) == ["a", "c"]
    finally:
        await uow.close()


async def test_sqlite_writers_queue_a_write_unit_holds_the_lock_from_its_first_statement(tmp_path: Path) -> None:
    path = tmp_path / "queue.db"
    engine = create_engine(f"sqlite+aiosqlite:///{path}", pool_size=2)
    async with engine.begin() as conn:
        await conn.execute(sa.text("CREATE TABLE t (n INTEGER PRIMARY KEY, v TEXT NOT NULL)"))
    other = sqlite3.connect(path, timeout=0, isolation_level=None)  # another process's writer, not waiting

    def other_writes() -> bool:
        try:
            other.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:  # database is locked
            return False
        other.execute("ROLLBACK")
        return True

    try:
        writer = SqlUnitOfWork(engine, CLOCK)
        conn = await writer.connection()
        await conn.execute(sa.text("SELECT count(*) FROM t"))  # a read first, as a use case reads before it writes
        # BEGIN IMMEDIATE: the write lock is this unit's already, so it never fails upgrading a read to a write;
        # other writers wait for it (on their busy timeout) instead
        assert not other_writes()
        await conn.execute(sa.text("INSERT INTO t (v) VALUES ('a')"))
        await writer.commit()
        assert other_writes()

        reader = SqlUnitOfWork(engine, CLOCK, write=False)
        await (await reader.connection()).execute(sa.text("SELECT count(*) FROM t"))
        assert other_writes()  # a read-only unit holds no lock
        await reader.close()
        await writer.close()
    finally:
        other.close()
        await engine.dispose()


async def test_no_unit_leaves_a_connection_checked_out(table_engine: tuple[Any, str]) -> None:
    engine, table = table_engine
    pool = engine.sync_engine.pool

    async def one(n: int) -> None:
        uow = SqlUnitOfWork(engine, CLOCK, write=n % 2 == 0)
        try:
            conn = await uow.connection()
            await conn.execute(sa.text(f"SELECT count(*) FROM {table}"))
            if n % 3 == 0:
                await conn.execute(sa.text(f"INSERT INTO {table} (v) VALUES (NULL)"))  # fails: NOT NULL
            await uow.commit()
        except sa.exc.IntegrityError:
            pass
        finally:
            await uow.close()

    for n in range(12):
        await one(n)
    await asyncio.gather(*(one(n) for n in range(3)))
    assert pool.checkedout() == 0
    assert await _values(engine, table) == []


@pytest.mark.postgres
async def test_postgres_keeps_the_connections_a_burst_opened_and_never_opens_more_than_the_pool(
        private_pg_url: str) -> None:
    """A burst of requests needs more connections than were open: the pool opens them, up to its size, and keeps
    them when they come back, so the next burst connects to nothing (a connection closed on its return and opened
    again for the next request costs PostgreSQL a new backend each time). Past the size, requests wait."""
    engine = create_engine(private_pg_url, pool_size=4)  # a database of its own: no other process's backends
    pool = engine.sync_engine.pool
    in_use, most = 0, 0

    async def one() -> None:
        nonlocal in_use, most
        uow = SqlUnitOfWork(engine, CLOCK, write=False)
        try:
            conn = await uow.connection()
            in_use += 1
            most = max(most, in_use)
            await conn.execute(sa.text("SELECT pg_sleep(0.02)"))
            in_use -= 1
        finally:
            await uow.close()

    async def backend_pids() -> set[int]:
        async with engine.connect() as conn:
            return {row[0] for row in await conn.execute(sa.text(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"))}

    try:
        await asyncio.gather(*(one() for _ in range(10)))
        assert most == 4  # the fifth request waited for a connection instead of opening one more
        assert pool.checkedin() == 4 and pool.checkedout() == 0  # all four kept
        opened = await backend_pids()
        assert len(opened) == 4
        await asyncio.gather(*(one() for _ in range(10)))
        assert await backend_pids() == opened  # the second burst used the same four backends
    finally:
        await engine.dispose()
