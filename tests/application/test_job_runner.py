"""The job runner on the memory queue with a ManualClock: due order, backoff with jitter, giving up, lease
expiry, concurrency limits, drain on stop and wake-ups."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.memory.clock import ManualClock
from application.jobs import JobKind, JobRunner, JobWakeUps, backoff, drain_batches, due_or_beat, next_beat
from application.ports.jobs import ClaimedJob, JobQueue, NewJob
from entrypoints.ioc import build_container
from entrypoints.overrides import ClockProvider
from entrypoints.settings import Settings
from entrypoints.units import ScopedUnits

T0 = datetime(2026, 4, 6, 8, tzinfo=UTC)
BOUND = 5.0  # seconds a test waits at most for the runner's task (it never needs it)


class FixedRandom:
    """Jitter at a known point: ``uniform(low, high)`` returns ``low + fraction * (high - low)``."""

    def __init__(self, fraction: float) -> None:
        self.fraction = fraction

    def uniform(self, low: float, high: float) -> float:
        return low + self.fraction * (high - low)

    def hex(self, nbytes: int) -> str:
        return "0" * nbytes * 2


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
async def units(tmp_path: Path, clock: ManualClock) -> AsyncIterator[ScopedUnits]:
    settings = Settings(database_url="memory://", var_dir=tmp_path, secret_key="test-secret-key")
    container = build_container(settings, ClockProvider(clock))
    yield ScopedUnits(container)
    await container.close()


async def _schedule(units: ScopedUnits, *jobs: NewJob) -> None:
    async with units.begin() as unit:
        for job in jobs:
            await (await unit.get(JobQueue)).schedule(job)
        await unit.commit()


async def _claim(units: ScopedUnits, kind: str, now: datetime) -> list[ClaimedJob]:
    async with units.begin() as unit:  # left without commit: rolled back, the probe leaves no lease behind
        return await (await unit.get(JobQueue)).claim(kind, "probe", now, now + timedelta(seconds=1), 100)


def _runner(units: ScopedUnits, clock: ManualClock, *kinds: JobKind, **options: Any) -> JobRunner:
    return JobRunner(kinds, units, clock, FixedRandom(0.0), "runner-1", **options)


async def test_due_jobs_run_in_priority_order_and_later_ones_wait(units: ScopedUnits, clock: ManualClock) -> None:
    ran: list[str] = []

    async def handler(job: ClaimedJob) -> None:
        ran.append(job.key)

    await _schedule(units, NewJob("k", T0, "campaign"), NewJob("k", T0, "single", priority=10),
                    NewJob("k", T0 + timedelta(minutes=1), "later"))
    runner = _runner(units, clock, JobKind("k", handler))
    assert await runner.run_due() == 2
    assert ran == ["single", "campaign"]
    assert await runner.run_due() == 0
    clock.advance(minutes=1)
    assert await runner.run_due() == 1 and ran[-1] == "later"


async def test_a_failing_job_backs_off_exponentially_with_jitter_then_gives_up(
        units: ScopedUnits, clock: ManualClock) -> None:
    attempts: list[int] = []

    async def flaky(job: ClaimedJob) -> None:
        attempts.append(job.attempts)
        raise RuntimeError("receiver down")

    kind = JobKind("flaky", flaky, max_attempts=3, backoff_base=timedelta(seconds=10))
    assert backoff(kind, 3, FixedRandom(1.0)) == timedelta(seconds=40)
    assert backoff(kind, 3, FixedRandom(0.0)) == timedelta(seconds=20)  # jitter: between half and the whole
    assert backoff(JobKind("x", flaky, backoff_max=timedelta(seconds=30)), 20, FixedRandom(1.0)).total_seconds() == 30
    runner = JobRunner([kind], units, clock, FixedRandom(0.5), "runner-1")
    await _schedule(units, NewJob("flaky", T0, "one"))
    assert await runner.run_due() == 1
    clock.advance(seconds=7.4)
    assert await runner.run_due() == 0  # 10 s * 0.75
    clock.advance(seconds=0.1)
    assert await runner.run_due() == 1
    clock.advance(seconds=14.9)
    assert await runner.run_due() == 0  # 20 s * 0.75
    clock.advance(seconds=0.1)
    assert await runner.run_due() == 1
    clock.advance(days=30)
    assert await runner.run_due() == 0  # the third attempt was the last: the job failed for good
    assert attempts == [1, 2, 3]


async def test_a_crashed_owners_job_is_taken_over_after_its_lease(units: ScopedUnits, clock: ManualClock) -> None:
    ran: list[int] = []

    async def handler(job: ClaimedJob) -> None:
        ran.append(job.attempts)

    await _schedule(units, NewJob("k", T0, "only"))
    async with units.begin() as unit:  # a worker claims it and dies
        await (await unit.get(JobQueue)).claim("k", "crashed", T0, T0 + timedelta(seconds=60), 1)
        await unit.commit()
    runner = _runner(units, clock, JobKind("k", handler))
    clock.advance(seconds=59)
    assert await runner.run_due() == 0
    clock.advance(seconds=1)
    assert await runner.run_due() == 1 and ran == [2]


async def test_a_recurring_job_is_due_again_when_its_handler_says(units: ScopedUnits, clock: ManualClock) -> None:
    async def tick(job: ClaimedJob) -> datetime:
        return clock.now() + timedelta(minutes=10)

    runner = _runner(units, clock, JobKind("tick", tick, recurring=True))
    await runner.start()
    assert await runner.run_due() == 1
    clock.advance(minutes=9)
    assert await runner.run_due() == 0
    clock.advance(minutes=1)
    assert await runner.run_due() == 1


async def test_the_runner_holds_its_concurrency_limit_and_drains_on_stop(
        units: ScopedUnits, clock: ManualClock) -> None:
    started: list[str] = []
    release = asyncio.Event()
    two_running = asyncio.Event()

    async def slow(job: ClaimedJob) -> None:
        started.append(job.key)
        if len(started) == 2:
            two_running.set()
        await release.wait()

    await _schedule(units, *(NewJob("slow", T0, f"j{n}") for n in range(5)))
    runner = _runner(units, clock, JobKind("slow", slow, concurrency=2), grace_seconds=BOUND)
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    await asyncio.wait_for(two_running.wait(), BOUND)
    for _ in range(20):
        await asyncio.sleep(0)  # let the runner look again: its slots are full
    assert len(started) == 2
    stop.set()  # drain: nothing new is claimed, the two in flight finish
    release.set()
    await asyncio.wait_for(task, BOUND)
    assert len(started) == 2
    assert sorted(j.key for j in await _claim(units, "slow", T0)) == ["j2", "j3", "j4"]  # the two finished


async def test_a_drain_past_its_grace_releases_the_leases(units: ScopedUnits, clock: ManualClock) -> None:
    running = asyncio.Event()

    async def stuck(job: ClaimedJob) -> None:
        running.set()
        await asyncio.Event().wait()

    await _schedule(units, NewJob("stuck", T0, "j"))
    runner = _runner(units, clock, JobKind("stuck", stuck), grace_seconds=0)
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    await asyncio.wait_for(running.wait(), BOUND)
    stop.set()
    await asyncio.wait_for(task, BOUND)
    [job] = await _claim(units, "stuck", T0)  # released at once, not after its 60 s lease
    assert job.attempts == 1  # the interrupted attempt does not count


async def test_a_wake_up_runs_an_on_wake_job_before_it_is_due(units: ScopedUnits, clock: ManualClock) -> None:
    ran = asyncio.Event()

    async def look(job: ClaimedJob) -> datetime:
        ran.set()
        return clock.now() + timedelta(hours=1)

    await _schedule(units, NewJob("look", T0 + timedelta(hours=1)))
    wake_ups = JobWakeUps()
    runner = _runner(units, clock, JobKind("look", look, on_wake=True), wake=wake_ups.subscribe(),
                     safety_poll_seconds=3600)
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not ran.is_set()  # not due, and the runner sleeps (the safety poll is an hour)
    wake_ups.notify()
    await asyncio.wait_for(ran.wait(), BOUND)
    stop.set()
    await asyncio.wait_for(task, BOUND)


class CountingUnits:
    """The units of work a runner opens, counted, with the claims made through them."""

    def __init__(self, units: ScopedUnits) -> None:
        self.units = units
        self.opened = 0
        self.committed = 0
        self.claims: list[str] = []

    @contextlib.asynccontextmanager
    async def begin(self) -> AsyncIterator[Any]:
        self.opened += 1
        async with self.units.begin() as unit:
            yield _CountingUnit(self, unit)


class _CountingUnit:
    def __init__(self, counts: CountingUnits, unit: Any) -> None:
        self.counts, self.unit = counts, unit

    async def get(self, dependency: type[Any]) -> Any:
        found = await self.unit.get(dependency)
        if dependency is JobQueue:
            counts, claim = self.counts, found.claim

            async def counted_claim(kind: str, *args: Any, **kwargs: Any) -> list[ClaimedJob]:
                counts.claims.append(kind)
                return await claim(kind, *args, **kwargs)

            found.claim = counted_claim
        return found

    async def commit(self) -> None:
        self.counts.committed += 1
        await self.unit.commit()


TWELVE = [f"kind.{n}" for n in range(12)]


async def _one_pass(runner: JobRunner) -> None:
    """Start the runner, let it look at the queue and fall asleep (its safety poll is an hour), stop it."""
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    for _ in range(50):
        await asyncio.sleep(0)
    stop.set()
    await asyncio.wait_for(task, BOUND)


async def test_an_idle_pass_over_many_kinds_is_one_unit_of_work_and_claims_nothing(
        units: ScopedUnits, clock: ManualClock) -> None:
    async def never(job: ClaimedJob) -> None:
        raise AssertionError("nothing is due")

    await _schedule(units, *(NewJob(name, T0 + timedelta(minutes=10)) for name in TWELVE))
    counting = CountingUnits(units)
    runner = _runner(counting, clock, *(JobKind(name, never, recurring=True) for name in TWELVE),
                     safety_poll_seconds=3600)
    await _one_pass(runner)
    assert counting.claims == []  # one question for all twelve kinds instead of a claim each
    assert counting.opened == 1 and counting.committed == 0  # and the next due time read in the same unit


async def test_a_pass_claims_only_the_kinds_with_due_work(units: ScopedUnits, clock: ManualClock) -> None:
    ran: list[str] = []

    async def tick(job: ClaimedJob) -> datetime:
        ran.append(job.kind)
        return clock.now() + timedelta(minutes=10)

    await _schedule(units, *(NewJob(name, T0 + timedelta(minutes=10)) for name in TWELVE))
    await _schedule(units, NewJob("kind.5", T0), NewJob("kind.9", T0 - timedelta(seconds=1)))
    counting = CountingUnits(units)
    runner = _runner(counting, clock, *(JobKind(name, tick, recurring=True) for name in TWELVE),
                     safety_poll_seconds=3600)
    await _one_pass(runner)
    assert sorted(ran) == ["kind.5", "kind.9"]
    assert sorted(counting.claims) == ["kind.5", "kind.9"]
    assert counting.opened <= 6  # claims (one unit), two outcomes, and passes that find nothing due
    async with units.begin() as unit:
        assert await (await unit.get(JobQueue)).next_due(TWELVE) == T0 + timedelta(minutes=10)


async def test_a_wake_up_claims_only_the_on_wake_kinds_that_are_free(units: ScopedUnits,
                                                                      clock: ManualClock) -> None:
    ran: list[str] = []

    async def tick(job: ClaimedJob) -> datetime:
        ran.append(job.kind)
        return clock.now() + timedelta(minutes=10)

    await _schedule(units, *(NewJob(name, T0 + timedelta(minutes=10)) for name in TWELVE))
    counting = CountingUnits(units)
    wake_ups = JobWakeUps()
    kinds = [JobKind(name, tick, recurring=True, on_wake=name in {"kind.1", "kind.2"}) for name in TWELVE]
    runner = _runner(counting, clock, *kinds, wake=wake_ups.subscribe(), safety_poll_seconds=3600)
    wake_ups.notify()
    await _one_pass(runner)
    assert sorted(ran) == ["kind.1", "kind.2"] and sorted(counting.claims) == ["kind.1", "kind.2"]


def test_rechecks_on_the_same_beat_fall_due_together() -> None:
    period = timedelta(seconds=15)
    beat = datetime(2026, 4, 6, 8, 0, 15, tzinfo=UTC)
    for before in (15.0, 14.0, 7.4, 0.001):  # whenever in the previous period a job ran, it is due on the same beat
        assert next_beat(beat - timedelta(seconds=before), period) == beat
    assert next_beat(beat, period) == beat + period  # run on the beat: due again one period later
    assert next_beat(beat + timedelta(seconds=0.2), period) == beat + period  # (claimed just after it)


async def test_a_backlog_is_drained_while_a_batch_comes_back_full() -> None:
    backlog = [3, 3, 1, 3]  # what each step would handle, with batches of 3

    async def step() -> int:
        return backlog.pop(0)

    assert await drain_batches(step, 3) == 7  # two full batches, then a short one ends it
    assert backlog == [3]
    backlog[:] = [0, 3]
    assert await drain_batches(step, 3) == 0  # an empty first batch: one step only
    assert backlog == [3]


def test_a_pass_is_due_at_its_next_work_but_never_after_the_next_beat() -> None:
    now = datetime(2026, 1, 5, 9, 0, 3, tzinfo=UTC)
    beat = timedelta(seconds=15)
    assert due_or_beat(None, now, beat) == datetime(2026, 1, 5, 9, 0, 15, tzinfo=UTC)
    assert due_or_beat(now + timedelta(seconds=2), now, beat) == now + timedelta(seconds=2)
    assert due_or_beat(now + timedelta(minutes=5), now, beat) == datetime(2026, 1, 5, 9, 0, 15, tzinfo=UTC)
