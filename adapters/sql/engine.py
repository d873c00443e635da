"""Engine construction for both databases."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from pathlib import Path
from typing import Any

import msgspec
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import AsyncAdaptedQueuePool
from sqlalchemy.util.concurrency import await_
from sqlalchemy.util.queue import AsyncAdaptedQueue, Empty, Full

from adapters.sql import postgres_driver, sqlite_driver

WRITE_OPTION = "parley_write"


class _FairQueue(AsyncAdaptedQueue):  # type: ignore[type-arg]
    """The pool's idle connections, handed out first come, first served, most recently used first.

    SQLAlchemy's asyncio queue lets a request that arrives while a connection is idle take it ahead of the
    requests already waiting, and a woken waiter that loses that race goes to the back of the line; under load
    some requests wait for seconds (a p99 of 1.7 s against a p50 of 60 ms at 32 connections on a pool of 10).
    Here a returned connection goes straight to the oldest waiter, and nobody takes an idle one while others wait.

    Beyond ``maxsize`` (the pool size) it keeps up to ``spare`` more idle connections (the overflow), where
    SQLAlchemy's pool closed an overflow connection the moment it came back: under a steady load of more requests
    than the pool size, that opened and closed about 14 PostgreSQL connections a second (each a backend started,
    a TLS attempt and the driver's type introspection). Idle connections are handed out newest first, so the
    ones a load no longer needs grow old at the other end, and ``stale`` gives back those idle for longer than
    the pool keeps them.
    """

    def __init__(self, maxsize: int = 0, use_lifo: bool = False) -> None:
        super().__init__(maxsize, use_lifo)
        self._waiters: deque[asyncio.Future[Any]] = deque()
        self._idle: deque[tuple[float, Any]] = deque()  # (returned at, connection), the newest on the right
        self.spare = 0

    def empty(self) -> bool:
        return not self._idle

    def full(self) -> bool:
        return bool(self.maxsize) and len(self._idle) >= self.maxsize + self.spare

    def qsize(self) -> int:
        return len(self._idle)

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        self.put_nowait(item)

    def put_nowait(self, item: Any) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(item)
                return
        if self.full():
            raise Full()
        self._idle.append((time.monotonic(), item))

    def get_nowait(self) -> Any:
        if self._waiters or not self._idle:
            raise Empty()
        return self._idle.pop()[1]

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        if not self._waiters and self._idle:
            return self._idle.pop()[1]
        if not block:
            raise Empty()
        return await_(self._wait(seconds=timeout))

    def stale(self, idle_seconds: float) -> list[Any]:
        """Take out the idle connections beyond ``maxsize`` that nobody used for ``idle_seconds``."""
        limit = time.monotonic() - idle_seconds
        taken = []
        while len(self._idle) > self.maxsize and self._idle[0][0] < limit:
            taken.append(self._idle.popleft()[1])
        return taken

    async def _wait(self, *, seconds: float | None) -> Any:
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await asyncio.wait_for(asyncio.shield(waiter), seconds)
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled():
                self.put_nowait(waiter.result())  # handed over just as this request stopped waiting: pass it on
            else:
                waiter.cancel()
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            if isinstance(exc, TimeoutError):
                raise Empty() from None
            raise


class FairQueuePool(AsyncAdaptedQueuePool):
    """SQLAlchemy's asyncio pool on the queue above: overflow connections stay open while they are in use now and
    then, and close once idle for ``SPARE_IDLE_SECONDS`` (looked at whenever a connection comes back)."""

    _queue_class = _FairQueue  # type: ignore[assignment]
    SPARE_IDLE_SECONDS = 60.0

    def __init__(self, creator: Any, pool_size: int = 5, max_overflow: int = 10, **kw: Any) -> None:
        super().__init__(creator, pool_size=pool_size, max_overflow=max_overflow, **kw)
        self._pool.spare = max(0, max_overflow)  # type: ignore[attr-defined]

    def _do_return_conn(self, record: Any) -> None:
        super()._do_return_conn(record)
        for stale in self._pool.stale(self.SPARE_IDLE_SECONDS):  # type: ignore[attr-defined]
            try:
                stale.close()
            finally:
                self._dec_overflow()

    # log under SQLAlchemy's own namespace (quiet below WARNING unless asked for), like the pools it ships:
    # otherwise every engine.dispose() at shutdown printed "Pool disposed ... Pool recreating" at INFO
    _sqla_logger_namespace = "sqlalchemy.pool.impl.FairQueuePool"


def _json_loads(text: str | bytes) -> Any:
    """JSON columns as the standard library reads them, about five times faster; whatever msgspec refuses
    (NaN, numbers beyond a double, lone surrogates) goes to json.loads as before."""
    try:
        return msgspec.json.decode(text)
    except msgspec.MsgspecError:
        return json.loads(text)


def create_engine(url: str, *, pool_size: int = 10, echo: bool = False) -> AsyncEngine:
    """SQLite: WAL, a busy timeout, foreign keys, and BEGIN IMMEDIATE for write transactions
    (so concurrent writers queue instead of failing on a lock upgrade)."""
    parsed = make_url(url)
    kwargs: dict[str, Any] = {"echo": echo, "json_deserializer": _json_loads}
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        kwargs.update(poolclass=FairQueuePool, pool_size=pool_size, max_overflow=0, pool_timeout=60)
        if parsed.get_driver_name() == "aiosqlite":
            kwargs["module"] = sqlite_driver.dbapi()  # one thread hand-off per statement (sqlite_driver.py)
        engine = create_async_engine(url, **kwargs)
        _configure_sqlite(engine)
        return engine
    kwargs.update(poolclass=FairQueuePool, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=False,
                  pool_timeout=30)
    if parsed.get_driver_name() == "asyncpg":
        kwargs["module"] = postgres_driver.dbapi()  # BEGIN waits for a read unit's first write (postgres_driver.py)
    engine = create_async_engine(url, **kwargs)
    if parsed.get_driver_name() == "asyncpg":
        _configure_postgresql(engine)
    return engine


def _configure_sqlite(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Any) -> None:
        write = connection.get_execution_options().get(WRITE_OPTION)
        # sent with the transaction's first statement, in its hand-off to aiosqlite's thread (sqlite_driver.py);
        # a unit declared read-only sends its plain reads outside any transaction (adapters/sql/reads.py)
        connection.connection.dbapi_connection.begin_lazily("BEGIN IMMEDIATE" if write else "BEGIN",
                                                            reads_outside=write is False)


def _configure_postgresql(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # after the dialect's own set-up (its listener comes first): jsonb read in one step (postgres_driver.py)
        await_(postgres_driver.set_jsonb_codec(dbapi_connection.driver_connection))

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Any) -> None:
        # a unit declared read-only sends its plain reads outside any transaction (postgres_driver.py)
        if connection.get_execution_options().get(WRITE_OPTION) is False:
            connection.connection.dbapi_connection.begin_lazily()
