"""Usage on the memory backend: the ledger records a source once per metric (seconds rounded up), the one quota
gate reserves against a hard-stop plan's allowance and refuses past it with quota_exceeded naming the metric
(plans with overage are never refused), a recorded source gives back its reservation, usage.threshold fires at
80 % and 100 % once per period, and the reports read one period's counters and a daily series."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from application.context import Actor
from application.ports.platform import UnitOfWork
from application.ports.usage import CALL_SECONDS, CALLS, SMS_SEGMENTS, QuotaGate, UsageRecorder
from application.usage import GetUsage, GetUsageCommand, GetUsageMetrics, GetUsageMetricsCommand
from domain.errors import QuotaExceeded, ValidationFailed
from tests.application.conftest import NOW, App


async def record(app: App, organization_id: int, kind: str, quantity: float, reference: str,
                 at: datetime = NOW) -> None:
    """One write through the usage port in its own unit of work, as a call's end or a send records it."""
    async with app.container() as r:
        await (await r.get(UsageRecorder)).record(organization_id, kind, quantity, at, reference)
        await (await r.get(UnitOfWork)).commit()


async def admit(app: App, organization_id: int, kind: str, reference: str, quantity: int) -> None:
    """The quota gate as a dial or a send passes it, in its own unit of work (committed when admitted)."""
    async with app.container() as r:
        await (await r.get(QuotaGate)).admit(organization_id, kind, reference, quantity, app.clock.now())
        await (await r.get(UnitOfWork)).commit()


async def metrics(app: App, organization_id: int, period: str | None = None) -> dict:  # type: ignore[type-arg]
    report = await app.run(GetUsage, GetUsageCommand(Actor.system(organization_id), period))
    return report.metrics  # type: ignore[no-any-return]


async def test_a_source_is_recorded_once_per_metric_with_its_seconds_rounded_up(app: App) -> None:
    org = await app.organization()
    await record(app, org, CALL_SECONDS, 61.2, "call:abc")
    await record(app, org, CALL_SECONDS, 61.2, "call:abc")  # a restarted worker records the same end again
    await record(app, org, CALLS, 1, "call:abc")
    await record(app, org, SMS_SEGMENTS, 2, "sms:7")
    used = await metrics(app, org)
    assert used["call_minutes"]["used_seconds"] == 62 and used["calls"] == 1
    assert used["sms_segments"]["used"] == 2


async def test_a_hard_stop_plan_is_refused_past_its_allowance_and_overage_never_is(app: App) -> None:
    starter, business = await app.organization(plan="starter"), await app.organization(plan="business")
    await record(app, starter, SMS_SEGMENTS, 499, "sms:earlier")
    await admit(app, starter, SMS_SEGMENTS, "sms:1", 1)  # the 500th segment fits
    await record(app, starter, SMS_SEGMENTS, 1, "sms:1")
    with pytest.raises(QuotaExceeded) as refused:
        await admit(app, starter, SMS_SEGMENTS, "sms:2", 1)
    assert refused.value.details == {"metric": "sms_segments", "plan": "starter", "period": "2026-03",
                                     "included": 500}
    await record(app, business, CALL_SECONDS, 2_000 * 60 + 1, "call:earlier")
    await admit(app, business, CALL_SECONDS, "call:2", 3600)
    assert (await metrics(app, starter))["sms_segments"] == {"used": 500, "included": 500, "remaining": 0}


async def test_a_reservation_holds_until_its_source_is_recorded(app: App) -> None:
    org = await app.organization(plan="starter")
    await admit(app, org, CALL_SECONDS, "call:a", 2900)  # a call's longest duration, of the 6000 s included
    await admit(app, org, CALL_SECONDS, "call:b", 2900)
    with pytest.raises(QuotaExceeded) as refused:
        await admit(app, org, CALL_SECONDS, "call:c", 2900)
    assert refused.value.details["metric"] == "call_minutes"
    await record(app, org, CALL_SECONDS, 12, "call:a")  # the call ended after 12 s: the rest is given back
    await admit(app, org, CALL_SECONDS, "call:c", 2900)


async def test_thresholds_fire_at_80_and_100_percent_once_per_period(app: App) -> None:
    org = await app.organization(plan="starter")

    async def thresholds() -> list[tuple[str, int, float]]:
        return [(d["metric"], d["threshold_percent"], d["used"]) for kind, d in await app.events(org)
                if kind == "usage.threshold"]

    await record(app, org, SMS_SEGMENTS, 399, "sms:bulk")
    assert await thresholds() == []
    await record(app, org, SMS_SEGMENTS, 1, "sms:1")  # 400 of 500: 80 %
    await record(app, org, SMS_SEGMENTS, 1, "sms:2")
    assert await thresholds() == [("sms_segments", 80, 400)]
    await record(app, org, SMS_SEGMENTS, 99, "sms:3")  # 500: 100 %
    await record(app, org, CALL_SECONDS, 100 * 60, "call:all")  # both call thresholds at once, in minutes
    assert await thresholds() == [("sms_segments", 80, 400), ("sms_segments", 100, 500),
                                  ("call_minutes", 80, 100.0), ("call_minutes", 100, 100.0)]
    april = datetime(2026, 4, 1, 1, tzinfo=UTC)  # the next period starts afresh
    await record(app, org, SMS_SEGMENTS, 450, "sms:april", april)
    assert len(await thresholds()) == 5


async def test_the_report_reads_one_period_and_refuses_a_bad_one_naming_it(app: App) -> None:
    org = await app.organization(plan="starter")
    await record(app, org, SMS_SEGMENTS, 7, "sms:feb", datetime(2026, 2, 28, 23, 59, tzinfo=UTC))
    await record(app, org, SMS_SEGMENTS, 3, "sms:mar", datetime(2026, 3, 1, tzinfo=UTC))
    current = await metrics(app, org)
    assert current["sms_segments"] == {"used": 3, "included": 500, "remaining": 497}
    assert current["call_minutes"] == {"used": 0, "used_seconds": 0, "included": 100, "remaining": 100}
    assert (await metrics(app, org, "previous"))["sms_segments"]["used"] == 7
    assert await metrics(app, org, "2026-02") == await metrics(app, org, "previous")
    for bad in ("2026-13", "last", "2026-1"):
        with pytest.raises(ValidationFailed) as refused:
            await metrics(app, org, bad)
        assert "period" in str(refused.value)


async def test_the_daily_series_reads_the_day_counters_and_validates_its_range(app: App) -> None:
    org = await app.organization()
    actor = Actor.system(org)
    await record(app, org, CALL_SECONDS, 90, "call:a", NOW)
    await record(app, org, CALL_SECONDS, 30, "call:b", NOW + timedelta(hours=1))
    await record(app, org, CALL_SECONDS, 60, "call:c", NOW + timedelta(days=2))

    async def series(**fields: str) -> list[tuple[date, float]]:
        command = GetUsageMetricsCommand(actor, fields.pop("metric", "call_minutes"), fields.pop("start", None),
                                         fields.pop("end", None), fields.pop("granularity", "day"))
        return [(p.date, p.value) for p in await app.run(GetUsageMetrics, command)]

    assert await series(start="2026-03-02", end="2026-03-05") == [
        (date(2026, 3, 2), 2.0), (date(2026, 3, 3), 0.0), (date(2026, 3, 4), 1.0), (date(2026, 3, 5), 0.0)]
    for fields, named in (({"metric": "minutes", "start": "2026-03-02", "end": "2026-03-03"}, "metric"),
                          ({"end": "2026-03-03"}, "start"),
                          ({"start": "2026-03-02", "end": "soon"}, "end"),
                          ({"start": "2026-03-02", "end": "2026-03-01"}, "end"),
                          ({"start": "2026-03-02", "end": "2026-03-03", "granularity": "week"}, "granularity"),
                          ({"start": "2024-01-01", "end": "2026-01-01"}, "end"),
                          ({"start": "2026-03-01", "end": "2026-04-01", "granularity": "hour"}, "end")):
        with pytest.raises(ValidationFailed) as refused:
            await series(**fields)
        assert named in str(refused.value)
    hourly = await app.run(GetUsageMetrics, GetUsageMetricsCommand(actor, "call_minutes", "2026-03-02", "2026-03-02",
                                                                   "hour"))
    assert len(hourly) == 24 and sum(p.value for p in hourly) == 2.0
    assert [(p.hour, p.value) for p in hourly if p.value] == [(NOW.replace(minute=0, second=0, microsecond=0), 1.5),
                                                            (NOW.replace(minute=0, second=0, microsecond=0)
                                                             + timedelta(hours=1), 0.5)]
