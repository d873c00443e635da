"""Housekeeping job (every 10 minutes): purges expired idempotency records, ended rate-limit windows, and
outbox events every consumer has processed once the retention window (PARLEY_OUTBOX_RETENTION_DAYS) has
passed."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from dishka import AsyncContainer, Provider, Scope, provide, provide_all

from application.housekeeping import PurgeExpired, PurgeExpiredCommand
from application.jobs import JobKind
from application.outbox import OutboxPolicy, PurgeConsumedEvents, PurgeConsumedEventsCommand
from application.ports.jobs import ClaimedJob
from application.ports.platform import Clock
from entrypoints.features import Feature
from entrypoints.settings import Settings
from entrypoints.worker import in_unit

log = logging.getLogger("parley.housekeeping")
INTERVAL = timedelta(minutes=10)
KIND = "housekeeping.purge"


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
    """One purge, in one unit of work."""
    purged, events = await in_unit(container, _execute)
    if purged.idempotency_records or purged.rate_limit_windows or events:
        log.info("purged %d idempotency records, %d rate-limit windows and %d outbox events",
                 purged.idempotency_records, purged.rate_limit_windows, events)


async def _execute(unit: Any) -> tuple[Any, int]:
    purged = await (await unit.get(PurgeExpired)).execute(PurgeExpiredCommand())
    events = await (await unit.get(PurgeConsumedEvents)).execute(PurgeConsumedEventsCommand())
    return purged, events


def purge_job(container: AsyncContainer, settings: Settings) -> JobKind:
    async def purge(job: ClaimedJob) -> datetime:
        await purge_once(container)
        return (await container.get(Clock)).now() + INTERVAL

    return JobKind(KIND, purge, recurring=True)


FEATURE = Feature(name="housekeeping", providers=(HousekeepingProvider,), jobs=[purge_job],
                  settings=OutboxSettings)
