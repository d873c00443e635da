"""The SQL unit of work: one connection per request, transactions begun on first use."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from adapters.sql.engine import WRITE_OPTION
from adapters.sql.tables import outbox_events
from application.ports.platform import Clock
from domain.events import DomainEvent


class SqlUnitOfWork:
    def __init__(self, engine: AsyncEngine, clock: Clock, *, write: bool = True) -> None:
        self._engine = engine
        self._clock = clock
        self._write = write
        self._connection: AsyncConnection | None = None
        self._events: list[DomainEvent] = []

    async def connection(self) -> AsyncConnection:
        if self._connection is None:
            conn = await self._engine.connect()
            if self._write:
                await conn.execution_options(**{WRITE_OPTION: True})
            self._connection = conn
        return self._connection

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    def record(self, event: DomainEvent) -> None:
        self._events.append(event)

    async def commit(self) -> None:
        if self._events:
            conn = await self.connection()
            now = self._clock.now()
            await conn.execute(
                outbox_events.insert(),
                [{"organization_id": e.organization_id, "type": e.type, "data": e.data, "created_at": now}
                 for e in self._events],
            )
            self._events.clear()
        if self._connection is not None and self._connection.in_transaction():
            await self._connection.commit()

    async def rollback(self) -> None:
        self._events.clear()
        if self._connection is not None and self._connection.in_transaction():
            await self._connection.rollback()

    async def close(self) -> None:
        if self._connection is not None:
            try:
                await self.rollback()
            finally:
                await self._connection.close()
                self._connection = None
