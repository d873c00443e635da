"""Features: each module in this package defines ``FEATURE``, a ``Feature`` the composition root installs.

A feature knows nothing of HTTP: its routes live on the HTTP side (``entrypoints/http/routes``), registered
under the feature's name, so the worker never loads Litestar. Modules are discovered at start-up, in name order.
"""

from __future__ import annotations

import asyncio
import importlib
import pkgutil
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from dishka import AsyncContainer, Provider

from application.jobs import JobKind
from entrypoints.settings import Backend, Settings

JobKindFactory = Callable[[AsyncContainer, Settings], JobKind]
"""Makes one of the feature's job kinds (``application/jobs.py``): the worker's one job runner runs them."""

Resident = Callable[[AsyncContainer, Settings, asyncio.Event], Awaitable[None]]
"""Work every worker process runs for its whole life, until the event is set (the webhook delivery pump:
deliveries are their own leased queue that every process claims from side by side), unless the process was told
to run other work only (``parley worker --jobs``)."""


@dataclass(frozen=True)
class Feature:
    """What a feature adds: dishka providers, job kinds, resident work and its settings section.

    ``providers`` are instantiated for every container; ``sql`` / ``memory`` (optional) hold the provider of
    its storage ports for the SQL backends (SQLite, PostgreSQL) and for the in-memory backend: the composition
    root picks one by ``Settings.backend``. ``settings`` is the feature's section (a frozen dataclass read
    from PARLEY_* variables, see ``entrypoints.settings``), provided through dishka like ``Settings``.
    """

    name: str
    providers: Sequence[type[Provider]] = ()
    sql: type[Provider] | None = None
    memory: type[Provider] | None = None
    jobs: list[JobKindFactory] = field(default_factory=list)
    resident: dict[str, Resident] = field(default_factory=dict)
    """By name (what ``parley worker --jobs`` / ``--exclude-jobs`` select, as job kinds)."""
    settings: type[Any] | None = None
    outbox_consumers: dict[str, str] = field(default_factory=dict)
    """The outbox consumers (``application/outbox.py``) it runs, each by the job kind that runs it: the shared
    safety recheck (``outbox.recheck``) makes that job due when the consumer is behind."""

    def container_providers(self, backend: Backend) -> list[Provider]:
        storage = self.sql if backend.sql else self.memory
        return [provider() for provider in self.providers] + ([storage()] if storage is not None else [])


@cache
def all_features() -> tuple[Feature, ...]:
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            found.append(importlib.import_module(f"{__name__}.{info.name}").FEATURE)
    return tuple(found)
