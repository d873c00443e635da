"""The SQL unit of work: one connection per request, transactions begun on first use."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from adapters.sql.engine import AUTOCOMMIT, WRITE_OPTION
from adapters.sql.tables import outbox_events
from application.context import CauseContext
from application.ports.platform import Clock
from domain.events import DomainEvent, PendingEvents, require_catalogued

OUTBOX_WRITE_LOCK = 0x5041524C4F42  # the advisory lock that orders outbox writes on PostgreSQL ("PARLOB")

NOTIFY_CHANNEL = "parley_jobs"
"""PostgreSQL channel a commit that created background work notifies (job runners LISTEN on it)."""
_NOTIFY = f"NOTIFY {NOTIFY_CHANNEL}"
_OUTBOX_COLUMNS = ("organization_id", "type", "data", "created_at", "depth")
_OUTBOX_INSERT = outbox_events.insert()
_LOCKED_OUTBOX_INSERT = outbox_events.insert().from_select(
    list(_OUTBOX_COLUMNS),
    sa.select(*(sa.bindparam(name, type_=outbox_events.c[name].type) for name in _OUTBOX_COLUMNS))
    .select_from(sa.select(sa.func.pg_advisory_xact_lock(OUTBOX_WRITE_LOCK),
                           sa.func.pg_notify(NOTIFY_CHANNEL, "")).subquery("outbox_write_lock")))
"""PostgreSQL: an event's row, inserted once the outbox write lock is held, in one round trip: the lock's
subquery runs before the row (and its id, from the sequence) is made, and the lock is held until the transaction
ends. Each round trip made under the lock lengthens the time every other event-writing commit waits. The same
subquery notifies the job runners (``pg_notify``, the function form of ``NOTIFY``: delivered at commit, one
notification however many rows), so a transaction with events sends no ``NOTIFY`` of its own."""


_VIEWS: weakref.WeakKeyDictionary[AsyncEngine, tuple[AsyncEngine, AsyncEngine]] = weakref.WeakKeyDictionary()


def _view(engine: AsyncEngine, write: bool) -> AsyncEngine:
    """``engine`` with a unit's execution options (sharing its pool), made once per engine: a read-only unit's
    connections on PostgreSQL are in the ``AUTOCOMMIT`` isolation level, on SQLite they get no ``BEGIN``
    (``adapters/sql/engine.py``)."""
    views = _VIEWS.get(engine)
    if views is None:
        autocommit = {"isolation_level": AUTOCOMMIT} if engine.dialect.name == "postgresql" else {}
        views = _VIEWS[engine] = (engine.execution_options(**autocommit, **{WRITE_OPTION: False}),
                                  engine.execution_options(**{WRITE_OPTION: True}))
    return views[write]


class SqlUnitOfWork:
    """One connection for the unit's life, taken from the pool at its first statement. In a unit that may write
    (the default) SQLAlchemy begins a transaction with the first statement after each commit or rollback (on
    SQLite ``BEGIN IMMEDIATE``), and ``commit()`` ends it together with the outbox events recorded.

    ``write=False`` declares a read-only unit (an HTTP GET, HEAD or OPTIONS: ``TransactionMode``): no ``BEGIN``
    or ``COMMIT`` is sent, each statement is its own transaction (PostgreSQL's ``AUTOCOMMIT`` isolation level),
    which on PostgreSQL saves two round trips a request. What such a unit writes must hold one statement at a
    time (a counter, a ``last_used_at``, an insert that ignores a conflict); it records no events.

    Events are recorded at least as deep as ``cause`` says (a fresh context when none is given: nothing caused
    the unit's work)."""

    def __init__(self, engine: AsyncEngine, clock: Clock, *, write: bool = True,
                 on_work: Callable[[], None] | None = None, cause: CauseContext | None = None) -> None:
        self.engine = engine
        self._cause = cause or CauseContext()
        self._on_work = on_work
        self._created_work = False
        self._clock = clock
        self._write = write
        self._connection: AsyncConnection | None = None
        self._events = PendingEvents()
        self.read_once: dict[tuple[str, Any], Any] = {}
        """Rows the unit's repositories read in the current transaction, kept to its end (``commit``,
        ``rollback``) so that a second look in it costs no round trip (an organization read by the DNC gate
        and the quota gate of one call). A repository that writes a row it keeps here forgets it."""
        self.read_ahead: dict[tuple[Any, ...], Any] = {}
        """Answers read ahead of the questions a use case is about to ask (``SqlCallPlacementReads``), each taken
        by the first read that asks it (``pop``), so none outlives that question; what is left is dropped with the
        transaction (``commit``, ``rollback``)."""

    async def connection(self) -> AsyncConnection:
        if self._connection is None:
            self._connection = await _view(self.engine, self._write).connect()
        return self._connection

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @property
    def statements_commit_alone(self) -> bool:
        """Whether each statement commits the moment it ran (a read-only unit, or inside ``autocommit``): nothing it
        writes can be rolled back any more."""
        return not self._write

    def record(self, event: DomainEvent) -> None:
        """Keep ``event`` (an event of the catalogue: anything else is a TypeError) for the outbox, at least as deep
        as the unit's cause."""
        if not self._write:
            raise RuntimeError("a read-only unit of work records no events: its writes are not one transaction")
        self._events.add(event, self._cause.depth)

    def created_work(self) -> None:
        """This transaction creates background work: job runners are woken once it committed."""
        self._created_work = True

    async def commit(self) -> None:
        self.read_once.clear()
        self.read_ahead.clear()
        postgres = self.dialect == "postgresql"
        if self._created_work and not self._events and postgres:
            # runners in other processes LISTEN; PostgreSQL delivers the notification at commit (with events, the
            # outbox insert notifies)
            conn = await self.connection()
            await conn.exec_driver_sql(_NOTIFY)
        if self._events:
            conn = await self.connection()
            now = self._clock.now()
            rows = [{"organization_id": e.organization_id, "type": require_catalogued(e).type, "data": e.data,
                     "created_at": now, "depth": e.depth} for e in self._events]
            # PostgreSQL: outbox ids become visible in id order: the write lock is taken with the rows and held
            # until this transaction ends, so a smaller id can never commit after a larger one is visible, and a
            # consumer's cursor never skips an event (SQLite has one writer at a time anyway)
            await conn.execute(_LOCKED_OUTBOX_INSERT if postgres else _OUTBOX_INSERT, rows)
            self._events.clear()
            self._created_work = True
        if self._write and self._connection is not None and self._connection.in_transaction():
            # a read-only unit's statements have each committed already: its transaction is SQLAlchemy's
            # bookkeeping alone, ended when the connection is closed (a round trip saved: on SQLite, a hand-off to
            # the driver's thread)
            await self._connection.commit()
        if self._created_work:
            self._created_work = False
            if self._on_work is not None:
                self._on_work()

    @contextlib.asynccontextmanager
    async def autocommit(self) -> AsyncIterator[None]:
        """The block's statements each commit on their own, as a read-only unit's do: on PostgreSQL the connection
        is in SQLAlchemy's ``AUTOCOMMIT`` isolation level for the block, on SQLite it sends no ``BEGIN IMMEDIATE``
        (``WRITE_OPTION``). Saves the ``BEGIN`` and ``COMMIT`` round trips of a step of one statement. Begun
        between transactions; its events would have no transaction of theirs, so recording one is refused. A unit
        with no connection yet takes none for it: a block that sends nothing (a rate limit served from the
        process's lease) costs nothing, and one that does connects through the read-only view, in autocommit."""
        if not self._write:  # a read-only unit's statements commit on their own already
            yield
            return
        conn = self._connection
        if conn is not None:
            if conn.in_transaction():
                raise RuntimeError("autocommit() begins between transactions: commit or roll back first")
            own = {"isolation_level": AUTOCOMMIT} if self.dialect == "postgresql" else {WRITE_OPTION: False}
            await conn.execution_options(**own)
        self._write = False
        try:
            yield
        finally:
            self._write = True
            conn = self._connection
            if conn is not None:
                if conn.in_transaction():  # SQLAlchemy's own bookkeeping: each statement has committed already
                    await conn.rollback()
                restore = {"isolation_level": conn.default_isolation_level} if self.dialect == "postgresql" \
                    else {WRITE_OPTION: True}
                await conn.execution_options(**restore)

    async def rollback(self) -> None:
        self._forget()
        if self._connection is not None and self._connection.in_transaction():
            await self._connection.rollback()

    def _forget(self) -> None:
        self.read_once.clear()
        self.read_ahead.clear()
        self._events.clear()
        self._created_work = False

    async def close(self) -> None:
        """Ends the unit: what it did not commit is rolled back, by closing its connection (SQLAlchemy rolls back a
        transaction still open, and the pool then skips its own rollback of the connection: one round trip, not
        two)."""
        self._forget()
        if self._connection is not None:
            try:
                await self._connection.close()
            finally:
                self._connection = None
