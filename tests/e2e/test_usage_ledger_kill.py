"""The usage ledger under a killed worker: a real process is SIGKILLed while it records a call's usage (its rows
written, the transaction open); after a restart the call's usage is recorded exactly once, also when the
restarted worker records the same call end again. On SQLite and PostgreSQL, on a database of the test's own: a
process killed mid-write must not share the database the run's other tests read and write."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from adapters.sql.usage_tables import usage_counters, usage_daily, usage_ledger
from application.ports.usage import CALL_SECONDS, CALLS
from tests.e2e.usage_recording_process import SECONDS
from tests.support.apps import Api, ApiFactory

pytestmark = pytest.mark.slow  # real processes (make test runs it; make test-fast leaves it out)

ROOT = Path(__file__).resolve().parents[2]


def _recorder(url: str, var_dir: Path, organization_id: int, call_id: str, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.e2e.usage_recording_process", url, str(var_dir),
                             str(organization_id), call_id, mode], cwd=ROOT, env=dict(os.environ),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


async def _state(api: Api, organization_id: int, call_id: str) -> tuple[list[tuple[str, int]], dict[str, int], int]:
    engine = create_async_engine(api.settings.database_url)
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(sa.select(usage_ledger.c.metric, usage_ledger.c.quantity).where(
                usage_ledger.c.source_type == "call", usage_ledger.c.source_id == call_id)
                .order_by(usage_ledger.c.metric))).all()
            counters = dict((await conn.execute(sa.select(usage_counters.c.metric, usage_counters.c.used).where(
                usage_counters.c.organization_id == organization_id))).all())
            daily = (await conn.execute(sa.select(sa.func.coalesce(sa.func.sum(usage_daily.c.used), 0)).where(
                usage_daily.c.organization_id == organization_id,
                usage_daily.c.metric == CALL_SECONDS))).scalar_one()
        return [(m, int(q)) for m, q in rows], {m: int(u) for m, u in counters.items()}, int(daily)
    finally:
        await engine.dispose()


async def test_a_worker_killed_mid_record_leaves_nothing_and_the_restart_records_once(
        make_api: ApiFactory, private_sql_url: str, tmp_path: Path) -> None:
    any_api = await make_api(private_sql_url)
    t = await any_api.tenant(plan="business")
    call_id = str(uuid.uuid4())
    url = any_api.settings.database_url

    hung = _recorder(url, tmp_path, t.organization_id, call_id, "hang")
    try:
        line = await asyncio.to_thread(hung.stdout.readline)  # type: ignore[union-attr]
        assert line.strip() == "recorded", hung.stderr.read() if hung.stderr else ""
        hung.send_signal(signal.SIGKILL)  # mid-record: the ledger rows and counters written, not committed
        assert await asyncio.to_thread(hung.wait, 10) == -signal.SIGKILL
    finally:
        if hung.poll() is None:
            hung.kill()
    assert await _state(any_api, t.organization_id, call_id) == ([], {}, 0)

    billable = int(-(-SECONDS // 1))  # 94.2 s bills 95
    expected = ([(CALL_SECONDS, billable), (CALLS, 1)], {CALL_SECONDS: billable, CALLS: 1}, billable)
    for _restart in range(2):  # the restarted worker records the call's end; then again, as after a later crash
        done = _recorder(url, tmp_path, t.organization_id, call_id, "commit")
        out, err = await asyncio.to_thread(done.communicate, timeout=60)
        assert done.returncode == 0 and out.strip() == "committed", err
        assert await _state(any_api, t.organization_id, call_id) == expected
