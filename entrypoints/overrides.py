"""Providers that pin a port to a given object, for tests and benchmarks:
``build_container(settings, ClockProvider(ManualClock(...)))`` runs the whole application on that clock,
``Pinned(Resolver, FakeResolver(...))`` on that resolver."""

from __future__ import annotations

from typing import Any

from dishka import Provider, Scope

from application.ports.platform import Clock


class Pinned(Provider):
    """Provides ``port`` as ``value`` for the container's lifetime (APP scope)."""

    def __init__(self, port: Any, value: Any) -> None:
        super().__init__(scope=Scope.APP)
        self.provide(lambda: value, provides=port)


class ClockProvider(Pinned):
    """Overrides ``Clock`` with the one it was given (e.g. ``adapters.memory.clock.ManualClock``)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(Clock, clock)
