"""`python -m entrypoints.webhook_worker`: a process that runs only the webhook work (the dispatcher job and the
delivery pump) against PARLEY_DATABASE_URL, until SIGTERM or SIGINT.

`parley worker` runs these jobs together with every other feature's; this entry point exists for
the crash test and the benchmark, which start, kill and count webhook workers on their own.
Tuning: PARLEY_WEBHOOK_LEASE_SECONDS, _CONCURRENCY, _BATCH_SIZE, _POLL_SECONDS.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal

from entrypoints.ioc import build_container
from entrypoints.runtime import configure_logging, tune_gc
from entrypoints.settings import Settings
from entrypoints.webhook_jobs import WorkerOptions, webhooks_job


async def run(settings: Settings, options: WorkerOptions) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    container = build_container(settings)
    try:
        await webhooks_job(container, settings, stop, options)
    finally:
        await container.close()


def main() -> None:
    settings = Settings.from_env()
    configure_logging(settings.log_level, settings.log_format)
    tune_gc(settings.gc_threshold)
    asyncio.run(run(settings, WorkerOptions.from_env()))


if __name__ == "__main__":
    main()
