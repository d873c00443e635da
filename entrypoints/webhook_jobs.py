"""The webhook worker: the dispatcher (outbox -> deliveries) and the delivery loop (claim, send,
record), plus one-pass functions that tests and benchmarks drive deterministically.

Each unit of work opens its own request scope and commits it. Sending happens outside any
transaction: a claim is a lease (``locked_until``), so no database lock is held while waiting for
a receiver, and a worker that dies loses its leases when they expire.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta

from dishka import AsyncContainer

from application.ports.platform import Random, UnitOfWork
from application.ports.webhooks import ClaimedDelivery
from application.webhooks import (
    ClaimDeliveries,
    DeliveryOutcome,
    DispatchOutbox,
    RecordDeliveryOutcomes,
    ReleaseDeliveries,
    SendDelivery,
)
from entrypoints.settings import Settings

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
    poll_seconds: float = 0.1
    """How often an idle worker looks for new events and due retries."""
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
    async with container() as request:
        dispatched = await (await request.get(DispatchOutbox)).execute(limit)
        await (await request.get(UnitOfWork)).commit()
    return dispatched


async def claim(container: AsyncContainer, worker: str, limit: int, lease: timedelta) -> list[ClaimedDelivery]:
    async with container() as request:
        claimed = await (await request.get(ClaimDeliveries)).execute(worker, limit, lease)
        await (await request.get(UnitOfWork)).commit()
    return claimed


async def record(container: AsyncContainer, worker: str, outcomes: Sequence[DeliveryOutcome]) -> None:
    async with container() as request:
        await (await request.get(RecordDeliveryOutcomes)).execute(worker, outcomes)
        await (await request.get(UnitOfWork)).commit()


async def release(container: AsyncContainer, worker: str, delivery_ids: Sequence[int]) -> None:
    async with container() as request:
        await (await request.get(ReleaseDeliveries)).execute(worker, delivery_ids)
        await (await request.get(UnitOfWork)).commit()


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
            return await sender.execute(item)

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


async def dispatch_loop(container: AsyncContainer, settings: Settings, stop: asyncio.Event, options: WorkerOptions,
                        wake: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            dispatched = await dispatch_once(container, settings, limit=options.dispatch_batch)
        except Exception:
            log.exception("webhook dispatch failed; retrying")
            dispatched = 0
            await _wait([stop], 1.0)
        if dispatched:
            wake.set()
        if dispatched < options.dispatch_batch:
            await _wait([stop], options.poll_seconds)


async def delivery_loop(container: AsyncContainer, settings: Settings, stop: asyncio.Event, options: WorkerOptions,
                        wake: asyncio.Event) -> None:
    """Keeps up to ``options.concurrency`` deliveries in flight; records outcomes in batches."""
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
                        in_flight[asyncio.create_task(sender.execute(item))] = item
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
    """The worker job: dispatcher and delivery loop, sharing a wake-up signal (a dispatch wakes
    the delivery loop at once, so an idle system delivers within one poll interval)."""
    options = options or WorkerOptions.from_env()
    wake = asyncio.Event()
    async with asyncio.TaskGroup() as group:  # one loop failing stops the other (the worker restarts both)
        group.create_task(dispatch_loop(container, settings, stop, options, wake))
        group.create_task(delivery_loop(container, settings, stop, options, wake))


__all__ = [
    "WorkerOptions", "claim", "deliver_once", "dispatch_once", "drain", "record", "release", "webhooks_job",
]
