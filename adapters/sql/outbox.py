"""The outbox read by its consumers: one cursor per consumer (``outbox_cursors``), purging what
every consumer has processed. The writing side is ``SqlUnitOfWork.commit``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from adapters.sql.dialect import insert
from adapters.sql.tables import outbox_cursors, outbox_events
from adapters.sql.uow import SqlUnitOfWork
from domain.events import EventRecord

cursors = outbox_cursors


class SqlOutboxReader:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def _register(self, consumer: str) -> AsyncConnection:
        """The connection, with ``consumer``'s cursor row in place (at 0 when it is new)."""
        conn = await self.uow.connection()
        register = insert(cursors, self.uow.dialect).on_conflict_do_nothing(index_elements=[cursors.c.consumer])
        await conn.execute(register, {"consumer": consumer, "last_id": 0, "updated_at": None})
        return conn

    async def pending(self, consumer: str, limit: int) -> list[EventRecord]:
        conn = await self.uow.connection()
        seen = (await conn.execute(sa.select(cursors.c.last_id).where(cursors.c.consumer == consumer))).scalar()
        if seen is not None and (await conn.execute(
                sa.select(outbox_events.c.id).where(outbox_events.c.id > seen).limit(1))).first() is None:
            return []  # nothing new: an idle poll neither writes nor locks
        if seen is None:
            await self._register(consumer)
        # one pass per consumer at a time (another pass skips): the consumer then sees events in id
        # order, which the in-order delivery of a resource's events relies on (SQLite: one writer)
        last_id = (await conn.execute(
            sa.select(cursors.c.last_id).where(cursors.c.consumer == consumer).with_for_update(skip_locked=True)
        )).scalar()
        if last_id is None:
            return []
        rows = await conn.execute(
            sa.select(outbox_events).where(outbox_events.c.id > last_id).order_by(outbox_events.c.id).limit(limit))
        return [EventRecord(r.id, r.organization_id, r.type, dict(r.data), r.created_at, r.depth) for r in rows]

    async def advance(self, consumer: str, last_id: int, at: datetime) -> None:
        conn = await self._register(consumer)
        await conn.execute(cursors.update().where(cursors.c.consumer == consumer, cursors.c.last_id < last_id)
                           .values(last_id=last_id, updated_at=at))

    async def cursor(self, consumer: str) -> int:
        conn = await self.uow.connection()
        found = (await conn.execute(sa.select(cursors.c.last_id).where(cursors.c.consumer == consumer))).scalar()
        return int(found or 0)

    async def behind(self, consumers: Sequence[str]) -> list[str]:
        if not consumers:
            return []
        conn = await self.uow.connection()
        found = (await conn.execute(sa.select(sa.func.max(outbox_events.c.id)))).scalar()
        if found is None:
            return []
        rows = await conn.execute(sa.select(cursors.c.consumer, cursors.c.last_id)
                                  .where(cursors.c.consumer.in_(list(consumers))))
        seen = {row.consumer: row.last_id for row in rows}
        return [name for name in consumers if seen.get(name, 0) < found]

    async def purge(self, consumers: Sequence[str], created_before: datetime) -> int:
        names = sorted(set(consumers))
        if not names:
            return 0
        conn = await self.uow.connection()
        found = (await conn.execute(sa.select(sa.func.count(), sa.func.min(cursors.c.last_id))
                                    .where(cursors.c.consumer.in_(names)))).one()
        if found[0] < len(names) or not found[1]:
            return 0  # a consumer without a cursor has processed nothing
        result = await conn.execute(outbox_events.delete().where(
            outbox_events.c.id <= found[1], outbox_events.c.created_at < created_before))
        return int(result.rowcount or 0)
