"""The SQL unit of work: one connection per request, transactions begun on first use."""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.util.concurrency import greenlet_spawn

from adapters.sql.engine import WRITE_OPTION
from adapters.sql.reads import DriverRead
from adapters.sql.tables import outbox_events
from application.ports.platform import Clock
from domain.events import DomainEvent, PendingEvents, require_catalogued

_T = TypeVar("_T")

OUTBOX_WRITE_LOCK = 0x5041524C4F42  # the advisory lock that orders outbox writes on PostgreSQL ("PARLOB")

NOTIFY_CHANNEL = "parley_jobs"
"""PostgreSQL channel a commit that created background work notifies (job runners LISTEN on it)."""
_NOTIFY = f"NOTIFY {NOTIFY_CHANNEL}"


_VIEWS: weakref.WeakKeyDictionary[AsyncEngine, tuple[AsyncEngine, AsyncEngine]] = weakref.WeakKeyDictionary()


def _view(engine: AsyncEngine, write: bool) -> AsyncEngine:
    """``engine`` with the write option set (its pool): a connection then carries it from the start, where setting
    it on each connection cost a greenlet of its own per request."""
    views = _VIEWS.get(engine)
    if views is None:
        views = _VIEWS[engine] = (engine.execution_options(**{WRITE_OPTION: False}),
                                  engine.execution_options(**{WRITE_OPTION: True}))
    return views[write]


class SqlUnitOfWork:
    def __init__(self, engine: AsyncEngine, clock: Clock, *, write: bool = True,
                 on_work: Callable[[], None] | None = None) -> None:
        self._engine = engine
        self._on_work = on_work
        self._created_work = False
        self._clock = clock
        self._write = write
        self._connection: AsyncConnection | None = None
        self._pooled: PoolProxiedConnection | None = None  # a read unit's connection while only its driver used it
        self._events = PendingEvents()

    async def connection(self) -> AsyncConnection:
        if self._connection is None:
            # a write unit's transactions can write from their first statement (SQLite: BEGIN IMMEDIATE); a read
            # unit's plain reads run outside any transaction until it writes (adapters/sql/reads.py)
            view = _view(self._engine, self._write)
            pooled, self._pooled = self._pooled, None
            if pooled is None:
                self._connection = await view.connect()
            else:  # the connection the unit's driver reads used, now under SQLAlchemy, which returns it to the pool
                self._connection = AsyncConnection(view, await greenlet_spawn(Connection, view.sync_engine, pooled))
        return self._connection

    async def _driver_connection(self) -> Any:
        """The pooled connection for what goes to the driver: the SQLAlchemy connection's when the unit has one,
        otherwise one straight from the pool (a GET whose statements all go to the driver never builds
        SQLAlchemy's connection around it)."""
        if self._connection is not None:
            conn = self._connection
            # the pooled connection, without the greenlet get_raw_connection() spends when it need not reconnect
            return (await conn.get_raw_connection() if conn.invalidated else conn.sync_connection.connection)
        if self._pooled is None:
            self._pooled = await greenlet_spawn(self._engine.sync_engine.raw_connection)
        return self._pooled

    async def _to_asyncpg(self, send: Callable[[Any], Awaitable[_T]]) -> _T:
        """``send`` given asyncpg's connection, for a fixed statement SQLAlchemy's execution only made dearer. A
        failure of any kind invalidates the connection (SQLAlchemy would have judged it, had it sent the
        statement), so the pool never hands out one left in an unknown state."""
        pooled = await self._driver_connection()
        try:
            return await send(pooled.driver_connection)
        except BaseException as error:
            await self._invalidate(pooled, error)
            raise

    async def driver_rows(self, read: DriverRead, params: Mapping[str, Any]) -> Sequence[Any]:
        """The rows of a plain read as the driver returns them (``adapters/sql/reads.py``): straight from the
        driver in a read-only unit, through SQLAlchemy in one that may write."""
        if self._write:
            return (await (await self.connection()).execute(read.statement, params)).all()
        dialect = self._engine.dialect
        sql, values = read.compiled(dialect)
        pooled = await self._driver_connection()
        adapted = pooled.dbapi_connection
        try:
            return await adapted.read(sql, values(params))  # type: ignore[no-any-return]
        except dialect.loaded_dbapi.Error as error:
            if dialect.is_disconnect(error, adapted, None):  # as SQLAlchemy judges a failed statement's
                await self._invalidate(pooled, error)
            raise

    def in_transaction(self) -> bool:
        return self._connection is not None and self._connection.in_transaction()

    async def driver_fetch_alone(self, sql: str, args: Sequence[Any]) -> Sequence[Any]:
        """PostgreSQL with no transaction open: a fixed statement (asyncpg's numbered parameters) sent straight to
        asyncpg, its own transaction: one round trip instead of three (BEGIN, the statement, COMMIT)."""
        if self.in_transaction():
            raise RuntimeError("a transaction is open: the statement would run in it")
        return await self._to_asyncpg(lambda raw: raw.fetch(sql, *args))  # type: ignore[no-any-return]

    async def _invalidate(self, pooled: Any, error: BaseException) -> None:
        if self._connection is not None:
            await self._connection.invalidate()
        else:
            self._pooled = None
            await greenlet_spawn(pooled.invalidate, error)

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    def record(self, event: DomainEvent) -> None:
        """Keep ``event`` (an event of the catalogue: anything else is a TypeError) for the outbox."""
        self._events.add(event)

    def caused_at_depth(self, depth: int) -> None:
        """Events recorded from now on in this unit were caused by a trigger's action at ``depth``."""
        self._events.depth = depth

    def caused_depth(self) -> int:
        return self._events.depth

    def created_work(self) -> None:
        """This transaction creates background work: job runners are woken once it committed."""
        self._created_work = True

    async def commit(self) -> None:
        if self._events:
            conn = await self.connection()
            now = self._clock.now()
            if self.dialect == "postgresql":
                # outbox ids become visible in id order: the lock is held until this transaction
                # ends, so a smaller id can never commit after a larger one is visible, and a
                # consumer's cursor never skips an event (SQLite has one writer at a time anyway)
                await conn.execute(sa.select(sa.func.pg_advisory_xact_lock(OUTBOX_WRITE_LOCK)))
            await conn.execute(
                outbox_events.insert(),
                [{"organization_id": e.organization_id, "type": require_catalogued(e).type, "data": e.data,
                  "created_at": now, "depth": e.depth} for e in self._events],
            )
            self._events.clear()
            self._created_work = True
        if self._created_work and self.dialect == "postgresql" and self._connection is not None:
            # runners in other processes LISTEN; PostgreSQL delivers the notification at commit. Sent to asyncpg
            # directly, in the transaction SQLAlchemy began on this connection (on its own when none is open):
            # a fixed statement with nothing to bind or read back
            await self._to_asyncpg(lambda raw: raw.execute(_NOTIFY))
        if self._connection is not None and self._connection.in_transaction():
            await self._connection.commit()
        if self._created_work:
            self._created_work = False
            if self._on_work is not None:
                self._on_work()

    async def rollback(self) -> None:
        self._events.clear()
        self._created_work = False
        if self._connection is not None and self._connection.in_transaction():
            await self._connection.rollback()

    async def close(self) -> None:
        pooled, self._pooled = self._pooled, None
        if pooled is not None:  # only driver reads used it: nothing to end, back to the pool (which resets it)
            await greenlet_spawn(pooled.close)
        if self._connection is not None:
            try:
                await self.rollback()
            finally:
                await self._connection.close()
                self._connection = None
