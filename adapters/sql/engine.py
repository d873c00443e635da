"""Engine construction for both databases: SQLAlchemy's own engine, pool and drivers, set up through the options
and events its documentation describes, nothing more.

- JSON columns are read by msgspec (``json_deserializer``).
- SQLite: WAL, a busy timeout, foreign keys. The driver's own transaction handling is off and a ``begin`` event
  listener sends ``BEGIN IMMEDIATE`` (SQLAlchemy's SQLite documentation shows this for aiosqlite), so concurrent
  writers queue on the busy timeout instead of failing on a lock upgrade. A connection whose ``WRITE_OPTION`` is
  False (a read-only unit of work) gets no ``BEGIN``: each of its statements is its own transaction.
- PostgreSQL: jsonb is read by msgspec's decoder in one step, a codec set on each new connection through
  asyncpg's ``set_type_codec`` (``AdaptedConnection.run_async``, as SQLAlchemy's asyncpg documentation shows).
  A read-only unit of work runs in SQLAlchemy's ``AUTOCOMMIT`` isolation level (``adapters/sql/uow.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

WRITE_OPTION = "parley_write"
"""An execution option of the unit of work's connections: False for a read-only unit's (``adapters/sql/uow.py``)."""

AUTOCOMMIT = "AUTOCOMMIT"


def _json_loads(text: str | bytes) -> Any:
    """JSON columns as the standard library reads them, about five times faster; whatever msgspec refuses
    (NaN, numbers beyond a double, lone surrogates) goes to json.loads as before."""
    try:
        return msgspec.json.decode(text)
    except msgspec.MsgspecError:
        return json.loads(text)


DEFAULT_POOL_SIZE = {"sqlite": 10, "postgresql": 20}
"""Connections a process holds when PARLEY_DB_POOL_SIZE does not say. SQLite writes one at a time, and each
aiosqlite connection is a thread: more than 10 made `GET /v2/agents` slower (767 requests/s with 20 against 919
with 10 and 949 with 5, docs/performance.md); PostgreSQL serves concurrent statements, and 20 keeps a serve process
under load from waiting for connections."""


def create_engine(url: str, *, pool_size: int = 0, echo: bool = False) -> AsyncEngine:
    """An engine for ``url`` (``sqlite+aiosqlite`` or ``postgresql+asyncpg``) with a pool of ``pool_size``
    connections (0: ``DEFAULT_POOL_SIZE``), opened as the load needs them and kept: none beyond it. (SQLAlchemy
    closes an overflow connection the moment it comes back while the pool is full, so under a steady load above
    the pool's size each request would open a PostgreSQL backend and close it: that cost ``GET /v2/agents`` about
    half its throughput.)"""
    parsed = make_url(url)
    pool_size = pool_size or DEFAULT_POOL_SIZE.get(parsed.get_backend_name(), 10)
    kwargs: dict[str, Any] = {"echo": echo, "json_deserializer": _json_loads}
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if not database or database == ":memory:":
            # an in-memory database lives in its one connection: SQLAlchemy keeps that one (a static pool)
            engine = create_async_engine(url, **kwargs)
        else:
            if not database.startswith("file:"):
                Path(database).parent.mkdir(parents=True, exist_ok=True)
            # one writer at a time anyway: more connections would only wait on the database's lock
            engine = create_async_engine(url, pool_size=pool_size, max_overflow=0, pool_timeout=60, **kwargs)
        _configure_sqlite(engine)
        return engine
    engine = create_async_engine(url, pool_size=pool_size, max_overflow=0, pool_timeout=30, **kwargs)
    if parsed.get_driver_name() == "asyncpg":
        _configure_asyncpg(engine)
    return engine


def _configure_sqlite(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # the driver sends no BEGIN of its own: the listener below does
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Any) -> None:
        if connection.get_execution_options().get(WRITE_OPTION, True):
            connection.exec_driver_sql("BEGIN IMMEDIATE")


_JSONB_IN = msgspec.json.Decoder(float_hook=float)
"""A jsonb value read, in C with no Python frame per value: msgspec reads the text as ``json.loads`` would, a
number beyond a double (which jsonb can hold and msgspec alone refuses) becoming ``float`` infinity as there."""


def _jsonb_out(text: str) -> str:
    return text  # SQLAlchemy has serialized the value already


def _configure_asyncpg(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # after the dialect's own codecs (its set-up runs first): SQLAlchemy's jsonb codec slices, decodes to text
        # and calls the JSON deserializer, three steps and a copy for each of a list page's hundred values
        dbapi_connection.run_async(lambda driver: driver.set_type_codec(
            "jsonb", encoder=_jsonb_out, decoder=_JSONB_IN.decode, schema="pg_catalog", format="text"))
