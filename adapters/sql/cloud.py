"""The cloud status on SQL: worker heartbeats (``worker_heartbeats``), a round trip, the outbox backlog from the
consumers' cursors, and the organization's failing webhook subscriptions."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa

from adapters.sql.cloud_tables import worker_heartbeats
from adapters.sql.dialect import insert
from adapters.sql.tables import outbox_cursors, outbox_events
from adapters.sql.uow import SqlUnitOfWork
from adapters.sql.webhooks_tables import webhook_subscriptions
from application.ports.cloud import OutboxBacklog
from domain.webhooks import WebhookStatus


class SqlHeartbeats:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def beat(self, process: str, at: datetime) -> None:
        conn = await self.uow.connection()
        upsert = insert(worker_heartbeats, self.uow.dialect).values(process=process, last_heartbeat_at=at)
        await conn.execute(upsert.on_conflict_do_update(index_elements=[worker_heartbeats.c.process],
                                                        set_={"last_heartbeat_at": at}))

    async def latest(self) -> datetime | None:
        conn = await self.uow.connection()
        return (await conn.execute(sa.select(sa.func.max(worker_heartbeats.c.last_heartbeat_at)))).scalar()

    async def forget(self, before: datetime) -> int:
        conn = await self.uow.connection()
        result = await conn.execute(worker_heartbeats.delete().where(worker_heartbeats.c.last_heartbeat_at < before))
        return int(result.rowcount or 0)


class SqlPlatformHealth:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def ping(self) -> None:
        conn = await self.uow.connection()
        await conn.execute(sa.text("SELECT 1"))

    async def outbox_backlog(self, consumers: Sequence[str]) -> OutboxBacklog:
        if not consumers:
            return OutboxBacklog(0, None)
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(outbox_cursors.c.consumer, outbox_cursors.c.last_id)
                                  .where(outbox_cursors.c.consumer.in_(list(consumers))))
        cursors = {row.consumer: int(row.last_id) for row in rows}
        horizon = min(cursors.get(name, 0) for name in consumers)
        pending = outbox_events.c.id > horizon
        count = (await conn.execute(sa.select(sa.func.count()).select_from(outbox_events).where(pending))).scalar()
        oldest = (await conn.execute(sa.select(outbox_events.c.created_at).where(pending)
                                     .order_by(outbox_events.c.id).limit(1))).scalar()
        return OutboxBacklog(int(count or 0), oldest)

    async def failing_subscriptions(self, organization_id: int) -> int:
        conn = await self.uow.connection()
        subs = webhook_subscriptions.c
        failing = sa.or_(subs.status == WebhookStatus.DISABLED,
                         sa.and_(subs.status == WebhookStatus.ACTIVE, subs.failing_since.is_not(None)))
        query = (sa.select(sa.func.count()).select_from(webhook_subscriptions)
                 .where(subs.organization_id == organization_id, subs.deleted_at.is_(None), failing))
        return int((await conn.execute(query)).scalar() or 0)
