"""Trigger benchmarks, through the real consumer (``EvaluateTriggers`` as the job ``triggers.evaluate`` runs it).

  evaluate    one organization with 1,000 triggers spread over 20 event types (50 per type; each has two
              comparisons, one trigger in ten matches), plus 20 other organizations with 1,000 triggers each (so
              the lookup must be indexed). Records one event at a time and times one consumer pass over it:
              the lookup of the event's triggers, their evaluation, the runs stored (50) and the matched actions'
              jobs (5), the cursor advanced, committed (target < 5 ms). Beside it, in the same run: the same pass for an
              event of an organization without triggers (the pass's fixed cost: read, cursor, commit), the lookup
              and the evaluation alone (``TriggerRepository.for_event`` + ``domain.triggers.decide``), and the peer a
              missing index would cost: reading every trigger of the organization and filtering by event.

    .venv/bin/python bench/triggers_bench.py evaluate [--database sqlite|postgres|both] [--events 200]

  throughput  PostgreSQL: a producer commits events at --rate per second (10 per transaction) for --seconds while
              one consumer (a thread of its own, with its own event loop) drains them; reports the consumer's rate,
              its lag at the end, its CPU time per event and the PostgreSQL backends' (when the server runs on this
              machine: /proc) (target: keeps up with 200 events/s). Triggers: --triggers per organization over 20
              event types.

    .venv/bin/python bench/triggers_bench.py throughput [--rate 200] [--seconds 15] [--triggers 20]

A PostgreSQL database ``parley_bench_<random>`` is created on PARLEY_BENCH_POSTGRES_URL (default
postgresql+asyncpg://postgres@127.0.0.1:5432/postgres) and dropped afterwards; SQLite uses a temporary file.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402

from adapters.sql.schema import upgrade  # noqa: E402
from adapters.sql.triggers_tables import triggers as triggers_table  # noqa: E402
from adapters.sql.uow import SqlUnitOfWork  # noqa: E402
from application.accounts import CreateOrganization, CreateOrganizationCommand  # noqa: E402
from application.ports.platform import UnitOfWork  # noqa: E402
from application.ports.triggers import TriggerRepository  # noqa: E402
from application.triggers import EvaluateTriggers, EvaluateTriggersCommand  # noqa: E402
from domain import triggers as rules  # noqa: E402
from domain.events import EventType, FieldType  # noqa: E402
from entrypoints.ioc import build_container  # noqa: E402
from entrypoints.settings import Settings  # noqa: E402
from entrypoints.units import ScopedUnits  # noqa: E402

EVENTS = [e for e in EventType if e.emitted and FieldType.STRING in e.fields.values()][:20]
KEY = {e: next(name for name, kind in e.fields.items() if kind is FieldType.STRING) for e in EVENTS}
"""The string member each event's bench conditions compare (set to "bench" in the recorded events)."""
NOW = datetime(2026, 1, 5, 9, tzinfo=UTC)


def _rule(org: int, event: EventType, n: int) -> dict[str, Any]:
    """Two comparisons; trigger n matches the bench's events when n % 10 == 0."""
    return {"organization_id": org, "name": f"rule {n}", "event": event.value, "enabled": True,
            "conditions": {"all": [{"field": f"data.{KEY[event]}", "op": "eq",
                                    "value": "bench" if n % 10 == 0 else f"other-{n}"},
                                   {"field": f"data.{KEY[event]}", "op": "exists", "value": True}]},
            "actions": [{"type": "chat_message", "config": {"url": "http://127.0.0.1:9/x",
                                                            "text": f"{{{{data.{KEY[event]}}}}}"}}],
            "sealed_secret": "x", "created_at": NOW, "updated_at": NOW}


async def _org(container: Any) -> int:
    async with container() as r:
        org = await (await r.get(CreateOrganization)).execute(CreateOrganizationCommand("bench", "enterprise",
                                                                                        "standard"))
        await (await r.get(UnitOfWork)).commit()
    return org.id or 0


async def _seed(container: Any, org: int, per_type: int) -> None:
    rows = [_rule(org, event, n) for event in EVENTS for n in range(per_type)]
    async with container() as r:
        uow = await r.get(SqlUnitOfWork)
        conn = await uow.connection()
        for start in range(0, len(rows), 500):
            await conn.execute(triggers_table.insert(), rows[start:start + 500])
        await uow.commit()


async def _record(container: Any, org: int, count: int, offset: int = 0) -> None:
    async with container() as r:
        uow = await r.get(UnitOfWork)
        for i in range(count):
            event = EVENTS[(offset + i) % len(EVENTS)]
            uow.record(event(org, {**event.example, KEY[event]: "bench", "n": offset + i}))
        await uow.commit()


async def evaluate_once(container: Any) -> int:
    """One pass of the triggers' consumer (the job ``triggers.evaluate`` runs passes while one came back full)."""
    return await ScopedUnits(container).execute(EvaluateTriggers, EvaluateTriggersCommand())


def _ms(values: list[float]) -> str:
    values = sorted(values)
    return (f"p50 {statistics.median(values) * 1000:.2f} ms, p95 {values[int(len(values) * 0.95)] * 1000:.2f} ms, "
            f"mean {statistics.fmean(values) * 1000:.2f} ms")


async def bench_evaluate(url: str, events: int) -> dict[str, str]:
    container = build_container(Settings(database_url=url, secret_key="bench", var_dir=Path(tempfile.mkdtemp())))
    try:
        org = await _org(container)
        await _seed(container, org, 50)
        for _ in range(20):  # other organizations' rules in the same table
            await _seed(container, await _org(container), 50)
        while await evaluate_once(container) > 0:
            pass
        quiet = await _org(container)  # an organization without triggers: the pass's fixed cost
        passes: list[float] = []
        cpu: list[float] = []
        empty_cpu: list[float] = []
        empty: list[float] = []
        lookups: list[float] = []
        scans: list[float] = []
        for i in range(events):
            await _record(container, org, 1, i)
            started, started_cpu = time.perf_counter(), time.process_time()
            assert await evaluate_once(container) == 1
            passes.append(time.perf_counter() - started)
            cpu.append(time.process_time() - started_cpu)
            await _record(container, quiet, 1, i)
            started, started_cpu = time.perf_counter(), time.process_time()
            assert await evaluate_once(container) == 1
            empty.append(time.perf_counter() - started)
            empty_cpu.append(time.process_time() - started_cpu)
            event = EVENTS[i % len(EVENTS)]
            data = {**event.example, KEY[event]: "bench", "n": i}
            async with container() as r:
                repo = await r.get(TriggerRepository)
                started = time.process_time()
                found = await repo.for_event(org, event.value)
                decided = [rules.decide(t, event.value, i, data, 0, NOW) for t in found]
                lookups.append(time.process_time() - started)
                assert len(found) == 50 and sum(d.matched for d in decided) == 5
                conn = await (await r.get(SqlUnitOfWork)).connection()
                started = time.process_time()
                every = (await conn.execute(sa.select(triggers_table).where(
                    triggers_table.c.organization_id == org))).all()
                [row for row in every if row.event == event.value and row.enabled]
                scans.append(time.process_time() - started)
        return {"one consumer pass per event (lookup, evaluate, 50 runs + 5 jobs stored, commit), wall": _ms(passes),
                "  its CPU time (this process)": _ms(cpu),
                "peer: the same pass for an event no trigger listens to, wall": _ms(empty),
                "  its CPU time (this process) ": _ms(empty_cpu),
                "lookup (index) + evaluation of the 50 rules, CPU time": _ms(lookups),
                "peer: reading all 1,000 rules of the organization instead, CPU time": _ms(scans)}
    finally:
        await container.close()


def _backend_cpu(pids: list[int]) -> dict[int, float]:
    """CPU seconds (user + system) of PostgreSQL backends by process id, when the server runs on this machine."""
    seconds = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return seconds


async def _backends(container: Any) -> list[int]:
    async with container() as r:
        conn = await (await r.get(SqlUnitOfWork)).connection()
        return [row[0] for row in (await conn.execute(sa.text(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"))).all()]


async def bench_throughput(url: str, rate: int, seconds: float, per_org: int) -> dict[str, str]:
    """The consumer runs in a thread of its own, with its own event loop: its CPU time is that thread's."""
    settings = Settings(database_url=url, secret_key="bench", var_dir=Path(tempfile.mkdtemp()))
    producer = build_container(settings)
    ready, done = threading.Event(), threading.Event()
    consumer_side: dict[str, float] = {}

    def consume() -> None:
        async def main() -> None:
            consumer = build_container(settings)
            try:
                while await evaluate_once(consumer) > 0:
                    pass
                ready.set()
                started = time.thread_time()
                consumed = 0
                while True:
                    finished = done.is_set()
                    step = await evaluate_once(consumer)
                    consumed += step
                    if step == 0:
                        if finished:
                            break
                        await asyncio.sleep(0.01)
                consumer_side.update(consumed=consumed, cpu=time.thread_time() - started,
                                     finished=time.perf_counter())
            finally:
                ready.set()
                await consumer.close()

        asyncio.run(main())

    try:
        org = await _org(producer)
        await _seed(producer, org, max(1, per_org // len(EVENTS)))
        thread = threading.Thread(target=consume, name="consumer")
        thread.start()
        await asyncio.to_thread(ready.wait)
        pids = set(await _backends(producer))
        backends_before = _backend_cpu(sorted(pids))
        backends = dict(backends_before)  # the last reading of each backend (one may end before the last)
        load_before = os.getloadavg()[0]
        produced = 0
        started = sampled = time.perf_counter()
        while time.perf_counter() - started < seconds:
            due = int((time.perf_counter() - started) * rate)
            if produced < due:
                batch = min(10, due - produced)
                await _record(producer, org, batch, produced)
                produced += batch
            else:
                await asyncio.sleep(0.005)
            if time.perf_counter() - sampled > 0.5:
                pids.update(await _backends(producer))
                backends.update(_backend_cpu(sorted(pids)))
                sampled = time.perf_counter()
        done.set()
        while thread.is_alive():
            pids.update(await _backends(producer))
            backends.update(_backend_cpu(sorted(pids)))
            await asyncio.sleep(0.2)
        await asyncio.to_thread(thread.join)
        elapsed = consumer_side["finished"] - started
        consumed = int(consumer_side["consumed"])
        backend_cpu = sum(cpu - backends_before.get(pid, 0.0) for pid, cpu in backends.items())
        async with producer() as r:
            conn = await (await r.get(SqlUnitOfWork)).connection()
            runs = (await conn.execute(sa.text("SELECT count(*) FROM trigger_runs"))).scalar()
        per_event = (f"{backend_cpu / consumed * 1000:.2f} ms" if backends else "n/a (the server is not local)")
        return {"events produced": f"{produced} in {seconds:.0f} s ({produced / seconds:.0f}/s)",
                "events consumed": f"{consumed} ({consumed / elapsed:.0f}/s over {elapsed:.1f} s, drained "
                                   f"{elapsed - seconds:.2f} s after the producer stopped)",
                "runs stored": str(runs),
                "consumer CPU (its thread) per event": f"{consumer_side['cpu'] / consumed * 1000:.2f} ms",
                "PostgreSQL backends' CPU per event (consumer and producer)": per_event,
                "load average (1 min) before, after": f"{load_before:.1f}, {os.getloadavg()[0]:.1f}"}
    finally:
        done.set()
        await producer.close()


async def _with_postgres(work: Any) -> Any:
    import asyncpg

    admin = os.environ.get("PARLEY_BENCH_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres")
    name = f"parley_bench_{uuid.uuid4().hex[:10]}"
    dsn = admin.replace("postgresql+asyncpg://", "postgresql://")
    conn = await asyncpg.connect(dsn)
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()
    url = admin.rsplit("/", 1)[0] + f"/{name}"
    try:
        await asyncio.to_thread(upgrade, url)
        return await work(url)
    finally:
        conn = await asyncpg.connect(dsn)
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.close()


async def _with_sqlite(work: Any) -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{tmp}/bench.db"
        await asyncio.to_thread(upgrade, url)
        return await work(url)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["evaluate", "throughput"])
    parser.add_argument("--database", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--triggers", type=int, default=20)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    if args.what == "evaluate":
        for database in (["sqlite", "postgres"] if args.database == "both" else [args.database]):
            runner = _with_sqlite if database == "sqlite" else _with_postgres
            result = await runner(lambda url: bench_evaluate(url, args.events))
            print(f"\n{database}, {args.events} events, 1,000 triggers in the organization (21,000 in the table)")
            for key, value in result.items():
                print(f"  {key}: {value}")
    else:
        result = await _with_postgres(lambda url: bench_throughput(url, args.rate, args.seconds, args.triggers))
        print(f"\npostgres, {args.rate} events/s for {args.seconds:.0f} s, {args.triggers} triggers")
        for key, value in result.items():
            print(f"  {key}: {value}")


if __name__ == "__main__":
    asyncio.run(main())
