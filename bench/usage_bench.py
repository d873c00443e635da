"""Usage and billing benchmarks.

  usage   GET /v2/usage through the real HTTP app (``create_app`` over the production container, driven in process
          through httpx's ASGI transport) for an organization with 1,000,000 usage_ledger rows in the current period
          (bulk-inserted directly, with the period and day counters they add up to), beside two peers measured in
          the same run, request for request in turn: the same route for an organization with no ledger rows, and
          GET /v2/health. Target: p50 < 20 ms for the big organization.

    .venv/bin/python bench/usage_bench.py usage [--database sqlite|postgres|both] [--rows 1000000] [--requests 300]

  close   PostgreSQL: the billing period close for 10,000 organizations (bulk-inserted, created in January 2026,
          each with period counters of January usage; plans cycling starter / business / enterprise; half with a
          payment method, a tenth of those declining; every 30th an enterprise partner and every third a child in
          partner mode of its block's partner, so a third are billed on a partner's invoice) at a manual clock of
          2026-02-01T00:00:05Z, through the
          worker's own functions: ``close_period`` (the job ``billing.close``: invoices in batches) and
          ``collect_due`` (the job ``billing.collect``: one transaction per charge, the gateway simulator).
          Target: the close under 60 s.

    .venv/bin/python bench/usage_bench.py close [--organizations 10000] [--batch 500] [--rounds 1] [--no-children]

  rollup  GET /v2/usage?rollup=children through the real HTTP app for a partner with 500 children (business plan)
          and 1,000,000 usage_ledger rows spread over them (with their counters). Target: p50 < 50 ms.

    .venv/bin/python bench/usage_bench.py rollup [--database sqlite|postgres|both] [--children 500] [--rows 1000000]

A PostgreSQL database ``parley_bench_<random>`` is created on 127.0.0.1:5432 (user postgres; PARLEY_BENCH_POSTGRES_URL
to change) and dropped afterwards; SQLite uses a temporary file.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import sys
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
sys.path[:0] = [str(ROOT), str(BENCH)]

import httpx  # noqa: E402
from run import Database, _settings, fresh_database  # noqa: E402

from adapters.memory.clock import ManualClock  # noqa: E402
from adapters.payments.simulator import SimulatedPaymentGateway  # noqa: E402
from application.billing import close_period, collect_due  # noqa: E402
from application.ports.billing import PaymentGateway  # noqa: E402
from domain.usage import period_bounds, period_of  # noqa: E402
from entrypoints.asgi_app import http_container  # noqa: E402
from entrypoints.cli import create_key, create_org, migrate  # noqa: E402
from entrypoints.http.app import create_app  # noqa: E402
from entrypoints.ioc import build_container  # noqa: E402
from entrypoints.overrides import ClockProvider, Pinned  # noqa: E402
from entrypoints.units import ScopedUnits  # noqa: E402

PG_ADMIN = os.environ.get("PARLEY_BENCH_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres")
METRICS = ("call_seconds", "calls", "sms_segments")


def _pg_dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


# ---------------------------------------------------------------------------------------------- usage


def _ledger_rows(org_id: int, rows: int, now: datetime, prefix: str = ""
                 ) -> tuple[list[tuple[Any, ...]], dict[str, int], dict[tuple[str, date], int]]:
    period = period_of(now)
    start, _ = period_bounds(period)
    span = max(1, int((now - start).total_seconds()))
    ledger, used, daily = [], dict.fromkeys(METRICS, 0), {}
    for n in range(rows):
        metric = METRICS[n % 3]
        quantity = (30 + n % 600) if metric == "call_seconds" else (1 if metric == "calls" else 1 + n % 3)
        at = start + timedelta(seconds=(n * 7919) % span)
        source = "sms" if metric == "sms_segments" else "call"
        ledger.append((org_id, metric, quantity, period, source, f"{prefix}bench-{n // 3}", at))
        used[metric] += quantity
        daily[(metric, at.date())] = daily.get((metric, at.date()), 0) + quantity
    return ledger, used, daily


async def _bulk_usage(db: Database, org_id: int, rows: int, now: datetime, prefix: str = "",
                      analyze: bool = True) -> float:
    ledger, used, daily = _ledger_rows(org_id, rows, now, prefix)
    period = period_of(now)
    started = time.perf_counter()
    if db.kind == "sqlite":
        conn = sqlite3.connect(db.url.split("///", 1)[1])
        with conn:
            conn.executemany("INSERT INTO usage_ledger (organization_id, metric, quantity, period, source_type, "
                             "source_id, occurred_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                             [(*r[:6], r[6].strftime("%Y-%m-%d %H:%M:%S.%f")) for r in ledger])
            conn.executemany("INSERT INTO usage_counters (organization_id, period, metric, used, reserved) "
                             "VALUES (?, ?, ?, ?, 0)", [(org_id, period, m, u) for m, u in used.items()])
            conn.executemany("INSERT INTO usage_daily (organization_id, metric, day, used) VALUES (?, ?, ?, ?)",
                             [(org_id, m, d.isoformat(), u) for (m, d), u in daily.items()])
        if analyze:
            conn.execute("ANALYZE")
        conn.close()
    else:
        import asyncpg

        conn = await asyncpg.connect(_pg_dsn(db.url))
        try:
            await conn.copy_records_to_table("usage_ledger", records=ledger, columns=[
                "organization_id", "metric", "quantity", "period", "source_type", "source_id", "occurred_at"])
            await conn.executemany("INSERT INTO usage_counters (organization_id, period, metric, used, reserved) "
                                   "VALUES ($1, $2, $3, $4, 0)", [(org_id, period, m, u) for m, u in used.items()])
            await conn.executemany("INSERT INTO usage_daily (organization_id, metric, day, used) "
                                   "VALUES ($1, $2, $3, $4)", [(org_id, m, d, u) for (m, d), u in daily.items()])
            if analyze:
                await conn.execute("ANALYZE")
        finally:
            await conn.close()
    return time.perf_counter() - started


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _usage_run(db: Database, rows: int, requests: int) -> dict[str, Any]:
    settings = _settings(db)
    settings = type(settings)(database_url=settings.database_url, var_dir=settings.var_dir,
                              secret_key=settings.secret_key, rate_limit_per_minute=10**9,
                              rate_limit_per_hour=10**9, log_level="WARNING")
    await asyncio.to_thread(migrate, settings)
    big = await create_org(settings, "Big", "business", "standard", None)
    empty = await create_org(settings, "Empty", "business", "standard", None)
    big_key = (await create_key(settings, big["id"], ["usage:read", "billing:read"], "bench", None))["key"]
    empty_key = (await create_key(settings, empty["id"], ["usage:read"], "bench", None))["key"]
    load = await _bulk_usage(db, big["id"], rows, datetime.now(UTC))
    container = http_container(settings)
    app = create_app(container, settings)
    timings: dict[str, list[float]] = {"usage (1M rows)": [], "usage (empty org)": [], "subscription": [],
                                       "health": []}
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as client:
            targets = {"usage (1M rows)": ("/v2/usage", big_key), "usage (empty org)": ("/v2/usage", empty_key),
                       "subscription": ("/v2/billing/subscription", big_key), "health": ("/v2/health", None)}
            for _ in range(20):  # warm-up
                for path, key in targets.values():
                    await client.get(path, headers={"Authorization": f"Bearer {key}"} if key else None)
            body = (await client.get("/v2/usage", headers={"Authorization": f"Bearer {big_key}"})).json()
            assert body["success"], body
            for _ in range(requests):
                for name, (path, key) in targets.items():
                    started = time.perf_counter()
                    response = await client.get(path, headers={"Authorization": f"Bearer {key}"} if key else None)
                    timings[name].append((time.perf_counter() - started) * 1000)
                    assert response.status_code == 200, response.text
    finally:
        await container.close()
    calls = body["data"]["metrics"]["calls"]
    return {"database": db.kind, "rows": rows, "load_s": round(load, 2), "calls_reported": calls,
            **{name: (round(statistics.median(v), 2), round(_pct(v, 0.95), 2)) for name, v in timings.items()}}


def usage(args: argparse.Namespace) -> None:
    kinds = ["sqlite", "postgres"] if args.database == "both" else [args.database]
    print("| database | ledger rows | bulk load | GET /usage, 1M rows: p50 / p95 | GET /usage, no rows: p50 / p95 "
          "| GET /billing/subscription: p50 / p95 | GET /health: p50 / p95 | target p50 < 20 ms | load average |")
    print("|---|---|---|---|---|---|---|---|---|")
    for kind in kinds:
        with fresh_database(kind, PG_ADMIN) as db:
            r = asyncio.run(_usage_run(db, args.rows, args.requests))
        big, empty, sub, health = r["usage (1M rows)"], r["usage (empty org)"], r["subscription"], r["health"]
        print(f"| {kind} | {r['rows']:,} | {r['load_s']} s | {big[0]} / {big[1]} ms | {empty[0]} / {empty[1]} ms "
              f"| {sub[0]} / {sub[1]} ms | {health[0]} / {health[1]} ms | {'met' if big[0] < 20 else 'NOT met'} "
              f"| {os.getloadavg()[0]:.1f} |", flush=True)


# ---------------------------------------------------------------------------------------------- rollup


async def _rollup_run(db: Database, children: int, rows: int, requests: int) -> dict[str, Any]:
    settings = _settings(db)
    settings = type(settings)(database_url=settings.database_url, var_dir=settings.var_dir,
                              secret_key=settings.secret_key, rate_limit_per_minute=10**9,
                              rate_limit_per_hour=10**9, log_level="WARNING")
    await asyncio.to_thread(migrate, settings)
    partner = await create_org(settings, "Agency", "enterprise", "partner", None)
    key = (await create_key(settings, partner["id"], ["usage:read"], "bench", None))["key"]
    started = time.perf_counter()
    child_ids = [(await create_org(settings, f"Client {n}", "business", "standard", partner["id"]))["id"]
                 for n in range(children)]
    made = time.perf_counter() - started
    load = 0.0
    for n, child in enumerate(child_ids):  # the rows spread over the children, each with its counters
        load += await _bulk_usage(db, child, rows // children + (1 if n < rows % children else 0),
                                  datetime.now(UTC), prefix=f"c{child}-", analyze=n == len(child_ids) - 1)
    container = http_container(settings)
    app = create_app(container, settings)
    timings: list[float] = []
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as client:
            headers = {"Authorization": f"Bearer {key}"}
            for _ in range(10):  # warm-up
                await client.get("/v2/usage?rollup=children", headers=headers)
            body = (await client.get("/v2/usage?rollup=children", headers=headers)).json()
            assert body["success"] and len(body["data"]["children"]) == children, body
            for _ in range(requests):
                began = time.perf_counter()
                response = await client.get("/v2/usage?rollup=children", headers=headers)
                timings.append((time.perf_counter() - began) * 1000)
                assert response.status_code == 200, response.text
    finally:
        await container.close()
    calls = sum(c["usage"]["calls"] for c in body["data"]["children"])
    return {"children": children, "rows": rows, "made_s": round(made, 1), "load_s": round(load, 1),
            "calls": calls, "p50": round(statistics.median(timings), 2), "p95": round(_pct(timings, 0.95), 2)}


def rollup(args: argparse.Namespace) -> None:
    kinds = ["sqlite", "postgres"] if args.database == "both" else [args.database]
    print("| database | children | ledger rows | GET /usage?rollup=children: p50 / p95 | target p50 < 50 ms "
          "| load average |")
    print("|---|---|---|---|---|---|")
    for kind in kinds:
        with fresh_database(kind, PG_ADMIN) as db:
            r = asyncio.run(_rollup_run(db, args.children, args.rows, args.requests))
        print(f"| {kind} | {r['children']} | {r['rows']:,} | {r['p50']} / {r['p95']} ms "
              f"| {'met' if r['p50'] < 50 else 'NOT met'} | {os.getloadavg()[0]:.1f} |", flush=True)


# ---------------------------------------------------------------------------------------------- close

JAN_CREATED = datetime(2026, 1, 10, tzinfo=UTC)
CLOSE_AT = datetime(2026, 2, 1, 0, 0, 5, tzinfo=UTC)
PLANS = ("starter", "business", "enterprise")


async def _bulk_organizations(url: str, count: int, children: bool = True) -> None:
    import asyncpg

    conn = await asyncpg.connect(_pg_dsn(url))
    try:
        ids = await conn.fetch(
            "INSERT INTO organizations (name, plan, org_type, created_at, updated_at) "
            "SELECT 'Org ' || n, (ARRAY['starter','business','enterprise'])[1 + n % 3], 'standard', $1, $1 "
            "FROM generate_series(0, $2 - 1) AS n RETURNING id", JAN_CREATED, count)
        org_ids = sorted(r["id"] for r in ids)
        if children:  # every 30th a partner; every third (n % 3 == 2) a child in partner mode of its block's partner
            partners = {n: org_ids[n] for n in range(1, count, 30)}
            await conn.execute("UPDATE organizations SET org_type = 'partner', plan = 'enterprise' "
                               "WHERE id = ANY($1::bigint[])", list(partners.values()))
            await conn.executemany("UPDATE organizations SET parent_id = $1 WHERE id = $2", [
                (partners[(n // 30) * 30 + 1], org) for n, org in enumerate(org_ids)
                if n % 3 == 2 and (n // 30) * 30 + 1 in partners])
        counters = []
        for n, org in enumerate(org_ids):
            counters += [(org, "2026-01", "call_seconds", (n * 997) % (2_200 * 60)),
                         (org, "2026-01", "calls", n % 400), (org, "2026-01", "sms_segments", (n * 31) % 11_000)]
        await conn.copy_records_to_table("usage_counters", records=[(*c, 0) for c in counters],
                                         columns=["organization_id", "period", "metric", "used", "reserved"])
        methods = []
        for n, org in enumerate(org_ids):
            if n % 2 == 0:
                token = "pm_card_chargeDeclined" if n % 20 == 0 else "pm_card_visa"
                methods.append((org, f"{token}.bench{n}", "visa", "4242", 12, 2034, JAN_CREATED))
        await conn.copy_records_to_table("billing_payment_methods", records=methods, columns=[
            "organization_id", "gateway_id", "brand", "last4", "exp_month", "exp_year", "created_at"])
        await conn.execute(
            "INSERT INTO billing_accounts (organization_id, status, cancel_at_period_end, default_payment_method_id) "
            "SELECT organization_id, 'active', false, id FROM billing_payment_methods")
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


async def _close_run(db: Database, organizations: int, batch: int, children: bool) -> dict[str, Any]:
    settings = _settings(db)
    await asyncio.to_thread(migrate, settings)
    await _bulk_organizations(db.url, organizations, children)
    gateway = SimulatedPaymentGateway()
    container = build_container(settings, ClockProvider(ManualClock(CLOSE_AT)), Pinned(PaymentGateway, gateway))
    try:
        started = time.perf_counter()
        invoiced = await close_period(ScopedUnits(container), "2026-01", batch)
        closed = time.perf_counter() - started
        started = time.perf_counter()
        tried = await collect_due(ScopedUnits(container))
        collected = time.perf_counter() - started
        again = await close_period(ScopedUnits(container), "2026-01", batch)
    finally:
        await container.close()
    declined = sum(1 for c in gateway.charges if c.result.status == "declined")
    return {"organizations": organizations, "invoiced": invoiced, "close_s": round(closed, 2),
            "charged": tried, "declined": declined, "collect_s": round(collected, 2), "second_close": again}


def close(args: argparse.Namespace) -> None:
    print("| organizations | invoices | close (billing.close) | charges (declined) | collection (billing.collect) "
          "| a second close | target close < 60 s | load average |")
    print("|---|---|---|---|---|---|---|---|")
    for _ in range(args.rounds):
        with fresh_database("postgres", PG_ADMIN) as db:
            r = asyncio.run(_close_run(db, args.organizations, args.batch, not args.no_children))
        print(f"| {r['organizations']:,} | {r['invoiced']:,} | {r['close_s']} s | {r['charged']:,} "
              f"({r['declined']:,}) | {r['collect_s']} s | {r['second_close']} new | "
              f"{'met' if r['close_s'] < 60 else 'NOT met'} | {os.getloadavg()[0]:.1f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="scenario", required=True)
    u = sub.add_parser("usage")
    u.add_argument("--database", choices=("sqlite", "postgres", "both"), default="both")
    u.add_argument("--rows", type=int, default=1_000_000)
    u.add_argument("--requests", type=int, default=300)
    c = sub.add_parser("close")
    c.add_argument("--organizations", type=int, default=10_000)
    c.add_argument("--batch", type=int, default=500)
    c.add_argument("--rounds", type=int, default=1)
    c.add_argument("--no-children", action="store_true", help="no partners and no partner-mode children")
    r = sub.add_parser("rollup")
    r.add_argument("--database", choices=("sqlite", "postgres", "both"), default="both")
    r.add_argument("--children", type=int, default=500)
    r.add_argument("--rows", type=int, default=1_000_000)
    r.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    {"usage": usage, "close": close, "rollup": rollup}[args.scenario](args)


if __name__ == "__main__":
    main()
