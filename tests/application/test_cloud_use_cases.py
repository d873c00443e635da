"""Cloud status use cases on the memory backend: each component measured with the manual clock (the database
round trip, the newest worker heartbeat, the outbox backlog, the telephony health check, the organization's
failing webhook subscriptions), a component whose measurement fails is down while the others are still measured,
and the overall status is the worst component's; the heartbeat forgets processes silent for a day."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.memory.clock import ManualClock
from application.cloud import (
    FORGET_AFTER,
    GetCloudStatus,
    GetCloudStatusCommand,
    RecordHeartbeat,
    RecordHeartbeatCommand,
)
from application.context import Actor
from application.outbox import CONSUMERS
from application.ports.cloud import Heartbeats, OutboxBacklog, PlatformHealth
from application.ports.events import OutboxReader
from application.ports.platform import UnitOfWork
from application.ports.telephony import Telephony, TelephonyHealth
from application.ports.webhooks import SubscriptionRepository
from application.webhooks import CreateSubscription, CreateSubscriptionCommand
from domain.cloud import ComponentStatus
from domain.events import event
from entrypoints.ioc import build_container
from entrypoints.overrides import ClockProvider, Pinned
from entrypoints.settings import Settings
from tests.application.conftest import NOW, App
from tests.support.apps import CHEAP_HASHING

OPERATIONAL, DEGRADED, DOWN = ComponentStatus.OPERATIONAL, ComponentStatus.DEGRADED, ComponentStatus.DOWN


class FakeTelephony:
    def __init__(self) -> None:
        self.answer: TelephonyHealth | Exception = TelephonyHealth(ok=True, provider="fake")

    async def health(self) -> TelephonyHealth:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class FakeHealth:
    """A database that answers after ``latency`` on the manual clock, or fails; nothing pending, nothing failing."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock, self.latency, self.fails = clock, timedelta(0), False

    async def ping(self) -> None:
        if self.fails:
            raise ConnectionError("the database did not answer")
        self.clock.advance(seconds=self.latency.total_seconds())

    async def outbox_backlog(self, consumers: Any) -> OutboxBacklog:
        return OutboxBacklog(0, None)

    async def failing_subscriptions(self, organization_id: int) -> int:
        return 0


@pytest.fixture
async def telephony() -> FakeTelephony:
    return FakeTelephony()


@pytest.fixture
async def cloud(tmp_path: Path, telephony: FakeTelephony) -> AsyncIterator[App]:
    """The memory backend's cloud status, with a telephony provider the test decides."""
    async with _app(tmp_path, lambda clock: [Pinned(Telephony, telephony)]) as built:
        yield built


class _app:
    def __init__(self, tmp_path: Path, overrides: Any) -> None:
        self.clock = ManualClock(NOW)
        settings = Settings(database_url="memory://", var_dir=tmp_path / "var", secret_key="test-secret-key",
                            **CHEAP_HASHING)
        self.container = build_container(settings, ClockProvider(self.clock), *overrides(self.clock))

    async def __aenter__(self) -> App:
        return App(self.container, self.clock)

    async def __aexit__(self, *exc: object) -> None:
        await self.container.close()


async def status(app: App, actor: Actor):  # type: ignore[no-untyped-def]
    return await app.run(GetCloudStatus, GetCloudStatusCommand(actor))


async def beat(app: App, process: str = "worker:1") -> None:
    await app.run(RecordHeartbeat, RecordHeartbeatCommand(process))


async def consume_everything(app: App) -> None:
    async with app.container() as r:
        reader = await r.get(OutboxReader)
        for consumer in CONSUMERS:
            while events := await reader.pending(consumer, 1000):
                await reader.advance(consumer, events[-1].id, app.clock.now())
        await (await r.get(UnitOfWork)).commit()


async def record_events(app: App, organization_id: int, count: int = 1) -> None:
    async with app.container() as r:
        uow = await r.get(UnitOfWork)
        for n in range(count):
            uow.record(event(organization_id, "call.completed", {"call_id": f"c{n}"}))
        await uow.commit()


async def test_a_healthy_platform_is_operational(cloud: App) -> None:
    actor = await cloud.actor()
    await beat(cloud)
    await consume_everything(cloud)
    measured = await status(cloud, actor)
    assert measured.status == OPERATIONAL and measured.checked_at == NOW
    assert (measured.database.status, measured.database.latency_ms) == (OPERATIONAL, 0.0)
    assert (measured.worker.last_heartbeat_at, measured.outbox.pending, measured.telephony.provider,
            measured.webhooks.failing_subscriptions) == (NOW, 0, "fake", 0)


async def test_the_worker_is_degraded_then_down_as_its_newest_heartbeat_ages(cloud: App) -> None:
    actor = await cloud.actor()
    await consume_everything(cloud)
    never = await status(cloud, actor)
    assert (never.worker.status, never.worker.last_heartbeat_at, never.status) == (DOWN, None, DOWN)
    await beat(cloud, "a:1")
    cloud.clock.advance(seconds=30)
    await beat(cloud, "b:2")  # the newest heartbeat of any process counts
    cloud.clock.advance(seconds=61)
    degraded = await status(cloud, actor)
    assert (degraded.worker.status, degraded.worker.last_heartbeat_at, degraded.status) == (
        DEGRADED, NOW + timedelta(seconds=30), DEGRADED)
    cloud.clock.advance(seconds=240)  # 301 s after the newest heartbeat
    assert (await status(cloud, actor)).worker.status == DOWN
    await beat(cloud, "a:1")
    assert (await status(cloud, actor)).worker.status == OPERATIONAL


async def test_the_heartbeat_forgets_processes_silent_for_a_day(cloud: App) -> None:
    await beat(cloud, "old:1")
    cloud.clock.advance(seconds=FORGET_AFTER.total_seconds() + 1)
    async with cloud.container() as r:
        assert await (await r.get(Heartbeats)).latest() == NOW
    await beat(cloud, "new:2")
    async with cloud.container() as r:
        heartbeats = await r.get(Heartbeats)
        assert await heartbeats.latest() == cloud.clock.now()
        assert await heartbeats.forget(cloud.clock.now() + timedelta(seconds=1)) == 1  # the old one was gone


async def test_the_outbox_is_degraded_then_down_while_events_wait_for_a_consumer(cloud: App) -> None:
    actor = await cloud.actor()
    await consume_everything(cloud)
    await record_events(cloud, actor.organization_id)
    await beat(cloud)
    young = (await status(cloud, actor)).outbox
    assert (young.status, young.pending, young.oldest_pending_seconds) == (OPERATIONAL, 1, 0.0)
    cloud.clock.advance(seconds=61)
    await beat(cloud)
    assert (await status(cloud, actor)).outbox.status == DEGRADED
    cloud.clock.advance(seconds=840)
    await beat(cloud)
    old = await status(cloud, actor)
    assert (old.outbox.status, old.outbox.oldest_pending_seconds, old.status) == (DOWN, 901.0, DOWN)
    await consume_everything(cloud)
    assert (await status(cloud, actor)).outbox.pending == 0


async def test_failing_webhook_subscriptions_degrade_only_their_organizations_status(cloud: App) -> None:
    actor, other = await cloud.actor(), await cloud.actor()
    ids = [(await cloud.run(CreateSubscription, CreateSubscriptionCommand(
        actor, f"https://hooks.example.com/{n}", ["call.completed"]))).subscription.id for n in range(3)]
    await beat(cloud)
    await consume_everything(cloud)
    assert (await status(cloud, actor)).webhooks.status == OPERATIONAL
    async with cloud.container() as r:
        subs = await r.get(SubscriptionRepository)
        await subs.mark_failing(actor.organization_id, ids[0], NOW)  # deliveries failing, still active
        disabled = await subs.get(actor.organization_id, ids[1])
        await subs.update(replace(disabled, status="disabled", disabled_reason="the receiver answered 410",
                                  disabled_at=NOW))
        await (await r.get(UnitOfWork)).commit()
    measured = await status(cloud, actor)
    assert (measured.webhooks.status, measured.webhooks.failing_subscriptions, measured.status) == (
        DEGRADED, 2, DEGRADED)
    assert (await status(cloud, other)).webhooks.failing_subscriptions == 0


async def test_the_telephony_health_check_decides_its_status(cloud: App, telephony: FakeTelephony) -> None:
    actor = await cloud.actor()
    await beat(cloud)
    await consume_everything(cloud)
    telephony.answer = TelephonyHealth(ok=False, provider="fake", detail="carrier unreachable")
    down = await status(cloud, actor)
    assert (down.telephony.status, down.telephony.provider, down.status) == (DOWN, "fake", DOWN)
    telephony.answer = TimeoutError("no answer")
    failed = await status(cloud, actor)
    assert (failed.telephony.status, failed.telephony.provider) == (DOWN, None)
    assert failed.database.status == OPERATIONAL  # the others are still measured


async def test_the_database_is_degraded_when_slow_and_down_when_it_fails(tmp_path: Path) -> None:
    health: list[FakeHealth] = []

    def overrides(clock: ManualClock) -> list[Any]:
        health.append(FakeHealth(clock))
        return [Pinned(PlatformHealth, health[0]), Pinned(Telephony, FakeTelephony())]

    async with _app(tmp_path, overrides) as app:
        actor = await app.actor()
        await beat(app)
        health[0].latency = timedelta(milliseconds=251)
        slow = await status(app, actor)
        assert (slow.database.status, slow.database.latency_ms, slow.status) == (DEGRADED, 251.0, DEGRADED)
        health[0].fails = True
        failed = await status(app, actor)
        assert (failed.database.status, failed.database.latency_ms, failed.status) == (DOWN, None, DOWN)
        assert failed.worker.status == OPERATIONAL
