"""SQL adapters for webhooks: subscriptions, the delivery queue and its log."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from adapters.sql.constraints import constraint_errors
from adapters.sql.dialect import insert
from adapters.sql.paging import fetch_page
from adapters.sql.uow import SqlUnitOfWork
from adapters.sql.webhooks_tables import webhook_attempts, webhook_deliveries, webhook_subscriptions
from application.ports.platform import Page, PageRequest
from application.ports.webhooks import AttemptFilter, ClaimedDelivery, DeliveryUpdate, SubscriptionFilter
from domain.webhooks import Delivery, DeliveryAttempt, DeliveryStatus, Subscription, WebhookStatus

subs = webhook_subscriptions
dlv = webhook_deliveries
att = webhook_attempts

_SUB_COLUMNS = [c for c in subs.c if c.name != "deleted_at"]
_DLV_COLUMNS = [c for c in dlv.c if c.name not in ("locked_until", "locked_by")]


def _row_to_subscription(row: Any) -> Subscription:
    return Subscription(
        id=row.id, organization_id=row.organization_id, name=row.name, url=row.url, events=tuple(row.events),
        status=row.status, sealed_secret=row.secret, previous_sealed_secret=row.previous_secret,
        previous_secret_expires_at=row.previous_secret_expires_at, failing_since=row.failing_since,
        disabled_reason=row.disabled_reason, disabled_at=row.disabled_at, created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _subscription_values(s: Subscription) -> dict[str, Any]:
    return {
        "organization_id": s.organization_id, "name": s.name, "url": s.url, "events": list(s.events),
        "status": s.status, "secret": s.sealed_secret, "previous_secret": s.previous_sealed_secret,
        "previous_secret_expires_at": s.previous_secret_expires_at, "failing_since": s.failing_since,
        "disabled_reason": s.disabled_reason, "disabled_at": s.disabled_at, "created_at": s.created_at,
        "updated_at": s.updated_at,
    }


def _row_to_delivery(row: Any) -> Delivery:
    return Delivery(
        id=row.id, organization_id=row.organization_id, subscription_id=row.subscription_id,
        event_type=row.event_type, data=dict(row.data), occurred_at=row.occurred_at, message_id=row.webhook_id,
        event_id=row.event_id, resource=row.resource, status=row.status, attempts=row.attempts,
        next_attempt_at=row.next_attempt_at,
        auto_retry=bool(row.auto_retry), created_at=row.created_at, updated_at=row.updated_at,
    )


def _delivery_values(d: Delivery) -> dict[str, Any]:
    return {
        "organization_id": d.organization_id, "subscription_id": d.subscription_id, "event_id": d.event_id,
        "event_type": d.event_type, "data": d.data, "occurred_at": d.occurred_at, "webhook_id": d.message_id,
        "resource": d.resource, "status": d.status, "attempts": d.attempts, "auto_retry": d.auto_retry,
        "next_attempt_at": d.next_attempt_at, "created_at": d.created_at, "updated_at": d.updated_at,
    }


def _row_to_attempt(row: Any) -> DeliveryAttempt:
    return DeliveryAttempt(
        id=row.id, organization_id=row.organization_id, subscription_id=row.subscription_id,
        delivery_id=row.delivery_id, event_type=row.event_type, message_id=row.webhook_id, attempt=row.attempt,
        status=row.status, response_status=row.response_status, response_body=row.response_body,
        duration_ms=row.duration_ms, error=row.error, created_at=row.created_at, next_retry_at=row.next_retry_at,
    )


class SqlSubscriptionRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    @staticmethod
    def _live(organization_id: int) -> Any:
        return sa.and_(subs.c.organization_id == organization_id, subs.c.deleted_at.is_(None))

    async def add(self, subscription: Subscription) -> Subscription:
        conn = await self.uow.connection()
        row = (await conn.execute(subs.insert().returning(*_SUB_COLUMNS), _subscription_values(subscription))).one()
        return _row_to_subscription(row)

    async def _get(self, organization_id: int, subscription_id: int, lock: bool) -> Subscription | None:
        conn = await self.uow.connection()
        query = sa.select(*_SUB_COLUMNS).where(self._live(organization_id), subs.c.id == subscription_id)
        if lock:
            query = query.with_for_update()
        row = (await conn.execute(query)).first()
        return _row_to_subscription(row) if row else None

    async def get(self, organization_id: int, subscription_id: int) -> Subscription | None:
        return await self._get(organization_id, subscription_id, lock=False)

    async def get_for_update(self, organization_id: int, subscription_id: int) -> Subscription | None:
        return await self._get(organization_id, subscription_id, lock=True)

    async def list(self, organization_id: int, filters: SubscriptionFilter, page: PageRequest) -> Page[Subscription]:
        conn = await self.uow.connection()
        condition = self._live(organization_id)
        if filters.status:
            condition = sa.and_(condition, subs.c.status == filters.status)
        rows, total = await fetch_page(conn, _SUB_COLUMNS, condition, [subs.c.id], page)
        return Page([_row_to_subscription(r) for r in rows], total, page.limit, page.offset)

    async def update(self, subscription: Subscription) -> Subscription:
        conn = await self.uow.connection()
        values = _subscription_values(subscription)
        values.pop("organization_id")
        values.pop("created_at")
        await conn.execute(subs.update().where(self._live(subscription.organization_id),
                                               subs.c.id == subscription.id).values(**values))
        return subscription

    async def delete(self, organization_id: int, subscription_id: int, at: datetime) -> None:
        conn = await self.uow.connection()
        await conn.execute(subs.update().where(self._live(organization_id), subs.c.id == subscription_id)
                           .values(deleted_at=at, updated_at=at))

    async def active_for(self, organization_ids: Sequence[int]) -> builtins.list[Subscription]:
        if not organization_ids:
            return []
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(*_SUB_COLUMNS).where(
            subs.c.organization_id.in_(list(organization_ids)), subs.c.status == WebhookStatus.ACTIVE,
            subs.c.deleted_at.is_(None),
        ).order_by(subs.c.id))
        return [_row_to_subscription(r) for r in rows]

    async def mark_healthy(self, organization_id: int, subscription_ids: Sequence[int]) -> None:
        conn = await self.uow.connection()
        await conn.execute(subs.update().where(subs.c.organization_id == organization_id,
                                               subs.c.id.in_(sorted(set(subscription_ids))),
                                               subs.c.failing_since.is_not(None)).values(failing_since=None))

    async def mark_failing(self, organization_id: int, subscription_id: int, since: datetime) -> datetime:
        conn = await self.uow.connection()
        mine = sa.and_(subs.c.organization_id == organization_id, subs.c.id == subscription_id)
        await conn.execute(subs.update().where(mine, subs.c.failing_since.is_(None)).values(failing_since=since))
        stored = (await conn.execute(sa.select(subs.c.failing_since).where(mine))).scalar()
        return stored or since

    async def disable(self, organization_id: int, subscription_id: int, reason: str, at: datetime) -> bool:
        conn = await self.uow.connection()
        result = await conn.execute(subs.update().where(
            subs.c.organization_id == organization_id, subs.c.id == subscription_id,
            subs.c.status == WebhookStatus.ACTIVE,
        ).values(status="disabled", disabled_reason=reason[:2000], disabled_at=at, updated_at=at))
        return bool(result.rowcount)


class SqlDeliveryRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def add_many(self, deliveries: Sequence[Delivery]) -> int:
        if not deliveries:
            return 0
        conn = await self.uow.connection()
        statement = insert(dlv, self.uow.dialect).on_conflict_do_nothing(
            index_elements=[dlv.c.event_id, dlv.c.subscription_id])
        result = await conn.execute(statement, [_delivery_values(d) for d in deliveries])
        return result.rowcount if result.rowcount is not None and result.rowcount >= 0 else len(deliveries)

    async def add(self, delivery: Delivery) -> Delivery:
        conn = await self.uow.connection()
        with constraint_errors():
            row = (await conn.execute(dlv.insert().returning(*_DLV_COLUMNS), _delivery_values(delivery))).one()
        return _row_to_delivery(row)

    async def get(self, organization_id: int, delivery_id: int) -> Delivery | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(*_DLV_COLUMNS).where(
            dlv.c.organization_id == organization_id, dlv.c.id == delivery_id))).first()
        return _row_to_delivery(row) if row else None

    async def claim_due(self, now: datetime, limit: int, worker: str, lease_until: datetime) -> list[ClaimedDelivery]:
        conn = await self.uow.connection()
        earlier = dlv.alias("earlier")
        waits_for_earlier = sa.exists().where(  # an earlier event of the same resource is still on its way
            earlier.c.subscription_id == dlv.c.subscription_id, earlier.c.resource == dlv.c.resource,
            earlier.c.status == DeliveryStatus.PENDING, earlier.c.event_id < dlv.c.event_id)
        due = (
            sa.select(dlv.c.id)
            .where(dlv.c.status == DeliveryStatus.PENDING, dlv.c.next_attempt_at <= now,
                   sa.or_(dlv.c.locked_until.is_(None), dlv.c.locked_until < now),
                   sa.or_(dlv.c.resource.is_(None), ~waits_for_earlier))
            .order_by(dlv.c.next_attempt_at, dlv.c.id)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        claimed = (await conn.execute(
            dlv.update().where(dlv.c.id.in_(due.scalar_subquery()))
            .values(locked_until=lease_until, locked_by=worker, attempts=dlv.c.attempts + 1)
            .returning(*_DLV_COLUMNS)
        )).all()
        if not claimed:
            return []
        deliveries = sorted((_row_to_delivery(r) for r in claimed), key=lambda d: (d.next_attempt_at, d.id))
        wanted = sorted({d.subscription_id for d in deliveries})
        rows = await conn.execute(sa.select(*_SUB_COLUMNS).where(subs.c.id.in_(wanted), subs.c.deleted_at.is_(None)))
        by_key = {(r.organization_id, r.id): _row_to_subscription(r) for r in rows}
        return [ClaimedDelivery(d, by_key.get((d.organization_id, d.subscription_id))) for d in deliveries]

    async def finish(self, worker: str, updates: Sequence[DeliveryUpdate]) -> None:
        if not updates:
            return
        conn = await self.uow.connection()
        statement = (
            dlv.update()
            .where(dlv.c.id == sa.bindparam("b_id"), dlv.c.locked_by == worker)
            .values(status=sa.bindparam("b_status"), next_attempt_at=sa.bindparam("b_next"),
                    updated_at=sa.bindparam("b_at"), locked_until=None, locked_by=None)
        )
        await conn.execute(statement, [
            {"b_id": u.delivery_id, "b_status": u.status, "b_next": u.next_attempt_at, "b_at": u.at}
            for u in updates
        ])

    async def release(self, worker: str, delivery_ids: Sequence[int]) -> None:
        if not delivery_ids:
            return
        conn = await self.uow.connection()
        await conn.execute(dlv.update().where(dlv.c.id.in_(list(delivery_ids)), dlv.c.locked_by == worker)
                           .values(locked_until=None, locked_by=None,
                                   attempts=sa.case((dlv.c.attempts > 0, dlv.c.attempts - 1), else_=0)))

    async def requeue(self, organization_id: int, delivery_id: int, at: datetime, *, auto_retry: bool) -> bool:
        conn = await self.uow.connection()
        result = await conn.execute(
            dlv.update()
            .where(dlv.c.organization_id == organization_id, dlv.c.id == delivery_id,
                   sa.or_(dlv.c.locked_until.is_(None), dlv.c.locked_until < at))
            .values(status="pending", next_attempt_at=at, auto_retry=auto_retry, updated_at=at,
                    locked_until=None, locked_by=None)
        )
        return bool(result.rowcount)

    async def add_attempts(self, attempts: Sequence[DeliveryAttempt]) -> None:
        if not attempts:
            return
        conn = await self.uow.connection()
        await conn.execute(att.insert(), [{
            "organization_id": a.organization_id, "subscription_id": a.subscription_id, "delivery_id": a.delivery_id,
            "event_type": a.event_type, "webhook_id": a.message_id, "attempt": a.attempt, "status": a.status,
            "response_status": a.response_status, "response_body": a.response_body, "duration_ms": a.duration_ms,
            "error": a.error, "created_at": a.created_at, "next_retry_at": a.next_retry_at,
        } for a in attempts])

    async def list_attempts(self, organization_id: int, subscription_id: int, filters: AttemptFilter,
                            page: PageRequest) -> Page[DeliveryAttempt]:
        conn = await self.uow.connection()
        where = [att.c.organization_id == organization_id, att.c.subscription_id == subscription_id]
        if filters.event:
            where.append(att.c.event_type == filters.event)
        if filters.status:
            where.append(att.c.status == filters.status)
        rows, total = await fetch_page(conn, list(att.c), sa.and_(*where), [att.c.id.desc()], page)
        return Page([_row_to_attempt(r) for r in rows], total, page.limit, page.offset)

    async def get_attempt(self, organization_id: int, subscription_id: int, attempt_id: int) -> DeliveryAttempt | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(att).where(
            att.c.organization_id == organization_id, att.c.subscription_id == subscription_id,
            att.c.id == attempt_id))).first()
        return _row_to_attempt(row) if row else None

    async def purge_finished(self, before: datetime) -> int:
        conn = await self.uow.connection()
        finished = sa.select(webhook_deliveries.c.id).where(
            webhook_deliveries.c.status != DeliveryStatus.PENDING,
            webhook_deliveries.c.updated_at < before).scalar_subquery()
        attempts = await conn.execute(webhook_attempts.delete().where(webhook_attempts.c.delivery_id.in_(finished)))
        await conn.execute(webhook_deliveries.delete().where(
            webhook_deliveries.c.status != DeliveryStatus.PENDING, webhook_deliveries.c.updated_at < before))
        return int(attempts.rowcount or 0)
