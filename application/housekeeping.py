"""Housekeeping: forget idempotency records past their window, ended rate-limit windows and expired media-stream
tokens (used or not); and the history
nobody needs forever, after its retention window: jobs that failed for the last time, finished webhook deliveries
with their log rows, and ended trigger runs."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from application.audit import PurgeAuditEvents, PurgeAuditEventsCommand
from application.jobs import JobKind, clock_now
from application.outbox import PurgeConsumedEvents, PurgeConsumedEventsCommand
from application.ports.accounts import IdempotencyStore, RateLimiter
from application.ports.jobs import ClaimedJob, JobQueue
from application.ports.media import MediaStreamTokens
from application.ports.platform import Clock, Unit, Units
from application.ports.triggers import TriggerRepository
from application.ports.webhooks import DeliveryRepository
from domain.idempotency import REPLAY_WINDOW

log = logging.getLogger("parley.housekeeping")


@dataclass(frozen=True, slots=True)
class Purged:
    idempotency_records: int
    rate_limit_windows: int
    media_stream_tokens: int = 0


@dataclass(frozen=True, slots=True)
class PurgeExpiredCommand:
    """Purge what has expired by now (the clock's)."""


class PurgeExpired:
    def __init__(self, store: IdempotencyStore, limiter: RateLimiter, tokens: MediaStreamTokens,
                 clock: Clock) -> None:
        self.store, self.limiter, self.tokens, self.clock = store, limiter, tokens, clock

    async def execute(self, command: PurgeExpiredCommand) -> Purged:
        now = self.clock.now()
        records = await self.store.purge_expired(now - REPLAY_WINDOW)
        windows = await self.limiter.purge(now)
        return Purged(records, windows, await self.tokens.purge(now))


MIN_RETENTION = timedelta(days=1)
"""No history is purged sooner: a webhook delivery retries for about 28 hours, and an operator looks at a failed
job the next day."""


@dataclass(frozen=True, slots=True)
class HistoryRetention:
    """How long each kind of history is kept once it ended (each at least ``MIN_RETENTION``)."""

    failed_jobs: timedelta = timedelta(days=30)
    webhook_logs: timedelta = timedelta(days=30)
    trigger_runs: timedelta = timedelta(days=30)

    def __post_init__(self) -> None:
        for name in ("failed_jobs", "webhook_logs", "trigger_runs"):
            object.__setattr__(self, name, max(MIN_RETENTION, getattr(self, name)))


@dataclass(frozen=True, slots=True)
class PurgedHistory:
    failed_jobs: int
    webhook_logs: int
    trigger_runs: int


@dataclass(frozen=True, slots=True)
class PurgeHistoryCommand:
    """Purge the history whose retention window ended by now (the clock's)."""


class PurgeHistory:
    def __init__(self, jobs: JobQueue, deliveries: DeliveryRepository, triggers: TriggerRepository, clock: Clock,
                 retention: HistoryRetention) -> None:
        self.jobs, self.deliveries, self.triggers, self.clock = jobs, deliveries, triggers, clock
        self.retention = retention

    async def execute(self, command: PurgeHistoryCommand) -> PurgedHistory:
        now, keep = self.clock.now(), self.retention
        return PurgedHistory(await self.jobs.purge_failed(now - keep.failed_jobs),
                             await self.deliveries.purge_finished(now - keep.webhook_logs),
                             await self.triggers.purge_runs(now - keep.trigger_runs))


PURGE_JOB = "housekeeping.purge"
PURGE_INTERVAL = timedelta(minutes=10)


async def purge_once(units: Units) -> None:
    """One purge (``PurgeExpired``, the outbox's ``PurgeConsumedEvents``, ``PurgeHistory``, ``PurgeAuditEvents``)
    in one unit of work, logged when it purged anything."""

    async def purge(unit: Unit) -> tuple[Purged, int, PurgedHistory, int]:
        return (await (await unit.get(PurgeExpired)).execute(PurgeExpiredCommand()),
                await (await unit.get(PurgeConsumedEvents)).execute(PurgeConsumedEventsCommand()),
                await (await unit.get(PurgeHistory)).execute(PurgeHistoryCommand()),
                await (await unit.get(PurgeAuditEvents)).execute(PurgeAuditEventsCommand()))

    purged, events, history, audit = await units.run(purge)
    if purged.idempotency_records or purged.rate_limit_windows or purged.media_stream_tokens or events:
        log.info("purged %d idempotency records, %d rate-limit windows, %d media-stream tokens and %d outbox events",
                 purged.idempotency_records, purged.rate_limit_windows, purged.media_stream_tokens, events)
    if history.failed_jobs or history.webhook_logs or history.trigger_runs:
        log.info("purged %d failed jobs, %d webhook delivery log rows and %d trigger runs",
                 history.failed_jobs, history.webhook_logs, history.trigger_runs)
    if audit:
        log.info("purged %d audit events past their retention", audit)


def purge_job(units: Units) -> JobKind:
    """``housekeeping.purge``: a purge, then due again after ``PURGE_INTERVAL``."""

    async def purge(job: ClaimedJob) -> datetime:
        await purge_once(units)
        return await clock_now(units) + PURGE_INTERVAL

    return JobKind(PURGE_JOB, purge, recurring=True)
