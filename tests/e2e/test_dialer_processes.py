"""Two `parley worker` processes dial one campaign on PostgreSQL: the campaign's cap is never exceeded and no
attempt is dialled twice, also when one of them is killed with SIGKILL mid-run and another takes over."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from adapters.sql.calls_tables import calls
from adapters.sql.campaigns_tables import campaign_contacts, campaigns, contact_attempts
from tests.http.dialer_support import campaign, get
from tests.support.apps import ApiFactory
from tests.support.webhooks import create_private_pg, drop_private_pg

ROOT = Path(__file__).resolve().parents[2]
CAP = 3
CONTACTS = 24


@pytest.fixture
async def private_pg(postgres_url: str) -> AsyncIterator[str]:
    url = await create_private_pg(postgres_url)
    yield url
    await drop_private_pg(url)


def _worker(url: str, var_dir: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PARLEY_DATABASE_URL": url, "PARLEY_SECRET_KEY": "test-secret-key",
           "PARLEY_VAR_DIR": str(var_dir), "PARLEY_SIMULATOR_SPEED": "10", "PARLEY_LOG_LEVEL": "WARNING",
           # a killed worker's jobs, and the conversations it had taken, move to another after seconds, not a minute
           "PARLEY_JOB_LEASE_SECONDS": "3", "PARLEY_SIMULATOR_OFFER_AGAIN_SECONDS": "5"}
    return subprocess.Popen([sys.executable, "-m", "entrypoints.cli", "worker"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _max_overlap(intervals: list[tuple[object, object]]) -> int:
    """The most intervals [created, ended) open at one instant (an end before a start at the same instant)."""
    points = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals if end is not None],
                    key=lambda p: (p[0], p[1]))
    most = current = 0
    for _, step in points:
        current += step
        most = max(most, current)
    return most


@pytest.mark.slow  # a crash test (make test runs it in its serial pass)
@pytest.mark.serial
@pytest.mark.postgres
async def test_two_workers_keep_the_cap_and_dial_each_attempt_once_across_a_kill(
        make_api: ApiFactory, private_pg: str, tmp_path: Path) -> None:
    api = await make_api(private_pg)
    t = await api.tenant()
    people = [{"phone": f"+1415555{i:04d}", "name": f"C{i}", "custom_data": {"plan": "x"}} for i in range(CONTACTS)]
    c = await campaign(api, t, people, start=False, max_concurrent_calls=CAP, timezone_mode="campaign",
                       calling_hours={"start": "00:00", "end": "24:00"})
    workers = [_worker(private_pg, tmp_path), _worker(private_pg, tmp_path)]
    engine = create_async_engine(private_pg)
    try:
        assert (await api.client.post(f"/v2/campaigns/{c['id']}/start", headers=t.headers)).status_code == 200
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 120  # a killed worker's job leases expire after 3 s
        killed = False
        while True:  # polled in the database (the API's rate limit is not under test)
            async with engine.connect() as conn:
                status = (await conn.execute(sa.select(campaigns.c.status).where(campaigns.c.id == c["id"]))
                          ).scalar_one()
                done = (await conn.execute(sa.select(sa.func.count()).where(
                    campaign_contacts.c.campaign_id == c["id"], campaign_contacts.c.status == "completed"))
                        ).scalar_one()
            if status == "completed":
                break
            assert loop.time() < deadline, (status, done)
            if not killed and done >= CONTACTS // 3:
                workers[0].send_signal(signal.SIGKILL)  # mid-run: it may hold the job's lease
                workers[0].wait(10)
                workers.append(_worker(private_pg, tmp_path))
                killed = True
            await asyncio.sleep(0.1)
        assert killed
        async with engine.connect() as conn:
            rows = (await conn.execute(sa.select(calls.c.created_at, calls.c.ended_at, calls.c.idempotency_key,
                                                 calls.c.contact_id).where(calls.c.campaign_id == c["id"]))).all()
            attempts = (await conn.execute(sa.select(contact_attempts.c.contact_id, contact_attempts.c.attempt)
                                           .join(campaign_contacts,
                                                 campaign_contacts.c.id == contact_attempts.c.contact_id)
                                           .where(campaign_contacts.c.campaign_id == c["id"]))).all()
        assert len(rows) == CONTACTS == len({r.contact_id for r in rows})  # one call per contact, none twice
        assert len({r.idempotency_key for r in rows}) == CONTACTS
        assert sorted(a.attempt for a in attempts) == [1] * CONTACTS
        assert _max_overlap([(r.created_at, r.ended_at) for r in rows]) <= CAP
        assert (await get(api, t, f"/campaigns/{c['id']}"))["stats"]["completed"] == CONTACTS
    finally:
        for process in workers:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in workers:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
        await engine.dispose()
