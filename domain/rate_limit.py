"""Fixed-window rate limiting rules, windows aligned to the clock."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Window:
    seconds: int
    limit: int

    def start(self, epoch: float) -> int:
        return int(epoch // self.seconds) * self.seconds

    def end(self, epoch: float) -> int:
        return self.start(epoch) + self.seconds


@dataclass(frozen=True, slots=True)
class WindowState:
    window: Window
    used: int  # requests counted in the window, this one included when allowed
    reset_at: int


@dataclass(frozen=True, slots=True)
class RateLimitDecision:
    allowed: bool
    limit: int
    remaining: int
    reset_at: int
    retry_after: int | None

    @classmethod
    def from_states(cls, states: list[WindowState], allowed: bool, now: float) -> RateLimitDecision:
        """Headers describe the window with the fewest remaining requests (ties: the later reset)."""
        tightest = min(states, key=lambda s: (s.window.limit - s.used, -s.reset_at))
        remaining = max(0, tightest.window.limit - tightest.used)
        retry_after = None
        if not allowed:
            exhausted = [s for s in states if s.used >= s.window.limit]
            reset = max(s.reset_at for s in exhausted)
            retry_after = max(1, math.ceil(reset - now))
            tightest = max(exhausted, key=lambda s: s.reset_at)
            remaining = 0
        return cls(allowed, tightest.window.limit, remaining, tightest.reset_at, retry_after)


def default_windows(per_minute: int, per_hour: int) -> tuple[Window, ...]:
    return (Window(60, per_minute), Window(3600, per_hour))


def tightest(first: RateLimitDecision, second: RateLimitDecision) -> RateLimitDecision:
    """The decision of two limits on one request (a key's and its organization's): refused when either refused
    (the refusal's headers), else the one with the fewest remaining requests (on a tie, the later reset)."""
    if not second.allowed:
        return second
    if not first.allowed:
        return first
    return min((first, second), key=lambda d: (d.remaining, -d.reset_at))
