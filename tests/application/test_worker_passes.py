"""The worker's passes on the memory backend, each step a unit of work of its own (``Units``): the campaign
dialer's budgets and round-robin, the calls' progress pass (the plan's lines, the sweeper, one organization at a
time), and the webhook delivery steps (exactly once, a stopped pump releasing what it could not finish)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.memory.clock import ManualClock
from application.call_progress import RunCallProgress, RunCallProgressCommand
from application.calls import GetCall, GetCallCommand
from application.context import Actor
from application.dialer_pass import DialerPolicy, RunDialerPass, RunDialerPassCommand
from application.ports.calls import CallFilter, CallRepository
from application.ports.egress import PostResult
from application.ports.platform import PageRequest
from application.ports.webhooks import WebhookHttp
from application.webhook_delivery import (
    DeliverDue,
    DeliverDueCommand,
    DeliveryPolicy,
    PumpDeliveries,
    PumpDeliveriesCommand,
    dispatch_once,
    drain,
)
from application.webhooks import (
    ClaimDeliveries,
    ClaimDeliveriesCommand,
    CreateSubscription,
    CreateSubscriptionCommand,
    SendDelivery,
)
from entrypoints.ioc import build_container
from entrypoints.overrides import ClockProvider, Pinned
from entrypoints.settings import Settings
from entrypoints.units import ScopedUnits
from tests.application.conftest import NOW, App
from tests.application.test_calls_use_cases import BUSY, agent, place
from tests.application.test_dialer_use_cases import _running
from tests.application.test_webhooks_use_cases import LEASE, call_ended
from tests.support.apps import CHEAP_HASHING

# ---------------------------------------------------------------------------------------------- the dialer


async def _calls_per_campaign(app: App, actor: Actor) -> dict[int, int]:
    async with app.container() as r:
        calls = (await (await r.get(CallRepository)).list(actor.organization_id, CallFilter(),
                                                           PageRequest(200, 0))).items
    counts: dict[int, int] = {}
    for call in calls:
        assert call.campaign_id is not None
        counts[call.campaign_id] = counts.get(call.campaign_id, 0) + 1
    return counts


def _dialer(app: App, **policy: int) -> RunDialerPass:
    return RunDialerPass(ScopedUnits(app.container), DialerPolicy(**policy))


async def test_a_pass_gives_each_campaign_its_budget_in_turn(app: App) -> None:
    actor = await app.actor()
    first = await _running(app, actor, [f"+1415555{i:04d}" for i in range(6)], max_concurrent_calls=50)
    second = await _running(app, actor, [f"+1415556{i:04d}" for i in range(6)], max_concurrent_calls=50)
    report = await _dialer(app, campaign_budget=3).execute(RunDialerPassCommand())
    assert (report.dialled, report.exhausted) == (6, True)  # a budget ran out: the job is due again at once
    assert await _calls_per_campaign(app, actor) == {first.id: 3, second.id: 3}  # not six for the first


async def test_the_pass_budget_stops_the_pass_and_the_next_pass_goes_on(app: App) -> None:
    actor = await app.actor()
    first = await _running(app, actor, [f"+1415555{i:04d}" for i in range(4)], max_concurrent_calls=50)
    second = await _running(app, actor, [f"+1415556{i:04d}" for i in range(4)], max_concurrent_calls=50)
    dialer = _dialer(app, campaign_budget=3, pass_budget=4)
    report = await dialer.execute(RunDialerPassCommand())
    assert (report.dialled, report.exhausted) == (4, True)
    assert await _calls_per_campaign(app, actor) == {first.id: 3, second.id: 1}  # round-robin: oldest first
    app.clock.advance(seconds=1)
    report = await dialer.execute(RunDialerPassCommand())
    assert report.dialled == 4 and await _calls_per_campaign(app, actor) == {first.id: 4, second.id: 4}
    report = await dialer.execute(RunDialerPassCommand())
    assert (report.dialled, report.exhausted) == (0, False)  # nothing left: due again on its next beat


async def test_a_pass_settles_the_contacts_whose_calls_ended_before_it_dials(app: App) -> None:
    actor = await app.actor()
    await _running(app, actor, ["+1555010000", "+1555010001"], max_concurrent_calls=5)
    assert (await _dialer(app).execute(RunDialerPassCommand())).dialled == 2
    async with app.container() as r:  # the calls end on the line; nobody applied the contacts' outcomes yet
        calls = await r.get(CallRepository)
        assert len([c for c in (await calls.list(actor.organization_id, CallFilter(), PageRequest(10, 0))).items
                    if not c.is_final]) == 2
    await _finish_all_calls_only(app, actor)
    report = await _dialer(app).execute(RunDialerPassCommand())
    assert (report.settled, report.dialled) == (2, 0)
    assert [kind for kind, _ in await app.events(actor.organization_id)][-1] == "campaign.completed"


async def _finish_all_calls_only(app: App, actor: Actor) -> None:
    """End every call as completed without settling (the pass settles them)."""
    from application.calls import CallFinisher
    from application.ports.platform import UnitOfWork

    async with app.container() as r:
        calls = await r.get(CallRepository)
        finisher = await r.get(CallFinisher)
        for call in [c for c in (await calls.list(actor.organization_id, CallFilter(), PageRequest(10, 0))).items
                     if not c.is_final]:
            ringing = call if call.status != "queued" else call.move("dial", app.clock.now())[0]
            answered = ringing.move("answer", app.clock.now())[0]
            await finisher.finish(answered, "complete", app.clock.now(), end_reason="completed")
        await (await r.get(UnitOfWork)).commit()


# ---------------------------------------------------------------------------------------------- the calls


def _progress(app: App) -> RunCallProgress:
    return RunCallProgress(ScopedUnits(app.container))


async def test_the_progress_pass_dials_within_the_lines_and_moves_calls_to_their_end(app: App) -> None:
    actor = await app.actor(plan="starter")  # two lines
    agent_id = await agent(app, actor)
    placed = [await place(app, actor, agent_id) for _ in range(3)]
    report = await _progress(app).execute(RunCallProgressCommand())
    assert (report.dialled, report.advanced, report.swept) == (2, 0, 0)
    for _ in range(20):
        app.clock.advance(seconds=15)
        await _progress(app).execute(RunCallProgressCommand())
    statuses = [(await app.run(GetCall, GetCallCommand(actor, c.id))).status for c in placed]
    assert statuses == ["completed"] * 3  # the third was dialled once a line was free


async def test_a_pass_limited_to_one_organization_leaves_the_others_alone(app: App) -> None:
    mine, theirs = await app.actor(), await app.actor()
    call = await place(app, mine, await agent(app, mine))
    other = await place(app, theirs, await agent(app, theirs), BUSY)
    report = await _progress(app).execute(RunCallProgressCommand(mine.organization_id))
    assert report.dialled == 1
    assert (await app.run(GetCall, GetCallCommand(mine, call.id))).status != "queued"
    assert (await app.run(GetCall, GetCallCommand(theirs, other.id))).status == "queued"


async def test_the_progress_pass_sweeps_a_call_stuck_past_its_deadline(app: App) -> None:
    actor = await app.actor()
    call = await place(app, actor, await agent(app, actor))
    app.clock.advance(days=2)  # never dialled: past the queue's time-out
    report = await _progress(app).execute(RunCallProgressCommand())
    assert report.swept == 1
    ended = await app.run(GetCall, GetCallCommand(actor, call.id))
    assert (ended.status, ended.end_reason) == ("failed", "timeout")


# ---------------------------------------------------------------------------------------------- webhooks


@dataclass
class FakeReceiver:
    """The webhook egress: answers ``status`` at once, or holds every send until ``release`` is set."""

    status: int = 200
    hold: bool = False

    def __post_init__(self) -> None:
        self.sent: list[str] = []
        self.sending = asyncio.Event()
        self.release = asyncio.Event()

    async def fetch(self, url: str, **options: Any) -> Any:
        raise AssertionError("deliveries never fetch")

    async def post(self, url: str, *, body: bytes, headers: Mapping[str, str], timeout: float) -> PostResult:  # noqa: ASYNC109
        self.sent.append(headers["X-Webhook-Id"])
        self.sending.set()
        if self.hold:
            await self.release.wait()
        return PostResult(self.status)


@pytest.fixture
async def hooks(tmp_path: Path) -> AsyncIterator[tuple[App, FakeReceiver]]:
    receiver = FakeReceiver()
    settings = Settings(database_url="memory://", var_dir=tmp_path / "var", secret_key="test-secret-key",
                        public_base_url="https://api.example.test", **CHEAP_HASHING)
    built = build_container(settings, ClockProvider(clock := ManualClock(NOW)), Pinned(WebhookHttp, receiver))
    yield App(built, clock), receiver
    await built.close()


async def _subscribed_event(app: App) -> Actor:
    actor = await app.actor()
    await app.run(CreateSubscription, CreateSubscriptionCommand(actor, "https://hooks.example.com/in",
                                                                ["call.ended"]))
    await call_ended(app, actor)
    return actor


async def test_a_drained_delivery_is_sent_once(hooks: tuple[App, FakeReceiver]) -> None:
    app, receiver = hooks
    await _subscribed_event(app)
    units = ScopedUnits(app.container)
    deliver = DeliverDue(units, await app.container.get(SendDelivery), DeliveryPolicy())
    assert await drain(units, deliver, "worker-1") == 1
    assert await drain(units, deliver, "worker-1") == 0  # recorded: nothing is sent twice
    assert await deliver.execute(DeliverDueCommand("worker-2")) == 0
    assert len(receiver.sent) == 1


async def test_a_stopped_pump_releases_the_send_it_could_not_finish(hooks: tuple[App, FakeReceiver]) -> None:
    app, receiver = hooks
    receiver.hold = True
    await _subscribed_event(app)
    units = ScopedUnits(app.container)
    assert await dispatch_once(units) == 1
    pump = PumpDeliveries(units, await app.container.get(SendDelivery),
                          DeliveryPolicy(poll_seconds=0.05, shutdown_grace_seconds=0))
    stop, wake = asyncio.Event(), asyncio.Event()
    wake.set()
    running = asyncio.create_task(pump.execute(PumpDeliveriesCommand("worker-1", stop, wake)))
    await asyncio.wait_for(receiver.sending.wait(), 5)
    stop.set()
    await asyncio.wait_for(running, 5)  # past its grace: the hanging send is cancelled and its lease released
    again = await app.run(ClaimDeliveries, ClaimDeliveriesCommand("worker-2", 10, LEASE))
    assert [c.delivery.message_id for c in again] == receiver.sent  # due at once, not after the lease
    assert again[0].delivery.attempts == 1  # the released try is not counted
