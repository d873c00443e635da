"""The cloud status's ports on every backend: worker heartbeats, the outbox backlog from the consumers' cursors,
and failing webhook subscriptions."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from application.outbox import CONSUMERS
from application.ports.cloud import Heartbeats, PlatformHealth
from application.ports.events import OutboxReader
from application.ports.platform import UnitOfWork
from application.ports.webhooks import SubscriptionRepository
from domain.events import event
from domain.webhooks import Subscription
from tests.support.apps import new_organization

FAR = datetime(2090, 1, 1, tzinfo=UTC)  # later than any other test's heartbeat on a shared database


async def _in(container: Any, work: Any) -> Any:
    async with container() as request:
        result = await work(request)
        await (await request.get(UnitOfWork)).commit()
    return result


async def test_heartbeats_keep_one_row_per_process_and_forget_the_silent(container: Any) -> None:
    async def beats(request: Any) -> datetime | None:
        heartbeats = await request.get(Heartbeats)
        await heartbeats.beat("host:1:aa", FAR)
        await heartbeats.beat("host:2:bb", FAR + timedelta(seconds=20))
        await heartbeats.beat("host:1:aa", FAR + timedelta(seconds=30))  # the same process, kept current
        return await heartbeats.latest()

    assert await _in(container, beats) == FAR + timedelta(seconds=30)

    async def forget(request: Any) -> tuple[int, datetime | None]:
        heartbeats = await request.get(Heartbeats)
        gone = await heartbeats.forget(FAR + timedelta(seconds=25))
        return gone, await heartbeats.latest()

    gone, latest = await _in(container, forget)
    assert gone >= 1 and latest == FAR + timedelta(seconds=30)
    assert await _in(container, lambda r: _forget_all(r)) >= 1
    assert await _in(container, lambda r: _latest(r)) is None


async def _forget_all(request: Any) -> int:
    return await (await request.get(Heartbeats)).forget(FAR + timedelta(days=1))  # type: ignore[no-any-return]


async def _latest(request: Any) -> datetime | None:
    return await (await request.get(Heartbeats)).latest()  # type: ignore[no-any-return]


async def _consume_all(request: Any) -> None:
    reader = await request.get(OutboxReader)
    for consumer in CONSUMERS:
        while events := await reader.pending(consumer, 1000):
            await reader.advance(consumer, events[-1].id, FAR)


async def test_the_backlog_is_what_the_slowest_consumer_has_not_processed(container: Any) -> None:
    org = await new_organization(container)
    await _in(container, _consume_all)

    async def backlog(request: Any) -> Any:
        health = await request.get(PlatformHealth)
        await health.ping()
        return await health.outbox_backlog(CONSUMERS)

    assert (await _in(container, backlog)).pending == 0

    async def record(request: Any) -> None:
        uow = await request.get(UnitOfWork)
        for n in range(3):
            uow.record(event(org, "call.completed", {"call_id": f"c{n}"}))

    await _in(container, record)
    waiting = await _in(container, backlog)
    assert waiting.pending == 3 and waiting.oldest_pending_at is not None

    async def one_consumer_done(request: Any) -> None:
        reader = await request.get(OutboxReader)
        events = await reader.pending(CONSUMERS[0], 1000)
        await reader.advance(CONSUMERS[0], events[-1].id, FAR)

    await _in(container, one_consumer_done)
    assert (await _in(container, backlog)).pending == 3  # the others still have them
    await _in(container, _consume_all)
    assert await _in(container, backlog) == type(waiting)(0, None)


async def test_failing_subscriptions_are_the_failing_active_and_the_disabled(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    now = datetime(2026, 1, 5, 9, tzinfo=UTC)

    async def add(request: Any) -> list[Subscription]:
        subs = await request.get(SubscriptionRepository)
        made = [await subs.add(Subscription(None, o, "s", "https://example.com/h", ("call.completed",),
                                            created_at=now, updated_at=now)) for o in (org, org, org, org, other)]
        await subs.update(replace(made[0], failing_since=now))
        await subs.update(replace(made[1], status="disabled", disabled_reason="gone", disabled_at=now))
        await subs.update(replace(made[2], status="paused"))
        await subs.update(replace(made[4], status="disabled", disabled_reason="gone", disabled_at=now))
        return made

    await _in(container, add)

    async def failing(request: Any) -> tuple[int, int]:
        health = await request.get(PlatformHealth)
        return await health.failing_subscriptions(org), await health.failing_subscriptions(other)

    assert await _in(container, failing) == (2, 1)
