"""The job queue in memory (one process; the store's lock makes claims exclusive)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from adapters.memory.store import InMemoryUnitOfWork
from application.ports.jobs import ClaimedJob, NewJob

JOBS = "jobs"


@dataclass(frozen=True, slots=True)
class _Row:
    id: int
    kind: str
    key: str
    payload: dict[str, Any]
    priority: int
    due_at: datetime
    attempts: int = 0
    version: int = 0
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    last_error: str | None = None
    failed_at: datetime | None = None


class InMemoryJobQueue:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def _rows(self) -> dict[int, _Row]:
        return (await self.uow.tables())[JOBS]

    async def schedule(self, job: NewJob) -> None:
        rows = await self._rows()
        for row in rows.values():
            if row.kind == job.kind and row.key == job.key:
                self.uow.created_work()
                rows[row.id] = replace(row, due_at=min(row.due_at, job.due_at),
                                       priority=max(row.priority, job.priority), version=row.version + 1,
                                       payload=dict(job.payload), failed_at=None)
                return
        self.uow.created_work()
        self._insert(rows, job)

    def _insert(self, rows: dict[int, _Row], job: NewJob) -> None:
        new_id = self.uow.store.next_id(JOBS)
        rows[new_id] = _Row(new_id, job.kind, job.key, dict(job.payload), job.priority, job.due_at)

    async def schedule_new(self, new: Sequence[NewJob]) -> None:
        if not new:
            return
        rows = await self._rows()
        taken = {(row.kind, row.key) for row in rows.values()}
        for job in new:
            if (job.kind, job.key) not in taken:
                self._insert(rows, job)
                taken.add((job.kind, job.key))
        self.uow.created_work()

    async def claim(self, kind: str, owner: str, now: datetime, lease_until: datetime, limit: int, *,
                    due_by: datetime | None = None) -> list[ClaimedJob]:
        rows = await self._rows()
        due = sorted(
            (r for r in rows.values() if r.kind == kind and r.failed_at is None and r.due_at <= (due_by or now)
             and (r.lease_expires_at is None or r.lease_expires_at <= now)),
            key=lambda r: (-r.priority, r.due_at, r.id))[:limit]
        claimed = []
        for row in due:
            row = replace(row, attempts=row.attempts + 1, lease_owner=owner, lease_expires_at=lease_until)
            rows[row.id] = row
            claimed.append(ClaimedJob(row.id, row.kind, row.key, dict(row.payload), row.priority, row.due_at,
                                      row.attempts, owner, lease_until, row.version))
        return claimed

    async def due_kinds(self, kinds: Sequence[str], now: datetime, *, woken: Sequence[str] = ()) -> set[str]:
        return {r.kind for r in (await self._rows()).values()
                if r.kind in kinds and r.failed_at is None and (r.due_at <= now or r.kind in woken)
                and (r.lease_expires_at is None or r.lease_expires_at <= now)}

    async def _held(self, job: ClaimedJob) -> _Row | None:
        row = (await self._rows()).get(job.id)
        return row if row is not None and row.lease_owner == job.lease_owner else None

    async def complete(self, job: ClaimedJob, next_due: datetime | None) -> bool:
        row = await self._held(job)
        if row is None:
            return False
        rows = await self._rows()
        if row.version != job.schedule_version:  # scheduled again while running: run again
            next_due = row.due_at if next_due is None else min(next_due, row.due_at)
        if next_due is None:
            del rows[row.id]
        else:
            rows[row.id] = replace(row, due_at=next_due, attempts=0, lease_owner=None, lease_expires_at=None,
                                   last_error=None)
        return True

    async def retry(self, job: ClaimedJob, due_at: datetime, error: str) -> bool:
        row = await self._held(job)
        if row is None:
            return False
        (await self._rows())[row.id] = replace(row, due_at=due_at, lease_owner=None, lease_expires_at=None,
                                               last_error=error)
        return True

    async def fail(self, job: ClaimedJob, error: str, now: datetime) -> bool:
        row = await self._held(job)
        if row is None:
            return False
        (await self._rows())[row.id] = replace(row, lease_owner=None, lease_expires_at=None, last_error=error,
                                               failed_at=now)
        return True

    async def release(self, owner: str, job_ids: Sequence[int]) -> None:
        rows = await self._rows()
        for job_id in job_ids:
            row = rows.get(job_id)
            if row is not None and row.lease_owner == owner:
                rows[job_id] = replace(row, attempts=max(0, row.attempts - 1), lease_owner=None,
                                       lease_expires_at=None)

    async def next_due(self, kinds: Sequence[str]) -> datetime | None:
        times = [max(r.due_at, r.lease_expires_at) if r.lease_expires_at else r.due_at
                 for r in (await self._rows()).values() if r.kind in kinds and r.failed_at is None]
        return min(times, default=None)

    async def purge_failed(self, before: datetime) -> int:
        rows = await self._rows()
        gone = [row.id for row in rows.values() if row.failed_at is not None and row.failed_at < before]
        for job_id in gone:
            del rows[job_id]
        return len(gone)
