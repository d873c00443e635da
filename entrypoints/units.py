"""``Units`` (``application/ports/platform.py``) over the composition root's container: every unit of work is a
request scope of it, committed through that scope's ``UnitOfWork``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from dishka import AsyncContainer

from application.ports.platform import Unit, UnitOfWork, UseCase

T = TypeVar("T")
C = TypeVar("C")
R = TypeVar("R")


class ScopedUnit:
    """One request scope: what it resolves shares its unit of work."""

    def __init__(self, scope: AsyncContainer) -> None:
        self.scope = scope

    async def get(self, dependency: type[T]) -> T:
        return await self.scope.get(dependency)

    async def commit(self) -> None:
        await (await self.scope.get(UnitOfWork)).commit()


class ScopedUnits:
    """The composition root's ``Units``: ``ScopedUnits(container)``, or ``Units`` from the container.
    ``context``: what each scope is opened with (the HTTP container's units outside a request, e.g. a media
    session's, carry a stand-in request: ``entrypoints/http/providers.py``)."""

    def __init__(self, container: AsyncContainer, context: dict[Any, Any] | None = None) -> None:
        self.container, self.context = container, context

    @contextlib.asynccontextmanager
    async def begin(self) -> AsyncIterator[Unit]:
        async with self.container(context=self.context) if self.context else self.container() as scope:
            yield ScopedUnit(scope)

    async def run(self, work: Callable[[Unit], Awaitable[R]]) -> R:
        async with self.begin() as unit:
            result = await work(unit)
            await unit.commit()
            return result

    async def read(self, work: Callable[[Unit], Awaitable[R]]) -> R:
        async with self.begin() as unit, (await unit.get(UnitOfWork)).autocommit():
            return await work(unit)

    async def execute(self, case: type[UseCase[C, R]], command: C) -> R:
        async def work(unit: Unit) -> Any:
            return await (await unit.get(case)).execute(command)

        return await self.run(work)
