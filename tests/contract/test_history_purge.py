"""The purges housekeeping runs on history (``PurgeHistory``), on every backend: a job that failed for the last
time, a finished delivery with its log rows and an ended trigger run go once older than their window; a pending
delivery, a running run and what is younger stay."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from application.housekeeping import HistoryRetention, PurgeHistory, PurgeHistoryCommand
from application.ports.jobs import JobQueue, NewJob
from application.ports.platform import PageRequest, UnitOfWork
from application.ports.triggers import TriggerRepository
from application.ports.webhooks import AttemptFilter, DeliveryRepository, SubscriptionRepository
from domain.triggers import TriggerRun
from domain.webhooks import Delivery, DeliveryAttempt
from tests.contract.test_trigger_ports import _trigger
from tests.contract.test_webhook_ports import _sub
from tests.support.apps import new_organization

OLD = datetime(2001, 1, 1, 9, tzinfo=UTC)
DAYS = timedelta(days=30)


async def test_history_older_than_its_window_is_purged(container: Any) -> None:
    org = await new_organization(container)
    young = OLD + timedelta(days=20)
    async with container() as r:
        subscription = await (await r.get(SubscriptionRepository)).add(_sub(org, OLD))
        deliveries = await r.get(DeliveryRepository)
        made = {}
        for at, status in ((OLD, "succeeded"), (OLD, "pending"), (young, "failed")):
            delivery = await deliveries.add(Delivery(
                None, org, subscription.id or 0, "call.ended", {}, at, f"msg_{status}_{at.day}_{org}", status=status,
                attempts=1, created_at=at, updated_at=at))
            made[status] = delivery.id
            await deliveries.add_attempts([DeliveryAttempt(None, org, subscription.id or 0, delivery.id or 0,
                                                           "call.ended", delivery.message_id, 1, "failed", 500,
                                                           "", 5, None, at)])
        triggers = await r.get(TriggerRepository)
        trigger = await triggers.add(_trigger(org))
        await triggers.add_runs([
            TriggerRun(None, org, trigger.id or 0, "appointment.booked", event_id, 0, True, status, (), (),
                       created_at=at, finished_at=None if status == "running" else at)
            for event_id, at, status in ((1, OLD, "failed"), (2, OLD, "running"), (3, young, "succeeded"))])
        queue = await r.get(JobQueue)
        for key, at in (("old", OLD), ("young", young)):
            await queue.schedule(NewJob(kind=f"tests.history.{org}", key=key, payload={}, due_at=at))
            [claimed] = await queue.claim(f"tests.history.{org}", "tests", at, at + timedelta(minutes=1), 1)
            assert await queue.fail(claimed, "broken", at)
        await (await r.get(UnitOfWork)).commit()

    async with container() as r:
        purge = PurgeHistory(await r.get(JobQueue), await r.get(DeliveryRepository), await r.get(TriggerRepository),
                             _At(OLD + DAYS + timedelta(days=1)), HistoryRetention(DAYS, DAYS, DAYS))
        purged = await purge.execute(PurgeHistoryCommand())
        await (await r.get(UnitOfWork)).commit()
    assert purged.webhook_logs == 1 and purged.trigger_runs == 1 and purged.failed_jobs >= 1

    async with container() as r:
        deliveries = await r.get(DeliveryRepository)
        assert await deliveries.get(org, made["succeeded"] or 0) is None
        assert await deliveries.get(org, made["pending"] or 0) is not None
        logs = await deliveries.list_attempts(org, subscription.id or 0, AttemptFilter(), PageRequest(10, 0))
        assert sorted(a.delivery_id for a in logs.items) == sorted([made["pending"], made["failed"]])
        runs = await (await r.get(TriggerRepository)).list_runs(org, trigger.id or 0, None, PageRequest(10, 0))
        assert sorted(run.event_id or 0 for run in runs.items) == [2, 3]
        await (await r.get(UnitOfWork)).rollback()


class _At:
    def __init__(self, now: datetime) -> None:
        self._now = now

    def now(self) -> datetime:
        return self._now
