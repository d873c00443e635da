"""A worker process killed with SIGKILL in the middle of its deliveries loses nothing: once its
leases expire, another worker sends them again with the same X-Webhook-Id."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from application.ports.platform import UnitOfWork
from domain.events import event
from entrypoints.ioc import build_container
from tests.support.apps import ApiFactory
from tests.support.receiver import Receiver, Reply

ROOT = Path(__file__).resolve().parents[2]
PATHS = ("/a", "/b", "/c")
WEBHOOK_WORK = "webhooks.dispatch,webhooks.deliver"
"""A worker process that runs only the webhook work (``parley worker --jobs``)."""


def _start_worker(url: str, var_dir: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PARLEY_DATABASE_URL": url,
        "PARLEY_SECRET_KEY": "test-secret-key",
        "PARLEY_ALLOW_LOOPBACK_TARGETS": "1",
        "PARLEY_VAR_DIR": str(var_dir),
        "PARLEY_WEBHOOK_LEASE_SECONDS": "3",
        "PARLEY_WEBHOOK_POLL_SECONDS": "0.05",
        "PARLEY_LOG_LEVEL": "WARNING",
    }
    return subprocess.Popen([sys.executable, "-m", "entrypoints.cli", "worker", "--no-migrate", "--jobs", WEBHOOK_WORK],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


async def _exit_code(process: subprocess.Popen[bytes], timeout: float) -> int:  # noqa: ASYNC109
    deadline = asyncio.get_running_loop().time() + timeout
    while process.poll() is None:
        if asyncio.get_running_loop().time() > deadline:
            process.kill()
            raise AssertionError("the worker did not stop in time")
        await asyncio.sleep(0.05)
    return process.returncode


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def crash_db(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue("fresh_sqlite_url" if request.param == "sqlite" else "fresh_pg_url")


@pytest.mark.slow
async def test_killed_worker_deliveries_arrive_once_more_with_the_same_id(
        make_api: ApiFactory, crash_db: str, receiver: Receiver, tmp_path: Path) -> None:
    api = await make_api(crash_db)
    t = await api.tenant()
    hooks = {}
    for path in PATHS:
        r = await api.client.post("/v2/webhooks", json={"url": receiver.url(path), "events": ["call.completed"]},
                                  headers=t.headers)
        hooks[path] = r.json()["data"]
        receiver.script(path, Reply(200, hang=30))  # the first worker never gets an answer
    jobs = build_container(api.settings)
    async with jobs() as r:
        uow = await r.get(UnitOfWork)
        uow.record(event(t.organization_id, "call.completed", {"call_id": "c-9"}))
        await uow.commit()
    await jobs.close()

    first = _start_worker(crash_db, tmp_path)
    try:
        await receiver.wait_for(3, timeout=30)
    finally:
        first.send_signal(signal.SIGKILL)  # kill -9, mid-delivery
    assert await _exit_code(first, 5) == -signal.SIGKILL

    second = _start_worker(crash_db, tmp_path)
    try:
        await receiver.wait_for(6, timeout=30)
        for _ in range(100):  # the outcomes are recorded right after the answers
            logs = {path: (await api.client.get(f"/v2/webhooks/{hook['id']}/logs", headers=t.headers)).json()["data"]
                    for path, hook in hooks.items()}
            if all(len(rows) == 1 for rows in logs.values()):
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)  # nothing else arrives
    finally:
        second.send_signal(signal.SIGTERM)
        code = await _exit_code(second, 15)
    assert code == 0, second.stderr.read().decode() if second.stderr else ""

    by_path: dict[str, list[str]] = defaultdict(list)
    for got in receiver.requests:
        by_path[got.path].append(got.webhook_id)
    for path in PATHS:
        ids = by_path[path]
        assert len(ids) == 2 and ids[0] == ids[1], (path, ids)  # at least once, with the same webhook id
        [log] = logs[path]
        assert log["status"] == "succeeded" and log["message_id"] == ids[0] and log["attempt"] == 2
    assert len({ids[0] for ids in by_path.values()}) == 3
