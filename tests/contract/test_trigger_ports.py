"""Triggers behave the same on memory, SQLite and PostgreSQL: rules round-trip (conditions and actions as data),
the lookup by (organization, event) sees only enabled rules of that organization, a run per (trigger, event) is
stored once whatever the repetition (a whole pass's runs in one call too, their traces as they were), runs page
newest first by status, the action jobs of new runs are scheduled at once, and events keep their depth."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from application.context import CauseContext
from application.outbox import TRIGGERS
from application.ports.events import OutboxReader
from application.ports.jobs import JobQueue, NewJob
from application.ports.platform import PageRequest, UnitOfWork
from application.ports.triggers import TriggerRepository
from domain.events import DomainEvent, EventType
from domain.triggers import Action, ActionResult, Trigger, decide, matcher, parse_conditions
from tests.support.apps import new_organization

NOW = datetime(2026, 3, 2, 9, tzinfo=UTC)
CONDITIONS = parse_conditions({"all": [{"field": "data.status", "op": "eq", "value": "confirmed"}, {"any": [
    {"field": "data.calendar_id", "op": "in", "value": [3]}]}]}, EventType.APPOINTMENT_BOOKED)


def _trigger(org: int, event: str = "appointment.booked", enabled: bool = True) -> Trigger:
    return Trigger(None, org, "t", event, CONDITIONS, (Action("chat_message", {"url": "https://x.test/a",
                                                                               "text": "{{data.id}}"}),),
                   enabled, "sealed", NOW, NOW)


async def test_rules_round_trip_and_are_found_by_organization_and_event(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    async with container() as r:
        repo = await r.get(TriggerRepository)
        kept = await repo.add(_trigger(org))
        await repo.add(_trigger(org, enabled=False))
        await repo.add(_trigger(org, event="call.ended"))
        await repo.add(_trigger(other))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        repo = await r.get(TriggerRepository)
        assert await repo.get(org, kept.id or 0) == kept
        assert await repo.get(other, kept.id or 0) is None
        assert [t.id for t in await repo.for_event(org, "appointment.booked")] == [kept.id]
        assert (await repo.list(org, PageRequest(10, 0))).total == 3
        changed = await repo.update(replace(kept, name="renamed", conditions=None, updated_at=NOW + timedelta(1)))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        assert await (await r.get(TriggerRepository)).get(org, kept.id or 0) == changed


async def test_a_run_per_trigger_and_event_is_stored_once(container: Any) -> None:
    org = await new_organization(container)
    async with container() as r:
        repo = await r.get(TriggerRepository)
        rule = await repo.add(_trigger(org))
        await (await r.get(UnitOfWork)).commit()
    example = dict(EventType.APPOINTMENT_BOOKED.example)
    runs = [decide(rule, "appointment.booked", n, {**example, "status": status}, 0, NOW)
            for n, status in ((1, "confirmed"), (2, "pending"), (3, "confirmed"))]
    async with container() as r:
        repo = await r.get(TriggerRepository)
        stored = await repo.add_runs(runs[:2])
        assert [(s.event_id, s.matched) for s in stored] == [(1, True), (2, False)]
        again = await repo.add_runs(runs)
        assert [s.event_id for s in again] == [3]
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        repo = await r.get(TriggerRepository)
        run = await repo.get_run(org, stored[0].id or 0, lock=True)
        assert run is not None and run.data == {**example, "status": "confirmed"}
        assert [s.result for s in run.condition_trace] == [True, True]
        done = replace(run, status="succeeded", finished_at=NOW, actions=(
            ActionResult("chat_message", "succeeded", 1, None, NOW, NOW),))
        await repo.update_run(done)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        repo = await r.get(TriggerRepository)
        assert await repo.get_run(org, done.id or 0) == done
        page = await repo.list_runs(org, rule.id or 0, None, PageRequest(10, 0))
        assert [x.event_id for x in page.items] == [3, 2, 1] and page.total == 3
        assert [x.event_id for x in (await repo.list_runs(org, rule.id or 0, "not_matched",
                                                          PageRequest(10, 0))).items] == [2]
        assert await repo.delete(org, rule.id or 0) and not await repo.delete(org, rule.id or 0)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        repo = await r.get(TriggerRepository)
        assert (await repo.list_runs(org, rule.id or 0, None, PageRequest(10, 0))).total == 0


async def test_events_are_as_deep_as_their_units_cause_when_recorded(container: Any) -> None:
    org = await new_organization(container)
    async with container() as r:
        before = await (await r.get(OutboxReader)).cursor(TRIGGERS)
        uow = await r.get(UnitOfWork)
        uow.record(DomainEvent(EventType.CALL_ENDED, org, {"id": "a"}))
        (await r.get(CauseContext)).depth = 2
        uow.record(EventType.CALL_ENDED(org, {"id": "b"}))
        uow.record(replace(EventType.CALL_ENDED(org, {"id": "c"}), depth=3))
        await uow.commit()
    async with container() as r:
        mine = [e for e in await (await r.get(OutboxReader)).pending(TRIGGERS, 10_000)
                if e.organization_id == org and e.id > before]
    assert [(e.data["id"], e.depth) for e in mine] == [("a", 0), ("b", 2), ("c", 3)]


async def test_a_pass_of_runs_is_stored_once_with_its_traces_as_they_were(container: Any) -> None:
    org = await new_organization(container)
    async with container() as r:
        repo = await r.get(TriggerRepository)
        rules = [await repo.add(_trigger(org)) for _ in range(4)]
        await (await r.get(UnitOfWork)).commit()
    odd = {"status": "confirmed\u00e9\U0001f600\"\\" + "x" * 600, "calendar_id": 2**70,
           "notes": {"nested": [1.5, None, True]}}
    samples = [{**EventType.APPOINTMENT_BOOKED.example, "status": s} for s in ("confirmed", "pending")] + [odd]
    runs = [decide(rule, "appointment.booked", 100 + n, data, 0, NOW, matcher(rule.conditions))
            for n, data in enumerate(samples * 40) for rule in rules]  # 120 events, 480 runs
    async with container() as r:
        repo = await r.get(TriggerRepository)
        early = await repo.add_runs(runs[:50])
        stored = await repo.add_runs(runs)
        await (await r.get(UnitOfWork)).commit()
    assert len(early) == 50 and len(stored) == len(runs) - 50
    assert [s.id for s in stored] == sorted(s.id or 0 for s in stored)
    assert {(s.trigger_id, s.event_id) for s in early + stored} == {(r.trigger_id, r.event_id) for r in runs}
    async with container() as r:
        repo = await r.get(TriggerRepository)
        for run in (early[0], early[1], stored[-1]):
            back = await repo.get_run(org, run.id or 0)
            assert back is not None
            assert (back.matched, back.status, back.condition_trace, back.actions, back.data) == (
                run.matched, run.status, run.condition_trace, run.actions, run.data)
    assert stored[-1].condition_trace[0].actual == decide(rules[0], "", None, odd, 0, NOW).condition_trace[0].actual


async def test_the_action_jobs_of_new_runs_are_scheduled_at_once(container: Any) -> None:
    kind = f"test.action.{id(container)}"
    async with container() as r:
        await (await r.get(JobQueue)).schedule_new([NewJob(kind, NOW, f"7:{i}", {"run_id": 7, "index": i})
                                                     for i in range(3)])
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        claimed = await (await r.get(JobQueue)).claim(kind, "w", NOW, NOW + timedelta(minutes=1), 10)
        await (await r.get(UnitOfWork)).commit()
    assert sorted((j.key, j.payload["index"], j.attempts) for j in claimed) == [("7:0", 0, 1), ("7:1", 1, 1),
                                                                                ("7:2", 2, 1)]


async def test_the_run_rate_breaker_counts_matched_runs_by_event_time_and_disables(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    async with container() as r:
        repo = await r.get(TriggerRepository)
        rule = await repo.add(_trigger(org))
        await (await r.get(UnitOfWork)).commit()
    booked = dict(EventType.APPOINTMENT_BOOKED.example, status="confirmed", calendar_id=3)
    async with container() as r:
        repo = await r.get(TriggerRepository)
        await repo.add_runs([decide(rule, "appointment.booked", n, booked if n < 5 else {}, 0, NOW,
                                    event_at=NOW + timedelta(seconds=n)) for n in range(1, 8)])
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        repo = await r.get(TriggerRepository)
        assert await repo.count_matched_runs(org, rule.id or 0, NOW) == 4  # runs 1-4 matched, 5-7 did not
        assert await repo.count_matched_runs(org, rule.id or 0, NOW + timedelta(seconds=3)) == 2
        assert await repo.count_matched_runs(other, rule.id or 0, NOW) == 0
        [stored] = (await repo.list_runs(org, rule.id or 0, None, PageRequest(1, 6))).items
        assert stored.event_at == NOW + timedelta(seconds=1)
        await repo.disable(org, rule.id or 0, "run_rate", NOW + timedelta(minutes=1))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        repo = await r.get(TriggerRepository)
        disabled = await repo.get(org, rule.id or 0)
        assert disabled is not None
        assert (disabled.enabled, disabled.disabled_reason, disabled.updated_at) == (
            False, "run_rate", NOW + timedelta(minutes=1))
        assert await repo.for_event(org, "appointment.booked") == []
