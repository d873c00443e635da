"""ASGI factory for servers (`uvicorn --factory entrypoints.asgi_app:make_app`) and the HTTP app's container."""

from __future__ import annotations

import asyncio
import os

from dishka import AsyncContainer, Provider
from dishka.integrations.litestar import LitestarProvider
from litestar import Litestar

from entrypoints.features.engines import warm_offline_engines
from entrypoints.http.app import create_app
from entrypoints.http.providers import HttpProvider
from entrypoints.ioc import build_container, make_container
from entrypoints.observability import use_multiprocess_directory
from entrypoints.runtime import configure_logging, tune_gc
from entrypoints.settings import Settings
from entrypoints.worker import InProcessWorker


def http_container(settings: Settings, *overrides: Provider) -> AsyncContainer:
    """A container for the HTTP app: the composition root's, plus what a Litestar request provides."""
    return make_container(settings, LitestarProvider(), HttpProvider(), *overrides)


def make_app() -> Litestar:
    settings = Settings.from_env().with_secret_key()
    use_multiprocess_directory()
    configure_logging(settings.log_level, settings.log_format)
    tune_gc(settings.gc_threshold)
    app = create_app(http_container(settings), settings)

    async def warm_engines(_: Litestar) -> None:
        # in the background: the server is ready at once, and the first call finds the engines loaded
        app.state["engines_warm_up"] = asyncio.get_running_loop().create_task(warm_offline_engines())

    app.on_startup.append(warm_engines)
    if os.environ.get("PARLEY_IN_PROCESS_WORKER") == "1":
        worker_container = build_container(settings)
        worker = InProcessWorker(worker_container, settings)

        async def start_worker(_: Litestar) -> None:
            await worker.start()

        async def stop_worker(_: Litestar) -> None:
            await worker.close()
            await worker_container.close()

        app.on_startup.append(start_worker)
        app.on_shutdown.insert(0, stop_worker)
    return app
