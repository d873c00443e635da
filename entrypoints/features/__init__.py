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

from entrypoints.settings import Backend, Settings

Job = Callable[[AsyncContainer, Settings, asyncio.Event], Awaitable[None]]
"""A background job: runs until the event is set (``parley worker``, or in-process with ``parley serve``)."""


@dataclass(frozen=True)
class Feature:
    """What a feature adds: dishka providers, background jobs and its settings section.

    ``providers`` are instantiated for every container; ``sql`` / ``memory`` (optional) hold the provider of
    its storage ports for the SQL backends (SQLite, PostgreSQL) and for the in-memory backend: the composition
    root picks one by ``Settings.backend``. ``settings`` is the feature's section (a frozen dataclass read
    from PARLEY_* variables, see ``entrypoints.settings``), provided through dishka like ``Settings``.
    """

    name: str
    providers: Sequence[type[Provider]] = ()
    sql: type[Provider] | None = None
    memory: type[Provider] | None = None
    jobs: list[Job] = field(default_factory=list)
    settings: type[Any] | None = None

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
