"""Housekeeping jobs. ``housekeeping.purge`` (every 10 minutes): purges expired idempotency records, ended
rate-limit windows, expired media-stream tokens, outbox events every consumer has processed once the retention window
(PARLEY_OUTBOX_RETENTION_DAYS) has passed, and the history kept for a while: failed jobs, finished webhook
deliveries with their log rows, ended trigger runs (PARLEY_FAILED_JOB_RETENTION_DAYS,
PARLEY_WEBHOOK_LOG_RETENTION_DAYS, PARLEY_TRIGGER_RUN_RETENTION_DAYS), and audit events older than 365 days.
``outbox.recheck`` (every 15 s): the outbox consumers' shared safety recheck
(``application/outbox.RecheckConsumers``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from dishka import AsyncContainer, Provider, Scope, provide, provide_all

from application import housekeeping as cases
from application.housekeeping import HistoryRetention, PurgeExpired, PurgeHistory
from application.jobs import JobKind, next_beat
from application.outbox import (
    RECHECK,
    OutboxPolicy,
    PurgeConsumedEvents,
    RecheckConsumers,
    RecheckConsumersCommand,
)
from application.ports.jobs import ClaimedJob
from application.ports.platform import Clock
from entrypoints.features import Feature, OutboxConsumerJobs
from entrypoints.settings import Settings
from entrypoints.units import ScopedUnits

KIND = cases.PURGE_JOB
RECHECK_KIND = "outbox.recheck"


@dataclass(frozen=True)
class HousekeepingSettings:
    ENV_PREFIX = ""

    outbox_retention_days: float = 7.0
    """PARLEY_OUTBOX_RETENTION_DAYS: how long an outbox event every consumer has processed is kept."""
    failed_job_retention_days: float = 30.0
    """PARLEY_FAILED_JOB_RETENTION_DAYS: how long a job that failed for the last time is kept (at least 1)."""
    webhook_log_retention_days: float = 30.0
    """PARLEY_WEBHOOK_LOG_RETENTION_DAYS: how long a finished webhook delivery and its log rows are kept (at
    least 1)."""
    trigger_run_retention_days: float = 30.0
    """PARLEY_TRIGGER_RUN_RETENTION_DAYS: how long an ended trigger run is kept (at least 1)."""


class HousekeepingProvider(Provider):
    scope = Scope.REQUEST
    cases = provide_all(PurgeExpired, PurgeConsumedEvents, PurgeHistory, RecheckConsumers)

    @provide(scope=Scope.APP)
    def outbox_policy(self, section: HousekeepingSettings) -> OutboxPolicy:
        return OutboxPolicy(retention=timedelta(days=section.outbox_retention_days))

    @provide(scope=Scope.APP)
    def history_retention(self, section: HousekeepingSettings) -> HistoryRetention:
        return HistoryRetention(timedelta(days=section.failed_job_retention_days),
                                timedelta(days=section.webhook_log_retention_days),
                                timedelta(days=section.trigger_run_retention_days))


def purge_job(container: AsyncContainer, settings: Settings) -> JobKind:
    return cases.purge_job(ScopedUnits(container))


async def recheck_once(container: AsyncContainer) -> list[str]:
    """One shared recheck, in one unit of work: the consumers that were behind (their jobs are due now)."""
    consumers = await container.get(OutboxConsumerJobs)
    return await ScopedUnits(container).execute(RecheckConsumers, RecheckConsumersCommand(consumers.pairs))


def recheck_job(container: AsyncContainer, settings: Settings) -> JobKind:
    """The consumers' shared safety recheck as a recurring job, on the 15 s beat (``next_beat``)."""

    async def recheck(job: ClaimedJob) -> datetime:
        await recheck_once(container)
        return next_beat((await container.get(Clock)).now(), RECHECK)

    return JobKind(RECHECK_KIND, recheck, recurring=True)


FEATURE = Feature(name="housekeeping", providers=(HousekeepingProvider,), jobs=[purge_job, recheck_job],
                  settings=HousekeepingSettings)
