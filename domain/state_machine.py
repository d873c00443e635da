"""State machines as data: a transition table per aggregate."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from domain.errors import InvalidTransition


@dataclass(frozen=True, slots=True)
class TransitionTable:
    """Allowed moves of one aggregate: ``(from_state, trigger) -> to_state``."""

    entity: str
    moves: Mapping[tuple[str, str], str]

    @classmethod
    def of(cls, entity: str, moves: Iterable[tuple[str, str, str]]) -> TransitionTable:
        return cls(entity, {(src, trigger): dst for src, trigger, dst in moves})

    def states(self) -> frozenset[str]:
        return frozenset({s for s, _ in self.moves} | set(self.moves.values()))

    def can(self, current: str, trigger: str) -> bool:
        return (current, trigger) in self.moves

    def next(self, current: str, trigger: str, *, target: str | None = None) -> str:
        """The state after ``trigger`` from ``current``; raises InvalidTransition if illegal."""
        try:
            return self.moves[(current, trigger)]
        except KeyError:
            raise self.refusal(current, trigger, target=target) from None

    def refusal(self, current: str, trigger: str, *, target: str | None = None) -> InvalidTransition:
        """The error for ``trigger`` from ``current``, naming the states from which it is possible."""
        allowed = tuple(sorted({src for src, t in self.moves if t == trigger and src}))
        return InvalidTransition(self.entity, current, target or trigger, action=trigger.replace("_", " "),
                                 allowed_from=allowed)
