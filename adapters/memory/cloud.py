"""The cloud status in memory: worker heartbeats in a table, the outbox backlog from the consumers' cursors
(``adapters/memory/outbox.py``) and failing subscriptions (``adapters/memory/webhooks.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from adapters.memory.outbox import CURSORS
from adapters.memory.store import InMemoryUnitOfWork
from adapters.memory.webhooks import SUBS
from application.ports.cloud import OutboxBacklog
from domain.webhooks import WebhookStatus

HEARTBEATS = "worker_heartbeats"


class InMemoryHeartbeats:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def beat(self, process: str, at: datetime) -> None:
        (await self.uow.tables())[HEARTBEATS][process] = at

    async def latest(self) -> datetime | None:
        return max((await self.uow.tables())[HEARTBEATS].values(), default=None)

    async def forget(self, before: datetime) -> int:
        rows = (await self.uow.tables())[HEARTBEATS]
        gone = [process for process, at in rows.items() if at < before]
        for process in gone:
            del rows[process]
        return len(gone)


class InMemoryPlatformHealth:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def ping(self) -> None:
        await self.uow.tables()

    async def outbox_backlog(self, consumers: Sequence[str]) -> OutboxBacklog:
        if not consumers:
            return OutboxBacklog(0, None)
        cursors = (await self.uow.tables())[CURSORS]
        horizon = min(cursors.get(name, 0) for name in consumers)
        pending = [(event_id, at) for event_id, _, at in self.uow.store.outbox if event_id > horizon]
        return OutboxBacklog(len(pending), pending[0][1] if pending else None)

    async def failing_subscriptions(self, organization_id: int) -> int:
        rows = (await self.uow.tables())[SUBS]
        return sum(1 for sub, deleted_at in rows.values()
                   if deleted_at is None and sub.organization_id == organization_id
                   and (sub.status == WebhookStatus.DISABLED
                        or (sub.status == WebhookStatus.ACTIVE and sub.failing_since is not None)))
