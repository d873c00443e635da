"""The outbox as its consumers see it: every consumer (webhooks today; triggers, usage later) reads
the same events in id order, at its own pace, behind a cursor of its own."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from domain.events import EventRecord


class OutboxReader(Protocol):
    """The events use cases recorded (``uow.record``), read back by the outbox's consumers.

    Each consumer has a cursor: the id of the last event it has processed. Ids become visible in
    increasing order (the units of work make sure of it), so an event with an id at or below a
    cursor was either processed by that consumer or never committed."""

    async def pending(self, consumer: str, limit: int) -> list[EventRecord]:
        """Up to ``limit`` events after ``consumer``'s cursor, oldest first. The cursor (created at
        0 the first time) is locked for this transaction: a concurrent pass of the same consumer
        gets an empty list, a different consumer is not held up."""
        ...

    async def advance(self, consumer: str, last_id: int, at: datetime) -> None:
        """Move ``consumer``'s cursor to ``last_id`` (never backwards)."""
        ...

    async def cursor(self, consumer: str) -> int:
        """``consumer``'s cursor (0 when it has none yet)."""
        ...

    async def behind(self, consumers: Sequence[str]) -> list[str]:
        """Those of ``consumers`` with an event past their cursor (a consumer without a cursor is behind as
        soon as there is an event), in the order given: one question for every consumer."""
        ...

    async def purge(self, consumers: Sequence[str], created_before: datetime) -> int:
        """Delete the events every one of ``consumers`` has processed and that were recorded before
        ``created_before``; returns how many. A consumer without a cursor has processed nothing."""
        ...
