"""The webhook worker: the dispatcher (outbox -> deliveries, the job kind ``webhooks.dispatch``) and the
delivery pump (claim, send, record; resident in every worker process), plus one-pass functions that tests and
benchmarks drive deterministically.

Each unit of work opens its own request scope and commits it. Sending happens outside any
transaction: a claim is a lease (``locked_until``), so no database lock is held while waiting for
a receiver, and a worker that dies loses its leases when they expire. Deliveries are their own leased queue
(claimed with SKIP LOCKED, so every worker process sends side by side); the pump sleeps until a wake-up
(a commit that dispatched or recorded events) or its safety poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from dishka import AsyncContainer

from application.jobs import JobKind, JobRunner
from application.outbox import CONSUMER_FALLBACK
from application.ports.jobs import ClaimedJob
from application.ports.platform import Clock, Random
from application.ports.webhooks import ClaimedDelivery
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
from entrypoints.observability import WEBHOOK_DELIVERIES, JobMetrics
from entrypoints.runtime import JOB_WAKE_UPS
from entrypoints.settings import Settings
from entrypoints.worker import ContainerUnits, in_unit, listening

DISPATCH_KIND = "webhooks.dispatch"

log = logging.getLogger("parley.webhooks.worker")


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    batch_size: int = 100
    """Deliveries claimed per claim (at most)."""
    concurrency: int = 100
    """Deliveries in flight at once per worker process."""
    lease_seconds: float = 60.0
    """How long a claim holds; must exceed the 10 s send timeout by a margin. A delivery whose
    worker died is claimed again once its lease has expired."""
    poll_seconds: float = 10.0
    """How often an idle worker looks for new events and due retries when nothing woke it (a commit in this
    process, or on PostgreSQL in any process, wakes it at once)."""
    dispatch_batch: int = 500
    shutdown_grace_seconds: float = 12.0
    """On stop: how long in-flight sends may take to finish before they are released."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> WorkerOptions:
        env = os.environ if environ is None else environ
        base = cls()

        def number(name: str, default: float) -> float:
            raw = env.get(f"PARLEY_WEBHOOK_{name}")
            return float(raw) if raw else default

        return replace(
            base,
            batch_size=int(number("BATCH_SIZE", base.batch_size)),
            concurrency=int(number("CONCURRENCY", base.concurrency)),
            lease_seconds=number("LEASE_SECONDS", base.lease_seconds),
            poll_seconds=number("POLL_SECONDS", base.poll_seconds),
        )


def worker_name(random: Random | None = None) -> str:
    suffix = random.hex(4) if random is not None else os.urandom(4).hex()
    return f"{socket.gethostname()[:32]}:{os.getpid()}:{suffix}"


# -- units of work ---------------------------------------------------------------------------


async def dispatch_once(container: AsyncContainer, settings: Settings | None = None, *, limit: int = 500) -> int:
    """Fan out one batch of undispatched events; returns how many events were dispatched."""
    return await in_unit(container, lambda unit: _run(unit, DispatchOutbox, DispatchOutboxCommand(limit)))


async def claim(container: AsyncContainer, worker: str, limit: int, lease: timedelta) -> list[ClaimedDelivery]:
    command = ClaimDeliveriesCommand(worker, limit, lease)
    return await in_unit(container, lambda unit: _run(unit, ClaimDeliveries, command))


async def record(container: AsyncContainer, worker: str, outcomes: Sequence[DeliveryOutcome]) -> None:
    command = RecordDeliveryOutcomesCommand(worker, outcomes)
    await in_unit(container, lambda unit: _run(unit, RecordDeliveryOutcomes, command))


async def release(container: AsyncContainer, worker: str, delivery_ids: Sequence[int]) -> None:
    await in_unit(container, lambda unit: _run(unit, ReleaseDeliveries, ReleaseDeliveriesCommand(worker, delivery_ids)))


async def _run(unit: Any, case: type[Any], command: Any) -> Any:
    return await (await unit.get(case)).execute(command)


async def deliver_once(container: AsyncContainer, settings: Settings | None = None,
                       options: WorkerOptions | None = None) -> int:
    """Claim the deliveries due now (one batch), send them concurrently, record the outcomes.
    Returns how many deliveries were handled."""
    options = options or WorkerOptions()
    worker = worker_name()
    claimed = await claim(container, worker, options.batch_size, timedelta(seconds=options.lease_seconds))
    if not claimed:
        return 0
    sender = await container.get(SendDelivery)
    gate = asyncio.Semaphore(options.concurrency)

    async def send(item: ClaimedDelivery) -> DeliveryOutcome:
        async with gate:
            return await sender.execute(SendDeliveryCommand(item))

    outcomes = await asyncio.gather(*(send(item) for item in claimed))
    await record(container, worker, outcomes)
    return len(outcomes)


async def drain(container: AsyncContainer, settings: Settings | None = None, options: WorkerOptions | None = None,
                *, rounds: int = 20) -> int:
    """Dispatch and deliver until nothing is due now (retries scheduled later stay pending).
    Returns the number of deliveries handled."""
    handled = 0
    for _ in range(rounds):
        dispatched = await dispatch_once(container, settings)
        sent = await deliver_once(container, settings, options)
        handled += sent
        if not dispatched and not sent:
            break
    return handled


# -- loops -----------------------------------------------------------------------------------


async def _wait(events: Sequence[asyncio.Event], timeout: float) -> None:  # noqa: ASYNC109
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()


def dispatch_kind(container: AsyncContainer, options: WorkerOptions) -> JobKind:
    """The dispatcher as a recurring job: one-pass batches (``dispatch_once``) until the outbox is drained, then
    due again after CONSUMER_FALLBACK; a commit that recorded events wakes it at once, the shared recheck
    (``outbox.recheck``) finds the rest, and a dispatch that created deliveries wakes the delivery pumps."""

    async def dispatch(job: ClaimedJob) -> datetime:
        while await dispatch_once(container, limit=options.dispatch_batch) >= options.dispatch_batch:
            pass
        return (await container.get(Clock)).now() + CONSUMER_FALLBACK

    return JobKind(DISPATCH_KIND, dispatch, on_wake=True, recurring=True)


async def delivery_loop(container: AsyncContainer, settings: Settings, stop: asyncio.Event, options: WorkerOptions,
                        wake: asyncio.Event) -> None:
    """Keeps up to ``options.concurrency`` deliveries in flight; records outcomes in batches. Idle, it sleeps
    until ``wake`` (work was committed) or the poll interval."""
    worker = worker_name()
    lease = timedelta(seconds=options.lease_seconds)
    sender = await container.get(SendDelivery)
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
                        claimed = await claim(container, worker, wanted, lease)
                    except Exception:
                        log.exception("claiming webhook deliveries failed")
                        claimed = []
                    for item in claimed:
                        in_flight[asyncio.create_task(sender.execute(SendDeliveryCommand(item)))] = item
                    # a short batch means nothing more is due: look again after the poll interval
                    next_claim = 0.0 if len(claimed) == wanted else loop.time() + options.poll_seconds
            if not in_flight:
                await _wait([wake, stop], max(0.0, next_claim - loop.time()) or options.poll_seconds)
                continue
            done, _ = await asyncio.wait(in_flight, timeout=options.poll_seconds, return_when=asyncio.FIRST_COMPLETED)
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
                    await record(container, worker, outcomes)
                    for outcome in outcomes:
                        WEBHOOK_DELIVERIES.labels(outcome.verdict.delivery_status).inc()
                    next_claim = 0.0  # a finished delivery may release the next event of its resource
                except Exception:
                    log.exception("recording %d webhook outcomes failed; they will be sent again", len(outcomes))
    finally:
        if in_flight:
            for task in in_flight:
                task.cancel()
            ids = [item.delivery.id or 0 for item in in_flight.values()]
            with contextlib.suppress(Exception):
                await asyncio.shield(release(container, worker, ids))


async def webhooks_job(container: AsyncContainer, settings: Settings, stop: asyncio.Event,
                       options: WorkerOptions | None = None) -> None:
    """The webhook work alone (tests, the benchmark, ``python -m entrypoints.webhook_worker``): a job runner with
    the dispatcher, and the delivery pump; both wake on this process's commits and, on PostgreSQL, on every
    process's."""
    options = options or WorkerOptions.from_env()
    random = await container.get(Random)
    runner = JobRunner([dispatch_kind(container, options)], ContainerUnits(container), await container.get(Clock),
                       random, worker_name(random), wake=JOB_WAKE_UPS.subscribe(),
                       safety_poll_seconds=options.poll_seconds, grace_seconds=options.shutdown_grace_seconds,
                       observer=JobMetrics())
    wake = JOB_WAKE_UPS.subscribe()
    try:
        async with listening(container, settings):
            await runner.start()
            async with asyncio.TaskGroup() as group:  # one failing stops the other (the worker restarts both)
                group.create_task(runner.run(stop))
                group.create_task(delivery_loop(container, settings, stop, options, wake))
    finally:
        JOB_WAKE_UPS.unsubscribe(runner.wake)
        JOB_WAKE_UPS.unsubscribe(wake)


__all__ = [
    "WorkerOptions", "claim", "deliver_once", "delivery_loop", "dispatch_kind", "dispatch_once", "drain", "record",
    "release", "webhooks_job",
]
