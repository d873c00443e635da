"""Cloud-connectivity status: every component measured when asked (a database round trip, the worker's
heartbeat, the outbox backlog, the telephony provider's health check, the organization's failing webhook
subscriptions); the overall status is the worst component's. Ages and latencies are measured with the Clock
port, so tests move a manual clock.

The worker's heartbeat is a recurring job (``RecordHeartbeat``): the worker process that runs it records its
name and the time, and forgets processes silent for a day.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from application.context import Actor
from application.jobs import JobKind, next_beat
from application.outbox import CONSUMERS
from application.ports.cloud import Heartbeats, PlatformHealth
from application.ports.jobs import ClaimedJob
from application.ports.platform import Clock, Units
from application.ports.telephony import Telephony
from domain.cloud import ComponentStatus, by_age, worst

log = logging.getLogger("parley.cloud")

FORGET_AFTER = timedelta(days=1)
"""A worker process silent this long is forgotten (its heartbeat row deleted)."""


@dataclass(frozen=True, slots=True)
class StatusThresholds:
    """When a component stops being operational (settings section PARLEY_CLOUD_STATUS_*)."""

    database_degraded_ms: float = 250.0
    worker_degraded_seconds: float = 60.0
    worker_down_seconds: float = 300.0
    outbox_degraded_seconds: float = 60.0
    outbox_down_seconds: float = 900.0
    outbox_degraded_pending: int = 1000


@dataclass(frozen=True, slots=True)
class DatabaseComponent:
    status: ComponentStatus
    latency_ms: float | None


@dataclass(frozen=True, slots=True)
class WorkerComponent:
    status: ComponentStatus
    last_heartbeat_at: datetime | None


@dataclass(frozen=True, slots=True)
class OutboxComponent:
    status: ComponentStatus
    pending: int | None
    oldest_pending_seconds: float | None


@dataclass(frozen=True, slots=True)
class TelephonyComponent:
    status: ComponentStatus
    provider: str | None


@dataclass(frozen=True, slots=True)
class WebhooksComponent:
    status: ComponentStatus
    failing_subscriptions: int | None


@dataclass(frozen=True, slots=True)
class CloudStatus:
    status: ComponentStatus
    checked_at: datetime
    database: DatabaseComponent
    worker: WorkerComponent
    outbox: OutboxComponent
    telephony: TelephonyComponent
    webhooks: WebhooksComponent


@dataclass(frozen=True, slots=True)
class GetCloudStatusCommand:
    actor: Actor


class GetCloudStatus:
    """Measure every component now. A component whose measurement fails is down (the others are still measured)."""

    def __init__(self, health: PlatformHealth, heartbeats: Heartbeats, telephony: Telephony, clock: Clock,
                 thresholds: StatusThresholds) -> None:
        self.health, self.heartbeats, self.telephony = health, heartbeats, telephony
        self.clock, self.thresholds = clock, thresholds

    async def execute(self, command: GetCloudStatusCommand) -> CloudStatus:
        checked_at = self.clock.now()
        database = await self._database()
        worker = await self._worker()
        outbox = await self._outbox()
        telephony = await self._telephony()
        webhooks = await self._webhooks(command.actor.organization_id)
        overall = worst(c.status for c in (database, worker, outbox, telephony, webhooks))
        return CloudStatus(overall, checked_at, database, worker, outbox, telephony, webhooks)

    def _seconds_since(self, then: datetime) -> float:
        return max(0.0, (self.clock.now() - then).total_seconds())

    async def _database(self) -> DatabaseComponent:
        started = self.clock.now()
        try:
            await self.health.ping()
        except Exception:
            log.exception("cloud status: the database round trip failed")
            return DatabaseComponent(ComponentStatus.DOWN, None)
        latency = round(self._seconds_since(started) * 1000, 3)
        slow = latency > self.thresholds.database_degraded_ms
        return DatabaseComponent(ComponentStatus.DEGRADED if slow else ComponentStatus.OPERATIONAL, latency)

    async def _worker(self) -> WorkerComponent:
        try:
            last = await self.heartbeats.latest()
        except Exception:
            log.exception("cloud status: reading the worker's heartbeat failed")
            return WorkerComponent(ComponentStatus.DOWN, None)
        age = None if last is None else self._seconds_since(last)
        t = self.thresholds
        return WorkerComponent(by_age(age, t.worker_degraded_seconds, t.worker_down_seconds), last)

    async def _outbox(self) -> OutboxComponent:
        try:
            backlog = await self.health.outbox_backlog(CONSUMERS)
        except Exception:
            log.exception("cloud status: reading the outbox backlog failed")
            return OutboxComponent(ComponentStatus.DOWN, None, None)
        age = 0.0 if backlog.oldest_pending_at is None else round(self._seconds_since(backlog.oldest_pending_at), 3)
        t = self.thresholds
        status = by_age(age, t.outbox_degraded_seconds, t.outbox_down_seconds)
        if backlog.pending > t.outbox_degraded_pending:
            status = worst((status, ComponentStatus.DEGRADED))
        return OutboxComponent(status, backlog.pending, age)

    async def _telephony(self) -> TelephonyComponent:
        try:
            health = await self.telephony.health()
        except Exception:
            log.exception("cloud status: the telephony health check failed")
            return TelephonyComponent(ComponentStatus.DOWN, None)
        return TelephonyComponent(ComponentStatus.OPERATIONAL if health.ok else ComponentStatus.DOWN, health.provider)

    async def _webhooks(self, organization_id: int) -> WebhooksComponent:
        try:
            failing = await self.health.failing_subscriptions(organization_id)
        except Exception:
            log.exception("cloud status: counting failing webhook subscriptions failed")
            return WebhooksComponent(ComponentStatus.DOWN, None)
        return WebhooksComponent(ComponentStatus.DEGRADED if failing else ComponentStatus.OPERATIONAL, failing)


@dataclass(frozen=True, slots=True)
class RecordHeartbeatCommand:
    process: str
    """The worker process's name (host:pid:random)."""


class RecordHeartbeat:
    """The worker is alive: record ``process``'s heartbeat now, and forget processes silent for a day."""

    def __init__(self, heartbeats: Heartbeats, clock: Clock) -> None:
        self.heartbeats, self.clock = heartbeats, clock

    async def execute(self, command: RecordHeartbeatCommand) -> datetime:
        now = self.clock.now()
        await self.heartbeats.beat(command.process, now)
        await self.heartbeats.forget(now - FORGET_AFTER)
        return now


HEARTBEAT_JOB = "cloud.heartbeat"


def heartbeat_job(units: Units, period: timedelta) -> JobKind:
    """``cloud.heartbeat``: the worker process running it (the job's lease owner) records its heartbeat in a unit of
    work, then it is due again on the next beat of ``period`` (with the other rechecks, ``next_beat``)."""

    async def beat(job: ClaimedJob) -> datetime:
        return next_beat(await units.execute(RecordHeartbeat, RecordHeartbeatCommand(job.lease_owner)), period)

    return JobKind(HEARTBEAT_JOB, beat, recurring=True, backoff_max=period)
