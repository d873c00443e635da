"""Features: each module in this package defines ``FEATURE``, a ``Feature``; the composition root installs the
ones its registry lists (``entrypoints.ioc.FEATURES``, in that order).

A feature knows nothing of HTTP: its routes live on the HTTP side (``entrypoints/http/routes``), registered
under the feature's name, so the worker never loads Litestar.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
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

    ``providers`` are instantiated once per process (``provider_instance``) and installed in every container;
    ``sql`` / ``memory`` (optional) hold the provider of
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
    overrides: Mapping[Any, str] = field(default_factory=dict)
    """Ports this feature provides in place of another's: port -> the name of the feature (listed before it in the
    registry, or ``core``) whose provision it replaces. Providing a port another feature provides without
    declaring it here stops the composition root (``FeatureConflict``)."""

    def container_providers(self, backend: Backend) -> list[Provider]:
        storage = self.sql if backend.sql else self.memory
        chosen = (*self.providers, *((storage,) if storage is not None else ()))
        return [provider_instance(provider) for provider in chosen]


@functools.cache
def provider_instance(provider: type[Provider]) -> Provider:
    """The one instance of a feature's provider in this process: a provider keeps no state of its own (its
    factories make the objects, the container keeps them), so every container a process builds (a test run builds
    hundreds) installs the same one instead of reading the class's factories again (about a fifth of a build)."""
    return provider()


@dataclass(frozen=True)
class OutboxConsumerJobs:
    """(consumer, job kind) of every installed feature's outbox consumers (``Feature.outbox_consumers``), for the
    shared safety recheck; the composition root provides it."""

    pairs: tuple[tuple[str, str], ...] = ()


class FeatureConflict(Exception):
    """Two features provide one port and the later one did not declare it overrides the earlier one's."""


def provided_ports(providers: Sequence[Provider]) -> set[Any]:
    """What the providers provide (their factories' and aliases' types)."""
    return ({factory.provides.type_hint for provider in providers for factory in provider.factories}
            | {alias.provides.type_hint for provider in providers for alias in provider.aliases})


def check_overrides(installed: Sequence[tuple[Feature, Sequence[Provider]]]) -> None:
    """Every port is provided by one feature, or overridden by a later one that declares it (``Feature.overrides``,
    naming the feature it overrides); FeatureConflict otherwise, and for a declared override of nothing.
    ``installed``: each feature, in order, with the providers it installs."""
    owner: dict[Any, str] = {}
    for feature, providers in installed:
        ports = provided_ports(providers)
        for port, overridden in feature.overrides.items():
            if port not in ports:
                raise FeatureConflict(f"feature {feature.name!r} declares it overrides {port!r} "
                                      "but does not provide it")
            if owner.get(port) != overridden:
                raise FeatureConflict(f"feature {feature.name!r} declares it overrides {port!r} of {overridden!r}, "
                                      f"but {overridden!r} does not provide it before {feature.name!r}")
        for port in sorted(ports - set(feature.overrides), key=repr):
            if port in owner:
                raise FeatureConflict(f"features {owner[port]!r} and {feature.name!r} both provide {port!r}: "
                                      f"declare the override in {feature.name!r} (Feature.overrides)")
        owner.update(dict.fromkeys(ports, feature.name))
