"""SQLite under asyncio with fewer thread hand-offs than SQLAlchemy's aiosqlite adaptation.

aiosqlite runs every operation on the connection's own thread: each one is a hand-off (a queued call, a thread
wake-up, a future resolved on the event loop). SQLAlchemy's adaptation makes four of them per statement (open a
cursor, execute, fetch the rows, close the cursor), one for ``BEGIN``, one for the commit and one more for the
rollback the pool sends when a connection comes back, even when there is no transaction to roll back: seven for
a request that reads one page. Here, the same driver and the same SQL:

- a statement is one hand-off: cursor, execute, fetch and close run together on the connection's thread;
- ``BEGIN`` (or ``BEGIN IMMEDIATE``) waits for the transaction's first statement and goes with it;
- a rollback or commit with no transaction open on the connection (SQLite's own ``in_transaction``) is not sent.

Errors surface as before: a ``BEGIN IMMEDIATE`` that times out on the busy lock fails the statement it went
with, and the transaction it would have opened is not open. Server-side cursors keep SQLAlchemy's own class
(nothing here streams).

A read-only unit of work (``begin_lazily(..., reads_outside=True)``, an HTTP GET) goes further: its plain reads
(``adapters/sql/reads.py``) run outside a transaction, each on a snapshot of its own, and ``BEGIN`` waits for its
first statement that is anything else. In WAL mode such a read never waits for a writer, so it runs on the event
loop's own thread, as a synchronous driver would, with no hand-off at all: a GET that authenticates and reads
one page makes none instead of four. A read that takes more than ``INLINE_BUDGET_SECONDS`` of the thread's CPU
time (a progress handler looks) is interrupted, which has no effect outside a transaction, and runs again on the
connection's thread; that statement goes there directly for its next thousand runs, then tries here again.

Used by ``adapters.sql.engine.create_engine`` for every ``sqlite+aiosqlite`` URL (``module=``); it relies on
aiosqlite's ``Connection._execute`` (run a function on the connection's thread), which SQLAlchemy's adaptation
itself builds on.
"""

from __future__ import annotations

import collections
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

import aiosqlite
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
)
from sqlalchemy.util import EMPTY_DICT
from sqlalchemy.util.concurrency import await_

from adapters.sql.reads import plain_read

_Outcome = tuple[Any, int, Any, list[Any]]

INLINE_BUDGET_SECONDS = 0.002
"""How much CPU time a plain read may take on the event loop's thread before it moves to the connection's."""
_PROGRESS_STEPS = 1000  # SQLite virtual-machine steps between two looks at the clock
_SLOW: dict[str, int] = {}
"""Reads that went over the budget: how many of their next runs go to the thread from the start. Then one more try
here: a read slow once (a cold cache, a page it had to read from disk) is not sent away for the process's life."""
_SLOW_RUNS = 1000
_SLOW_MAX = 1024


def _run(conn: sqlite3.Connection, begin: str | None, operation: str, parameters: Any, many: bool) -> _Outcome:
    """On the connection's thread: the pending BEGIN, then the statement, its rows and what the cursor knew."""
    if begin is not None:
        conn.execute(begin)
    cursor = conn.cursor()
    try:
        if many:
            cursor.executemany(operation, parameters)
        else:
            cursor.execute(operation, parameters)
        rows = cursor.fetchall() if cursor.description else []
        return cursor.description, cursor.rowcount, cursor.lastrowid, rows
    finally:
        cursor.close()


class OneTripCursor(AsyncAdapt_aiosqlite_cursor):
    """A client-side cursor whose every statement is one hand-off to the connection's thread."""

    __slots__ = ("_description", "_lastrowid", "_rowcount")

    def __init__(self, adapt_connection: ParleyAiosqliteConnection) -> None:  # no driver cursor is opened
        self._adapt_connection = adapt_connection
        self._connection = adapt_connection._connection
        self._cursor = None  # type: ignore[assignment]
        self._soft_closed_memoized = EMPTY_DICT
        self._rows = collections.deque()
        self._description: Any = None
        self._rowcount = -1
        self._lastrowid: Any = None

    @property
    def description(self) -> Any:
        return self._description

    @property
    def rowcount(self) -> int:
        return self._rowcount

    @property
    def lastrowid(self) -> Any:
        return self._lastrowid

    @property
    def arraysize(self) -> int:
        return 1

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        pass

    async def _async_soft_close(self) -> None:
        return None  # the driver's cursor is already closed

    def close(self) -> None:
        self._rows.clear()

    def execute(self, operation: Any, parameters: Any = None) -> Any:
        parameters = () if parameters is None else parameters
        try:
            if self._adapt_connection._reads_outside and self._inline(operation, parameters):
                return None
            return await_(self._go(operation, parameters, False))
        except Exception as error:
            self._adapt_connection._handle_exception(error)

    def _inline(self, operation: Any, parameters: Any) -> bool:
        """A read unit's plain read, outside a transaction, on this thread; False when it must go to the thread."""
        adapt = self._adapt_connection
        if adapt._pending_begin is None or not plain_read(operation):
            return False
        # SQLAlchemy's asyncio layer insists that a statement awaits: this coroutine never suspends
        outcome = await_(adapt._read_here(operation, parameters))
        if outcome is None:
            return False
        self._description, self._rowcount, self._lastrowid, rows = outcome
        self._rows = collections.deque(rows)
        return True

    def executemany(self, operation: Any, seq_of_parameters: Any) -> Any:
        try:
            return await_(self._go(operation, seq_of_parameters, True))
        except Exception as error:
            self._adapt_connection._handle_exception(error)

    async def _go(self, operation: Any, parameters: Any, many: bool) -> None:
        adapt = self._adapt_connection
        async with adapt._execute_mutex:
            begin = adapt._pending_begin
            if begin is not None and adapt._reads_outside and not many and plain_read(operation):
                begin = None  # a read unit's plain read: no transaction yet (the module's docstring)
            else:
                adapt._pending_begin = None
            self._description, self._rowcount, self._lastrowid, rows = await self._connection._execute(
                _run, self._connection._conn, begin, operation, parameters, many)
            self._rows = collections.deque(rows)

    def setinputsizes(self, *inputsizes: Any) -> None:
        return None

    def fetchall(self) -> Sequence[Any]:
        rows = list(self._rows)
        self._rows.clear()
        return rows


class ParleyAiosqliteConnection(AsyncAdapt_aiosqlite_connection):
    __slots__ = ("_pending_begin", "_reads_outside")

    _cursor_cls = OneTripCursor

    def __init__(self, dbapi: Any, connection: Any) -> None:
        super().__init__(dbapi, connection)
        self._pending_begin: str | None = None
        self._reads_outside = False

    async def _read_here(self, operation: str, parameters: Any) -> _Outcome | None:
        """A plain read outside a transaction, on the event loop's thread within the CPU budget; None when it
        cannot run here (a transaction is open, the thread is busy with this connection, the read went over the
        budget lately: ``_SLOW``)."""
        conn = self._connection._conn
        if conn.in_transaction or self._execute_mutex.locked():
            return None
        left = _SLOW.get(operation)
        if left is not None:
            if left > 1:
                _SLOW[operation] = left - 1
                return None
            del _SLOW[operation]  # its turn to try here again
        # the thread's own CPU time: a read the machine merely preempted is not a slow read
        deadline = time.thread_time() + INLINE_BUDGET_SECONDS
        over = False

        def check() -> bool:
            nonlocal over
            over = time.thread_time() > deadline
            return over

        conn.set_progress_handler(check, _PROGRESS_STEPS)
        try:
            return _run(conn, None, operation, parameters, False)
        except sqlite3.OperationalError:
            if not over:
                raise
            if len(_SLOW) >= _SLOW_MAX:
                _SLOW.clear()
            _SLOW[operation] = _SLOW_RUNS
            return None
        finally:
            conn.set_progress_handler(None, 0)

    async def read(self, operation: str, parameters: tuple[Any, ...]) -> list[Any]:
        """A read unit's plain read (``adapters/sql/reads.py``: ``DriverRead``), straight from the driver: here
        when it can run here, otherwise on the connection's thread, in the transaction when one is open and
        outside it when none is (a pending ``BEGIN`` keeps waiting for a statement that needs it)."""
        try:
            outcome = await self._read_here(operation, parameters)
            if outcome is None:
                async with self._execute_mutex:
                    outcome = await self._connection._execute(_run, self._connection._conn, None, operation,
                                                              parameters, False)
        except Exception as error:
            self._handle_exception(error)
        return outcome[3]

    def begin_lazily(self, statement: str, *, reads_outside: bool = False) -> None:
        """``BEGIN`` (or ``BEGIN IMMEDIATE``) goes with the next statement, in its hand-off; with
        ``reads_outside``, with the next statement that is not a plain read."""
        self._pending_begin = statement
        self._reads_outside = reads_outside

    def _open(self) -> bool:
        connection = self._connection
        return bool(connection._connection) and connection.in_transaction

    def rollback(self) -> None:
        self._pending_begin, self._reads_outside = None, False
        if self._open():
            super().rollback()

    def commit(self) -> None:
        self._pending_begin, self._reads_outside = None, False
        if self._open():
            super().commit()


class ParleyAiosqliteDbapi(AsyncAdapt_aiosqlite_dbapi):
    def connect(self, *arg: Any, **kw: Any) -> ParleyAiosqliteConnection:
        kw.pop("async_creator_fn", None)
        kw["check_same_thread"] = False  # plain reads run on the event loop's thread (one at a time, as ever)
        connection = self.aiosqlite.connect(*arg, **kw)
        connection._thread.daemon = True
        return ParleyAiosqliteConnection(self, await_(connection))


def dbapi() -> ParleyAiosqliteDbapi:
    return ParleyAiosqliteDbapi(aiosqlite, sqlite3)
