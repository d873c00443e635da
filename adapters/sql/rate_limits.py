"""Rate-limit counters shared through the database, and this process's leases on them.

A counter is a row per bucket (a key lineage, an organization, an address), window length and window start. A
request is counted in every window of its buckets or in none: a window at its limit refuses it, and a refused
request consumes nothing.

Leases. Counting each request with a statement costs a round trip and a write per request, which matters for a
bucket whose limit was raised far above the defaults (a busy integration's key). Where the count commits the
moment it is made (the request pipeline's rate-limit step runs in ``UnitOfWork.autocommit``), a process reserves
several requests of such a window at once: the shared counter goes up by the lease's size, conditionally (never
past the limit), and the process spends the lease on its next requests without a statement. So no process admits a
request the shared counter has not counted, and a bucket is never admitted over its limit however many processes
serve it. The size is a 1,024th of what the process last saw left in the window, at most 32: a window with fewer
than 2,048 requests left, and so every limit under 2,048 (the defaults: 60 a minute, 1,000 an hour; 300 and 5,000
for an organization), is counted one request at a time, exactly, across processes. Above that, a process may hold
counted requests it has not served yet, so another process may refuse a bucket up to (size - 1) requests per other
process early, out of thousands. A refused request gives back what the process held in its other windows, so a
refusal strands nothing. Counts made in a caller's transaction, which may still roll back, are never leased.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from adapters.sql.dialect import insert
from adapters.sql.tables import rate_limit_counters
from adapters.sql.uow import SqlUnitOfWork
from domain.rate_limit import RateLimitDecision, Window, WindowState

Buckets = list[tuple[str, tuple[Window, ...]]]
Slot = tuple[str, int, int]
"""A counter's row: bucket, window length in seconds, window start (epoch seconds)."""

LEASE_CAP = 32
LEASE_DIVISOR = 1024


@dataclass(slots=True)
class Lease:
    counted: int
    """The shared counter as this process last saw it (after its last reservation)."""
    unspent: int
    """Requests this process reserved in the counter and has not served yet."""


class RateLimitLeases:
    """One process's leases; ``cap=1``: a request's own, one request a counter, dropped with the request."""

    def __init__(self, *, cap: int = LEASE_CAP) -> None:
        self.cap = cap
        self.slots: dict[Slot, Lease] = {}
        self._prune_at = 0.0

    def size(self, slot: Slot, limit: int) -> int:
        lease = self.slots.get(slot)
        left = limit - (lease.counted if lease else 0)
        return max(1, min(self.cap, left // LEASE_DIVISOR))

    def unspent(self, slot: Slot) -> int:
        lease = self.slots.get(slot)
        return lease.unspent if lease else 0

    def used(self, slot: Slot) -> int:
        """The requests counted in the window, less those this process holds unserved."""
        lease = self.slots.get(slot)
        return lease.counted - lease.unspent if lease else 0

    def credit(self, slot: Slot, size: int, counted: int) -> None:
        lease = self.slots.setdefault(slot, Lease(0, 0))
        # another request's reservation may have come back first with a later count
        lease.counted, lease.unspent = max(lease.counted, counted), lease.unspent + size

    def full(self, slot: Slot, limit: int) -> None:
        lease = self.slots.setdefault(slot, Lease(0, 0))
        lease.counted = max(lease.counted, limit)

    def spend(self, slot: Slot) -> None:
        """One request served from the lease (reserved beforehand)."""
        self.slots[slot].unspent -= 1

    def drop(self, slot: Slot) -> int:
        """Forget the lease; returns what it held unspent, for the caller to give back."""
        lease = self.slots.pop(slot, None)
        return lease.unspent if lease is not None else 0

    def given_back(self, slot: Slot) -> None:
        """One counted request was given back in the shared counter."""
        lease = self.slots.get(slot)
        if lease is not None and lease.counted > 0:
            lease.counted -= 1

    def prune(self, epoch: float) -> None:
        """Forget the windows that ended (once a minute)."""
        if epoch < self._prune_at:
            return
        self._prune_at = epoch + 60
        for slot in [s for s in self.slots if s[1] + s[2] <= epoch]:
            del self.slots[slot]


# PostgreSQL: every counter reserved, and the transaction's commit told not to wait for the WAL flush (a crash may
# forget the last few hundred milliseconds of counts), in one round trip (``set_config(..., true)`` is ``SET
# LOCAL``; the CTE is joined, so it runs once, before the rows are written). A row is reserved by its size only
# when the whole size fits under its limit, found by its slot, ``bucket|seconds`` (seconds are digits, so the last
# ``|`` splits a slot unambiguously).
_PG_RESERVE = sa.text("""
WITH quiet AS (SELECT set_config('synchronous_commit', 'off', true) AS done)
INSERT INTO rate_limit_counters AS counter (bucket, window_seconds, window_start, count)
SELECT w.bucket, w.seconds, w.start, w.size
FROM unnest(CAST(:buckets AS varchar[]), CAST(:seconds AS integer[]), CAST(:starts AS bigint[]),
            CAST(:sizes AS integer[])) AS w(bucket, seconds, start, size)
CROSS JOIN quiet
ON CONFLICT (bucket, window_seconds, window_start) DO UPDATE SET count = counter.count + EXCLUDED.count
WHERE counter.count + EXCLUDED.count <= (CAST(:limits AS integer[]))[
    array_position(CAST(:slots AS varchar[]), counter.bucket || '|' || counter.window_seconds)]
RETURNING counter.bucket, counter.window_seconds, counter.count
""")


class SqlRateLimiter:
    """Shared counters: one conditional upsert reserves what a request needs in all its windows (none when this
    process's leases cover it), in the caller's transaction (the caller commits)."""

    def __init__(self, uow: SqlUnitOfWork, leases: RateLimitLeases) -> None:
        self.uow = uow
        self.leases = leases

    async def hit(self, bucket: str, windows: tuple[Window, ...], now: datetime) -> RateLimitDecision:
        return (await self.hit_all([(bucket, windows)], now))[0]

    async def hit_all(self, buckets: Buckets, now: datetime) -> list[RateLimitDecision]:
        epoch = now.timestamp()
        limits: dict[Slot, int] = {}  # a bucket's windows of one length share a row: the smallest limit holds
        for bucket, windows in buckets:
            for w in windows:
                slot = (bucket, w.seconds, w.start(epoch))
                limits[slot] = min(limits.get(slot, w.limit), w.limit)
        leases = self.leases if self.uow.statements_commit_alone else RateLimitLeases(cap=1)
        leases.prune(epoch)
        full: set[Slot] = set()
        mine: dict[Slot, int] = {}  # the place in its window of the first request each reservation counted
        while not full:  # another request of this process may spend what was reserved while this one waited
            empty = {slot: limit for slot, limit in limits.items() if leases.unspent(slot) == 0}
            if not empty:
                break
            full = await self._reserve(leases, empty, mine)
        used: dict[Slot, int] = {}
        for slot in limits:
            if full:  # counted without this request, which is not served
                used[slot] = max(leases.used(slot), limits[slot]) if slot in full else leases.used(slot)
            else:  # this request's place: the one it reserved, or the next of the process's lease
                leases.spend(slot)
                used[slot] = mine.get(slot, leases.used(slot))
        decisions = []
        for bucket, windows in buckets:
            # a window that refused was full when it refused, whatever another request gave back since
            states = [WindowState(w, used[bucket, w.seconds, w.start(epoch)], w.end(epoch)) for w in windows]
            # refused: each bucket says whether it would have allowed the request (which of them refused)
            decisions.append(RateLimitDecision.from_states(
                states, not full or all(s.used < s.window.limit for s in states), epoch))
        if full:
            for slot in limits:
                # dropped before the give-back is awaited: no other request of this process spends it meanwhile
                unspent = leases.drop(slot)
                if unspent:
                    await self._give_back(slot, unspent)
        return decisions

    async def _reserve(self, leases: RateLimitLeases, limits: dict[Slot, int], mine: dict[Slot, int]) -> set[Slot]:
        """Each counter reserved by its lease's size, or by one where the size no longer fits (``mine``: the place
        of the first request reserved); returns the counters at their limit."""
        sizes = {slot: leases.size(slot, limit) for slot, limit in limits.items()}
        counted = await self._increment(sizes, limits)
        smaller = {slot: 1 for slot, size in sizes.items() if slot not in counted and size > 1}
        singly = await self._increment(smaller, limits) if smaller else {}
        full = set()
        for slot, size in sizes.items():
            if slot in counted:
                leases.credit(slot, size, counted[slot])
                mine[slot] = counted[slot] - size + 1
            elif slot in singly:
                leases.credit(slot, 1, singly[slot])
                mine[slot] = singly[slot]
            else:
                leases.full(slot, limits[slot])
                full.add(slot)
        return full

    async def _increment(self, sizes: dict[Slot, int], limits: dict[Slot, int]) -> dict[Slot, int]:
        """One statement: each counter up by its size where that fits under its limit. Returns the new counts of
        those reserved."""
        conn = await self.uow.connection()
        if self.uow.dialect == "postgresql":
            rows = (await conn.execute(_PG_RESERVE, {
                "buckets": [s[0] for s in sizes], "seconds": [s[1] for s in sizes], "starts": [s[2] for s in sizes],
                "sizes": list(sizes.values()), "limits": [limits[s] for s in sizes],
                "slots": [f"{s[0]}|{s[1]}" for s in sizes]})).all()
        else:
            c = rate_limit_counters.c
            stmt = insert(rate_limit_counters, self.uow.dialect).values([
                {"bucket": b, "window_seconds": seconds, "window_start": start, "count": size}
                for (b, seconds, start), size in sizes.items()])
            stmt = stmt.on_conflict_do_update(
                index_elements=["bucket", "window_seconds", "window_start"],
                set_={"count": c.count + stmt.excluded.count},
                where=c.count + stmt.excluded.count <= sa.case(
                    *[(sa.and_(c.bucket == b, c.window_seconds == seconds), limits[(b, seconds, start)])
                      for b, seconds, start in sizes]),
            ).returning(c.bucket, c.window_seconds, c.count)
            rows = (await conn.execute(stmt)).all()
        starts = {(s[0], s[1]): s[2] for s in sizes}
        return {(str(r[0]), int(r[1]), starts[str(r[0]), int(r[1])]): int(r[2]) for r in rows}

    async def _give_back(self, slot: Slot, count: int) -> None:
        c = rate_limit_counters.c
        conn = await self.uow.connection()
        await conn.execute(rate_limit_counters.update().where(
            c.bucket == slot[0], c.window_seconds == slot[1], c.window_start == slot[2], c.count > 0,
        ).values(count=sa.case((c.count > count, c.count - count), else_=0)))

    async def _read(self, slot: Slot) -> int:
        c = rate_limit_counters.c
        conn = await self.uow.connection()
        value = (await conn.execute(sa.select(c.count).where(
            c.bucket == slot[0], c.window_seconds == slot[1], c.window_start == slot[2]))).scalar()
        return int(value or 0)

    async def release(self, bucket: str, windows: tuple[Window, ...], at: datetime) -> None:
        """Gives back one request in each window (in the shared counter, as it was counted)."""
        epoch = at.timestamp()
        for window in windows:
            slot = (bucket, window.seconds, window.start(epoch))
            await self._give_back(slot, 1)
            self.leases.given_back(slot)

    async def purge(self, before: datetime) -> int:
        conn = await self.uow.connection()
        ends = rate_limit_counters.c.window_start + rate_limit_counters.c.window_seconds
        result = await conn.execute(rate_limit_counters.delete().where(ends < int(before.timestamp())))
        return result.rowcount or 0

    async def peek(self, bucket: str, windows: tuple[Window, ...], now: datetime) -> RateLimitDecision:
        epoch = now.timestamp()
        states = []
        for w in windows:
            slot = (bucket, w.seconds, w.start(epoch))
            states.append(WindowState(w, max(0, await self._read(slot) - self.leases.unspent(slot)), w.end(epoch)))
        return RateLimitDecision.from_states(states, all(s.used < s.window.limit for s in states), epoch)
