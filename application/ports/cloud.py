"""Ports of the cloud-connectivity status: the worker's heartbeats, and the platform's measurable state
(a database round trip, the outbox backlog, failing webhook subscriptions)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True, slots=True)
class OutboxBacklog:
    pending: int
    """Events some consumer has not processed yet (after the lowest of the consumers' cursors)."""
    oldest_pending_at: datetime | None
    """When the oldest of them was recorded (None: nothing pending)."""


class Heartbeats(Protocol):
    """Request-scoped: works in the caller's unit of work."""

    async def beat(self, process: str, at: datetime) -> None:
        """Record that worker process ``process`` was alive at ``at`` (one row per process, kept current)."""
        ...

    async def latest(self) -> datetime | None:
        """The newest heartbeat of any worker process (None: no worker ever beat)."""
        ...

    async def forget(self, before: datetime) -> int:
        """Delete the heartbeats of processes last seen before ``before`` (long gone); returns how many."""
        ...


class PlatformHealth(Protocol):
    """Request-scoped reads of the platform's state; each method is one round trip or two."""

    async def ping(self) -> None:
        """One round trip to the database (raises when it cannot be made)."""
        ...

    async def outbox_backlog(self, consumers: Sequence[str]) -> OutboxBacklog:
        """What ``consumers`` still have to process, from their cursors (a consumer without one: everything)."""
        ...

    async def failing_subscriptions(self, organization_id: int) -> int:
        """The organization's webhook subscriptions that are failing: active ones whose deliveries fail without a
        success (``failing_since`` set), and disabled ones (the platform disables a subscription that failed for
        5 days or whose receiver answered 410)."""
        ...
