"""Housekeeping: forget idempotency records past their window and ended rate-limit windows."""

from __future__ import annotations

from dataclasses import dataclass

from application.ports.accounts import IdempotencyStore, RateLimiter
from application.ports.platform import Clock, UnitOfWork
from domain.idempotency import REPLAY_WINDOW


@dataclass(frozen=True, slots=True)
class Purged:
    idempotency_records: int
    rate_limit_windows: int


class PurgeExpired:
    def __init__(self, uow: UnitOfWork, store: IdempotencyStore, limiter: RateLimiter, clock: Clock) -> None:
        self.uow, self.store, self.limiter, self.clock = uow, store, limiter, clock

    async def execute(self) -> Purged:
        now = self.clock.now()
        records = await self.store.purge_expired(now - REPLAY_WINDOW)
        windows = await self.limiter.purge(now)
        return Purged(records, windows)
