"""The background worker: runs every feature's jobs until asked to stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable
from typing import Any

from dishka import AsyncContainer

from entrypoints.features import Job, all_features
from entrypoints.settings import Settings

log = logging.getLogger("parley.worker")


def jobs() -> list[Job]:
    return [job for feature in all_features() for job in feature.jobs]


async def _guarded(job: Job, container: AsyncContainer, settings: Settings, stop: asyncio.Event) -> None:
    """A job that fails is logged and restarted after a pause, until stop is set."""
    name = getattr(job, "__qualname__", repr(job))
    while not stop.is_set():
        try:
            await job(container, settings, stop)
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("worker job %s failed; restarting", name)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=1.0)


async def run_jobs(container: AsyncContainer, settings: Settings, stop: asyncio.Event) -> None:
    selected = jobs()
    log.info("worker running %d job(s)", len(selected))
    await asyncio.gather(*(_guarded(job, container, settings, stop) for job in selected))


async def run_worker(settings: Settings, make_container: Callable[[Settings], AsyncContainer]) -> None:
    """`parley worker`: until SIGTERM or SIGINT; in-flight work is finished or released by each job."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    container = make_container(settings)
    try:
        await run_jobs(container, settings, stop)
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
