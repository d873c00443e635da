"""A read-only unit of work (an HTTP GET's) sends its plain reads outside any transaction, and opens one with its
first statement that is anything else (adapters/sql/reads.py): on SQLite those reads run on the event loop's own
thread unless they take too long, on PostgreSQL they go without BEGIN and COMMIT. What such a unit writes is
still atomic."""

from __future__ import annotations

import threading
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from adapters.memory.clock import ManualClock
from adapters.sql import sqlite_driver
from adapters.sql.engine import create_engine
from adapters.sql.reads import plain_read
from adapters.sql.uow import SqlUnitOfWork

CLOCK = ManualClock(datetime(2026, 3, 1, tzinfo=UTC))


@pytest.mark.parametrize(("sql", "plain"), [
    ("SELECT agents.id FROM agents WHERE agents.organization_id = $1", True),
    ("  select count(*) from t", True),
    ("SELECT jobs.id FROM jobs WHERE jobs.kind = $1 FOR UPDATE SKIP LOCKED", False),
    ("SELECT * FROM t FOR NO KEY UPDATE", False),
    ("SELECT * FROM t FOR SHARE", False),
    ("SELECT pg_advisory_xact_lock($1) AS pg_advisory_xact_lock_1", False),
    ("SELECT nextval('s')", False),
    ("SELECT set_config('x', 'y', true)", False),
    ("SELECT * INTO copy FROM t", False),
    ("INSERT INTO t (v) VALUES (?)", False),
    ("UPDATE t SET v = 1", False),
    ("WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x", False),
])
def test_only_selects_that_neither_lock_nor_have_effects_are_plain_reads(sql: str, plain: bool) -> None:
    assert plain_read(sql) is plain


@pytest.fixture
async def sqlite_engine(tmp_path: Path) -> AsyncIterator[Any]:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'reads.db'}", pool_size=2)
    setup = SqlUnitOfWork(engine, CLOCK)
    conn = await setup.connection()
    await conn.execute(sa.text("CREATE TABLE t (n INTEGER PRIMARY KEY, v TEXT NOT NULL)"))
    await conn.execute(sa.text("INSERT INTO t (v) VALUES ('a'), ('b')"))
    await setup.commit()
    await setup.close()
    try:
        yield engine
    finally:
        await engine.dispose()


async def _thread_function(uow: SqlUnitOfWork) -> Any:
    """The unit's connection with a SQL function ``tid()``: the thread that runs the statement."""
    conn = await uow.connection()
    raw = (await conn.get_raw_connection()).driver_connection
    await raw.create_function("tid", 0, threading.get_ident)
    return conn


async def test_sqlite_read_unit_reads_on_the_loop_thread_outside_a_transaction(sqlite_engine: Any) -> None:
    uow = SqlUnitOfWork(sqlite_engine, CLOCK, write=False)
    conn = await _thread_function(uow)
    raw = (await conn.get_raw_connection()).driver_connection
    here = threading.get_ident()
    assert (await conn.execute(sa.text("SELECT tid()"))).scalar_one() == here
    assert (await conn.execute(sa.text("SELECT count(*) FROM t"))).scalar_one() == 2
    assert not raw.in_transaction  # no snapshot held between statements

    # a write unit's statements still go to the connection's thread, in their transaction
    writer = SqlUnitOfWork(sqlite_engine, CLOCK)
    wconn = await _thread_function(writer)
    assert (await wconn.execute(sa.text("SELECT tid()"))).scalar_one() != here
    await wconn.execute(sa.text("INSERT INTO t (v) VALUES ('c')"))
    await writer.commit()
    await writer.close()

    assert (await conn.execute(sa.text("SELECT count(*) FROM t"))).scalar_one() == 3  # the next read sees it
    await uow.commit()
    await uow.close()


async def test_sqlite_read_unit_that_writes_is_atomic(sqlite_engine: Any) -> None:
    uow = SqlUnitOfWork(sqlite_engine, CLOCK, write=False)
    conn = await _thread_function(uow)
    raw = (await conn.get_raw_connection()).driver_connection
    assert (await conn.execute(sa.text("SELECT count(*) FROM t"))).scalar_one() == 2
    await conn.execute(sa.text("INSERT INTO t (v) VALUES ('c')"))
    assert raw.in_transaction  # the write opened the transaction
    # later reads run in it, on the connection's thread, and see its write
    assert (await conn.execute(sa.text("SELECT tid()"))).scalar_one() != threading.get_ident()
    assert (await conn.execute(sa.text("SELECT count(*) FROM t"))).scalar_one() == 3
    await conn.execute(sa.text("INSERT INTO t (v) VALUES ('d')"))
    await uow.rollback()
    assert (await conn.execute(sa.text("SELECT count(*) FROM t"))).scalar_one() == 2  # both writes undone

    await conn.execute(sa.text("INSERT INTO t (v) VALUES ('e')"))
    await uow.commit()
    await uow.close()
    check = SqlUnitOfWork(sqlite_engine, CLOCK, write=False)
    rows = (await (await check.connection()).execute(sa.text("SELECT v FROM t ORDER BY n"))).all()
    assert [r[0] for r in rows] == ["a", "b", "e"]
    await check.close()


async def test_sqlite_read_over_the_loop_budget_finishes_on_the_connection_thread(
        sqlite_engine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_driver, "INLINE_BUDGET_SECONDS", 0.0)  # every read is over budget
    monkeypatch.setattr(sqlite_driver, "_SLOW", {})
    monkeypatch.setattr(sqlite_driver, "_SLOW_RUNS", 3)
    uow = SqlUnitOfWork(sqlite_engine, CLOCK, write=False)
    conn = await _thread_function(uow)
    # enough virtual-machine steps for the progress handler to look at the clock at least once
    slow = ("SELECT tid(), count(*) FROM t a, t b, t c, t d, t e, t f, t g, t h, t i, t j, t k, t l, t m, t n "
            "WHERE a.v <> 'x'")
    tid, count = (await conn.execute(sa.text(slow))).one()
    assert count == 2 ** 14  # the whole answer, not the part read before the interruption
    assert tid != threading.get_ident()
    assert sqlite_driver._SLOW[slow] == 3  # sent to the thread directly for its next runs
    for left in (2, 1):
        assert (await conn.execute(sa.text(slow))).one()[1] == 2 ** 14
        assert sqlite_driver._SLOW[slow] == left
    # its runs sent away, it tries the loop's thread again (over budget again here, so sent away again)
    assert (await conn.execute(sa.text(slow))).one()[1] == 2 ** 14
    assert sqlite_driver._SLOW[slow] == 3
    monkeypatch.setattr(sqlite_driver, "INLINE_BUDGET_SECONDS", 1.0)
    for _ in range(3):
        tid = (await conn.execute(sa.text(slow))).one()[0]
    assert tid == threading.get_ident() and slow not in sqlite_driver._SLOW  # back on the loop's thread
    await uow.commit()
    await uow.close()


async def test_postgres_read_unit_sends_no_begin_until_it_needs_a_transaction(postgres_url: str) -> None:
    engine = create_engine(postgres_url, pool_size=2)
    observer = create_engine(postgres_url, pool_size=1)
    table = f"reads_{uuid.uuid4().hex[:8]}"

    async def state(pid: int) -> str:
        async with observer.connect() as o:
            return str((await o.execute(sa.text("SELECT state FROM pg_stat_activity WHERE pid = :p"),
                                        {"p": pid})).scalar_one())

    try:
        setup = SqlUnitOfWork(engine, CLOCK)
        await (await setup.connection()).execute(sa.text(f"CREATE TABLE {table} (n serial PRIMARY KEY, v text)"))
        await setup.commit()
        await setup.close()

        uow = SqlUnitOfWork(engine, CLOCK, write=False)
        conn = await uow.connection()
        pid = (await conn.execute(sa.text("SELECT pg_backend_pid()"))).scalar_one()
        assert (await conn.execute(sa.text(f"SELECT count(*) FROM {table}"))).scalar_one() == 0
        assert await state(pid) == "idle"  # not "idle in transaction": no BEGIN was sent

        await conn.execute(sa.text(f"INSERT INTO {table} (v) VALUES ('a')"))
        assert await state(pid) == "idle in transaction"
        assert (await conn.execute(sa.text(f"SELECT count(*) FROM {table}"))).scalar_one() == 1
        await uow.rollback()
        assert (await conn.execute(sa.text(f"SELECT count(*) FROM {table}"))).scalar_one() == 0  # undone

        # a locking read needs its transaction too
        await conn.execute(sa.text(f"SELECT * FROM {table} FOR UPDATE"))
        assert await state(pid) == "idle in transaction"
        await uow.commit()
        assert await state(pid) == "idle"

        # a write unit begins with its first statement, whatever it is
        writer = SqlUnitOfWork(engine, CLOCK)
        wconn = await writer.connection()
        wpid = (await wconn.execute(sa.text("SELECT pg_backend_pid()"))).scalar_one()
        assert await state(wpid) == "idle in transaction"
        await writer.commit()
        await writer.close()
        await uow.close()
    finally:
        drop = SqlUnitOfWork(engine, CLOCK)
        await (await drop.connection()).execute(sa.text(f"DROP TABLE IF EXISTS {table}"))
        await drop.commit()
        await drop.close()
        await observer.dispose()
        await engine.dispose()
