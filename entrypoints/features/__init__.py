"""Feature modules: each one contributes providers, routes and background jobs.

A feature module in this package defines:
- ``providers(settings) -> list[dishka.Provider]``: its adapters and use cases (it may check
  ``settings.database_url == MEMORY_URL`` to choose in-memory adapters);
- ``ROUTES``: its Litestar route handlers (from ``entrypoints.http.routes.<feature>``);
- optionally ``JOBS``: factories ``make(context: entrypoints.worker.JobContext) -> application.jobs.JobKind``,
  the job kinds the worker's job runner runs;
- optionally ``RESIDENT``: ``work(context, stop: asyncio.Event)`` that every worker process runs until ``stop``.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from types import ModuleType


@cache
def modules() -> tuple[ModuleType, ...]:
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            found.append(importlib.import_module(f"{__name__}.{info.name}"))
    return tuple(found)
