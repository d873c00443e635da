"""Operational gauges read at scrape time: how much background work waits (metrics, never a decision)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True, slots=True)
class WorkBacklog:
    outbox_backlog: int
    """Outbox events some consumer has not processed yet."""
    outbox_oldest_at: datetime | None
    """When the oldest of them was recorded (None: no backlog)."""
    dialer_in_flight: int
    """Campaign contacts being dialled (``dialing``)."""
    dialer_due: int
    """Open contacts (``pending``, ``retry_wait``) of running campaigns due at ``now``."""


class BacklogGauges(Protocol):
    """Request-scoped; a few aggregate queries (indexed counts), read-only."""

    async def read(self, now: datetime) -> WorkBacklog | None:
        """None where the backend keeps no such figures (the in-memory backend)."""
        ...
