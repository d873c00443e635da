"""The job queue: due work claimed under a lease, run, and recorded (``application/jobs.py`` runs it).

A job is a row: ``kind`` (which handler runs it), ``key`` (at most one job per kind and key, so
a recurring job or a job per resource is scheduled, not duplicated), ``payload``, ``priority``
(higher first) and ``due_at`` (earlier first among equal priorities). A claim leases a job to one
owner until ``lease_expires_at``; a job whose owner died is claimed again once its lease expired.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class NewJob:
    kind: str
    due_at: datetime
    key: str = ""
    """At most one job per (kind, key): scheduling an existing one moves it earlier, never later."""
    payload: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    """Higher runs first; among equal priorities the earlier ``due_at``, then the older job."""


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    id: int
    kind: str
    key: str
    payload: dict[str, Any]
    priority: int
    due_at: datetime
    attempts: int
    """Attempts so far, this one included."""
    lease_owner: str
    lease_expires_at: datetime
    schedule_version: int
    """Bumped by every ``schedule``: a run that finishes on an older version was overtaken by new work."""


class JobQueue(Protocol):
    """Request-scoped: every method works in the caller's unit of work (the caller commits)."""

    async def schedule(self, job: NewJob) -> None:
        """Create the job, or make the pending one of the same (kind, key) due no later than ``job.due_at``
        (and at least ``job.priority``). A job being run is marked so it runs again after its run."""
        ...

    async def schedule_new(self, jobs: Sequence[NewJob]) -> None:
        """Schedules jobs whose (kind, key) were never used (e.g. keys holding a new row's id), all at once in the
        caller's unit of work: one statement on SQL. A (kind, key) that exists all the same is left as it is."""
        ...

    async def claim(self, kind: str, owner: str, now: datetime, lease_until: datetime, limit: int, *,
                    due_by: datetime | None = None) -> list[ClaimedJob]:
        """Lease up to ``limit`` due jobs of ``kind`` (not leased, or lease expired) in priority, due, id order.
        Two claimers never get the same job (PostgreSQL: FOR UPDATE SKIP LOCKED; SQLite: one writer).
        ``due_by`` (a wake-up) also claims jobs due up to then."""
        ...

    async def due_kinds(self, kinds: Sequence[str], now: datetime, *, woken: Sequence[str] = ()) -> set[str]:
        """Which of ``kinds`` have a job that ``claim`` would lease now: due by ``now``, not failed, not leased
        (or its lease expired); for a kind in ``woken`` (a wake-up, ``claim``'s ``due_by``) a job not yet due
        counts too. One question for every kind, so an idle runner claims nothing instead of one kind after
        another."""
        ...

    async def complete(self, job: ClaimedJob, next_due: datetime | None) -> bool:
        """The run succeeded: delete the job, or keep it due at ``next_due`` (a recurring job), attempts reset.
        A job scheduled again during the run stays due at the earlier of both times. False when the lease was
        lost (another owner has it now)."""
        ...

    async def retry(self, job: ClaimedJob, due_at: datetime, error: str) -> bool:
        """The run failed: release the lease, due again at ``due_at``, ``last_error`` kept."""
        ...

    async def fail(self, job: ClaimedJob, error: str, now: datetime) -> bool:
        """The run failed for the last time: the job stays, ``failed_at`` set, never claimed again."""
        ...

    async def release(self, owner: str, job_ids: Sequence[int]) -> None:
        """Give leases back unrun (a draining worker): due as before, the attempt not counted."""
        ...

    async def next_due(self, kinds: Sequence[str]) -> datetime | None:
        """The earliest time a job of these kinds may be claimed (due, or its lease expires); None: no job."""
        ...

    async def purge_failed(self, before: datetime) -> int:
        """Forget the jobs that failed for the last time before ``before`` (housekeeping); how many."""
        ...


class JobOutcome(StrEnum):
    """How a job run ended (the job line's ``outcome`` and the metrics' label)."""

    OK = "ok"
    RETRY = "retry"
    """It failed; it runs again after its backoff."""
    FAILED = "failed"
    """It failed for the last time (``max_attempts``)."""
    LEASE_EXPIRED = "lease_expired"
    """It ran past its lease (the job line only: another owner may have claimed it)."""


class JobObserver(Protocol):
    """Told of every job run's outcome (``JobOutcome``: ``ok``, ``retry``, ``failed``) and of every lease a run
    lost (it ran past its lease and another owner may have claimed the job): metrics."""

    def job_finished(self, kind: str, outcome: JobOutcome) -> None: ...

    def leases_expired(self, kind: str, job_ids: Sequence[int]) -> None: ...
