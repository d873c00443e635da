"""Housekeeping job: purges expired idempotency records, ended rate-limit windows, and outbox events
every consumer has processed once the retention window (PARLEY_OUTBOX_RETENTION_DAYS) has passed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import timedelta

from dishka import AsyncContainer, Provider, Scope, provide, provide_all

from application.housekeeping import PurgeExpired
from application.outbox import OutboxPolicy, PurgeConsumedEvents
from application.ports.platform import UnitOfWork
from entrypoints.features import Feature
from entrypoints.settings import Settings

log = logging.getLogger("parley.housekeeping")
INTERVAL_SECONDS = 600.0


@dataclass(frozen=True)
class OutboxSettings:
    ENV_PREFIX = "OUTBOX_"

    retention_days: float = 7.0
    """PARLEY_OUTBOX_RETENTION_DAYS: how long an outbox event every consumer has processed is kept."""


class HousekeepingProvider(Provider):
    scope = Scope.REQUEST
    cases = provide_all(PurgeExpired, PurgeConsumedEvents)

    @provide(scope=Scope.APP)
    def outbox_policy(self, section: OutboxSettings) -> OutboxPolicy:
        return OutboxPolicy(retention=timedelta(days=section.retention_days))


async def purge_once(container: AsyncContainer) -> None:
    async with container() as request:
        purged = await (await request.get(PurgeExpired)).execute()
        events = await (await request.get(PurgeConsumedEvents)).execute()
        await (await request.get(UnitOfWork)).commit()
    if purged.idempotency_records or purged.rate_limit_windows or events:
        log.info("purged %d idempotency records, %d rate-limit windows and %d outbox events",
                 purged.idempotency_records, purged.rate_limit_windows, events)


async def housekeeping(container: AsyncContainer, settings: Settings, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await purge_once(container)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=INTERVAL_SECONDS)


FEATURE = Feature(name="housekeeping", providers=(HousekeepingProvider,), jobs=[housekeeping],
                  settings=OutboxSettings)
