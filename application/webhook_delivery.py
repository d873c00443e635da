"""The webhook worker: the dispatcher (outbox -> deliveries, the job ``webhooks.dispatch``) and the delivery pump
(claim, send, record; resident in every worker process), plus the one-batch steps tests and benchmarks drive.

Each step is a unit of work of its own (``Units``). Sending happens outside any transaction: a claim is a lease
(``locked_until``), so no database lock is held while waiting for a receiver, and a worker that dies (kill -9)
loses its leases when they expire; another worker then sends those deliveries again, with the same
``X-Webhook-Id``. Deliveries are their own leased queue (claimed with SKIP LOCKED, so every worker process sends
side by side); the pump keeps up to ``concurrency`` sends in flight, records their outcomes in batches, and sleeps
until a wake-up (a commit that dispatched or recorded events) or its poll interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from application.jobs import JobKind
from application.outbox import consumer_job
from application.ports.platform import Units
from application.ports.webhooks import ClaimedDelivery, DeliveryObserver
from application.webhooks import (
    ClaimDeliveries,
    ClaimDeliveriesCommand,
    DeliveryOutcome,
    DispatchOutbox,
    DispatchOutboxCommand,
    RecordDeliveryOutcomes,
    RecordDeliveryOutcomesCommand,
    ReleaseDeliveries,
    ReleaseDeliveriesCommand,
    SendDelivery,
    SendDeliveryCommand,
)
from domain.identity import persisted

log = logging.getLogger("parley.webhooks.worker")

DISPATCH_KIND = "webhooks.dispatch"
DELIVER = "webhooks.deliver"
"""The delivery pump's name (``parley worker --jobs`` / ``--exclude-jobs``)."""


@dataclass(frozen=True, slots=True)
class DeliveryPolicy:
    batch_size: int = 100
    """Deliveries claimed per claim (at most)."""
    concurrency: int = 100
    """Deliveries in flight at once per worker process."""
    lease_seconds: float = 60.0
    """How long a claim holds; must exceed the 10 s send timeout by a margin. A delivery whose worker died is
    claimed again once its lease has expired."""
    poll_seconds: float = 10.0
    """How often an idle pump looks for due deliveries when nothing woke it (a commit in this process, or on
    PostgreSQL in any process, wakes it at once)."""
    dispatch_batch: int = 500
    """Events fanned out per dispatcher transaction."""
    shutdown_grace_seconds: float = 12.0
    """On stop: how long in-flight sends may take to finish before they are released."""

    @property
    def lease(self) -> timedelta:
        return timedelta(seconds=self.lease_seconds)


async def dispatch_once(units: Units, limit: int = 500) -> int:
    """Fan out one batch of undispatched events in one unit of work; how many events were dispatched."""
    return await units.execute(DispatchOutbox, DispatchOutboxCommand(limit))


def dispatch_job(units: Units, policy: DeliveryPolicy) -> JobKind:
    """The dispatcher as the outbox consumer ``webhooks`` (``application/outbox.consumer_job``); a dispatch that
    created deliveries wakes the delivery pumps."""
    return consumer_job(DISPATCH_KIND, units, DispatchOutbox, DispatchOutboxCommand, policy.dispatch_batch)


class DeliverySteps:
    """The pump's transactions, each a unit of work of its own, for one worker (the lease owner)."""

    def __init__(self, units: Units, worker: str) -> None:
        self.units, self.worker = units, worker

    async def claim(self, limit: int, lease: timedelta) -> list[ClaimedDelivery]:
        return await self.units.execute(ClaimDeliveries, ClaimDeliveriesCommand(self.worker, limit, lease))

    async def record(self, outcomes: Sequence[DeliveryOutcome]) -> None:
        await self.units.execute(RecordDeliveryOutcomes, RecordDeliveryOutcomesCommand(self.worker, outcomes))

    async def release(self, delivery_ids: Sequence[int]) -> None:
        await self.units.execute(ReleaseDeliveries, ReleaseDeliveriesCommand(self.worker, delivery_ids))


@dataclass(frozen=True, slots=True)
class DeliverDueCommand:
    worker: str


class DeliverDue:
    """One batch: claim the deliveries due now, send them concurrently, record the outcomes; how many were handled
    (tests and benchmarks)."""

    def __init__(self, units: Units, sender: SendDelivery, policy: DeliveryPolicy) -> None:
        self.units, self.sender, self.policy = units, sender, policy

    async def execute(self, command: DeliverDueCommand) -> int:
        steps = DeliverySteps(self.units, command.worker)
        claimed = await steps.claim(self.policy.batch_size, self.policy.lease)
        if not claimed:
            return 0
        gate = asyncio.Semaphore(self.policy.concurrency)

        async def send(item: ClaimedDelivery) -> DeliveryOutcome:
            async with gate:
                return await self.sender.execute(SendDeliveryCommand(item))

        outcomes = await asyncio.gather(*(send(item) for item in claimed))
        await steps.record(outcomes)
        return len(outcomes)


async def drain(units: Units, deliver: DeliverDue, worker: str, *, rounds: int = 20) -> int:
    """Dispatch and deliver until nothing is due now (retries scheduled later stay pending); how many deliveries
    were handled (tests)."""
    handled = 0
    for _ in range(rounds):
        dispatched = await dispatch_once(units)
        sent = await deliver.execute(DeliverDueCommand(worker))
        handled += sent
        if not dispatched and not sent:
            break
    return handled


async def _wait(events: Sequence[asyncio.Event], timeout: float) -> None:  # noqa: ASYNC109
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()


@dataclass(frozen=True, slots=True)
class PumpDeliveriesCommand:
    worker: str
    """The lease owner's name."""
    stop: asyncio.Event
    wake: asyncio.Event
    """Set when work was committed (the pump claims at once)."""


class PumpDeliveries:
    """The delivery pump, until ``stop``: keeps up to ``concurrency`` deliveries in flight and records outcomes in
    batches. Idle, it sleeps until ``wake`` or the poll interval. On stop it claims nothing new, lets in-flight sends
    finish within the grace period and releases the leases of the others."""

    def __init__(self, units: Units, sender: SendDelivery, policy: DeliveryPolicy,
                 observer: DeliveryObserver | None = None) -> None:
        self.units, self.sender, self.policy, self.observer = units, sender, policy, observer

    async def execute(self, command: PumpDeliveriesCommand) -> None:
        options, stop, wake = self.policy, command.stop, command.wake
        steps = DeliverySteps(self.units, command.worker)
        loop = asyncio.get_running_loop()
        in_flight: dict[asyncio.Task[DeliveryOutcome], ClaimedDelivery] = {}
        next_claim = 0.0
        stopping_since: float | None = None
        try:
            while True:
                if stop.is_set():
                    stopping_since = stopping_since or loop.time()
                    if not in_flight or loop.time() - stopping_since > options.shutdown_grace_seconds:
                        break
                else:
                    free = options.concurrency - len(in_flight)
                    if free > 0 and (wake.is_set() or loop.time() >= next_claim):
                        wake.clear()
                        wanted = min(free, options.batch_size)
                        try:
                            claimed = await steps.claim(wanted, options.lease)
                        except Exception:
                            log.exception("claiming webhook deliveries failed")
                            claimed = []
                        for item in claimed:
                            in_flight[asyncio.create_task(self.sender.execute(SendDeliveryCommand(item)))] = item
                        # a short batch means nothing more is due: look again after the poll interval
                        next_claim = 0.0 if len(claimed) == wanted else loop.time() + options.poll_seconds
                if not in_flight:
                    await _wait([wake, stop], max(0.0, next_claim - loop.time()) or options.poll_seconds)
                    continue
                done, _ = await asyncio.wait(in_flight, timeout=options.poll_seconds,
                                             return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    continue
                await asyncio.sleep(0)  # let sends that finish in the same instant join this batch
                done = {t for t in in_flight if t.done()}
                outcomes: list[DeliveryOutcome] = []
                for task in done:
                    item = in_flight.pop(task)
                    try:
                        outcomes.append(task.result())
                    except Exception:
                        log.exception("webhook delivery %s crashed; its lease will expire", item.delivery.message_id)
                if outcomes:
                    try:
                        await steps.record(outcomes)
                        if self.observer is not None:
                            for outcome in outcomes:
                                self.observer.delivered(outcome.verdict.delivery_status)
                        next_claim = 0.0  # a finished delivery may release the next event of its resource
                    except Exception:
                        log.exception("recording %d webhook outcomes failed; they will be sent again", len(outcomes))
        finally:
            if in_flight:
                for task in in_flight:
                    task.cancel()
                ids = [persisted(item.delivery.id) for item in in_flight.values()]
                with contextlib.suppress(Exception):
                    await asyncio.shield(steps.release(ids))
