"""The job queue on SQL. Claims are exclusive: PostgreSQL skips rows another claimer holds
(FOR UPDATE SKIP LOCKED); SQLite has one writer at a time (write transactions begin IMMEDIATE)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from adapters.sql.dialect import insert
from adapters.sql.jobs_tables import jobs
from adapters.sql.metadata import UtcDateTime
from adapters.sql.uow import NOTIFY_CHANNEL, SqlUnitOfWork
from application.ports.jobs import ClaimedJob, NewJob
from application.ports.platform import Clock

# a new job's insert for many at once (``schedule_new``); built once per dialect
_NEW_JOBS = {dialect: insert(jobs, dialect).on_conflict_do_nothing(index_elements=["kind", "key"])
             for dialect in ("postgresql", "sqlite")}

log = logging.getLogger("parley.jobs")


def _earlier(a: Any, b: Any) -> Any:
    return sa.case((a <= b, a), else_=b)


class SqlJobQueue:
    def __init__(self, uow: SqlUnitOfWork, clock: Clock) -> None:
        self.uow, self.clock = uow, clock

    async def schedule(self, job: NewJob) -> None:
        conn = await self.uow.connection()
        statement = insert(jobs, self.uow.dialect).values(
            kind=job.kind, key=job.key, payload=dict(job.payload), priority=job.priority, due_at=job.due_at,
            attempts=0, version=0, created_at=self.clock.now())
        excluded = statement.excluded
        await conn.execute(statement.on_conflict_do_update(
            index_elements=[jobs.c.kind, jobs.c.key],
            set_={"due_at": _earlier(jobs.c.due_at, excluded.due_at),
                  "priority": sa.case((jobs.c.priority >= excluded.priority, jobs.c.priority),
                                      else_=excluded.priority),
                  "payload": excluded.payload, "version": jobs.c.version + 1, "failed_at": None}))
        self.uow.created_work()  # wakes the runners once committed

    async def schedule_new(self, new: Sequence[NewJob]) -> None:
        if not new:
            return
        conn = await self.uow.connection()
        now = self.clock.now()
        await conn.execute(_NEW_JOBS[self.uow.dialect], [
            {"kind": j.kind, "key": j.key, "payload": dict(j.payload), "priority": j.priority, "due_at": j.due_at,
             "attempts": 0, "version": 0, "created_at": now} for j in new])
        self.uow.created_work()  # wakes the runners once committed

    async def claim(self, kind: str, owner: str, now: datetime, lease_until: datetime, limit: int, *,
                    due_by: datetime | None = None) -> list[ClaimedJob]:
        conn = await self.uow.connection()
        due = (
            sa.select(jobs.c.id)
            .where(jobs.c.kind == kind, jobs.c.failed_at.is_(None), jobs.c.due_at <= (due_by or now),
                   sa.or_(jobs.c.lease_expires_at.is_(None), jobs.c.lease_expires_at <= now))
            .order_by(jobs.c.priority.desc(), jobs.c.due_at, jobs.c.id)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        rows = (await conn.execute(
            jobs.update().where(jobs.c.id.in_(due.scalar_subquery()))
            .values(attempts=jobs.c.attempts + 1, lease_owner=owner, lease_expires_at=lease_until)
            .returning(jobs.c.id, jobs.c.kind, jobs.c.key, jobs.c.payload, jobs.c.priority, jobs.c.due_at,
                       jobs.c.attempts, jobs.c.version)
        )).all()
        claimed = [ClaimedJob(r.id, r.kind, r.key, dict(r.payload or {}), r.priority, r.due_at, r.attempts, owner,
                              lease_until, r.version) for r in rows]
        return sorted(claimed, key=lambda j: (-j.priority, j.due_at, j.id))

    async def due_kinds(self, kinds: Sequence[str], now: datetime, *, woken: Sequence[str] = ()) -> set[str]:
        if not kinds:
            return set()
        conn = await self.uow.connection()
        due = jobs.c.due_at <= now
        if woken:
            due = sa.or_(due, jobs.c.kind.in_(list(woken)))
        rows = await conn.execute(
            sa.select(jobs.c.kind).distinct()
            .where(jobs.c.kind.in_(list(kinds)), jobs.c.failed_at.is_(None), due,
                   sa.or_(jobs.c.lease_expires_at.is_(None), jobs.c.lease_expires_at <= now)))
        return {row.kind for row in rows}

    def _held(self, job: ClaimedJob) -> Any:
        return sa.and_(jobs.c.id == job.id, jobs.c.lease_owner == job.lease_owner)

    async def complete(self, job: ClaimedJob, next_due: datetime | None) -> bool:
        """One statement as a rule: the job deleted or made due again, as long as nobody scheduled it during the
        run; one scheduled again meanwhile (a newer version) stays due at the earlier of both times."""
        conn = await self.uow.connection()
        done = {"attempts": 0, "lease_owner": None, "lease_expires_at": None, "last_error": None}
        if next_due is None:
            deleted = await conn.execute(jobs.delete().where(self._held(job), jobs.c.version == job.schedule_version))
            if deleted.rowcount:
                return True
            due_at: Any = jobs.c.due_at  # scheduled again while running (or the lease is lost): run again
        else:
            when = sa.literal(next_due, UtcDateTime())
            due_at = sa.case((jobs.c.version == job.schedule_version, when), else_=_earlier(jobs.c.due_at, when))
        row = (await conn.execute(
            jobs.update().where(self._held(job)).values(due_at=due_at, **done).returning(jobs.c.id))).first()
        return row is not None

    async def retry(self, job: ClaimedJob, due_at: datetime, error: str) -> bool:
        conn = await self.uow.connection()
        result = await conn.execute(jobs.update().where(self._held(job)).values(
            due_at=due_at, lease_owner=None, lease_expires_at=None, last_error=error[:2000]))
        return bool(result.rowcount)

    async def fail(self, job: ClaimedJob, error: str, now: datetime) -> bool:
        conn = await self.uow.connection()
        result = await conn.execute(jobs.update().where(self._held(job)).values(
            lease_owner=None, lease_expires_at=None, last_error=error[:2000], failed_at=now))
        return bool(result.rowcount)

    async def release(self, owner: str, job_ids: Sequence[int]) -> None:
        if not job_ids:
            return
        conn = await self.uow.connection()
        await conn.execute(jobs.update().where(jobs.c.id.in_(list(job_ids)), jobs.c.lease_owner == owner).values(
            attempts=sa.case((jobs.c.attempts > 0, jobs.c.attempts - 1), else_=0),
            lease_owner=None, lease_expires_at=None))

    async def next_due(self, kinds: Sequence[str]) -> datetime | None:
        conn = await self.uow.connection()
        when = sa.case((jobs.c.lease_expires_at > jobs.c.due_at, jobs.c.lease_expires_at), else_=jobs.c.due_at)
        earliest = sa.type_coerce(sa.func.min(when), UtcDateTime())
        return (await conn.execute(
            sa.select(earliest).where(jobs.c.kind.in_(list(kinds)), jobs.c.failed_at.is_(None)))).scalar()

    async def purge_failed(self, before: datetime) -> int:
        conn = await self.uow.connection()
        result = await conn.execute(jobs.delete().where(jobs.c.failed_at.is_not(None), jobs.c.failed_at < before))
        return int(result.rowcount or 0)


class JobListener:
    """PostgreSQL: LISTEN on the jobs channel and call ``on_notify()`` for every notification. A dropped connection
    (a restarted server, a killed backend) is reopened, after ``retry_seconds`` while that fails, and
    ``on_notify()`` is called once it listens again: what was committed meanwhile is looked at."""

    def __init__(self, engine: Any, on_notify: Callable[[], None], *, retry_seconds: float = 1.0,
                 channel: str = NOTIFY_CHANNEL, on_payload: Callable[[str], None] | None = None) -> None:
        """``channel``: the one to LISTEN on; ``on_payload``: called with each notification's payload instead of
        ``on_notify()`` (which is still called once listening again after a dropped connection)."""
        self.engine, self.on_notify, self.retry_seconds = engine, on_notify, retry_seconds
        self.channel, self.on_payload = channel, on_payload
        self.opened = 0
        """How many times LISTEN was opened (1 + the reopenings)."""
        self.server_pid: int | None = None
        """The PostgreSQL backend that listens now (``pg_stat_activity``)."""
        self._connection: Any = None
        self._dropped = asyncio.Event()
        self._keeper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._open()
        self._keeper = asyncio.create_task(self._keep_listening())

    async def _open(self) -> None:
        conn = await self.engine.connect()
        try:
            raw = (await conn.get_raw_connection()).driver_connection
            await raw.add_listener(self.channel, self._received)
            raw.add_termination_listener(lambda *_: self._dropped.set())
            self.server_pid = raw.get_server_pid()
        except BaseException:
            with contextlib.suppress(Exception):
                await conn.invalidate()
            raise
        self._connection = conn
        self.opened += 1

    def _received(self, connection: Any, pid: int, channel: str, payload: str) -> None:
        if self.on_payload is not None:
            self.on_payload(payload)
        else:
            self.on_notify()

    async def _keep_listening(self) -> None:
        while True:
            await self._dropped.wait()
            self._dropped.clear()
            dropped, self._connection = self._connection, None
            if dropped is not None:
                with contextlib.suppress(Exception):
                    await dropped.invalidate()  # gone: never handed back to the pool
            log.warning("the job notification listener lost its connection; listening again")
            while True:
                try:
                    await self._open()
                    break
                except Exception:
                    log.warning("listening for job notifications failed; trying again in %.1f s", self.retry_seconds)
                    await asyncio.sleep(self.retry_seconds)
            self.on_notify()

    async def close(self) -> None:
        if self._keeper is not None:
            self._keeper.cancel()
            await asyncio.gather(self._keeper, return_exceptions=True)
        if self._connection is not None:
            with contextlib.suppress(Exception):
                await self._connection.close()
            self._connection = None


async def listen(engine: Any, on_notify: Callable[[], None], *, retry_seconds: float = 1.0) -> JobListener | None:
    """PostgreSQL: call ``on_notify()`` whenever a commit in any process created work (``JobListener``: close it to
    stop). None on SQLite (in-process wake-ups only)."""
    if engine.dialect.name != "postgresql":
        return None
    listener = JobListener(engine, on_notify, retry_seconds=retry_seconds)
    await listener.start()
    return listener
