"""The worker job as it runs in production: real clock, polling loops, graceful stop, and two
workers on PostgreSQL that never send a delivery twice."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

from application.context import Actor
from application.ports.platform import PageRequest, UnitOfWork
from application.ports.webhooks import AttemptFilter
from application.webhook_delivery import DeliverySteps, PumpDeliveries, PumpDeliveriesCommand
from application.webhooks import (
    DispatchOutbox,
    ListDeliveryAttempts,
    ListDeliveryAttemptsCommand,
    Redeliver,
    RedeliverCommand,
    SendTestEvent,
    SendTestEventCommand,
)
from domain.events import event
from domain.scopes import ScopeSet
from entrypoints.ioc import build_container
from tests.support.apps import ApiFactory
from tests.support.receiver import Receiver, Reply
from tests.support.webhooks import deliver_once, webhook_work

FAST = {"poll_seconds": 0.05, "lease_seconds": 10, "shutdown_grace_seconds": 5}


def _trace_passes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every committed dispatcher pass and every claim of the worker's loops, in order, with how many
    events or deliveries it took."""
    passes: list[tuple[str, int]] = []
    dispatch, claim = DispatchOutbox.execute, DeliverySteps.claim

    async def traced_dispatch(*args: Any, **kwargs: Any) -> int:
        dispatched = await dispatch(*args, **kwargs)
        passes.append(("dispatch", dispatched))
        return dispatched

    async def traced_claim(*args: Any) -> list[Any]:
        claimed = await claim(*args)
        passes.append(("claim", len(claimed)))
        return claimed

    monkeypatch.setattr(DispatchOutbox, "execute", traced_dispatch)
    monkeypatch.setattr(DeliverySteps, "claim", traced_claim)
    return passes


class SeenStop(asyncio.Event):
    """The delivery pump's stop: set when the worker's is, and ``seen`` once the pump has looked and found it set."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = asyncio.Event()

    def is_set(self) -> bool:
        if super().is_set():
            self.seen.set()
            return True
        return False


def _watch_the_pump_stop(monkeypatch: pytest.MonkeyPatch) -> SeenStop:
    """The stop the worker's delivery pump is given, which says when the pump has seen it."""
    pump_stop = SeenStop()
    execute = PumpDeliveries.execute

    async def watched(self: PumpDeliveries, command: PumpDeliveriesCommand) -> None:
        follow = asyncio.ensure_future(command.stop.wait())
        follow.add_done_callback(lambda _: pump_stop.set())
        try:
            await execute(self, replace(command, stop=pump_stop))
        finally:
            follow.cancel()

    monkeypatch.setattr(PumpDeliveries, "execute", watched)
    return pump_stop


@pytest.mark.slow
async def test_worker_delivers_soon_after_commit_and_finishes_in_flight_on_stop(
        make_api: ApiFactory, fresh_sqlite_url: str, receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    passes = _trace_passes(monkeypatch)
    pump_stop = _watch_the_pump_stop(monkeypatch)
    answer = asyncio.Event()
    api = await make_api(fresh_sqlite_url)
    t = await api.tenant()
    hook = (await api.client.post("/v2/webhooks", json={"url": receiver.url(), "events": ["call.ended"]},
                                  headers=t.headers)).json()["data"]
    jobs = build_container(api.settings)
    stop = asyncio.Event()
    worker = asyncio.create_task(webhook_work(jobs, api.settings, stop, **FAST))
    try:
        async with jobs() as r:
            uow = await r.get(UnitOfWork)
            uow.record(event(t.organization_id, "call.ended", {"n": 1}))
            await uow.commit()
        committed = len(passes)
        await receiver.wait_for(1, timeout=5)
        # "soon", counted in the worker's own passes rather than in seconds (the machine may be slow): the
        # first dispatcher pass that starts after the commit fans the event out (one under way may miss it),
        # and wakes the delivery loop at once, whose next claim sends it (one claim may be under way)
        after = passes[committed:]
        fanned_out = next(i for i, (kind, n) in enumerate(after) if kind == "dispatch" and n)
        assert sum(kind == "dispatch" for kind, _ in after[:fanned_out]) <= 1
        claims = [n for kind, n in after[fanned_out:] if kind == "claim"]
        assert next(i for i, n in enumerate(claims) if n) <= 1

        receiver.script("/hook", Reply(200, hold=answer))
        async with jobs() as r:
            uow = await r.get(UnitOfWork)
            uow.record(event(t.organization_id, "call.ended", {"n": 2}))
            await uow.commit()
        await receiver.wait_for(2, timeout=5)
        stop.set()  # while the second delivery is in flight
        await asyncio.wait_for(pump_stop.seen.wait(), timeout=5)  # the pump knows it is stopping...
        answer.set()  # ...before the receiver answers
        await asyncio.wait_for(worker, timeout=8)
    finally:
        stop.set()
        answer.set()
        if not worker.done():
            worker.cancel()
        await jobs.close()
    logs = (await api.client.get(f"/v2/webhooks/{hook['id']}/logs", headers=t.headers)).json()["data"]
    assert [x["status"] for x in logs] == ["succeeded", "succeeded"]  # the in-flight one was finished


async def test_a_test_send_and_a_redelivery_wake_the_idle_sender(
        make_api: ApiFactory, fresh_sqlite_url: str, receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test send and a redelivery leave at once, as event deliveries do: the idle sender is woken by their commit,
    not found by its poll (an hour here, so only the wake-up can deliver them in time)."""
    # idle: the dispatcher's first pass found no event, the sender's first claim no delivery (it sleeps for the poll)
    idle_now = asyncio.Event()
    dispatch, claim = DispatchOutbox.execute, DeliverySteps.claim
    first: set[str] = set()

    def looked(kind: str, found: int) -> None:
        if not found:
            first.add(kind)
        if first == {"dispatch", "claim"}:
            idle_now.set()

    async def traced_dispatch(*args: Any, **kwargs: Any) -> int:
        dispatched = await dispatch(*args, **kwargs)
        looked("dispatch", dispatched)
        return dispatched

    async def traced_claim(*args: Any) -> list[Any]:
        claimed = await claim(*args)
        looked("claim", len(claimed))
        return claimed

    monkeypatch.setattr(DispatchOutbox, "execute", traced_dispatch)
    monkeypatch.setattr(DeliverySteps, "claim", traced_claim)
    api = await make_api(fresh_sqlite_url)
    t = await api.tenant()
    hook = (await api.client.post("/v2/webhooks", json={"url": receiver.url(), "events": ["call.ended"]},
                                  headers=t.headers)).json()["data"]
    actor = Actor(t.organization_id, t.organization_id, None, ScopeSet.of(["*"]))
    jobs = build_container(api.settings)

    async def run(case: type, command: Any) -> Any:  # as the route runs it: the use case, then the commit
        async with jobs() as r:
            result = await (await r.get(case)).execute(command)
            await (await r.get(UnitOfWork)).commit()
        return result

    stop = asyncio.Event()
    idle = {"poll_seconds": 3600, "lease_seconds": 10, "shutdown_grace_seconds": 5}
    worker = asyncio.create_task(webhook_work(jobs, api.settings, stop, **idle))
    try:
        await asyncio.wait_for(idle_now.wait(), timeout=10)
        await run(SendTestEvent, SendTestEventCommand(actor, hook["id"]))
        await receiver.wait_for(1, timeout=5)
        assert receiver.requests[0].headers["x-webhook-event"] == "webhook.test"
        page: Any = None
        async with asyncio.timeout(5):  # the sender records the attempt just after the receiver answered
            while not (page and page.items):
                await asyncio.sleep(0.01)
                page = await run(ListDeliveryAttempts, ListDeliveryAttemptsCommand(
                    actor, hook["id"], AttemptFilter(), PageRequest()))
        await run(Redeliver, RedeliverCommand(actor, hook["id"], page.items[0].id))
        await receiver.wait_for(2, timeout=5)
    finally:
        stop.set()
        await asyncio.wait_for(worker, timeout=8)
        await jobs.close()
    first_send, again = receiver.requests
    assert first_send.webhook_id == again.webhook_id


async def test_stop_releases_deliveries_that_do_not_finish_in_time(
        make_api: ApiFactory, fresh_sqlite_url: str, receiver: Receiver) -> None:
    api = await make_api(fresh_sqlite_url)
    t = await api.tenant()
    hook = (await api.client.post("/v2/webhooks", json={"url": receiver.url(), "events": ["call.ended"]},
                                  headers=t.headers)).json()["data"]
    receiver.script("/hook", Reply(200, hang=5))
    jobs = build_container(api.settings)
    stop = asyncio.Event()
    impatient = {"poll_seconds": 0.05, "lease_seconds": 60, "shutdown_grace_seconds": 0.05}
    worker = asyncio.create_task(webhook_work(jobs, api.settings, stop, **impatient))
    try:
        async with jobs() as r:
            uow = await r.get(UnitOfWork)
            uow.record(event(t.organization_id, "call.ended", {}))
            await uow.commit()
        await receiver.wait_for(1, timeout=5)
        stop.set()
        await asyncio.wait_for(worker, timeout=3)  # gives up on the hanging send and releases it
        assert await deliver_once(jobs) == 1  # due again at once, not after the 60 s lease
    finally:
        stop.set()
        await jobs.close()
    first, again = receiver.requests
    assert first.webhook_id == again.webhook_id
    logs = (await api.client.get(f"/v2/webhooks/{hook['id']}/logs", headers=t.headers)).json()["data"]
    assert [(x["attempt"], x["status"]) for x in logs] == [(1, "succeeded")]  # the released try is not counted


@pytest.mark.slow  # 600 real deliveries through two workers' egress: an end-to-end run of a few seconds
@pytest.mark.postgres
async def test_two_workers_on_postgres_never_send_a_delivery_twice(
        make_api: ApiFactory, fresh_pg_url: str, receiver: Receiver) -> None:
    api = await make_api(fresh_pg_url)
    t = await api.tenant()
    for path in ("/a", "/b", "/c"):
        r = await api.client.post("/v2/webhooks", json={"url": receiver.url(path), "events": ["contact.completed"]},
                                  headers=t.headers)
        assert r.status_code == 201
    setup = build_container(api.settings)
    async with setup() as r:
        uow = await r.get(UnitOfWork)
        for n in range(200):
            uow.record(event(t.organization_id, "contact.completed", {"n": n}))
        await uow.commit()
    await setup.close()

    options = {"poll_seconds": 0.02, "lease_seconds": 30, "batch_size": 20, "concurrency": 40, "dispatch_batch": 25}
    workers = [build_container(api.settings) for _ in range(2)]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(webhook_work(w, api.settings, stop, **options)) for w in workers]
    try:
        await receiver.wait_for(600, timeout=60)
        await asyncio.sleep(0.5)  # a duplicate would arrive now
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=15)
        for w in workers:
            await w.close()
    ids = Counter(r.webhook_id for r in receiver.requests)
    assert len(receiver.requests) == 600 and len(ids) == 600 and max(ids.values()) == 1
    per_path = Counter(r.path for r in receiver.requests)
    assert per_path == {"/a": 200, "/b": 200, "/c": 200}
