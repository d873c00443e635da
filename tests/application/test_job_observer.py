"""The job runner tells its observer each run's outcome and each lease a run outlived (the metrics' source)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from adapters.memory.clock import ManualClock
from application.jobs import JobKind, JobRunner
from application.ports.jobs import ClaimedJob, NewJob
from entrypoints.units import ScopedUnits
from tests.application.test_job_runner import T0, FixedRandom, _schedule, clock, units  # noqa: F401


class Recorder:
    def __init__(self) -> None:
        self.finished: list[tuple[str, str]] = []
        self.expired: list[tuple[str, list[int]]] = []

    def job_finished(self, kind: str, outcome: str) -> None:
        self.finished.append((kind, outcome))

    def leases_expired(self, kind: str, job_ids: Sequence[int]) -> None:
        self.expired.append((kind, list(job_ids)))


async def test_outcomes_and_an_outlived_lease_reach_the_observer(units: ScopedUnits,  # noqa: F811
                                                                   clock: ManualClock) -> None:  # noqa: F811
    async def ok(job: ClaimedJob) -> None:
        return None

    async def flaky(job: ClaimedJob) -> None:
        raise RuntimeError("down")

    async def slow(job: ClaimedJob) -> None:
        clock.advance(seconds=61)  # runs past its 60 s lease; another runner takes the job over meanwhile
        await other.run_due()

    async def other_run(job: ClaimedJob) -> None:
        return None

    recorder = Recorder()
    runner = JobRunner([JobKind("ok", ok), JobKind("flaky", flaky, max_attempts=1), JobKind("slow", slow)],
                       units, clock, FixedRandom(0.0), "runner-1", observer=recorder)
    other = JobRunner([JobKind("slow", other_run)], units, clock, FixedRandom(0.0), "runner-2")
    await _schedule(units, NewJob("ok", T0, "a"), NewJob("flaky", T0, "b"))
    assert await runner.run_due() == 2
    assert sorted(recorder.finished) == [("flaky", "failed"), ("ok", "ok")]
    await _schedule(units, NewJob("slow", clock.now(), "c"))
    assert await runner.run_due() == 1
    assert recorder.finished[-1] == ("slow", "ok") and [kind for kind, _ in recorder.expired] == ["slow"]
    assert timedelta(seconds=61) > JobKind("x", ok).lease
