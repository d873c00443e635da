"""Providers that pin a platform port to a given object, for tests and benchmarks:
``build_container(settings, ClockProvider(ManualClock(...)))`` runs the whole application on that clock."""

from __future__ import annotations

from dishka import Provider, Scope, provide

from application.ports.platform import Clock


class ClockProvider(Provider):
    """Overrides ``Clock`` with the one it was given (e.g. ``adapters.memory.clock.ManualClock``)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self._clock = clock

    @provide(scope=Scope.APP)
    def clock(self) -> Clock:
        return self._clock
