"""Housekeeping: forget idempotency records past their window and ended rate-limit windows."""

from __future__ import annotations

from dataclasses import dataclass

from application.ports.accounts import IdempotencyStore, RateLimiter
from application.ports.platform import Clock
from domain.idempotency import REPLAY_WINDOW


@dataclass(frozen=True, slots=True)
class Purged:
    idempotency_records: int
    rate_limit_windows: int


@dataclass(frozen=True, slots=True)
class PurgeExpiredCommand:
    """Purge what has expired by now (the clock's)."""


class PurgeExpired:
    def __init__(self, store: IdempotencyStore, limiter: RateLimiter, clock: Clock) -> None:
        self.store, self.limiter, self.clock = store, limiter, clock

    async def execute(self, command: PurgeExpiredCommand) -> Purged:
        now = self.clock.now()
        records = await self.store.purge_expired(now - REPLAY_WINDOW)
        windows = await self.limiter.purge(now)
        return Purged(records, windows)
