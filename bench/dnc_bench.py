"""DNC screening benchmark: screen 100,000 numbers against a 1,000,000-entry list on PostgreSQL.

Target: under 5 s (the dial path's screening time-out is 5 s, DncGate.timeout_seconds).

    .venv/bin/python bench/dnc_bench.py [--entries 1000000] [--numbers 100000] [--hit-rate 0.5] [--repeat 3]
                                        [--database-url postgresql+asyncpg://postgres@127.0.0.1:5432/postgres]

A fresh database ``parley_bench_dnc_<random>`` is created on that server, migrated with `parley migrate`'s
code, filled, measured and dropped. The list is loaded with COPY (asyncpg ``copy_records_to_table``); the
measurement goes through the production path: a dishka container, ``DncGate`` (with its time-out) over
``SqlDncScreener`` in one unit of work, exactly as ``POST /calls`` and the dialler screen. It prints a
Markdown table (and JSON with --json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import asyncpg  # noqa: E402

from adapters.sql.schema import upgrade  # noqa: E402
from application.accounts import CreateOrganization, CreateOrganizationCommand  # noqa: E402
from application.context import Actor  # noqa: E402
from application.dnc import CreateDncList, CreateDncListCommand, DncGate  # noqa: E402
from application.ports.platform import UnitOfWork  # noqa: E402
from entrypoints.ioc import build_container  # noqa: E402
from entrypoints.settings import Settings  # noqa: E402

DEFAULT_SERVER = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
TARGET_SECONDS = 5.0


def _dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


def _number(n: int) -> str:
    """Distinct, valid-looking US numbers: +1 2xx xxx xxxx."""
    return f"+1{200 + n // 10_000_000 % 800:03d}{n % 10_000_000:07d}"


async def _create_database(server: str) -> tuple[str, str]:
    name = f"parley_bench_dnc_{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(_dsn(server))
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return name, server.rsplit("/", 1)[0] + f"/{name}"


async def _drop_database(server: str, name: str) -> None:
    conn = await asyncpg.connect(_dsn(server))
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


async def _seed(container: Any, url: str, entries: int) -> tuple[int, int, float]:
    async with container() as r:
        org = await (await r.get(CreateOrganization)).execute(CreateOrganizationCommand("Bench", "enterprise"))
        command = CreateDncListCommand(Actor.system(org.id or 0), "Bench list")
        dnc_list = await (await r.get(CreateDncList)).execute(command)
        await (await r.get(UnitOfWork)).commit()
    org_id, list_id = org.id or 0, dnc_list.id or 0
    now = datetime.now(UTC)
    started = time.perf_counter()
    conn = await asyncpg.connect(_dsn(url))
    try:
        batch = 200_000
        for start in range(0, entries, batch):
            records = [(list_id, _number(n), org_id, None, now) for n in range(start, min(entries, start + batch))]
            await conn.copy_records_to_table(
                "dnc_entries", records=records,
                columns=["list_id", "phone_number", "organization_id", "reason", "created_at"])
        await conn.execute("ANALYZE dnc_entries")
    finally:
        await conn.close()
    return org_id, list_id, time.perf_counter() - started


async def _screen_once(container: Any, org_id: int, numbers: list[str]) -> tuple[float, int]:
    async with container() as r:
        gate = await r.get(DncGate)
        started = time.perf_counter()
        found = await gate.screen(org_id, numbers)
        elapsed = time.perf_counter() - started
        await (await r.get(UnitOfWork)).rollback()
    return elapsed, len(found)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    name, url = await _create_database(args.database_url)
    try:
        await asyncio.to_thread(upgrade, url)
        settings = Settings(database_url=url, secret_key="bench", var_dir=Path("/tmp/parley-bench-dnc"))
        container = build_container(settings)
        try:
            org_id, _, load_seconds = await _seed(container, url, args.entries)
            rng = random.Random(7)
            hits = int(args.numbers * args.hit_rate)
            listed = [_number(n) for n in rng.sample(range(args.entries), hits)]
            unlisted = [_number(args.entries + n) for n in range(args.numbers - hits)]
            numbers = listed + unlisted
            rng.shuffle(numbers)
            await _screen_once(container, org_id, numbers[:1000])  # warm the pool and the plan cache
            runs = []
            for _ in range(args.repeat):
                elapsed, found = await _screen_once(container, org_id, numbers)
                assert found == hits, (found, hits)
                runs.append(elapsed)
            single = [(await _screen_once(container, org_id, [numbers[i]]))[0] for i in range(50)]
        finally:
            await container.close()
    finally:
        await _drop_database(args.database_url, name)
    return {
        "entries": args.entries, "numbers": args.numbers, "hits": hits, "load_seconds": round(load_seconds, 2),
        "screen_seconds": [round(x, 3) for x in runs], "screen_best": round(min(runs), 3),
        "screen_median": round(statistics.median(runs), 3),
        "single_number_ms_p50": round(statistics.median(single) * 1000, 2),
        "target_seconds": TARGET_SECONDS, "met": max(runs) < TARGET_SECONDS,
    }


def _markdown(result: dict[str, Any]) -> str:
    return "\n".join([
        "| list entries | numbers screened | listed among them | load (COPY) | screen: best / median / all runs "
        "| one number (p50) | target < 5 s |",
        "|---|---|---|---|---|---|---|",
        f"| {result['entries']:,} | {result['numbers']:,} | {result['hits']:,} | {result['load_seconds']} s "
        f"| {result['screen_best']} s / {result['screen_median']} s / {result['screen_seconds']} "
        f"| {result['single_number_ms_p50']} ms | {'met' if result['met'] else 'MISSED'} |",
    ])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=DEFAULT_SERVER, help="a PostgreSQL server (any database on it)")
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--numbers", type=int, default=100_000)
    parser.add_argument("--hit-rate", type=float, default=0.5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    outcome = asyncio.run(main(parser.parse_args()))
    print(json.dumps(outcome) if "--json" in sys.argv else _markdown(outcome))
    sys.exit(0 if outcome["met"] else 1)
