"""asyncpg under SQLAlchemy, with BEGIN deferred to a read-only unit's first statement that is not a plain read.

SQLAlchemy's asyncpg adaptation sends ``BEGIN`` before a transaction's first statement and ``COMMIT`` at its end:
three round trips, and two more statements for the server, for a request that reads one page. A unit of work
declared read-only (``begin_lazily()``, an HTTP GET) sends its plain reads (``adapters/sql/reads.py``) outside
any transaction instead, each one its own snapshot as under READ COMMITTED inside one, and its first statement
that is anything else (a write, a locking read, an advisory lock) opens the transaction as before, so what it
writes is still atomic. Its commit or rollback then sends nothing unless that happened. Server-side cursors,
``executemany`` and every unit not declared read-only keep SQLAlchemy's behaviour.

Used by ``adapters.sql.engine.create_engine`` for every ``postgresql+asyncpg`` URL (``module=``).
"""

from __future__ import annotations

from typing import Any

import asyncpg
import msgspec
from sqlalchemy.dialects.postgresql.asyncpg import (
    AsyncAdapt_asyncpg_connection,
    AsyncAdapt_asyncpg_cursor,
    AsyncAdapt_asyncpg_dbapi,
)
from sqlalchemy.util.concurrency import await_

from adapters.sql.reads import plain_read


class LazyBeginCursor(AsyncAdapt_asyncpg_cursor):
    __slots__ = ()

    async def _prepare_and_execute(self, operation: Any, parameters: Any) -> None:
        adapt: LazyBeginConnection = self._adapt_connection  # type: ignore[assignment]
        adapt._outside = adapt._reads_outside and plain_read(operation)
        try:
            await super()._prepare_and_execute(operation, parameters)
        finally:
            adapt._outside = False


class LazyBeginConnection(AsyncAdapt_asyncpg_connection):
    __slots__ = ("_outside", "_reads_outside")

    _cursor_cls = LazyBeginCursor

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reads_outside = False  # this transaction's plain reads go without BEGIN
        self._outside = False  # the statement under way is one of them

    async def read(self, operation: str, parameters: tuple[Any, ...]) -> list[Any]:
        """A read unit's plain read (``adapters/sql/reads.py``: ``DriverRead``), straight from asyncpg (its
        records, with its own statement cache): in the transaction when one is open, otherwise without one."""
        try:
            async with self._execute_mutex:
                return await self._connection.fetch(operation, *parameters)
        except Exception as error:
            self._handle_exception(error)

    def begin_lazily(self) -> None:
        """The transaction SQLAlchemy begins now is a read unit's: BEGIN waits for a statement that needs it."""
        self._reads_outside = True

    async def _start_transaction(self) -> None:
        if self._outside:
            return
        await super()._start_transaction()

    def rollback(self) -> None:
        self._reads_outside = False
        super().rollback()

    def commit(self) -> None:
        self._reads_outside = False
        super().commit()


class LazyBeginDbapi(AsyncAdapt_asyncpg_dbapi):
    def connect(self, *arg: Any, **kw: Any) -> LazyBeginConnection:
        creator = kw.pop("async_creator_fn", self.asyncpg.connect)
        cache_size = kw.pop("prepared_statement_cache_size", 100)
        name_func = kw.pop("prepared_statement_name_func", None)
        return await_(LazyBeginConnection.create(self, creator(*arg, **kw), prepared_statement_cache_size=cache_size,
                                                 prepared_statement_name_func=name_func))


_JSONB_IN = msgspec.json.Decoder(float_hook=float)
"""A jsonb value read, in C with no Python frame per value: msgspec reads the text as ``json.loads`` would, a
number beyond a double (which jsonb can hold and msgspec alone refuses) becoming ``float`` infinity as there."""


def _jsonb_out(text: str) -> str:
    return text  # SQLAlchemy has serialized the value already


async def set_jsonb_codec(connection: asyncpg.Connection) -> None:
    """SQLAlchemy's own jsonb codec slices, decodes to text and calls the engine's JSON deserializer: three steps
    and a copy for each of a list page's hundred JSON values. This one is set after SQLAlchemy's, on every new
    connection (``adapters.sql.engine``); writes are encoded as before."""
    await connection.set_type_codec("jsonb", encoder=_jsonb_out, decoder=_JSONB_IN.decode, schema="pg_catalog",
                                    format="text")


def dbapi() -> LazyBeginDbapi:
    return LazyBeginDbapi(asyncpg)
