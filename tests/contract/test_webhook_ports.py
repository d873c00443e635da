"""The webhook ports behave the same on memory, SQLite and PostgreSQL.

Deliveries are claimed by due time across all organizations, so each test works at its own
instant far in the past and leaves nothing due behind."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from application.ports.events import OutboxReader
from application.ports.platform import PageRequest, UnitOfWork
from application.ports.secrets import SecretBox
from application.ports.webhooks import (
    AttemptFilter,
    DeliveryRepository,
    DeliveryUpdate,
    SubscriptionFilter,
    SubscriptionRepository,
)
from domain.events import event
from domain.webhooks import Delivery, DeliveryAttempt, Subscription
from tests.support.apps import new_organization


def _sub(org: int, at: datetime, *, events: tuple[str, ...] = ("call.ended",), status: str = "active",
         url: str = "https://example.com/hook") -> Subscription:
    return Subscription(None, org, "hook", url, events, status=status, sealed_secret="sealed", created_at=at,
                        updated_at=at)


def _delivery(org: int, sub: int, at: datetime, n: int, *, event_id: int | None = None) -> Delivery:
    return Delivery(None, org, sub, "call.ended", {"n": n, "nested": {"x": [1, 2]}}, at,
                    f"msg_{org}_{sub}_{n}_{at.timestamp():.0f}", event_id=event_id, next_attempt_at=at,
                    created_at=at, updated_at=at)


async def _commit(r: Any) -> None:
    await (await r.get(UnitOfWork)).commit()


async def _settle(container: Any, at: datetime) -> None:
    """Cancel whatever this test left due (nothing may be sent by a later test's worker)."""
    async with container() as r:
        repo = await r.get(DeliveryRepository)
        left = await repo.claim_due(at + timedelta(days=1), 1000, "cleanup", at + timedelta(days=2))
        await repo.finish("cleanup", [DeliveryUpdate(c.delivery.id, "cancelled", None, at) for c in left])
        await _commit(r)


async def test_subscriptions_are_stored_listed_and_scoped(container: Any) -> None:
    at = datetime(2001, 1, 1, tzinfo=UTC)
    org, other = await new_organization(container), await new_organization(container)
    async with container() as r:
        repo = await r.get(SubscriptionRepository)
        a = await repo.add(_sub(org, at, events=("call.ended", "call.started")))
        b = await repo.add(_sub(org, at, status="paused"))
        await repo.add(_sub(other, at))
        await _commit(r)
    async with container() as r:
        repo = await r.get(SubscriptionRepository)
        got = await repo.get(org, a.id)
        assert got is not None and got.events == ("call.ended", "call.started") and got.created_at == at
        assert got.sealed_secret == "sealed"
        assert await repo.get(other, a.id) is None
        page = await repo.list(org, SubscriptionFilter(), PageRequest(1, 0))
        assert page.total == 2 and [s.id for s in page.items] == [a.id]
        assert [s.id for s in (await repo.list(org, SubscriptionFilter("paused"), PageRequest())).items] == [b.id]
        active = await repo.active_for([org, other])
        assert {s.organization_id for s in active} == {org, other} and b.id not in {s.id for s in active}
        later = at + timedelta(hours=1)
        await repo.update(replace(got, name="renamed", previous_sealed_secret="old",
                                  previous_secret_expires_at=later, updated_at=later))
        await repo.delete(org, b.id, later)
        await _commit(r)
    async with container() as r:
        repo = await r.get(SubscriptionRepository)
        got = await repo.get(org, a.id)
        assert got is not None and got.name == "renamed" and got.previous_secret_expires_at == at + timedelta(hours=1)
        assert await repo.get(org, b.id) is None
        assert (await repo.list(org, SubscriptionFilter(), PageRequest())).total == 1


async def test_subscription_health_updates_are_conditional(container: Any) -> None:
    at = datetime(2001, 2, 1, tzinfo=UTC)
    org = await new_organization(container)
    async with container() as r:
        repo = await r.get(SubscriptionRepository)
        sub = await repo.add(_sub(org, at))
        assert await repo.mark_failing(org, sub.id, at) == at
        assert await repo.mark_failing(org, sub.id, at + timedelta(days=1)) == at  # the streak keeps its start
        assert await repo.disable(org + 1, sub.id, "not yours", at) is False
        await _commit(r)
    async with container() as r:
        repo = await r.get(SubscriptionRepository)
        assert (await repo.get(org, sub.id)).failing_since == at  # type: ignore[union-attr]
        await repo.mark_healthy(org + 1, [sub.id])
        assert (await repo.get(org, sub.id)).failing_since == at  # type: ignore[union-attr]
        await repo.mark_healthy(org, [sub.id])
        assert (await repo.get(org, sub.id)).failing_since is None  # type: ignore[union-attr]
        assert await repo.disable(org, sub.id, "gone", at) is True
        assert await repo.disable(org, sub.id, "again", at) is False
        await _commit(r)
    async with container() as r:
        got = await (await r.get(SubscriptionRepository)).get(org, sub.id)
        assert got is not None and got.status == "disabled" and got.disabled_reason == "gone"
        assert got.disabled_at == at


async def test_claims_lease_deliveries_to_one_worker_at_a_time(container: Any) -> None:
    at = datetime(2001, 3, 1, tzinfo=UTC)
    org = await new_organization(container)
    async with container() as r:
        sub = await (await r.get(SubscriptionRepository)).add(_sub(org, at))
        deliveries = await r.get(DeliveryRepository)
        assert await deliveries.add_many([_delivery(org, sub.id, at, n) for n in range(5)]) == 5
        await _commit(r)
    lease = at + timedelta(seconds=30)
    async with container() as r:
        first = await (await r.get(DeliveryRepository)).claim_due(at, 3, "w1", lease)
        await _commit(r)
    async with container() as r:
        second = await (await r.get(DeliveryRepository)).claim_due(at, 10, "w2", lease)
        await _commit(r)
    assert len(first) == 3 and len(second) == 2
    assert not {c.delivery.id for c in first} & {c.delivery.id for c in second}
    assert all(c.delivery.attempts == 1 and c.subscription and c.subscription.id == sub.id for c in first)
    assert first[0].delivery.data == {"n": 0, "nested": {"x": [1, 2]}}
    async with container() as r:
        assert await (await r.get(DeliveryRepository)).claim_due(at + timedelta(seconds=29), 10, "w3", lease) == []
        await _commit(r)

    # w1 finishes one, fails one with a retry, and dies holding the third; w2 gives both back
    done, retry, lost = (c.delivery for c in first)
    async with container() as r:
        repo = await r.get(DeliveryRepository)
        await repo.finish("w1", [DeliveryUpdate(done.id, "succeeded", None, at),
                                 DeliveryUpdate(retry.id, "pending", at + timedelta(seconds=5), at)])
        await repo.finish("intruder", [DeliveryUpdate(lost.id, "failed", None, at)])  # not its lease: ignored
        await repo.release("w2", [c.delivery.id for c in second])
        await _commit(r)
    async with container() as r:
        repo = await r.get(DeliveryRepository)
        assert (await repo.get(org, done.id)).status == "succeeded"  # type: ignore[union-attr]
        again = await repo.claim_due(at + timedelta(seconds=31), 10, "w4", at + timedelta(seconds=90))
        await _commit(r)
    got = {c.delivery.id: c.delivery for c in again}
    assert set(got) == {retry.id, lost.id} | {c.delivery.id for c in second}
    assert got[lost.id].attempts == 2  # the lease expired: claimed again, the lost attempt counted
    assert got[second[0].delivery.id].attempts == 1  # released: the attempt was given back
    assert got[retry.id].attempts == 2
    async with container() as r:  # leave nothing due behind
        await (await r.get(DeliveryRepository)).finish("w4", [DeliveryUpdate(i, "succeeded", None, at) for i in got])
        await _commit(r)


async def test_fan_out_is_idempotent_and_requeue_respects_leases(container: Any) -> None:
    at = datetime(2001, 4, 1, tzinfo=UTC)
    org = await new_organization(container)
    async with container() as r:
        sub = await (await r.get(SubscriptionRepository)).add(_sub(org, at))
        repo = await r.get(DeliveryRepository)
        event_id = 10_000_000 + org
        assert await repo.add_many([_delivery(org, sub.id, at, 1, event_id=event_id)]) == 1
        assert await repo.add_many([replace(_delivery(org, sub.id, at, 2, event_id=event_id))]) == 0
        await _commit(r)
    async with container() as r:
        repo = await r.get(DeliveryRepository)
        claimed = await repo.claim_due(at, 10, "w1", at + timedelta(seconds=30))
        assert len(claimed) == 1
        assert await repo.requeue(org, claimed[0].delivery.id, at, auto_retry=False) is False  # in flight
        await repo.finish("w1", [DeliveryUpdate(claimed[0].delivery.id, "failed", None, at)])
        assert await repo.requeue(org + 1_000_000, claimed[0].delivery.id, at, auto_retry=False) is False
        assert await repo.requeue(org, claimed[0].delivery.id, at, auto_retry=False) is True
        await _commit(r)
    async with container() as r:
        got = await (await r.get(DeliveryRepository)).get(org, claimed[0].delivery.id)
        assert got is not None and got.status == "pending" and got.auto_retry is False and got.next_attempt_at == at
    await _settle(container, at)


async def test_attempt_log_is_filtered_and_paged_newest_first(container: Any) -> None:
    at = datetime(2001, 5, 1, tzinfo=UTC)
    org = await new_organization(container)
    async with container() as r:
        sub = await (await r.get(SubscriptionRepository)).add(_sub(org, at))
        repo = await r.get(DeliveryRepository)
        d = await repo.add(_delivery(org, sub.id, at, 1))
        rows = [DeliveryAttempt(None, org, sub.id, d.id, "call.ended" if n < 3 else "webhook.test", d.message_id, n,
                                "failed" if n % 2 else "succeeded", 500 if n % 2 else 200, "body", 12, None,
                                at + timedelta(seconds=n)) for n in range(1, 5)]
        await repo.add_attempts(rows)
        await _commit(r)
    async with container() as r:
        repo = await r.get(DeliveryRepository)
        page = await repo.list_attempts(org, sub.id, AttemptFilter(), PageRequest(2, 0))
        assert page.total == 4 and [a.attempt for a in page.items] == [4, 3]
        failed = await repo.list_attempts(org, sub.id, AttemptFilter(status="failed"), PageRequest())
        assert [a.attempt for a in failed.items] == [3, 1]
        tests = await repo.list_attempts(org, sub.id, AttemptFilter(event="webhook.test"), PageRequest())
        assert [a.attempt for a in tests.items] == [4, 3]
        one = page.items[0]
        assert await repo.get_attempt(org, sub.id, one.id) == one
        assert await repo.get_attempt(org, sub.id + 1, one.id) is None
        assert (await repo.list_attempts(org + 1, sub.id, AttemptFilter(), PageRequest())).total == 0
    await _settle(container, at)


async def test_outbox_reader_sees_committed_events_once(container: Any) -> None:
    org = await new_organization(container)
    consumer = f"test-{org}"  # a cursor of its own: the shared outbox is read from the start
    async with container() as r:
        uow = await r.get(UnitOfWork)
        uow.record(event(org, "call.ended", {"call_id": "a"}))
        uow.record(event(org, "call.started", {"call_id": "b"}))
        await uow.commit()
        uow.record(event(org, "call.failed", {"call_id": "rolled back"}))
        await uow.rollback()
    async with container() as r:
        mine = [e for e in await (await r.get(OutboxReader)).pending(consumer, 100_000) if e.organization_id == org]
        assert [(e.type, e.data) for e in mine] == [
            ("call.ended", {"call_id": "a"}), ("call.started", {"call_id": "b"})]
        assert mine[0].id < mine[1].id and mine[0].created_at is not None
        await (await r.get(OutboxReader)).advance(consumer, mine[0].id, datetime(2001, 6, 1, tzinfo=UTC))
        await (await r.get(UnitOfWork)).rollback()
    async with container() as r:
        reader = await r.get(OutboxReader)
        assert len([e for e in await reader.pending(consumer, 100_000) if e.organization_id == org]) == 2  # rolled back
        await reader.advance(consumer, mine[-1].id, datetime(2001, 6, 1, tzinfo=UTC))
        await _commit(r)
    async with container() as r:
        reader = await r.get(OutboxReader)
        assert [e for e in await reader.pending(consumer, 100_000) if e.organization_id == org] == []


async def test_secret_box_round_trips_and_refuses_tampering(container: Any) -> None:
    from application.ports.secrets import SecretUnreadable

    box = await container.get(SecretBox)
    sealed = box.seal("a" * 64)
    assert "a" * 64 not in sealed and box.open(sealed) == "a" * 64
    try:
        box.open(sealed[:-4] + "AAAA")
    except SecretUnreadable:
        pass
    else:
        raise AssertionError("a tampered token opened")



async def test_a_resources_later_deliveries_wait_while_an_earlier_one_is_pending(container: Any) -> None:
    at = datetime(2001, 9, 1, tzinfo=UTC)
    org = await new_organization(container)
    async with container() as r:
        subscriptions = await r.get(SubscriptionRepository)
        sub, other = await subscriptions.add(_sub(org, at)), await subscriptions.add(_sub(org, at))
        chain = [replace(_delivery(org, sub.id, at, n, event_id=100 + n), resource="call:a") for n in range(3)]
        unrelated = [replace(_delivery(org, sub.id, at, 7, event_id=107), resource="call:b"),
                     replace(_delivery(org, other.id, at, 8, event_id=101), resource="call:a"),
                     _delivery(org, sub.id, at, 9)]  # no resource: never waits
        assert await (await r.get(DeliveryRepository)).add_many([*chain, *unrelated]) == 6
        await _commit(r)
    ids: dict[int, int] = {}

    async def claim(now: datetime) -> list[int]:
        async with container() as r:
            claimed = await (await r.get(DeliveryRepository)).claim_due(now, 10, "w", now + timedelta(seconds=1))
            await _commit(r)
        ids.update({c.delivery.data["n"]: c.delivery.id for c in claimed})
        return sorted(c.delivery.data["n"] for c in claimed)

    async def finish(now: datetime, *updates: tuple[int, str, datetime | None]) -> None:
        async with container() as r:
            await (await r.get(DeliveryRepository)).finish("w", [
                DeliveryUpdate(ids[n], status, retry_at, now) for n, status, retry_at in updates])
            await _commit(r)

    assert await claim(at) == [0, 7, 8, 9]  # the head of each (subscription, resource) chain, and the rest
    retry_at = at + timedelta(seconds=5)
    await finish(at, (0, "pending", retry_at), (7, "succeeded", None), (8, "succeeded", None), (9, "failed", None))
    assert await claim(at + timedelta(seconds=2)) == []  # 1 and 2 wait for 0's retry
    assert await claim(retry_at) == [0]
    await finish(retry_at, (0, "succeeded", None))
    assert await claim(retry_at) == [1]  # one at a time, in event order
    await finish(retry_at, (1, "failed", None))  # finally failed: the next one goes
    assert await claim(retry_at) == [2]
    await finish(retry_at, (2, "succeeded", None))
    await _settle(container, at)
