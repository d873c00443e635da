"""The job queue behaves the same on memory, SQLite and PostgreSQL: priority then due order, leases that
expire, rescheduling, retry and failure; on PostgreSQL concurrent claimers never share a job."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from adapters.memory.clock import ManualClock
from adapters.sql.engine import create_engine
from adapters.sql.jobs import listen
from adapters.sql.uow import NOTIFY_CHANNEL
from application.ports.jobs import ClaimedJob, JobQueue, NewJob
from application.ports.platform import UnitOfWork
from entrypoints.ioc import build_container
from entrypoints.overrides import ClockProvider
from entrypoints.settings import Settings
from tests.processes import until

T0 = datetime(2026, 4, 6, 8, tzinfo=UTC)
LEASE = timedelta(seconds=30)


def _kind() -> str:
    return f"test.{uuid.uuid4().hex[:12]}"  # the database is shared by the run: each test its own kind


async def _do(container: Any, work: Any) -> Any:
    async with container() as r:
        result = await work(await r.get(JobQueue))
        await (await r.get(UnitOfWork)).commit()
        return result


async def _claim(container: Any, kind: str, owner: str, now: datetime, limit: int = 10) -> list[ClaimedJob]:
    return await _do(container, lambda q: q.claim(kind, owner, now, now + LEASE, limit))


async def test_claims_follow_priority_then_due_time(container: Any) -> None:
    kind = _kind()
    for key, priority, due in [("campaign-1", 0, T0), ("campaign-2", 0, T0 - timedelta(minutes=1)),
                               ("single-late", 10, T0), ("single-early", 10, T0 - timedelta(seconds=1)),
                               ("future", 99, T0 + timedelta(hours=1))]:
        await _do(container, lambda q, k=key, p=priority, d=due: q.schedule(NewJob(kind, d, k, {"n": k}, p)))
    claimed = await _claim(container, kind, "w1", T0)
    assert [j.key for j in claimed] == ["single-early", "single-late", "campaign-2", "campaign-1"]
    assert claimed[0].payload == {"n": "single-early"} and claimed[0].attempts == 1
    assert await _do(container, lambda q: q.next_due([kind])) == T0 + LEASE  # the claimed ones come back then


async def test_a_campaign_backlog_never_starves_a_single_call(container: Any) -> None:
    kind = _kind()
    for n in range(30):  # a dialer queued a backlog long ago
        await _do(container, lambda q, n=n: q.schedule(NewJob(kind, T0 - timedelta(hours=1), f"campaign-{n}")))
    await _do(container, lambda q: q.schedule(NewJob(kind, T0, "single", priority=10)))
    first = await _claim(container, kind, "w1", T0, limit=1)
    assert [j.key for j in first] == ["single"]


async def test_a_lease_expires_and_another_owner_takes_the_job_over(container: Any) -> None:
    kind = _kind()
    await _do(container, lambda q: q.schedule(NewJob(kind, T0, "only")))
    [held] = await _claim(container, kind, "crashed", T0)
    assert await _claim(container, kind, "other", T0 + LEASE - timedelta(seconds=1)) == []
    assert await _do(container, lambda q: q.next_due([kind])) == T0 + LEASE
    [taken] = await _claim(container, kind, "other", T0 + LEASE)
    assert taken.id == held.id and taken.attempts == 2 and taken.lease_owner == "other"
    assert await _do(container, lambda q: q.complete(held, None)) is False  # the old owner lost it
    assert await _do(container, lambda q: q.complete(taken, None)) is True
    assert await _do(container, lambda q: q.next_due([kind])) is None


async def test_recurring_jobs_retries_failures_and_releases(container: Any) -> None:
    kind = _kind()
    await _do(container, lambda q: q.schedule(NewJob(kind, T0, "tick")))
    [job] = await _claim(container, kind, "w", T0)
    assert await _do(container, lambda q: q.complete(job, T0 + timedelta(minutes=10)))
    assert await _claim(container, kind, "w", T0 + timedelta(minutes=9)) == []
    [job] = await _claim(container, kind, "w", T0 + timedelta(minutes=10))
    assert job.attempts == 1  # a completed run resets the attempts
    assert await _do(container, lambda q: q.retry(job, T0 + timedelta(minutes=11), "boom"))
    assert await _claim(container, kind, "w", T0 + timedelta(minutes=10, seconds=59)) == []
    [job] = await _claim(container, kind, "w", T0 + timedelta(minutes=11))
    assert job.attempts == 2
    await _do(container, lambda q: q.release("w", [job.id]))  # a draining runner gives it back unrun
    [job] = await _claim(container, kind, "w2", T0 + timedelta(minutes=11))
    assert job.attempts == 2
    assert await _do(container, lambda q: q.fail(job, "gave up", T0))
    assert await _claim(container, kind, "w", T0 + timedelta(days=1)) == []
    assert await _do(container, lambda q: q.next_due([kind])) is None


async def test_scheduling_again_moves_earlier_and_reruns_a_job_in_flight(container: Any) -> None:
    kind = _kind()
    await _do(container, lambda q: q.schedule(NewJob(kind, T0 + timedelta(hours=1), "k")))
    await _do(container, lambda q: q.schedule(NewJob(kind, T0 + timedelta(hours=2), "k")))  # never later
    assert await _do(container, lambda q: q.next_due([kind])) == T0 + timedelta(hours=1)
    await _do(container, lambda q: q.schedule(NewJob(kind, T0, "k")))
    [job] = await _claim(container, kind, "w", T0)
    await _do(container, lambda q: q.schedule(NewJob(kind, T0, "k")))  # new work while it runs
    assert await _do(container, lambda q: q.complete(job, None))
    [again] = await _claim(container, kind, "w", T0)  # not deleted: it runs again
    assert again.id == job.id
    assert await _do(container, lambda q: q.complete(again, None))
    assert await _do(container, lambda q: q.next_due([kind])) is None


async def test_a_wake_up_claims_a_job_before_it_is_due(container: Any) -> None:
    kind = _kind()
    await _do(container, lambda q: q.schedule(NewJob(kind, T0 + timedelta(minutes=5), "w")))
    assert await _claim(container, kind, "w", T0) == []
    woken = await _do(container, lambda q: q.claim(kind, "w", T0, T0 + LEASE, 1, due_by=T0 + timedelta(days=1)))
    assert [j.key for j in woken] == ["w"]


async def test_due_kinds_names_the_kinds_a_claim_would_lease_now(container: Any) -> None:
    due, later, leased, failed, absent = (_kind() for _ in range(5))
    await _do(container, lambda q: q.schedule(NewJob(due, T0 - timedelta(seconds=1), "a")))
    await _do(container, lambda q: q.schedule(NewJob(due, T0 + timedelta(hours=1), "b")))
    await _do(container, lambda q: q.schedule(NewJob(later, T0 + timedelta(minutes=5))))
    await _do(container, lambda q: q.schedule(NewJob(leased, T0)))
    await _do(container, lambda q: q.schedule(NewJob(failed, T0)))
    await _claim(container, leased, "w", T0)
    [doomed] = await _claim(container, failed, "w", T0)
    assert await _do(container, lambda q: q.fail(doomed, "gave up", T0))
    kinds = [due, later, leased, failed, absent]
    assert await _do(container, lambda q: q.due_kinds(kinds, T0)) == {due}
    assert await _do(container, lambda q: q.due_kinds(kinds, T0, woken=[later, absent])) == {due, later}
    assert await _do(container, lambda q: q.due_kinds(kinds, T0 + LEASE)) == {due, leased}  # its lease expired
    assert await _do(container, lambda q: q.due_kinds([later, leased], T0)) == set()
    assert await _do(container, lambda q: q.due_kinds([], T0)) == set()
    for kind in (due, leased):  # what due_kinds names, claim leases
        assert await _claim(container, kind, "w2", T0 + LEASE)
    assert await _do(container, lambda q: q.due_kinds(kinds, T0 + LEASE)) == set()


@pytest.mark.postgres
async def test_concurrent_claimers_never_share_a_job_on_postgresql(postgres_url: str, tmp_root: Path) -> None:
    clock = ManualClock(T0)
    settings = Settings(database_url=postgres_url, var_dir=tmp_root / "var", secret_key="test-secret-key",
                        db_pool_size=20)
    container = build_container(settings, ClockProvider(clock))
    kind = _kind()
    try:
        async with container() as r:
            queue = await r.get(JobQueue)
            for n in range(200):
                await queue.schedule(NewJob(kind, T0, f"job-{n}"))
            await (await r.get(UnitOfWork)).commit()

        async def claimer(name: str) -> list[int]:
            got: list[int] = []
            while True:
                batch = await _claim(container, kind, name, T0, limit=7)
                if not batch:
                    return got
                got.extend(j.id for j in batch)

        results = await asyncio.gather(*(claimer(f"w{n}") for n in range(8)))
        everything = [job_id for ids in results for job_id in ids]
        assert len(everything) == 200 and len(set(everything)) == 200
        assert sum(1 for ids in results if ids) > 1  # the claimers really ran side by side
    finally:
        await container.close()


async def test_a_recurring_job_scheduled_during_its_run_keeps_the_earlier_time(container: Any) -> None:
    kind = _kind()
    await _do(container, lambda q: q.schedule(NewJob(kind, T0, "tick")))
    [job] = await _claim(container, kind, "w", T0)
    await _do(container, lambda q: q.schedule(NewJob(kind, T0 + timedelta(minutes=1), "tick")))  # new work
    assert await _do(container, lambda q: q.complete(job, T0 + timedelta(minutes=10)))
    assert await _do(container, lambda q: q.next_due([kind])) == T0  # the earlier of both: due at once
    [again] = await _claim(container, kind, "w", T0)
    assert again.id == job.id and again.attempts == 1
    assert await _do(container, lambda q: q.complete(again, T0 + timedelta(minutes=10)))
    assert await _do(container, lambda q: q.next_due([kind])) == T0 + timedelta(minutes=10)
    assert await _claim(container, kind, "w", T0 + timedelta(minutes=10) - timedelta(microseconds=1)) == []
    assert [j.id for j in await _claim(container, kind, "w", T0 + timedelta(minutes=10))] == [job.id]


@pytest.mark.postgres
async def test_the_listener_listens_again_after_its_connection_dropped(postgres_url: str) -> None:
    engine = create_engine(postgres_url)
    woken = asyncio.Event()
    listener = await listen(engine, woken.set, retry_seconds=0.05)
    assert listener is not None

    async def notify() -> None:
        async with engine.connect() as conn:
            await conn.execute(sa.text(f"NOTIFY {NOTIFY_CHANNEL}"))
            await conn.commit()

    try:
        await notify()
        await asyncio.wait_for(woken.wait(), 10)
        woken.clear()
        first = listener.server_pid
        async with engine.connect() as conn:  # the server ends the listening backend (a restart, an operator)
            await conn.execute(sa.select(sa.func.pg_terminate_backend(first)))
        await until(lambda: _true(listener.opened == 2), 10, "the listener to listen again")
        assert listener.server_pid != first
        await asyncio.wait_for(woken.wait(), 10)  # woken once it listens again: what was missed is looked at
        woken.clear()
        await notify()
        await asyncio.wait_for(woken.wait(), 10)  # and notifications arrive again
    finally:
        await listener.close()
        await engine.dispose()


async def _true(value: bool) -> bool:
    return value
