"""Ports for webhook subscriptions, the delivery queue and its log (the outbox reader: ports/events.py)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from application.ports.egress import SafeHttp
from application.ports.platform import Page, PageRequest
from domain.webhooks import Delivery, DeliveryAttempt, Subscription


class WebhookHttp(SafeHttp, Protocol):
    """The SSRF-safe HTTP client deliveries go out through (its own instance, with the webhook
    User-Agent and port policy)."""


@dataclass(frozen=True, slots=True)
class SubscriptionFilter:
    status: str | None = None


class SubscriptionRepository(Protocol):
    async def add(self, subscription: Subscription) -> Subscription: ...

    async def get(self, organization_id: int, subscription_id: int) -> Subscription | None: ...

    async def get_for_update(self, organization_id: int, subscription_id: int) -> Subscription | None:
        """Like get, but locks the row until the transaction ends (where the database can)."""
        ...

    async def list(self, organization_id: int, filters: SubscriptionFilter, page: PageRequest) -> Page[Subscription]:
        ...

    async def update(self, subscription: Subscription) -> Subscription:
        """Store every field of ``subscription`` (found by organization and id)."""
        ...

    async def delete(self, organization_id: int, subscription_id: int, at: datetime) -> None: ...

    async def active_for(self, organization_ids: Sequence[int]) -> builtins.list[Subscription]:
        """The active (not deleted) subscriptions of these organizations, by id."""
        ...

    # health, written by the delivery worker as atomic conditional updates (several workers
    # may report on the same subscription at once)

    async def mark_healthy(self, organization_id: int, subscription_ids: Sequence[int]) -> None:
        """Clear ``failing_since`` (a delivery succeeded)."""
        ...

    async def mark_failing(self, organization_id: int, subscription_id: int, since: datetime) -> datetime:
        """Set ``failing_since`` unless already set; returns the value now stored."""
        ...

    async def disable(self, organization_id: int, subscription_id: int, reason: str, at: datetime) -> bool:
        """Move an active subscription to disabled with a reason; False when it was not active."""
        ...


@dataclass(frozen=True, slots=True)
class ClaimedDelivery:
    """A delivery leased to one worker, with its subscription as it is now (None when the
    subscription was deleted). ``delivery.attempts`` already counts the attempt about to be made."""

    delivery: Delivery
    subscription: Subscription | None


@dataclass(frozen=True, slots=True)
class DeliveryUpdate:
    delivery_id: int
    status: str
    next_attempt_at: datetime | None
    at: datetime


@dataclass(frozen=True, slots=True)
class AttemptFilter:
    event: str | None = None
    status: str | None = None


class DeliveryRepository(Protocol):
    async def add_many(self, deliveries: Sequence[Delivery]) -> int:
        """Insert deliveries. A (event_id, subscription_id) pair that already exists is skipped
        (fan-out is idempotent); returns how many were inserted."""
        ...

    async def add(self, delivery: Delivery) -> Delivery: ...

    async def get(self, organization_id: int, delivery_id: int) -> Delivery | None: ...

    async def claim_due(self, now: datetime, limit: int, worker: str, lease_until: datetime) -> list[ClaimedDelivery]:
        """Lease up to ``limit`` pending deliveries due at ``now`` (and not leased, or whose lease
        expired) to ``worker`` until ``lease_until``, counting one more attempt on each. Two
        workers never get the same delivery while its lease holds (SKIP LOCKED on PostgreSQL;
        SQLite serializes writers)."""
        ...

    async def finish(self, worker: str, updates: Sequence[DeliveryUpdate]) -> None:
        """Store the outcome of leased deliveries and release them; deliveries whose lease
        ``worker`` no longer holds are left alone."""
        ...

    async def release(self, worker: str, delivery_ids: Sequence[int]) -> None:
        """Give leased deliveries back unsent (graceful shutdown): due again at once, the
        attempt that was counted at claim time uncounted."""
        ...

    async def requeue(self, organization_id: int, delivery_id: int, at: datetime, *, auto_retry: bool) -> bool:
        """Make a delivery pending and due at ``at`` (``auto_retry`` False: one attempt only).
        False when a worker holds it right now."""
        ...

    async def add_attempts(self, attempts: Sequence[DeliveryAttempt]) -> None: ...

    async def list_attempts(self, organization_id: int, subscription_id: int, filters: AttemptFilter,
                            page: PageRequest) -> Page[DeliveryAttempt]:
        """Newest first."""
        ...

    async def get_attempt(self, organization_id: int, subscription_id: int, attempt_id: int) -> DeliveryAttempt | None:
        ...

    async def purge_finished(self, before: datetime) -> int:
        """Forget the deliveries that finished (succeeded, failed, cancelled: not pending) before ``before``,
        with their log rows (attempts); how many log rows (housekeeping)."""
        ...


class DeliveryObserver(Protocol):
    """Told of every delivery attempt the pump recorded, by its outcome (the delivery's status): metrics."""

    def delivered(self, status: str) -> None: ...
