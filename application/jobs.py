"""The job runner: claims due jobs under a lease, runs them, records the outcome, retries with backoff.

Every background activity is a job kind (``JobKind``): a name, a handler and its limits. A handler gets
the claimed job and returns when the job is due next (a recurring job) or None (done); an exception is
a failed attempt, retried after an exponential backoff with jitter until ``max_attempts``.

The runner never polls tightly: it sleeps until the earliest due job of its kinds, a wake-up (after a
commit that created work, in-process through ``JobWakeUps``; other processes through the queue adapter's
notifications) or a safety poll. On stop it claims nothing new, lets in-flight jobs finish within a grace
period and gives the leases of the others back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from application.ports.jobs import ClaimedJob, JobObserver, JobOutcome, JobQueue, NewJob
from application.ports.platform import Clock, Random, Units

log = logging.getLogger("parley.jobs")

Handler = Callable[[ClaimedJob], Awaitable[datetime | None]]


@dataclass(frozen=True, slots=True)
class JobKind:
    name: str
    handler: Handler
    concurrency: int = 1
    """Jobs of this kind in flight at once in one runner."""
    lease: timedelta = timedelta(seconds=60)
    """How long a claim holds; a job whose runner died is claimed again after it."""
    max_attempts: int = 10
    backoff_base: timedelta = timedelta(seconds=1)
    backoff_max: timedelta = timedelta(hours=1)
    on_wake: bool = False
    """A wake-up runs this kind's job at once (not only when due): work that looks for new rows itself
    (the calls worker) and returns when it is due next."""
    recurring: bool = False
    """The runner makes sure the job (key "") exists when it starts (due at once)."""


def backoff(kind: JobKind, attempts: int, random: Random) -> timedelta:
    """Exponential in the attempts made, capped, with jitter (between half and the whole delay)."""
    ceiling = min(kind.backoff_max.total_seconds(), kind.backoff_base.total_seconds() * 2 ** max(0, attempts - 1))
    return timedelta(seconds=ceiling * random.uniform(0.5, 1.0))


def next_beat(now: datetime, period: timedelta) -> datetime:
    """The first multiple of ``period`` (counted from the epoch) after ``now``, so never more than a period away:
    recurring jobs that look again on the same beat fall due together, and an idle runner wakes once for all of
    them (and claims them in one unit of work) instead of once each. A job run on the beat (just after it, as a
    runner claims it) is due again exactly one period later."""
    step = period.total_seconds()
    return datetime.fromtimestamp((now.timestamp() // step + 1) * step, tz=now.tzinfo)


class JobWakeUps:
    """The in-process wake-up: a commit that created work calls ``notify``; every runner waiting wakes."""

    def __init__(self) -> None:
        self._events: set[asyncio.Event] = set()

    def subscribe(self) -> asyncio.Event:
        event = asyncio.Event()
        self._events.add(event)
        return event

    def unsubscribe(self, event: asyncio.Event) -> None:
        self._events.discard(event)

    def notify(self) -> None:
        for event in self._events:
            event.set()


def due_or_beat(due: datetime | None, now: datetime, period: timedelta) -> datetime:
    """A pass's next due time: ``due`` (when its next piece of work is, None: none known), but never later than the
    next beat of ``period`` (``next_beat``), when it looks again for work that came some other way."""
    beat = next_beat(now, period)
    return min(due, beat) if due is not None else beat


async def drain_batches(step: Callable[[], Awaitable[int]], batch: int) -> int:
    """Run ``step`` (one batch, each in a unit of work of its own) once, then again while the batch came back full
    (``batch`` or more): a backlog larger than a batch is worked off one transaction at a time. Returns the sum of
    what the steps counted."""
    total = 0
    while True:
        done = await step()
        total += done
        if done < batch:
            return total


async def clock_now(units: Units) -> datetime:
    """The clock's now, read through a unit that begins no transaction (a job's next due time)."""
    async with units.begin() as unit:
        return (await unit.get(Clock)).now()


async def schedule(units: Units, job: NewJob) -> None:
    """Schedule a job in a unit of its own."""
    async with units.begin() as unit:
        await (await unit.get(JobQueue)).schedule(job)
        await unit.commit()


class JobRunner:
    def __init__(self, kinds: Sequence[JobKind], units: Units, clock: Clock, random: Random, owner: str, *,
                 wake: asyncio.Event | None = None, safety_poll_seconds: float = 15.0,
                 grace_seconds: float = 12.0, observer: JobObserver | None = None) -> None:
        self.kinds = {kind.name: kind for kind in kinds}
        self.units, self.clock, self.random, self.owner = units, clock, random, owner
        self.wake = wake or asyncio.Event()
        self.safety_poll_seconds, self.grace_seconds = safety_poll_seconds, grace_seconds
        self.observer = observer
        self._in_flight: dict[asyncio.Task[None], ClaimedJob] = {}
        self._woken: set[str] = set()
        self._idle_until: tuple[datetime | None] | None = None
        """Set by a pass that found nothing due: when the next job is (read in the same unit of work)."""

    async def start(self) -> None:
        """Make sure every recurring job exists (due now: a fresh start runs it once)."""
        for kind in self.kinds.values():
            if kind.recurring:
                await schedule(self.units, NewJob(kind.name, self.clock.now()))

    def _running(self, kind: str) -> int:
        return sum(1 for job in self._in_flight.values() if job.kind == kind)

    async def _claim(self, kind: JobKind, limit: int, *, woken: bool = False) -> list[ClaimedJob]:
        now = self.clock.now()
        due_by = now + timedelta(days=3650) if woken else None
        async with self.units.begin() as unit:
            claimed = await (await unit.get(JobQueue)).claim(kind.name, self.owner, now, now + kind.lease, limit,
                                                             due_by=due_by)
            await unit.commit()
        return claimed

    async def _record(self, job: ClaimedJob, work: Callable[[JobQueue], Awaitable[bool]]) -> None:
        async with self.units.begin() as unit:
            held = await work(await unit.get(JobQueue))
            await unit.commit()
        if not held:
            log.warning("job %s %s ran past its lease (another runner may have it now)", job.kind, job.key,
                        extra={"job_kind": job.kind, "job_id": job.id, "outcome": JobOutcome.LEASE_EXPIRED})
            if self.observer is not None:
                self.observer.leases_expired(job.kind, [job.id])

    def _finished(self, job: ClaimedJob, outcome: JobOutcome, started: datetime, *,
                  retry_in: timedelta | None = None) -> None:
        """The job line (one per run: kind, id, key, attempt, outcome, duration) and the observer's count."""
        fields = {"job_kind": job.kind, "job_id": job.id, "job_key": job.key, "attempt": job.attempts,
                  "outcome": outcome, "duration_ms": round((self.clock.now() - started).total_seconds() * 1000, 3)}
        if outcome == JobOutcome.OK:
            log.info("job %s%s ok", job.kind, f" {job.key}" if job.key else "", extra=fields)
        elif retry_in is not None:
            log.exception("job %s %s failed (attempt %d); retrying in %.1f s", job.kind, job.key, job.attempts,
                          retry_in.total_seconds(), extra=fields)
        else:
            log.exception("job %s %s failed for the last time (attempt %d)", job.kind, job.key, job.attempts,
                          extra=fields)
        if self.observer is not None:
            self.observer.job_finished(job.kind, outcome)

    async def execute(self, job: ClaimedJob) -> None:
        """Run one claimed job and record its outcome (each in its own unit of work)."""
        kind = self.kinds[job.kind]
        started = self.clock.now()
        try:
            next_due = await kind.handler(job)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            if job.attempts >= kind.max_attempts:
                self._finished(job, JobOutcome.FAILED, started)
                await self._record(job, lambda q: q.fail(job, error, self.clock.now()))
            else:
                delay = backoff(kind, job.attempts, self.random)
                self._finished(job, JobOutcome.RETRY, started, retry_in=delay)
                await self._record(job, lambda q: q.retry(job, self.clock.now() + delay, error))
            return
        self._finished(job, JobOutcome.OK, started)
        await self._record(job, lambda q: q.complete(job, next_due))

    async def run_due(self, *, woken: bool = False) -> int:
        """Claim every job due now (as ``clock`` says) and run each once, to completion; returns how many ran.
        ``woken``: as after a wake-up (``on_wake`` kinds run even when not yet due). Tests drive the runner with
        this and a ManualClock. Kinds are claimed one after the other: a job an earlier kind schedules runs too."""
        ran = 0
        for kind in self.kinds.values():
            claimed = await self._claim(kind, 10_000, woken=woken and kind.on_wake)
            gate = asyncio.Semaphore(kind.concurrency)

            async def bounded(job: ClaimedJob, gate: asyncio.Semaphore = gate) -> None:
                async with gate:
                    await self.execute(job)

            await asyncio.gather(*(bounded(job) for job in claimed))
            ran += len(claimed)
        return ran

    async def _start_due(self) -> bool:
        """Claim due jobs for every free slot; True when a kind filled all its free slots (more may be due).

        One unit of work: the queue is asked once which kinds with a free slot have due work (``due_kinds``), and
        only those are claimed. With nothing due, the same unit reads when the next job is (for the sleep), so an
        idle pass costs one transaction whatever the number of kinds."""
        self._idle_until = None
        free = {name: kind.concurrency - self._running(name) for name, kind in self.kinds.items()}
        open_kinds = [name for name, slots in free.items() if slots > 0]
        if not open_kinds:
            return False
        woken = [name for name in open_kinds if name in self._woken and self._running(name) == 0]
        now = self.clock.now()
        claimed: dict[str, list[ClaimedJob]] = {}
        try:
            async with self.units.begin() as unit:
                queue = await unit.get(JobQueue)
                due = await queue.due_kinds(open_kinds, now, woken=woken)
                if not due:
                    self._idle_until = (await queue.next_due(open_kinds),)
                for name in open_kinds:
                    if name in due:
                        kind = self.kinds[name]
                        claimed[name] = await queue.claim(
                            name, self.owner, now, now + kind.lease, free[name],
                            due_by=now + timedelta(days=3650) if name in woken else None)
                if due:
                    await unit.commit()
        except Exception:
            self._idle_until = None
            log.exception("claiming jobs failed")
            return False
        self._woken.difference_update(woken)
        more = False
        for name, jobs in claimed.items():
            for job in jobs:
                self._in_flight[asyncio.create_task(self._guarded(job))] = job
            more = more or len(jobs) == free[name]
        return more

    async def _guarded(self, job: ClaimedJob) -> None:
        try:
            await self.execute(job)
        except asyncio.CancelledError:
            raise
        except Exception:  # recording the outcome failed: the lease expires and the job runs again
            log.exception("recording the outcome of job %s %s failed", job.kind, job.key)

    async def _sleep_seconds(self) -> float:
        idle = [name for name, kind in self.kinds.items() if self._running(name) < kind.concurrency]
        if self._woken & set(idle):
            return 0.0
        if not idle:
            return self.safety_poll_seconds
        if self._idle_until is not None:  # the pass that found nothing due read it already
            return self._until(self._idle_until[0])
        try:
            async with self.units.begin() as unit:
                due = await (await unit.get(JobQueue)).next_due(idle)
        except Exception:
            log.exception("reading the next due job failed")
            return self.safety_poll_seconds
        return self._until(due)

    def _until(self, due: datetime | None) -> float:
        if due is None:
            return self.safety_poll_seconds
        return min(self.safety_poll_seconds, max(0.0, (due - self.clock.now()).total_seconds()))

    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop``: claim what is due, sleep until the next due job or a wake-up; then drain."""
        log.info("job runner %s running %s", self.owner, ", ".join(self.kinds))
        try:
            while not stop.is_set():
                if self.wake.is_set():
                    self.wake.clear()
                    self._woken |= {name for name, kind in self.kinds.items() if kind.on_wake}
                if await self._start_due():
                    await asyncio.sleep(0)
                    continue
                timeout = await self._sleep_seconds()
                if timeout > 0:
                    await self._wait([stop.wait(), self.wake.wait()], timeout)
                else:
                    await asyncio.sleep(0)
                self._in_flight = {t: j for t, j in self._in_flight.items() if not t.done()}
        finally:
            await self._drain()

    async def _wait(self, waits: list[Awaitable[object]], timeout: float) -> None:  # noqa: ASYNC109
        waiters = [asyncio.ensure_future(w) for w in waits] + list(self._in_flight)
        try:
            await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters[:len(waits)]:
                waiter.cancel()

    async def _drain(self) -> None:
        """Nothing new is claimed; in-flight jobs get the grace period, then are cancelled and released."""
        pending = {t for t in self._in_flight if not t.done()}
        if pending:
            log.info("draining %d job(s)", len(pending))
            _, pending = await asyncio.wait(pending, timeout=self.grace_seconds)
        if pending:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            ids = [self._in_flight[t].id for t in pending]
            with contextlib.suppress(Exception):
                await asyncio.shield(self._record_release(ids))
        self._in_flight.clear()

    async def _record_release(self, ids: list[int]) -> None:
        async with self.units.begin() as unit:
            await (await unit.get(JobQueue)).release(self.owner, ids)
            await unit.commit()
