"""In-memory webhooks: subscriptions, the delivery queue and its log."""

from __future__ import annotations

import builtins
import copy
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from adapters.memory.store import InMemoryUnitOfWork
from application.ports.platform import Page, PageRequest
from application.ports.webhooks import AttemptFilter, ClaimedDelivery, DeliveryUpdate, SubscriptionFilter
from domain.errors import Conflict
from domain.identity import persisted
from domain.webhooks import Delivery, DeliveryAttempt, DeliveryStatus, Subscription, WebhookStatus

SUBS = "webhook_subscriptions"
DELIVERIES = "webhook_deliveries"
ATTEMPTS = "webhook_attempts"


@dataclass
class _Lease:
    until: datetime
    worker: str


class InMemorySubscriptionRepository:
    """Rows: id -> (subscription, deleted_at)."""

    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def _rows(self) -> dict[int, tuple[Subscription, datetime | None]]:
        return (await self.uow.tables())[SUBS]

    async def add(self, subscription: Subscription) -> Subscription:
        rows = await self._rows()
        new_id = self.uow.store.next_id(SUBS)
        stored = replace(subscription, id=new_id)
        rows[new_id] = (stored, None)
        return stored

    async def get(self, organization_id: int, subscription_id: int) -> Subscription | None:
        entry = (await self._rows()).get(subscription_id)
        if entry is None or entry[1] is not None or entry[0].organization_id != organization_id:
            return None
        return entry[0]

    get_for_update = get

    async def list(self, organization_id: int, filters: SubscriptionFilter, page: PageRequest) -> Page[Subscription]:
        rows = await self._rows()
        found = [s for _, (s, deleted) in sorted(rows.items())
                 if deleted is None and s.organization_id == organization_id
                 and (filters.status is None or s.status == filters.status)]
        return page.slice(found)

    async def update(self, subscription: Subscription) -> Subscription:
        rows = await self._rows()
        entry = rows.get(persisted(subscription.id))
        if entry is not None and entry[1] is None and entry[0].organization_id == subscription.organization_id:
            rows[persisted(subscription.id)] = (replace(subscription, created_at=entry[0].created_at), None)
        return subscription

    async def delete(self, organization_id: int, subscription_id: int, at: datetime) -> None:
        rows = await self._rows()
        entry = rows.get(subscription_id)
        if entry is not None and entry[1] is None and entry[0].organization_id == organization_id:
            rows[subscription_id] = (replace(entry[0], updated_at=at), at)

    async def active_for(self, organization_ids: Sequence[int]) -> builtins.list[Subscription]:
        wanted = set(organization_ids)
        return [s for _, (s, deleted) in sorted((await self._rows()).items())
                if deleted is None and s.status == WebhookStatus.ACTIVE and s.organization_id in wanted]

    async def mark_healthy(self, organization_id: int, subscription_ids: Sequence[int]) -> None:
        rows = await self._rows()
        for sid in set(subscription_ids):
            entry = rows.get(sid)
            if entry is not None and entry[0].organization_id == organization_id and entry[0].failing_since:
                rows[sid] = (replace(entry[0], failing_since=None), entry[1])

    async def mark_failing(self, organization_id: int, subscription_id: int, since: datetime) -> datetime:
        rows = await self._rows()
        entry = rows.get(subscription_id)
        if entry is None or entry[0].organization_id != organization_id:
            return since
        if entry[0].failing_since is None:
            rows[subscription_id] = (replace(entry[0], failing_since=since), entry[1])
            return since
        return entry[0].failing_since

    async def disable(self, organization_id: int, subscription_id: int, reason: str, at: datetime) -> bool:
        rows = await self._rows()
        entry = rows.get(subscription_id)
        if entry is None or entry[0].organization_id != organization_id or entry[0].status != WebhookStatus.ACTIVE:
            return False
        rows[subscription_id] = (replace(entry[0], status="disabled", disabled_reason=reason[:2000],
                                         disabled_at=at, updated_at=at), entry[1])
        return True


class InMemoryDeliveryRepository:
    """Rows: id -> (delivery, lease or None); attempts: id -> attempt."""

    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def _rows(self) -> dict[int, tuple[Delivery, _Lease | None]]:
        return (await self.uow.tables())[DELIVERIES]

    async def add_many(self, deliveries: Sequence[Delivery]) -> int:
        rows = await self._rows()
        taken: set[tuple[int | None, int]] = {(d.event_id, d.subscription_id) for d, _ in rows.values()
                                              if d.event_id is not None}
        added = 0
        for delivery in deliveries:
            key = (delivery.event_id, delivery.subscription_id)
            if delivery.event_id is not None and key in taken:
                continue
            taken.add(key)
            await self.add(delivery)
            added += 1
        return added

    async def add(self, delivery: Delivery) -> Delivery:
        rows = await self._rows()
        if any(d.message_id == delivery.message_id for d, _ in rows.values()):
            raise Conflict("this delivery exists already")
        new_id = self.uow.store.next_id(DELIVERIES)
        stored = replace(delivery, id=new_id, data=copy.deepcopy(delivery.data))
        rows[new_id] = (stored, None)
        return stored

    async def get(self, organization_id: int, delivery_id: int) -> Delivery | None:
        entry = (await self._rows()).get(delivery_id)
        return entry[0] if entry is not None and entry[0].organization_id == organization_id else None

    async def claim_due(self, now: datetime, limit: int, worker: str, lease_until: datetime) -> list[ClaimedDelivery]:
        rows = await self._rows()
        subscriptions = (await self.uow.tables())[SUBS]
        waiting: dict[tuple[int, str], int] = {}  # (subscription, resource) -> its earliest pending event
        for d, _ in rows.values():
            if d.status == DeliveryStatus.PENDING and d.resource is not None and d.event_id is not None:
                key = (d.subscription_id, d.resource)
                waiting[key] = min(waiting.get(key, d.event_id), d.event_id)

        def first_of_its_resource(d: Delivery) -> bool:
            return d.resource is None or d.event_id is None or waiting[(d.subscription_id, d.resource)] >= d.event_id

        due = sorted(
            (d for d, lease in rows.values()
             if d.status == DeliveryStatus.PENDING and d.next_attempt_at is not None and d.next_attempt_at <= now
             and (lease is None or lease.until < now) and first_of_its_resource(d)),
            key=lambda d: (d.next_attempt_at, d.id),
        )[:limit]
        claimed = []
        for delivery in due:
            counted = replace(delivery, attempts=delivery.attempts + 1)
            rows[persisted(delivery.id)] = (counted, _Lease(lease_until, worker))
            entry = subscriptions.get(delivery.subscription_id)
            live = entry is not None and entry[1] is None and entry[0].organization_id == delivery.organization_id
            claimed.append(ClaimedDelivery(counted, entry[0] if entry is not None and live else None))
        return claimed

    async def finish(self, worker: str, updates: Sequence[DeliveryUpdate]) -> None:
        rows = await self._rows()
        for update in updates:
            entry = rows.get(update.delivery_id)
            if entry is None or entry[1] is None or entry[1].worker != worker:
                continue
            rows[update.delivery_id] = (replace(entry[0], status=update.status, next_attempt_at=update.next_attempt_at,
                                                updated_at=update.at), None)

    async def release(self, worker: str, delivery_ids: Sequence[int]) -> None:
        rows = await self._rows()
        for delivery_id in delivery_ids:
            entry = rows.get(delivery_id)
            if entry is None or entry[1] is None or entry[1].worker != worker:
                continue
            rows[delivery_id] = (replace(entry[0], attempts=max(0, entry[0].attempts - 1)), None)

    async def requeue(self, organization_id: int, delivery_id: int, at: datetime, *, auto_retry: bool) -> bool:
        rows = await self._rows()
        entry = rows.get(delivery_id)
        if entry is None or entry[0].organization_id != organization_id:
            return False
        if entry[1] is not None and entry[1].until >= at:
            return False
        rows[delivery_id] = (replace(entry[0], status="pending", next_attempt_at=at, auto_retry=auto_retry,
                                     updated_at=at), None)
        return True

    async def add_attempts(self, attempts: Sequence[DeliveryAttempt]) -> None:
        table = (await self.uow.tables())[ATTEMPTS]
        for attempt in attempts:
            new_id = self.uow.store.next_id(ATTEMPTS)
            table[new_id] = replace(attempt, id=new_id)

    async def list_attempts(self, organization_id: int, subscription_id: int, filters: AttemptFilter,
                            page: PageRequest) -> Page[DeliveryAttempt]:
        table = (await self.uow.tables())[ATTEMPTS]
        found = [a for a in sorted(table.values(), key=lambda a: -(persisted(a.id)))
                 if a.organization_id == organization_id and a.subscription_id == subscription_id
                 and (filters.event is None or a.event_type == filters.event)
                 and (filters.status is None or a.status == filters.status)]
        return page.slice(found)

    async def get_attempt(self, organization_id: int, subscription_id: int, attempt_id: int) -> DeliveryAttempt | None:
        attempt = (await self.uow.tables())[ATTEMPTS].get(attempt_id)
        if attempt is None or attempt.organization_id != organization_id or attempt.subscription_id != subscription_id:
            return None
        return attempt

    async def purge_finished(self, before: datetime) -> int:
        rows = await self._rows()
        finished = {delivery_id for delivery_id, (d, _) in rows.items()
                    if d.status != DeliveryStatus.PENDING and d.updated_at is not None and d.updated_at < before}
        table = (await self.uow.tables())[ATTEMPTS]
        attempts = [attempt_id for attempt_id, a in table.items() if a.delivery_id in finished]
        for attempt_id in attempts:
            del table[attempt_id]
        for delivery_id in finished:
            del rows[delivery_id]
        return len(attempts)
