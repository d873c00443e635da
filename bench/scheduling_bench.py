"""The availability benchmark: open slots of a busy calendar, on SQLite (and PostgreSQL if asked).

Scenario: a Europe/Berlin calendar with 15-minute slots, 5 rules per weekday (06:00-08:30, 09:00-11:30,
12:00-14:30, 15:00-17:30, 18:00-20:30: 3,000 candidate slots over 60 days), and 2,000 confirmed
appointments (two of every three slots), so 1,000 slots stay open. One request asks for the whole
60 days. Measured:

  (0) domain     open_slots alone over the same data, already in memory (no database): the floor
  (a) use case   GetAvailability.execute in a fresh request scope, the calendar unchanged since the
                 previous request: the calendar and its revision are read, the schedule (rules,
                 blackouts, the 2,000 held slots) comes from the process's cache
  (a') use case  the same, but another process changed the calendar before each request (a blackout
                 far outside the window): the schedule is loaded from the database every time
  (b) HTTP       GET /v2/scheduling/availability through the real app (authentication, rate limit,
                 scopes, the use case, rendering 1,000 slots with offsets, JSON), in process over
                 httpx's ASGI transport (no network), calendar unchanged
  (b') HTTP      the same, another process changing the calendar before each request

    .venv/bin/python bench/scheduling_bench.py [--database sqlite|postgres|both] [--iterations 200]

Prints p50/p90/p99 in milliseconds as a Markdown table (target: p50 <= 20 ms per request on SQLite).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from dishka import Provider, Scope, provide  # noqa: E402

from adapters.memory.clock import ManualClock  # noqa: E402
from adapters.sql.schema import upgrade  # noqa: E402
from application.accounts import (  # noqa: E402
    CreateOrganization,
    CreateOrganizationCommand,
    IssueApiKey,
    IssueApiKeyCommand,
)
from application.context import Actor  # noqa: E402
from application.ports.platform import UnitOfWork  # noqa: E402
from application.ports.scheduling import AppointmentRepository, CalendarRepository  # noqa: E402
from application.scheduling.availability import GetAvailability, GetAvailabilityCommand  # noqa: E402
from domain.scheduling.model import Appointment, AvailabilityRule, Blackout, Calendar, HeldIntervals  # noqa: E402
from domain.scheduling.rules import parse_hhmm  # noqa: E402
from domain.scheduling.slots import open_slots  # noqa: E402
from entrypoints.asgi_app import http_container  # noqa: E402
from entrypoints.http.app import create_app  # noqa: E402
from entrypoints.ioc import build_container  # noqa: E402
from entrypoints.overrides import ClockProvider  # noqa: E402
from entrypoints.runtime import TransactionMode  # noqa: E402
from entrypoints.settings import Settings  # noqa: E402

NOW = datetime(2026, 3, 1, 4, tzinfo=UTC)
DAYS = 60
WINDOWS = [("06:00", "08:30"), ("09:00", "11:30"), ("12:00", "14:30"), ("15:00", "17:30"), ("18:00", "20:30")]
PG_ADMIN = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"


class _ReadOnly(Provider):
    """A read transaction, as for an HTTP GET (on SQLite a plain BEGIN, not BEGIN IMMEDIATE)."""

    @provide(scope=Scope.REQUEST)
    def mode(self) -> TransactionMode:
        return TransactionMode(write=False)


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return {"p50": statistics.median(ordered) * 1000, "p90": pick(0.90), "p99": pick(0.99)}


async def _seed(settings: Settings, overrides: tuple[Provider, ...]) -> tuple[int, int, str]:
    container = build_container(settings, *overrides)
    try:
        async with container() as r:
            org = await (await r.get(CreateOrganization)).execute(
                CreateOrganizationCommand("Bench", "enterprise", "standard"))
            key = await (await r.get(IssueApiKey)).execute(IssueApiKeyCommand(org.id or 0, "bench", ("*",), None))
            calendars = await r.get(CalendarRepository)
            calendar = await calendars.add(Calendar(None, org.id or 0, "Busy", "Europe/Berlin",
                                                    slot_duration_minutes=15, horizon_days=DAYS, created_at=NOW,
                                                    updated_at=NOW))
            rules = []
            for weekday in range(7):
                for start, end in WINDOWS:
                    rules.append(await calendars.add_rule(org.id or 0, AvailabilityRule(
                        None, calendar.id, weekday, parse_hhmm(start, "start"), parse_hhmm(end, "end"))))
            candidates = open_slots(calendar, rules, [], [], NOW, NOW + timedelta(days=DAYS), NOW)
            assert len(candidates) == DAYS * 5 * 10, len(candidates)
            appointments = await r.get(AppointmentRepository)
            for i, slot in enumerate(candidates):
                if i % 3:
                    await appointments.add(Appointment(None, org.id or 0, calendar.id or 0, "confirmed", slot.start,
                                                       slot.end, attendee_name=f"Guest {i}", created_at=NOW,
                                                       updated_at=NOW))
            await (await r.get(UnitOfWork)).commit()
    finally:
        await container.close()
    return org.id or 0, calendar.id or 0, key.secret


class _OtherProcess:
    """Changes the calendar the way another API process would (its own container, engine and cache),
    outside the queried window: a blackout a year ahead. Each change gives the calendar a new revision,
    so the next availability read here cannot use what this process cached."""

    def __init__(self, settings: Settings, overrides: tuple[Provider, ...], org: int, calendar_id: int) -> None:
        self.container = build_container(settings, *overrides)
        self.org, self.calendar_id, self.changes = org, calendar_id, 0

    async def change(self) -> None:
        self.changes += 1
        start = NOW + timedelta(days=300, minutes=self.changes)
        async with self.container() as r:
            await (await r.get(CalendarRepository)).add_blackout(self.org, Blackout(
                None, self.calendar_id, start, start + timedelta(minutes=1)))
            await (await r.get(UnitOfWork)).commit()

    async def close(self) -> None:
        await self.container.close()


async def _use_case(settings: Settings, overrides: tuple[Provider, ...], org: int, calendar_id: int,
                    iterations: int, changed: bool = False) -> tuple[dict[str, float], int]:
    container = build_container(settings, *overrides, _ReadOnly())
    actor = Actor.system(org)
    query = GetAvailabilityCommand(actor, calendar_id, NOW, NOW + timedelta(days=DAYS))
    samples: list[float] = []
    found = 0
    other = _OtherProcess(settings, overrides, org, calendar_id) if changed else None
    try:
        for i in range(iterations + 10):
            if other is not None:
                await other.change()
            started = time.perf_counter()
            async with container() as r:
                result = await (await r.get(GetAvailability)).execute(query)
            elapsed = time.perf_counter() - started
            found = len(result.slots)
            if i >= 10:  # warm-up
                samples.append(elapsed)
    finally:
        await container.close()
        if other is not None:
            await other.close()
    return _percentiles(samples), found


async def _domain(settings: Settings, overrides: tuple[Provider, ...], org: int, calendar_id: int,
                  iterations: int) -> tuple[dict[str, float], int]:
    container = build_container(settings, *overrides)
    try:
        async with container() as r:
            calendars = await r.get(CalendarRepository)
            calendar = await calendars.get(org, calendar_id)
            rules = await calendars.list_rules(org, calendar_id)
            held = HeldIntervals.of(await (await r.get(AppointmentRepository)).held_slots(
                org, calendar_id, NOW, NOW + timedelta(days=DAYS + 1)))
    finally:
        await container.close()
    assert calendar is not None
    samples: list[float] = []
    found: list[Any] = []
    for i in range(iterations + 10):
        started = time.perf_counter()
        found = open_slots(calendar, rules, [], held, NOW, NOW + timedelta(days=DAYS), NOW)
        if i >= 10:
            samples.append(time.perf_counter() - started)
    return _percentiles(samples), len(found)


async def _http(settings: Settings, overrides: tuple[Provider, ...], org: int, calendar_id: int, key: str,
                iterations: int, changed: bool = False) -> tuple[dict[str, float], int]:
    container = http_container(settings, *overrides)
    app = create_app(container, settings)
    params = {"calendar_id": calendar_id, "start": NOW.isoformat(), "end": (NOW + timedelta(days=DAYS)).isoformat()}
    samples: list[float] = []
    found = 0
    other = _OtherProcess(settings, overrides, org, calendar_id) if changed else None
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as client:
            for i in range(iterations + 10):
                if other is not None:
                    await other.change()
                started = time.perf_counter()
                response = await client.get("/v2/scheduling/availability", params=params,
                                            headers={"Authorization": f"Bearer {key}"})
                elapsed = time.perf_counter() - started
                assert response.status_code == 200, response.text
                found = len(response.json()["data"]["slots"])
                if i >= 10:
                    samples.append(elapsed)
    finally:
        await container.close()
        if other is not None:
            await other.close()
    return _percentiles(samples), found


async def _postgres_database() -> tuple[str, Any]:
    import asyncpg

    name = f"parley_bench_{uuid.uuid4().hex[:10]}"
    dsn = PG_ADMIN.replace("postgresql+asyncpg://", "postgresql://")
    conn = await asyncpg.connect(dsn)
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()

    async def drop() -> None:
        conn = await asyncpg.connect(dsn)
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.close()

    return PG_ADMIN.rsplit("/", 1)[0] + f"/{name}", drop


async def run(database: str, iterations: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        drop = None
        if database == "sqlite":
            url = f"sqlite+aiosqlite:///{tmp}/bench.db"
        else:
            url, drop = await _postgres_database()
        try:
            await asyncio.to_thread(upgrade, url)
            settings = Settings(database_url=url, var_dir=Path(tmp) / "var", secret_key="bench-secret",
                                rate_limit_per_minute=10**9, rate_limit_per_hour=10**9)
            overrides: tuple[Provider, ...] = (ClockProvider(ManualClock(NOW)),)
            org, calendar_id, key = await _seed(settings, overrides)
            stats, found = await _domain(settings, overrides, org, calendar_id, iterations)
            rows.append({"database": database, "path": "domain only", "slots": found, **stats})
            stats, found = await _use_case(settings, overrides, org, calendar_id, iterations)
            rows.append({"database": database, "path": "use case", "slots": found, **stats})
            stats, found = await _use_case(settings, overrides, org, calendar_id, iterations, changed=True)
            rows.append({"database": database, "path": "use case, calendar changed before each", "slots": found,
                         **stats})
            stats, found = await _http(settings, overrides, org, calendar_id, key, iterations)
            rows.append({"database": database, "path": "HTTP", "slots": found, **stats})
            stats, found = await _http(settings, overrides, org, calendar_id, key, iterations, changed=True)
            rows.append({"database": database, "path": "HTTP, calendar changed before each", "slots": found,
                         **stats})
        finally:
            if drop is not None:
                await drop()
    return rows


def calibration_us() -> float:
    """Microseconds one ``datetime.isoformat()`` takes here (best of 5): a yardstick for comparing machines
    (about 0.2-0.4 us on an idle current desktop CPU)."""
    import timeit

    value = datetime(2026, 3, 1, 9, tzinfo=UTC)
    return min(timeit.repeat(value.isoformat, number=100_000, repeat=5)) * 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", choices=["sqlite", "postgres", "both"], default="sqlite")
    parser.add_argument("--iterations", type=int, default=200)
    args = parser.parse_args()
    databases = ["sqlite", "postgres"] if args.database == "both" else [args.database]
    rows: list[dict[str, Any]] = []
    for database in databases:
        rows.extend(asyncio.run(run(database, args.iterations)))
    print(f"availability: 60 days, 35 rules, 2,000 appointments; {args.iterations} requests after 10 warm-up; "
          f"yardstick datetime.isoformat() = {calibration_us():.2f} us\n")
    print("| database | path | open slots | p50 ms | p90 ms | p99 ms |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['database']} | {row['path']} | {row['slots']} | {row['p50']:.1f} | {row['p90']:.1f} | "
              f"{row['p99']:.1f} |")


if __name__ == "__main__":
    main()
