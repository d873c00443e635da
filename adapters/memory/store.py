"""A transactional in-memory store: one transaction at a time, rolled back by snapshot."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from typing import Any

from application.context import CauseContext
from application.ports.platform import Clock
from domain.events import DomainEvent, PendingEvents, require_catalogued


class InMemoryStore:
    def __init__(self) -> None:
        self.tables: dict[str, dict[Any, Any]] = defaultdict(dict)
        self.sequences: dict[str, int] = defaultdict(int)
        self.outbox: list[tuple[int, DomainEvent, Any]] = []
        """(id, event, recorded at), in id order; read by adapters/memory/outbox.py."""
        self.lock = asyncio.Lock()

    def next_id(self, table: str) -> int:
        self.sequences[table] += 1
        return self.sequences[table]


class InMemoryUnitOfWork:
    """Events are recorded at least as deep as ``cause`` says (a fresh context when none is given: nothing caused
    the unit's work)."""

    def __init__(self, store: InMemoryStore, clock: Clock, on_work: Callable[[], None] | None = None,
                 cause: CauseContext | None = None) -> None:
        self.store = store
        self._cause = cause or CauseContext()
        self.clock = clock
        self._on_work = on_work
        self._created_work = False
        self._snapshot: tuple[Any, Any, list[Any]] | None = None
        self._events = PendingEvents()

    async def tables(self) -> dict[str, dict[Any, Any]]:
        if self._snapshot is None:
            await self.store.lock.acquire()
            self._snapshot = (copy.deepcopy(self.store.tables), copy.deepcopy(self.store.sequences),
                              list(self.store.outbox))
        return self.store.tables

    def record(self, event: DomainEvent) -> None:
        """Keep ``event`` (an event of the catalogue: anything else is a TypeError) for the outbox, at least as deep
        as the unit's cause."""
        self._events.add(event, self._cause.depth)

    def created_work(self) -> None:
        self._created_work = True

    async def commit(self) -> None:
        if self._events:
            await self.tables()
            now = self.clock.now()
            for event in self._events:
                self.store.outbox.append((self.store.next_id("outbox"), require_catalogued(event), now))
            self._events.clear()
            self._created_work = True
        if self._snapshot is not None:
            self._snapshot = None
            self.store.lock.release()
        if self._created_work:
            self._created_work = False
            if self._on_work is not None:
                self._on_work()

    @contextlib.asynccontextmanager
    async def autocommit(self) -> AsyncIterator[None]:
        """The memory store has no round trips to save: the block is the caller's transaction."""
        yield

    async def rollback(self) -> None:
        self._events.clear()
        self._created_work = False
        if self._snapshot is not None:
            tables, sequences, outbox = self._snapshot
            self.store.tables.clear()
            self.store.tables.update(tables)
            self.store.sequences.clear()
            self.store.sequences.update(sequences)
            self.store.outbox[:] = outbox
            self._snapshot = None
            self.store.lock.release()

    async def close(self) -> None:
        await self.rollback()
