"""The background worker: one job runner (``application/jobs.py``) over every feature's job kinds.

A feature's ``jobs`` are factories ``make(container, settings) -> JobKind``; its ``resident`` work runs in every
worker process. A worker runs all of it (every feature of the registry, ``entrypoints.ioc.FEATURES``), or what an
operator names (``parley worker --jobs`` / ``--exclude-jobs``, ``JobSelection``, by job kind or resident name): work
then runs in processes of its own, e.g. the campaign dialer apart from the calls' progress. The queue hands a job
only to a runner that has its kind. Jobs open their units of work through ``Units`` (``entrypoints/units.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from dishka import AsyncContainer

from application.jobs import JobKind, JobRunner
from application.ports.platform import Clock, Random
from entrypoints.features import JobKindFactory, Resident
from entrypoints.ioc import FEATURES, listen_for_work
from entrypoints.observability import JobMetrics
from entrypoints.runtime import JOB_WAKE_UPS, owner_name
from entrypoints.settings import Backend, Settings
from entrypoints.units import ScopedUnits

log = logging.getLogger("parley.worker")

SAFETY_POLL_SECONDS = 15.0
"""An idle runner looks at the queue at least this often (wake-ups and due times make it sooner)."""


def jobs() -> list[JobKindFactory]:
    """Every feature's job kinds (factories)."""
    return [make for feature in FEATURES for make in feature.jobs]


class JobSelectionError(ValueError):
    """A ``JobSelection`` names unknown work, or leaves none."""


@dataclass(frozen=True, slots=True)
class JobSelection:
    """The work a worker process runs, by name (job kinds such as ``campaigns.dial``, and resident work such as
    ``webhooks.deliver``): ``only`` these (None: all of it), minus ``exclude``."""

    only: frozenset[str] | None = None
    exclude: frozenset[str] = frozenset()

    def names(self, known: list[str]) -> list[str]:
        """The selected names; JobSelectionError naming the known ones when a name is unknown or none is left."""
        unknown = sorted(((self.only or frozenset()) | self.exclude) - set(known))
        if unknown:
            raise JobSelectionError(f"unknown job kind {', '.join(unknown)} (the job kinds: {', '.join(known)})")
        picked = [name for name in known if (self.only is None or name in self.only) and name not in self.exclude]
        if not picked:
            raise JobSelectionError(f"no job kind left to run (the job kinds: {', '.join(known)})")
        return picked


EVERY_JOB = JobSelection()


def residents() -> dict[str, Resident]:
    """Every feature's resident work, by name."""
    return {name: work for feature in FEATURES for name, work in feature.resident.items()}


def selected_work(container: AsyncContainer, settings: Settings,
                  selection: JobSelection = EVERY_JOB) -> tuple[list[JobKind], dict[str, Resident]]:
    """The job kinds and the resident work a worker process runs (JobSelectionError: see JobSelection)."""
    kinds = [make(container, settings) for make in jobs()]
    present = residents()
    chosen = set(selection.names(sorted([kind.name for kind in kinds] + list(present))))
    return ([kind for kind in kinds if kind.name in chosen],
            {name: work for name, work in present.items() if name in chosen})


async def make_runner(container: AsyncContainer, settings: Settings, *,
                      safety_poll_seconds: float = SAFETY_POLL_SECONDS,
                      kinds: list[JobKind] | None = None) -> JobRunner:
    selected = kinds if kinds is not None else [make(container, settings) for make in jobs()]
    if settings.job_lease_seconds > 0:
        cap = timedelta(seconds=settings.job_lease_seconds)
        selected = [replace(kind, lease=min(kind.lease, cap)) for kind in selected]
    random = await container.get(Random)
    return JobRunner(selected, ScopedUnits(container), await container.get(Clock), random, owner_name(random),
                     safety_poll_seconds=safety_poll_seconds, observer=JobMetrics())


@contextlib.asynccontextmanager
async def listening(container: AsyncContainer, settings: Settings) -> AsyncIterator[None]:
    """On PostgreSQL: every commit that created work, in any process, wakes this process's runners (LISTEN).
    SQLite and memory: in-process wake-ups only (another process's work is found by the safety poll)."""
    listener = None
    if settings.backend == Backend.POSTGRESQL:
        from sqlalchemy.ext.asyncio import AsyncEngine

        try:
            listener = await listen_for_work(await container.get(AsyncEngine), JOB_WAKE_UPS.notify)
        except Exception:
            log.exception("listening for job notifications failed; idle runners rely on their safety poll")
    try:
        yield
    finally:
        if listener is not None:
            with contextlib.suppress(Exception):
                await listener.close()


async def _restarting(name: str, work: Callable[[], Awaitable[None]], stop: asyncio.Event) -> None:
    """Work that fails is logged and restarted after a pause, until stop is set."""
    while not stop.is_set():
        try:
            await work()
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("worker %s failed; restarting", name)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=1.0)


async def run_jobs(container: AsyncContainer, settings: Settings, stop: asyncio.Event,
                   selection: JobSelection = EVERY_JOB) -> None:
    """Run every feature's jobs (one runner) and resident work (or the ``selection`` of them) until ``stop``. On
    stop nothing new is claimed and in-flight jobs finish within the grace period or their leases are released."""
    kinds, present = selected_work(container, settings, selection)
    runner = await make_runner(container, settings, kinds=kinds)
    runner.wake = JOB_WAKE_UPS.subscribe()

    async def run_runner() -> None:
        await runner.start()
        await runner.run(stop)

    try:
        async with listening(container, settings):
            await asyncio.gather(_restarting("job runner", run_runner, stop),
                                 *(_restarting(name, functools.partial(r, container, settings, stop), stop)
                                   for name, r in present.items()))
    finally:
        JOB_WAKE_UPS.unsubscribe(runner.wake)


async def run_worker(settings: Settings, make_container: Callable[[Settings], AsyncContainer],
                     selection: JobSelection = EVERY_JOB) -> None:
    """`parley worker`: until SIGTERM or SIGINT (drain: in-flight jobs finish or their leases are released)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    container = make_container(settings)
    try:
        await run_jobs(container, settings, stop, selection)
    finally:
        await container.close()


class InProcessWorker:
    """The worker as part of `parley serve` (one server process)."""

    def __init__(self, container: AsyncContainer, settings: Settings) -> None:
        self.container, self.settings = container, settings
        self.stop = asyncio.Event()
        self.task: asyncio.Task[Any] | None = None

    async def start(self) -> None:
        self.task = asyncio.create_task(run_jobs(self.container, self.settings, self.stop))

    async def close(self) -> None:
        self.stop.set()
        if self.task is not None:
            try:
                await asyncio.wait_for(self.task, timeout=15)
            except TimeoutError:
                self.task.cancel()
