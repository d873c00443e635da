"""The in-memory outbox read by its consumers: ``store.outbox`` (written by the in-memory unit of
work) and a cursor per consumer kept in a table, so that a rollback undoes it."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from datetime import datetime

from adapters.memory.store import InMemoryUnitOfWork
from domain.events import EventRecord

CURSORS = "outbox_cursors"


class InMemoryOutboxReader:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def pending(self, consumer: str, limit: int) -> list[EventRecord]:
        last_id = (await self.uow.tables())[CURSORS].setdefault(consumer, 0)
        found = []
        for event_id, event, created_at in self.uow.store.outbox:
            if event_id > last_id:
                found.append(EventRecord(event_id, event.organization_id, event.type, copy.deepcopy(event.data),
                                         created_at, event.depth))
                if len(found) >= limit:
                    break
        return found

    async def advance(self, consumer: str, last_id: int, at: datetime) -> None:
        cursors = (await self.uow.tables())[CURSORS]
        cursors[consumer] = max(cursors.get(consumer, 0), last_id)

    async def cursor(self, consumer: str) -> int:
        return int((await self.uow.tables())[CURSORS].get(consumer, 0))

    async def behind(self, consumers: Sequence[str]) -> list[str]:
        outbox = self.uow.store.outbox
        if not outbox:
            return []
        newest = max(entry[0] for entry in outbox)
        cursors = (await self.uow.tables())[CURSORS]
        return [name for name in consumers if cursors.get(name, 0) < newest]

    async def purge(self, consumers: Sequence[str], created_before: datetime) -> int:
        cursors = (await self.uow.tables())[CURSORS]
        names = set(consumers)
        if not names or not names <= cursors.keys():
            return 0
        horizon = min(cursors[name] for name in names)
        outbox = self.uow.store.outbox
        kept = [entry for entry in outbox if entry[0] > horizon or entry[2] >= created_before]
        purged = len(outbox) - len(kept)
        outbox[:] = kept
        return purged
