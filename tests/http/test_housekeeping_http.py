"""Housekeeping forgets the history kept for a while once its retention window (30 days by default) has passed:
jobs that failed for the last time, finished webhook deliveries with their log rows (GET /webhooks/{id}/logs),
ended trigger runs (GET /triggers/{id}/runs). What is still pending or running, and what is younger, stays."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from adapters.memory.clock import ManualClock
from adapters.sql.engine import create_engine
from adapters.sql.jobs_tables import jobs
from application.housekeeping import PurgeExpired, PurgeExpiredCommand, purge_once
from application.ports.jobs import JobQueue, NewJob
from application.ports.media import MediaStreamTokens
from application.ports.platform import UnitOfWork
from application.ports.triggers import TriggerRepository
from application.ports.webhooks import DeliveryRepository
from domain.triggers import TriggerRun
from domain.webhooks import Delivery, DeliveryAttempt
from entrypoints.ioc import build_container
from entrypoints.units import ScopedUnits
from tests.support.apps import Api, ApiFactory, Tenant

START = datetime(2026, 3, 2, 9, tzinfo=UTC)


async def _history(api: Api, t: Tenant, hook_id: int, trigger_id: int, at: datetime, tag: str) -> dict[str, int]:
    """A finished and a pending delivery with a log row each, an ended and a running trigger run, and a job
    that failed for the last time, all made at ``at``; the deliveries' ids by ``<tag>_<status>``."""
    made: dict[str, int] = {}
    container = api.worker()
    async with container() as r:
        deliveries = await r.get(DeliveryRepository)
        for status in ("succeeded", "pending"):
            delivery = await deliveries.add(Delivery(
                None, t.organization_id, hook_id, "call.ended", {}, at, f"msg_{tag}_{status}", status=status,
                attempts=1, created_at=at, updated_at=at))
            made[f"{tag}_{status}"] = delivery.id or 0
            await deliveries.add_attempts([DeliveryAttempt(
                None, t.organization_id, hook_id, delivery.id or 0, "call.ended", delivery.message_id, 1,
                "succeeded" if status == "succeeded" else "failed", 200, "", 12, None, at)])
        runs = await r.get(TriggerRepository)
        await runs.add_runs([
            TriggerRun(None, t.organization_id, trigger_id, "call.ended", event_id, 0, True, status, (), (),
                       created_at=at, finished_at=at if status != "running" else None)
            for event_id, status in ((_event(tag, 1), "succeeded"), (_event(tag, 2), "running"))])
        queue = await r.get(JobQueue)
        await queue.schedule(NewJob(kind="tests.doomed", key=tag, payload={}, due_at=at))
        [claimed] = await queue.claim("tests.doomed", "tests", at, at + timedelta(minutes=1), 1)
        assert await queue.fail(claimed, "it broke", at)
        await (await r.get(UnitOfWork)).commit()
    return made


def _event(tag: str, n: int) -> int:
    return 1000 * (1 + len(tag)) + n


async def _failed_jobs(api: Api) -> set[str]:
    engine = create_engine(api.settings.database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(sa.select(jobs.c.key).where(jobs.c.kind == "tests.doomed"))
            return {row.key for row in rows}
    finally:
        await engine.dispose()


async def _get(api: Api, t: Tenant, path: str) -> list[dict[str, Any]]:
    r = await api.client.get(path, headers=t.headers)
    assert r.status_code == 200, r.text
    return r.json()["data"]  # type: ignore[no-any-return]


async def test_history_is_purged_after_its_retention_window(make_api: ApiFactory, sql_url: str) -> None:
    clock = ManualClock(START)
    api = await make_api(sql_url, clock=clock)
    t = await api.tenant()
    hook = await api.client.post("/v2/webhooks", json={"url": "https://hooks.example.com/p", "events": ["call.ended"]},
                                 headers=t.headers)
    trigger = await api.client.post("/v2/triggers", headers=t.headers, json={
        "name": "Ended", "event": "call.ended", "actions": [{"type": "webhook",
                                                             "config": {"url": "http://127.0.0.1:9/h"}}]})
    assert hook.status_code == 201 and trigger.status_code == 201, (hook.text, trigger.text)
    hook_id, trigger_id = hook.json()["data"]["id"], trigger.json()["data"]["id"]
    logs, runs = f"/v2/webhooks/{hook_id}/logs", f"/v2/triggers/{trigger_id}/runs"

    deliveries = {**await _history(api, t, hook_id, trigger_id, START, "old"),
                  **await _history(api, t, hook_id, trigger_id, START + timedelta(days=20), "young")}
    assert len(await _get(api, t, logs)) == 4 and len(await _get(api, t, runs)) == 4
    assert await _failed_jobs(api) == {"old", "young"}

    clock.advance(days=29)  # nothing has been kept for 30 days yet
    container = build_container(api.settings, *api.overrides)
    try:
        await purge_once(ScopedUnits(container))
        assert len(await _get(api, t, logs)) == 4 and len(await _get(api, t, runs)) == 4
        clock.advance(days=2)  # the old history is 31 days old, the young one 11
        await purge_once(ScopedUnits(container))
    finally:
        await container.close()
    kept_logs = await _get(api, t, logs)
    assert sorted(row["delivery_id"] for row in kept_logs) == sorted(
        deliveries[name] for name in ("old_pending", "young_pending", "young_succeeded")), kept_logs
    kept_runs = await _get(api, t, runs)
    assert sorted((run["event_id"], run["status"]) for run in kept_runs) == [
        (_event("old", 2), "running"), (_event("young", 1), "succeeded"), (_event("young", 2), "running")]
    assert await _failed_jobs(api) == {"young"}


async def test_expired_media_stream_tokens_are_purged(make_api: ApiFactory, sql_url: str) -> None:
    """A token, used or not, is forgotten once it has expired (PARLEY_MEDIA_TOKEN_TTL_SECONDS, 900 s); a live one
    stays and still opens its stream once."""
    clock = ManualClock(START)
    api = await make_api(sql_url, clock=clock)
    async with api.worker()() as unit:
        tokens = await unit.get(MediaStreamTokens)
        used = await tokens.issue("call-used", 1, START)
        assert await tokens.redeem(used, START) is not None
        await tokens.issue("call-unused", 1, START)
        await (await unit.get(UnitOfWork)).commit()
    clock.advance(seconds=600)
    async with api.worker()() as unit:
        fresh = await (await unit.get(MediaStreamTokens)).issue("call-fresh", 1, clock.now())
        await (await unit.get(UnitOfWork)).commit()
    container = build_container(api.settings, *api.overrides)
    try:
        async with container() as unit:  # nothing has expired yet
            assert (await (await unit.get(PurgeExpired)).execute(PurgeExpiredCommand())).media_stream_tokens == 0
        clock.advance(seconds=301)  # the first two are past their 900 s
        async with container() as unit:
            purged = await (await unit.get(PurgeExpired)).execute(PurgeExpiredCommand())
            await (await unit.get(UnitOfWork)).commit()
        assert purged.media_stream_tokens == 2
        await purge_once(ScopedUnits(container))  # the job's own pass: the fresh token is not expired
    finally:
        await container.close()
    async with api.worker()() as unit:
        grant = await (await unit.get(MediaStreamTokens)).redeem(fresh, clock.now())
        assert grant is not None and grant.call_id == "call-fresh"
