"""Cross-cutting ports: time, randomness and the unit of work."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, Protocol, TypeVar

from domain.events import DomainEvent

T = TypeVar("T")


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
    same transaction as the change that caused them.
    """

    def record(self, event: DomainEvent) -> None: ...

    def caused_at_depth(self, depth: int) -> None:
        """The events recorded from now on in this unit of work were caused by a trigger's action: they carry
        ``depth`` (``DomainEvent.depth``), which the triggers' loop guard reads."""
        ...

    def caused_depth(self) -> int:
        """The depth ``caused_at_depth`` gave this unit of work (0: its work was not caused by a trigger's action);
        work it starts that records events later (a call placed) keeps it."""
        ...

    def created_work(self) -> None:
        """This transaction creates background work: the job runners wake once it committed (recording an
        event or scheduling a job implies it)."""
        ...

    async def commit(self) -> None: ...

    async def rollback(self) -> None: ...


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
