"""Cross-cutting ports: time, randomness, the unit of work and how background work opens one (``Units``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, Protocol, TypeVar

from domain.events import DomainEvent

T = TypeVar("T")
C = TypeVar("C")
R = TypeVar("R")
C_contra = TypeVar("C_contra", contravariant=True)
R_co = TypeVar("R_co", covariant=True)


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...


class Random(Protocol):
    def base62(self, length: int) -> str: ...

    def hex(self, nbytes: int) -> str: ...

    def token(self, nbytes: int) -> str:
        """URL-safe random text."""
        ...

    def uuid(self) -> str: ...

    def uniform(self, low: float, high: float) -> float: ...


class UnitOfWork(Protocol):
    """One transaction at a time; the next use after commit or rollback begins a new one.

    Events recorded during a transaction are written to the outbox by ``commit``, in the
    same transaction as the change that caused them, at least as deep as the unit's cause
    (``application.context.CauseContext``, the triggers' loop guard).
    """

    def record(self, event: DomainEvent) -> None: ...

    def created_work(self) -> None:
        """This transaction creates background work: the job runners wake once it committed (recording an
        event or scheduling a job implies it)."""
        ...

    async def commit(self) -> None: ...

    async def rollback(self) -> None: ...

    def autocommit(self) -> AbstractAsyncContextManager[None]:
        """A block between transactions whose statements each commit on their own: no ``BEGIN`` or ``COMMIT`` is
        sent for it (a step whose work holds one statement at a time, such as the rate-limit count). It records
        no events."""
        ...


class UseCase(Protocol[C_contra, R_co]):
    """The shape of every use case: one ``execute`` taking its command."""

    async def execute(self, command: C_contra) -> R_co: ...


class Unit(Protocol):
    """One unit of work: what ``get`` resolves in it (ports, use cases) shares one transaction, which ``commit``
    commits; leaving it uncommitted rolls back."""

    async def get(self, dependency: type[T]) -> T: ...

    async def commit(self) -> None: ...


class Units(Protocol):
    """The one way work outside a request (jobs, the worker's passes, operator commands) runs a unit of work.

    ``await units.execute(Case, command)`` runs one use case in a unit of its own and commits it;
    ``await units.run(work)`` does the same for ``work(unit)``; ``async with units.begin() as unit`` leaves the
    commit to the caller. A unit whose work raises is rolled back. ``await units.read(work)`` runs ``work``, which
    only reads, in a unit whose statements each commit on their own (``UnitOfWork.autocommit``): no transaction,
    so on SQLite it neither takes nor waits for the write lock."""

    def begin(self) -> AbstractAsyncContextManager[Unit]: ...

    async def run(self, work: Callable[[Unit], Awaitable[R]]) -> R: ...

    async def read(self, work: Callable[[Unit], Awaitable[R]]) -> R: ...

    async def execute(self, case: type[UseCase[C, R]], command: C) -> R: ...


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int


@dataclass(frozen=True, slots=True)
class PageRequest:
    limit: int = 25
    offset: int = 0

    def slice(self, items: Sequence[T]) -> Page[T]:
        """This page of ``items``, all of which are in hand (the in-memory adapters, short lists)."""
        return Page(list(items[self.offset: self.offset + self.limit]), len(items), self.limit, self.offset)
