"""The period close and the collection survive a worker killed with SIGKILL mid-run, on PostgreSQL: 3,000
organizations (a tenth with a card that declines) are closed and collected by a worker process that is killed in
the middle of its collection passes, then restarted; the payment gateway (an emulator keeping its charges in a
journal outside the process, with idempotency keys) has exactly one charge for each invoice that has a card, no
organization has two invoices or none, and every invoice's state agrees with its charge."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from adapters.memory.clock import ManualClock
from adapters.sql.billing_tables import billing_invoices
from application.ports.accounts import OrganizationRepository
from application.ports.billing import BillingAccount, BillingRepository
from application.ports.platform import UnitOfWork
from domain.billing import PaymentMethod
from domain.organizations import Organization
from tests.support.apps import ApiFactory

ROOT = Path(__file__).resolve().parents[2]
JAN = datetime(2026, 1, 10, tzinfo=UTC)
ORGANIZATIONS = 3_000
PLANS = ("starter", "business", "enterprise")
PRICES = {"starter": 4_900, "business": 49_900, "enterprise": 249_900}


def _declines(n: int) -> bool:
    return n % 10 == 3  # a tenth


def _start(url: str, var_dir: Path, journal: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PARLEY_LOG_LEVEL": "WARNING"}
    return subprocess.Popen([sys.executable, "-m", "tests.e2e.billing_collection_process", url, str(var_dir),
                             str(journal)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


async def _seed(api: object, count: int) -> dict[int, str]:
    """``count`` organizations created in January, each with a default card; returns organization → plan."""
    plans: dict[int, str] = {}
    for first in range(0, count, 500):
        async with api._admin()() as request:  # type: ignore[attr-defined]
            orgs, billing = await request.get(OrganizationRepository), await request.get(BillingRepository)
            for n in range(first, min(first + 500, count)):
                plan = PLANS[n % 3]
                org = await orgs.add(Organization(None, f"Org {n}", plan, "standard", None, JAN, JAN))
                assert org.id is not None
                token = "pm_card_chargeDeclined" if _declines(n) else "pm_card_visa"
                method = await billing.add_method(PaymentMethod(None, org.id, f"{token}.{n}", "visa", "4242", 12,
                                                                2034, JAN))
                await billing.save_account(BillingAccount(org.id, default_payment_method_id=method.id))
                plans[org.id] = plan
            await (await request.get(UnitOfWork)).commit()
    return plans


async def _wait_for(process: subprocess.Popen[str], marker: str, times: int, timeout: float) -> None:  # noqa: ASYNC109
    seen = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    assert process.stdout is not None
    while seen < times:
        line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), max(1.0, deadline - loop.time()))
        if not line:
            raise AssertionError(f"the worker stopped: {process.stderr.read() if process.stderr else ''}")
        seen += marker in line


@pytest.mark.slow
@pytest.mark.postgres
async def test_a_worker_killed_mid_collection_charges_each_invoice_once(
        make_api: ApiFactory, fresh_pg_url: str, tmp_path: Path) -> None:
    api = await make_api(fresh_pg_url, clock=ManualClock(JAN))
    plans = await _seed(api, ORGANIZATIONS)
    journal = tmp_path / "charges.jsonl"

    first = _start(fresh_pg_url, tmp_path, journal)
    try:
        await _wait_for(first, "collected", 5, timeout=300)  # five passes of 40 committed, the next under way
    finally:
        first.send_signal(signal.SIGKILL)
    first.wait(10)
    assert first.returncode == -signal.SIGKILL
    charged_before = len(journal.read_text().splitlines())
    assert 0 < charged_before < ORGANIZATIONS

    second = _start(fresh_pg_url, tmp_path, journal)
    try:
        await _wait_for(second, "done", 1, timeout=600)
    except BaseException:
        second.kill()
        raise
    assert await asyncio.to_thread(second.wait, 60) == 0, second.stderr.read() if second.stderr else ""

    charges = [json.loads(line) for line in journal.read_text().splitlines()]
    keys = Counter(c["key"] for c in charges)
    assert not [k for k, n in keys.items() if n > 1]  # no charge made twice
    engine = create_async_engine(fresh_pg_url)
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(sa.select(
                billing_invoices.c.id, billing_invoices.c.organization_id, billing_invoices.c.total,
                billing_invoices.c.status, billing_invoices.c.attempt_count).where(
                billing_invoices.c.period == "2026-01",
                billing_invoices.c.organization_id.in_(list(plans))))).all()
    finally:
        await engine.dispose()
    by_org = Counter(r.organization_id for r in rows)
    assert set(by_org) == set(plans) and set(by_org.values()) == {1}  # one invoice each: none missing, none twice
    by_invoice = {int(c["key"].split("_")[1]): c for c in charges}
    # each invoice charged, once (attempt 1)
    assert set(by_invoice) >= {r.id for r in rows} and len(by_invoice) == len(charges)
    assert {c["key"].rsplit("_", 1)[1] for c in charges} == {"1"}
    ordinal = {org: n for n, org in enumerate(sorted(plans))}
    for r in rows:
        charge = by_invoice[r.id]
        assert r.total == PRICES[plans[r.organization_id]] == charge["amount"]
        declined = _declines(ordinal[r.organization_id])
        assert charge["status"] == ("declined" if declined else "succeeded")
        assert r.status == ("open" if declined else "paid") and r.attempt_count == 1, r
    assert Counter(c["status"] for c in charges)["declined"] == ORGANIZATIONS // 10
