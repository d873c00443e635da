"""Housekeeping jobs. ``housekeeping.purge`` (every 10 minutes): purges expired idempotency records, ended
rate-limit windows, and outbox events every consumer has processed once the retention window
(PARLEY_OUTBOX_RETENTION_DAYS) has passed. ``outbox.recheck`` (every 15 s): the outbox consumers' shared safety
recheck (``application/outbox.RecheckConsumers``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from dishka import AsyncContainer, Provider, Scope, provide, provide_all

from application.housekeeping import PurgeExpired, PurgeExpiredCommand
from application.jobs import JobKind, next_beat
from application.outbox import (
    RECHECK,
    OutboxPolicy,
    PurgeConsumedEvents,
    PurgeConsumedEventsCommand,
    RecheckConsumers,
    RecheckConsumersCommand,
)
from application.ports.jobs import ClaimedJob
from application.ports.platform import Clock
from entrypoints.features import Feature, all_features
from entrypoints.settings import Settings
from entrypoints.worker import in_unit

log = logging.getLogger("parley.housekeeping")
INTERVAL = timedelta(minutes=10)
KIND = "housekeeping.purge"
RECHECK_KIND = "outbox.recheck"


@dataclass(frozen=True)
class OutboxSettings:
    ENV_PREFIX = "OUTBOX_"

    retention_days: float = 7.0
    """PARLEY_OUTBOX_RETENTION_DAYS: how long an outbox event every consumer has processed is kept."""


class HousekeepingProvider(Provider):
    scope = Scope.REQUEST
    cases = provide_all(PurgeExpired, PurgeConsumedEvents, RecheckConsumers)

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


def consumer_jobs() -> tuple[tuple[str, str], ...]:
    """(consumer, job kind) of every installed feature's outbox consumers."""
    return tuple(pair for feature in all_features() for pair in sorted(feature.outbox_consumers.items()))


async def recheck_once(container: AsyncContainer) -> list[str]:
    """One shared recheck, in one unit of work: the consumers that were behind (their jobs are due now)."""
    command = RecheckConsumersCommand(consumer_jobs())
    return await in_unit(container, lambda unit: _recheck(unit, command))  # type: ignore[no-any-return]


async def _recheck(unit: Any, command: RecheckConsumersCommand) -> list[str]:
    return await (await unit.get(RecheckConsumers)).execute(command)  # type: ignore[no-any-return]


def recheck_job(container: AsyncContainer, settings: Settings) -> JobKind:
    """The consumers' shared safety recheck as a recurring job, on the 15 s beat (``next_beat``)."""

    async def recheck(job: ClaimedJob) -> datetime:
        await recheck_once(container)
        return next_beat((await container.get(Clock)).now(), RECHECK)

    return JobKind(RECHECK_KIND, recheck, recurring=True)


FEATURE = Feature(name="housekeeping", providers=(HousekeepingProvider,), jobs=[purge_job, recheck_job],
                  settings=OutboxSettings)
