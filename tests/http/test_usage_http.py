"""Usage metering and quotas through the real HTTP API on SQLite and PostgreSQL: the ledger written with the call
or message it measures (once per source, also when a restarted worker records the same call end again), the
one quota gate on calls and SMS (a hard stop on the starter plan, also under 20 concurrent calls), the
usage.threshold events, and GET /usage and /usage/metrics read from the counters."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from adapters.memory.clock import ManualClock
from adapters.sql.uow import SqlUnitOfWork
from adapters.sql.usage_tables import usage_counters, usage_ledger
from application.ports.platform import UnitOfWork
from application.ports.usage import CALL_SECONDS, CALLS, SMS_SEGMENTS, UsageRecorder
from tests.http.calls_support import active_agent, finish_calls, outbox, place
from tests.support.apps import Api, ApiFactory, Tenant

START = datetime(2026, 1, 5, 9, tzinfo=UTC)
CONCURRENT = 20


async def record(api: Api, organization_id: int, kind: str, quantity: float, reference: str,
                 at: datetime = START, *, commit: bool = True) -> None:
    """One write through the usage port in its own unit of work (committed, or abandoned as by a killed worker).
    A made-up reference (not a call's UUID) gets the organization's id appended: tests share a database."""
    if len(reference.partition(":")[2]) != 36:
        reference = f"{reference}-{organization_id}"
    container = api.worker()
    async with container() as r:
        await (await r.get(UsageRecorder)).record(organization_id, kind, quantity, at, reference)
        uow = await r.get(UnitOfWork)
        await (uow.commit() if commit else uow.rollback())


async def ledger_rows(api: Api, organization_id: int) -> list[tuple[str, str, str, int]]:
    container = api.worker()
    async with container() as r:
        conn = await (await r.get(SqlUnitOfWork)).connection()
        rows = await conn.execute(sa.select(usage_ledger.c.source_type, usage_ledger.c.source_id,
                                            usage_ledger.c.metric, usage_ledger.c.quantity)
                                  .where(usage_ledger.c.organization_id == organization_id)
                                  .order_by(usage_ledger.c.id))
        return [tuple(row) for row in rows]  # type: ignore[misc]


async def reserved(api: Api, organization_id: int) -> int:
    container = api.worker()
    async with container() as r:
        conn = await (await r.get(SqlUnitOfWork)).connection()
        return int((await conn.execute(sa.select(sa.func.coalesce(sa.func.sum(usage_counters.c.reserved), 0))
                                       .where(usage_counters.c.organization_id == organization_id)))
                   .scalar_one())


async def usage(api: Api, t: Tenant, period: str | None = None) -> dict[str, Any]:
    response = await api.client.get("/v2/usage", params={"period": period} if period else None, headers=t.headers)
    assert response.status_code == 200, response.text
    return response.json()["data"]  # type: ignore[no-any-return]


async def sms(api: Api, t: Tenant, body: str = "Hello") -> Any:
    return await api.client.post("/v2/sms", json={"to": "+14155550123", "body": body}, headers=t.headers)


# ---------------------------------------------------------------------------------------------- the ledger


async def test_a_finished_call_records_its_seconds_and_its_count_once(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant()
    agent = await active_agent(api, t)
    ids = [(await place(api, t, agent, "+1555010000")).json()["data"]["id"] for _ in range(2)]
    await finish_calls(api, t.organization_id)
    durations = [(await api.client.get(f"/v2/calls/{i}", headers=t.headers)).json()["data"]["duration_seconds"]
                 for i in ids]
    assert all(d > 0 for d in durations)
    rows = await ledger_rows(api, t.organization_id)
    assert sorted(rows) == sorted([("call", i, CALL_SECONDS, d) for i, d in zip(ids, durations, strict=True)]
                                  + [("call", i, CALLS, 1) for i in ids])
    data = await usage(api, t)
    assert data["period"] == "2026-01" and data["plan"] == "enterprise"
    assert data["period_start"] == "2026-01-01T00:00:00Z" and data["period_end"] == "2026-02-01T00:00:00Z"
    minutes = data["metrics"]["call_minutes"]
    assert minutes["used_seconds"] == sum(durations) and minutes["used"] == round(sum(durations) / 60, 2)
    assert minutes["included"] == 20_000 and data["metrics"]["calls"] == 2
    assert await reserved(api, t.organization_id) == 0


async def test_seconds_are_rounded_up_and_sms_segments_are_recorded_with_the_message(
        make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant()
    await record(api, t.organization_id, CALL_SECONDS, 61.2, "call:abc")
    long = await sms(api, t, "x" * 161)  # GSM-7, two segments
    assert long.status_code == 201, long.text
    rows = await ledger_rows(api, t.organization_id)
    assert rows == [("call", f"abc-{t.organization_id}", CALL_SECONDS, 62),
                    ("sms", str(long.json()["data"]["id"]), SMS_SEGMENTS, 2)]
    metrics = (await usage(api, t))["metrics"]
    assert metrics["call_minutes"]["used_seconds"] == 62 and metrics["sms_segments"]["used"] == 2


async def test_a_restarted_worker_recording_the_same_call_end_counts_it_once(
        make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant()
    agent = await active_agent(api, t)
    call_id = (await place(api, t, agent, "+1555010000")).json()["data"]["id"]
    await finish_calls(api, t.organization_id)
    before = await usage(api, t)
    duration = (await api.client.get(f"/v2/calls/{call_id}", headers=t.headers)).json()["data"]["duration_seconds"]
    # a worker killed after writing but before committing leaves nothing behind ...
    await record(api, t.organization_id, CALL_SECONDS, 999, "call:killed", commit=False)
    # ... and the same call end recorded again (the retry after a restart) is a no-op
    for _ in range(2):
        await record(api, t.organization_id, CALL_SECONDS, duration, f"call:{call_id}")
        await record(api, t.organization_id, CALLS, 1, f"call:{call_id}")
    assert await usage(api, t) == before
    rows = await ledger_rows(api, t.organization_id)
    assert Counter((r[1], r[2]) for r in rows) == {(call_id, CALL_SECONDS): 1, (call_id, CALLS): 1}
    # the killed write, retried, counts once
    await record(api, t.organization_id, CALL_SECONDS, 30, "call:killed")
    await record(api, t.organization_id, CALL_SECONDS, 30, "call:killed")
    assert (await usage(api, t))["metrics"]["call_minutes"]["used_seconds"] == duration + 30


# ---------------------------------------------------------------------------------------------- the quota gate


async def test_starter_is_a_hard_stop_on_calls_and_sms_and_business_has_overage(
        make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(START))
    starter, business = await api.tenant(plan="starter"), await api.tenant(plan="business")
    await record(api, starter.organization_id, CALL_SECONDS, 100 * 60, "call:earlier")
    await record(api, business.organization_id, CALL_SECONDS, 2_000 * 60 + 1, "call:earlier-b")
    refused = await place(api, starter, await active_agent(api, starter), "+1555010000")
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert error["code"] == "quota_exceeded" and error["details"]["metric"] == "call_minutes"
    assert refused.json()["success"] is False and "call_minutes" in error["message"]
    assert "held by calls in progress" in error["message"]  # what GET /usage does not show as used yet
    assert (await api.client.get("/v2/calls", headers=starter.headers)).json()["meta"]["total"] == 0
    assert (await place(api, business, await active_agent(api, business), "+1555010000")).status_code == 201
    await record(api, starter.organization_id, SMS_SEGMENTS, 499, "sms:earlier")
    assert (await sms(api, starter)).status_code == 201  # the 500th segment fits
    over = await sms(api, starter)
    assert over.status_code == 403 and over.json()["error"]["details"]["metric"] == "sms_segments"
    assert (await api.client.get("/v2/sms", headers=starter.headers)).json()["meta"]["total"] == 1
    usage_now = (await usage(api, starter))["metrics"]
    assert usage_now["sms_segments"] == {"used": 500, "included": 500, "remaining": 0}
    assert usage_now["call_minutes"]["remaining"] == 0


async def test_a_placed_call_reserves_its_longest_duration_until_it_ends(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant(plan="starter")
    agent = await active_agent(api, t, max_call_duration_seconds=3000)  # 50 of the 100 included minutes
    assert [(await place(api, t, agent, "+1555010000")).status_code for _ in range(3)] == [201, 201, 403]
    assert await reserved(api, t.organization_id) == 6000
    await finish_calls(api, t.organization_id)  # the calls end after a few seconds: the rest is given back
    assert await reserved(api, t.organization_id) == 0
    assert (await place(api, t, agent, "+1555010000")).status_code == 201


async def _concurrent_calls(api: Api, tenant: Tenant, agent: dict[str, Any]) -> Counter[tuple[int, str | None]]:
    body = {"bot_id": str(agent["id"]), "destination_phone": "+1555010000", "contact_name": "Ada"}
    responses = await asyncio.gather(*(api.client.post("/v2/calls", json=body, headers=tenant.headers)
                                       for _ in range(CONCURRENT)))
    return Counter((r.status_code, r.json().get("error", {}).get("code")) for r in responses)


async def test_twenty_concurrent_calls_never_overshoot_the_hard_limit(concurrent_api: Api) -> None:
    api = concurrent_api
    t = await api.tenant(plan="starter")
    agent = await active_agent(api, t, max_call_duration_seconds=900)  # 15 min each: room for exactly 6
    outcomes = await _concurrent_calls(api, t, agent)
    assert outcomes == {(201, None): 6, (403, "quota_exceeded"): CONCURRENT - 6}
    assert (await api.client.get("/v2/calls", headers=t.headers)).json()["meta"]["total"] == 6
    assert await reserved(api, t.organization_id) == 6 * 900


async def test_twenty_concurrent_calls_with_a_partly_used_period(concurrent_api: Api) -> None:
    api = concurrent_api
    t = await api.tenant(plan="starter")
    await record(api, t.organization_id, CALL_SECONDS, 97 * 60, "call:earlier-partly", datetime.now(UTC))
    agent = await active_agent(api, t, max_call_duration_seconds=60)  # 3 minutes left: exactly 3 calls
    assert await _concurrent_calls(api, t, agent) == {(201, None): 3, (403, "quota_exceeded"): CONCURRENT - 3}


# ---------------------------------------------------------------------------------------------- thresholds


async def test_usage_threshold_fires_at_80_and_100_percent_once_per_period(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant(plan="starter")
    await record(api, t.organization_id, SMS_SEGMENTS, 399, "sms:bulk")
    assert await outbox(api, t.organization_id, "usage.") == []
    assert (await sms(api, t)).status_code == 201  # 400 of 500: 80 %
    assert (await sms(api, t)).status_code == 201
    events = await outbox(api, t.organization_id, "usage.")
    assert [(k, d["metric"], d["threshold_percent"], d["used"]) for k, d in events] == [
        ("usage.threshold", "sms_segments", 80, 400)]
    assert events[0][1]["period"] == "2026-01" and events[0][1]["hard_stop"] is True
    await record(api, t.organization_id, SMS_SEGMENTS, 98, "sms:bulk-2")  # 499 (a jump past nothing)
    assert (await sms(api, t)).status_code == 201  # 500: 100 %
    await record(api, t.organization_id, CALL_SECONDS, 100 * 60, "call:all")  # both call thresholds at once
    kinds = [(d["metric"], d["threshold_percent"]) for _, d in await outbox(api, t.organization_id, "usage.")]
    assert kinds == [("sms_segments", 80), ("sms_segments", 100), ("call_minutes", 80), ("call_minutes", 100)]
    # the next period starts afresh
    api.clock.set(datetime(2026, 2, 1, 0, 0, 1, tzinfo=UTC))  # type: ignore[union-attr]
    await record(api, t.organization_id, SMS_SEGMENTS, 450, "sms:feb", datetime(2026, 2, 1, 1, tzinfo=UTC))
    assert len(await outbox(api, t.organization_id, "usage.")) == 5


# ---------------------------------------------------------------------------------------------- reports


async def test_usage_periods_and_their_validation(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant(plan="starter")
    await record(api, t.organization_id, SMS_SEGMENTS, 7, "sms:dec", datetime(2025, 12, 31, 23, 59, tzinfo=UTC))
    await record(api, t.organization_id, SMS_SEGMENTS, 3, "sms:jan", datetime(2026, 1, 1, tzinfo=UTC))
    current = await usage(api, t)
    assert current["metrics"]["sms_segments"] == {"used": 3, "included": 500, "remaining": 497}
    assert current["metrics"]["knowledge_bases"] == {"used": 0, "limit": 1}
    assert current["metrics"]["phone_numbers"] == 0 and current["metrics"]["calls"] == 0
    assert current["metrics"]["call_minutes"] == {"used": 0, "used_seconds": 0, "included": 100, "remaining": 100}
    previous = await usage(api, t, "previous")
    assert previous["period"] == "2025-12" and previous["metrics"]["sms_segments"]["used"] == 7
    assert (await usage(api, t, "2025-12")) == previous
    for bad in ("2026-13", "last", "2026-1", "9999-12", "0000-01", "1969-12"):  # the calendar's edges: 400, not 500
        r = await api.client.get("/v2/usage", params={"period": bad}, headers=t.headers)
        assert r.status_code == 400 and "period" in r.json()["error"]["details"]["validation_errors"], r.text
    for extra in ({}, {"granularity": "hour"}, {"group_by": "agent"}):
        edge = {"metric": "calls", "start": "9999-12-31", "end": "9999-12-31", **extra}
        r = await api.client.get("/v2/usage/metrics", params=edge, headers=t.headers)
        assert r.status_code == 400 and "start" in r.json()["error"]["details"]["validation_errors"], r.text
    reader = await api.key_for(t.organization_id, ("usage:read",))
    assert (await api.client.get("/v2/usage", headers=reader.headers)).status_code == 200
    other = await api.key_for(t.organization_id, ("calls:read",))
    r = await api.client.get("/v2/usage", headers=other.headers)
    assert r.status_code == 403 and r.json()["error"]["code"] == "INSUFFICIENT_SCOPE"


async def test_usage_metrics_is_a_daily_series_from_the_day_counters(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant()
    await record(api, t.organization_id, CALL_SECONDS, 90, "call:a", START)
    await record(api, t.organization_id, CALL_SECONDS, 30, "call:b", START + timedelta(hours=1))
    await record(api, t.organization_id, CALL_SECONDS, 60, "call:c", START + timedelta(days=2))
    await record(api, t.organization_id, CALLS, 1, "call:a", START)
    r = await api.client.get("/v2/usage/metrics", headers=t.headers, params={
        "metric": "call_minutes", "start": "2026-01-05", "end": "2026-01-08", "granularity": "day"})
    assert r.status_code == 200, r.text
    assert r.json()["data"]["series"] == [
        {"date": "2026-01-05", "value": 2.0}, {"date": "2026-01-06", "value": 0.0},
        {"date": "2026-01-07", "value": 1.0}, {"date": "2026-01-08", "value": 0.0}]
    calls = await api.client.get("/v2/usage/metrics", headers=t.headers, params={
        "metric": "calls", "start": "2026-01-05T00:00:00Z", "end": "2026-01-05T23:00:00Z"})
    assert calls.json()["data"]["series"] == [{"date": "2026-01-05", "value": 1.0}]
    for params, field in (({"metric": "minutes", "start": "2026-01-05", "end": "2026-01-06"}, "metric"),
                          ({"metric": "calls", "end": "2026-01-06"}, "start"),
                          ({"metric": "calls", "start": "2026-01-05", "end": "soon"}, "end"),
                          ({"metric": "calls", "start": "2026-01-05", "end": "2026-01-04"}, "end"),
                          ({"metric": "calls", "start": "2026-01-05", "end": "2026-01-06", "granularity": "week"},
                           "granularity")):
        bad = await api.client.get("/v2/usage/metrics", headers=t.headers, params=params)
        assert bad.status_code == 400 and field in bad.json()["error"]["details"]["validation_errors"], bad.text
    long = await api.client.get("/v2/usage/metrics", headers=t.headers, params={
        "metric": "calls", "start": "2024-01-01", "end": "2026-01-01"})
    assert long.status_code == 400 and long.json()["error"]["code"] == "bad_request", long.text
    assert long.json()["error"]["details"]["reason"] == "range_too_long"


async def test_usage_metrics_by_hour_from_the_ledger(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant()
    await record(api, t.organization_id, CALL_SECONDS, 90, "call:a", START)  # 09:00
    await record(api, t.organization_id, CALL_SECONDS, 30, "call:b", START + timedelta(minutes=59, seconds=59))
    await record(api, t.organization_id, CALL_SECONDS, 60, "call:c", START + timedelta(hours=1))  # 10:00
    await record(api, t.organization_id, SMS_SEGMENTS, 3, "sms:a", START + timedelta(hours=14, minutes=59))  # 23:59
    r = await api.client.get("/v2/usage/metrics", headers=t.headers, params={
        "metric": "call_minutes", "start": "2026-01-05", "end": "2026-01-06", "granularity": "hour"})
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["granularity"] == "hour" and len(data["series"]) == 48
    assert data["series"][0] == {"date": "2026-01-05", "hour": "2026-01-05T00:00:00Z", "value": 0.0}
    assert data["series"][9] == {"date": "2026-01-05", "hour": "2026-01-05T09:00:00Z", "value": 2.0}
    assert data["series"][10]["value"] == 1.0 and sum(p["value"] for p in data["series"]) == 3.0
    assert data["series"][47]["hour"] == "2026-01-06T23:00:00Z"
    sms = await api.client.get("/v2/usage/metrics", headers=t.headers, params={
        "metric": "sms_segments", "start": "2026-01-05", "end": "2026-01-05", "granularity": "hour"})
    assert [p["value"] for p in sms.json()["data"]["series"]][23] == 3.0
    # the day series still carries no hour
    day = await api.client.get("/v2/usage/metrics", headers=t.headers, params={
        "metric": "sms_segments", "start": "2026-01-05", "end": "2026-01-05"})
    assert day.json()["data"]["series"] == [{"date": "2026-01-05", "value": 3.0}]
    long = await api.client.get("/v2/usage/metrics", headers=t.headers, params={
        "metric": "calls", "start": "2026-01-01", "end": "2026-02-01", "granularity": "hour"})
    assert long.status_code == 400 and long.json()["error"]["details"]["reason"] == "range_too_long", long.text


@pytest.mark.slow
async def test_every_dial_path_passes_the_quota_gate(make_api: ApiFactory, sql_url: str) -> None:
    """The campaign dialer waits (status_reason quota_exceeded), dial-now and leads are refused: all place calls
    through the one gate."""
    from tests.http import dialer_support as support
    from tests.http.dialer_support import campaign, contacts, tick

    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant(plan="starter")
    try:
        c = await campaign(api, t, [{"phone": "+1555010000", "name": "Ada", "custom_data": {"plan": "x"}}],
                           timezone_mode="campaign", start=False)
        await record(api, t.organization_id, CALL_SECONDS, 100 * 60, "call:month")
        assert (await api.client.post(f"/v2/campaigns/{c['id']}/start", headers=t.headers)).status_code == 200
        await tick(api)
        found = (await api.client.get(f"/v2/campaigns/{c['id']}", headers=t.headers)).json()["data"]
        assert found["status"] == "running" and found["status_reason"] == "quota_exceeded"
        contact = next(iter((await contacts(api, t, c["id"])).values()))
        assert contact["status"] == "pending"
        now = await api.client.post(f"/v2/campaigns/{c['id']}/dial", json={"contact_id": contact["id"]},
                                    headers=t.headers)
        assert now.status_code == 403 and now.json()["error"]["code"] == "quota_exceeded", now.text
        agent = await active_agent(api, t, prompt="You call people back.", first_message="Hello.")
        lead = await api.client.post("/v2/leads", json={"phone": "+1555010000", "agent_id": agent["id"]},
                                     headers=t.headers)
        assert lead.status_code == 403 and lead.json()["error"]["code"] == "quota_exceeded", lead.text
        assert (await api.client.get("/v2/calls", headers=t.headers)).json()["meta"]["total"] == 0
    finally:
        await support.close_workers()
