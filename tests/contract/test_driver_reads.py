"""A read-only unit of work runs a ``DriverRead`` on the driver's own connection (adapters/sql/reads.py), and the
list of agents reads its page that way (on SQLite as one JSON document per agent, built by the database): the
answers are the ones SQLAlchemy's execution gives, in a unit that may write and in one that may not."""

from __future__ import annotations

import threading
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from adapters.memory.clock import ManualClock
from adapters.sql.accounts import SqlOrganizationRepository
from adapters.sql.agents import SqlAgentRepository
from adapters.sql.engine import create_engine
from adapters.sql.metadata import UtcDateTime
from adapters.sql.reads import DriverRead
from adapters.sql.tables import agents
from adapters.sql.uow import SqlUnitOfWork
from application.ports.agents import AgentFilter
from application.ports.platform import PageRequest
from domain.agents import Agent, Llm, Voice, Voicemail
from domain.organizations import Organization

NOW = datetime(2026, 3, 1, 9, 30, 15, 123456, tzinfo=UTC)
CLOCK = ManualClock(NOW)


def test_a_driver_read_puts_named_literal_and_processed_values_in_the_compiled_order() -> None:
    at = sa.bindparam("at", type_=UtcDateTime)
    read = DriverRead(sa.select(agents.c.id, sa.func.coalesce(agents.c.calendar_id, 7).label("c")).where(
        agents.c.organization_id == sa.bindparam("org"), agents.c.created_at < at,
        agents.c.id > sa.bindparam("org")))
    sql, values = read.compiled(sqlite.dialect())
    assert sql.count("?") == 4
    # SQLite stores UTC as naive text: the column type's bind processor ran
    assert values({"org": 5, "at": NOW}) == (7, 5, "2026-03-01 09:30:15.123456", 5)
    pg_sql, pg_values = read.compiled(postgresql.asyncpg.dialect())
    assert "$1" in pg_sql and "?" not in pg_sql
    assert sorted(map(str, pg_values({"org": 5, "at": NOW}))) == sorted(map(str, (7, 5, NOW)))
    assert read.compiled(sqlite.dialect()) is read.compiled(sqlite.dialect())  # compiled once


@pytest.mark.parametrize("statement", [
    sa.select(agents.c.id).with_for_update(),  # a locking read needs its transaction
    sa.select(agents.c.id).where(agents.c.id.in_(sa.bindparam("ids", expanding=True))),  # expanded per call
])
def test_a_driver_read_refuses_what_is_not_a_plain_positional_read(statement: Any) -> None:
    with pytest.raises(ValueError, match="plain"):
        DriverRead(statement).compiled(postgresql.asyncpg.dialect())


@pytest.fixture
async def engine(sql_url: str) -> AsyncIterator[Any]:
    engine = create_engine(sql_url, pool_size=2)
    try:
        yield engine
    finally:
        await engine.dispose()


async def _organization(engine: Any) -> int:
    uow = SqlUnitOfWork(engine, CLOCK)
    org = await SqlOrganizationRepository(uow).add(Organization(None, f"Reads {uuid.uuid4().hex[:6]}", "enterprise",
                                                                "standard", None, NOW, NOW))
    await uow.commit()
    await uow.close()
    return org.id or 0


AWKWARD = {"tags": ["a", 'quote " and \\ backslash', "ünïcødé ☎"], "n": [1, 2.5, None, -3e-7], "deep": {"x": {}},
           "big": 2 ** 53, "empty": ""}


async def _agents(engine: Any, org: int) -> list[Agent]:
    uow = SqlUnitOfWork(engine, CLOCK)
    repo = SqlAgentRepository(uow)
    made = [
        await repo.add(Agent(None, org, "Plain", created_at=NOW, updated_at=NOW)),
        await repo.add(Agent(None, org, "Ünïcode \"quoted\" agent", description="line one\nline two", status="active",
                             agent_mode="inbound", language="de-DE", voice=Voice("eleven", "v-9"), llm=Llm("m", 0.15),
                             prompt="Say \"hi\" \\ politely", first_message="Hallo ☎", max_call_duration_seconds=90,
                             voicemail=Voicemail("leave_message", "Bitte zurückrufen"), transfer_phone="+14155550100",
                             calendar_id=None, timezone="Europe/Berlin", metadata=AWKWARD, current_version=3,
                             created_at=NOW, updated_at=datetime(2026, 3, 2, tzinfo=UTC))),
    ]
    await uow.commit()
    await uow.close()
    return made


async def _list(engine: Any, org: int, write: bool, filters: AgentFilter, page: PageRequest) -> Any:
    uow = SqlUnitOfWork(engine, CLOCK, write=write)
    try:
        return await SqlAgentRepository(uow).list(org, filters, page)
    finally:
        await uow.close()


@pytest.mark.parametrize(("filters", "page"), [
    (AgentFilter(), PageRequest(25, 0)),
    (AgentFilter(), PageRequest(1, 1)),
    (AgentFilter(), PageRequest(5, 10)),  # past the end: no rows, the total still
    (AgentFilter(status="active", agent_mode="inbound"), PageRequest(25, 0)),
    (AgentFilter(search="ünï"), PageRequest(25, 0)),
    (AgentFilter(search="no such"), PageRequest(25, 0)),
])
async def test_a_read_unit_lists_the_agents_a_write_unit_lists(engine: Any, filters: AgentFilter,
                                                                page: PageRequest) -> None:
    org = await _organization(engine)
    made = await _agents(engine, org)
    read = await _list(engine, org, False, filters, page)
    assert read == await _list(engine, org, True, filters, page)
    if filters == AgentFilter() and page == PageRequest(25, 0):
        assert read.items == made and read.total == 2
        assert read.items[1].metadata == AWKWARD and read.items[1].created_at.tzinfo is UTC


async def test_a_stored_time_of_another_shape_is_still_read_on_sqlite(sqlite_url: str) -> None:
    """Only SQLite keeps times as text, which could be written by hand in another shape than the one the
    database's documents mark as UTC: such a page is read column by column instead."""
    engine = create_engine(sqlite_url, pool_size=2)
    try:
        await _read_a_hand_written_time(engine)
    finally:
        await engine.dispose()


async def _read_a_hand_written_time(engine: Any) -> None:
    org = await _organization(engine)
    made = await _agents(engine, org)
    uow = SqlUnitOfWork(engine, CLOCK)
    await (await uow.connection()).execute(sa.text("UPDATE agents SET created_at = '2026-03-01T10:30:15+01:00' "
                                                   "WHERE id = :id"), {"id": made[0].id})
    await uow.commit()
    await uow.close()
    page = await _list(engine, org, False, AgentFilter(), PageRequest(25, 0))
    assert page.items[0].created_at == datetime(2026, 3, 1, 9, 30, 15, tzinfo=UTC)
    assert page.items[1] == made[1]


async def test_a_read_unit_reads_outside_a_transaction_and_inside_the_one_it_opened(engine: Any) -> None:
    org = await _organization(engine)
    await _agents(engine, org)
    count = DriverRead(sa.select(sa.func.count()).select_from(agents).where(
        agents.c.organization_id == sa.bindparam("org")))
    pool = engine.sync_engine.pool
    uow = SqlUnitOfWork(engine, CLOCK, write=False)
    # driver reads alone take a connection straight from the pool
    assert (await uow.driver_rows(count, {"org": org}))[0][0] == 2
    assert pool.checkedout() == 1
    # the unit's SQLAlchemy connection is built around that same connection, not a second one
    conn = await uow.connection()
    assert pool.checkedout() == 1
    raw = (await conn.get_raw_connection()).driver_connection
    if engine.dialect.name == "sqlite":
        await raw.create_function("tid", 0, threading.get_ident)
        where = DriverRead(sa.select(sa.func.tid()))
        assert (await uow.driver_rows(where, {}))[0][0] == threading.get_ident()  # on the loop's own thread
    assert (await uow.driver_rows(count, {"org": org}))[0][0] == 2
    assert not conn.in_transaction() and not _in_transaction(raw)  # nothing begun, no snapshot held

    # once the unit writes, its reads see what it wrote and has not committed
    await SqlAgentRepository(uow).add(Agent(None, org, "Uncommitted", created_at=NOW, updated_at=NOW))
    assert _in_transaction(raw)
    assert (await uow.driver_rows(count, {"org": org}))[0][0] == 3
    await uow.rollback()
    assert (await uow.driver_rows(count, {"org": org}))[0][0] == 2
    await uow.close()
    assert pool.checkedout() == 0

    # a unit that only read through its driver gives its connection back, with nothing left open on it
    reader = SqlUnitOfWork(engine, CLOCK, write=False)
    assert (await reader.driver_rows(count, {"org": org}))[0][0] == 2
    await reader.close()
    assert pool.checkedout() == 0
    again = SqlUnitOfWork(engine, CLOCK)
    await SqlAgentRepository(again).add(Agent(None, org, "Written after", created_at=NOW, updated_at=NOW))
    await again.commit()
    await again.close()
    assert (await _list(engine, org, False, AgentFilter(), PageRequest(25, 0))).total == 3


def _in_transaction(driver_connection: Any) -> bool:
    if hasattr(driver_connection, "is_in_transaction"):  # asyncpg
        return bool(driver_connection.is_in_transaction())
    return bool(driver_connection.in_transaction)  # aiosqlite


@pytest.mark.postgres
@pytest.mark.parametrize("sqlalchemy_first", [True, False], ids=["under-sqlalchemy", "straight-from-the-pool"])
async def test_a_driver_read_on_a_dead_connection_fails_and_the_pool_replaces_it(postgres_url: str,
                                                                                  sqlalchemy_first: bool) -> None:
    engine = create_engine(postgres_url, pool_size=1)
    observer = create_engine(postgres_url, pool_size=1)
    one = DriverRead(sa.select(sa.literal_column("1")))
    try:
        uow = SqlUnitOfWork(engine, CLOCK, write=False)
        if sqlalchemy_first:
            conn = await uow.connection()
            pid = (await conn.execute(sa.text("SELECT pg_backend_pid()"))).scalar_one()
            await uow.commit()
        else:
            pid = (await uow.driver_rows(DriverRead(sa.select(sa.func.pg_backend_pid())), {}))[0][0]
        async with observer.connect() as o:
            await o.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": pid})
            await o.commit()
        with pytest.raises(Exception):  # noqa: B017 - whichever error the driver raises for a lost connection
            await uow.driver_rows(one, {})
        if sqlalchemy_first:
            assert conn.invalidated
        await uow.close()
        assert engine.sync_engine.pool.checkedout() == 0
        again = SqlUnitOfWork(engine, CLOCK, write=False)
        assert list((await again.driver_rows(one, {}))[0]) == [1]
        await again.close()
    finally:
        await observer.dispose()
        await engine.dispose()


@pytest.mark.postgres
async def test_a_statement_alone_is_its_own_transaction_and_a_failure_discards_its_connection(
        postgres_url: str) -> None:
    engine = create_engine(postgres_url, pool_size=1)
    table = f"alone_{uuid.uuid4().hex[:8]}"
    try:
        setup = SqlUnitOfWork(engine, CLOCK)
        await (await setup.connection()).execute(sa.text(f"CREATE TABLE {table} (n int PRIMARY KEY)"))
        await setup.commit()
        await setup.close()

        uow = SqlUnitOfWork(engine, CLOCK, write=False)
        assert list((await uow.driver_fetch_alone(f"INSERT INTO {table} VALUES ($1) RETURNING n", (7,)))[0]) == [7]
        await uow.rollback()  # nothing to undo: the insert was its own transaction, committed
        pid = (await uow.driver_rows(DriverRead(sa.select(sa.func.pg_backend_pid())), {}))[0][0]
        with pytest.raises(Exception):  # noqa: B017 - asyncpg's unique violation
            await uow.driver_fetch_alone(f"INSERT INTO {table} VALUES ($1)", (7,))
        await uow.close()
        assert engine.sync_engine.pool.checkedout() == 0

        # the failed statement's connection was discarded; in a transaction, a statement alone is refused
        writer = SqlUnitOfWork(engine, CLOCK)
        conn = await writer.connection()
        assert (await conn.execute(sa.text("SELECT pg_backend_pid()"))).scalar_one() != pid
        assert (await conn.execute(sa.text(f"SELECT count(*) FROM {table}"))).scalar_one() == 1
        with pytest.raises(RuntimeError, match="transaction is open"):
            await writer.driver_fetch_alone("SELECT 1", ())
        await writer.rollback()
        await writer.close()
    finally:
        drop = SqlUnitOfWork(engine, CLOCK)
        await (await drop.connection()).execute(sa.text(f"DROP TABLE IF EXISTS {table}"))
        await drop.commit()
        await drop.close()
        await engine.dispose()
