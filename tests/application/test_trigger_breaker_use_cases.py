"""The run-rate breaker on the memory backend: a trigger is disabled when its matched runs number more than 100
within a minute by the times of their events, so a backlog of events spread over time and read in one pass is not a
burst, while a burst in one pass is cut at the 101st run."""

from __future__ import annotations

from application.context import Actor
from application.ports.platform import PageRequest, UnitOfWork
from application.triggers import (
    CreateTrigger,
    CreateTriggerCommand,
    EvaluateTriggers,
    EvaluateTriggersCommand,
    GetTrigger,
    GetTriggerCommand,
    ListTriggerRuns,
    ListTriggerRunsCommand,
)
from domain.events import EventType
from tests.application.conftest import App

ACTIONS = [{"type": "chat_message", "config": {"url": "https://hooks.example.com/x", "text": "booked"}}]


async def _trigger(app: App, actor: Actor) -> int:
    made = await app.run(CreateTrigger, CreateTriggerCommand(actor, "Busy", "appointment.booked", ACTIONS))
    return int(made.trigger.id)


async def _booked(app: App, actor: Actor, count: int, *, seconds_apart: float) -> None:
    for n in range(count):
        async with app.container() as r:
            (await r.get(UnitOfWork)).record(EventType.APPOINTMENT_BOOKED(actor.organization_id, {
                **EventType.APPOINTMENT_BOOKED.example, "id": n}))
            await (await r.get(UnitOfWork)).commit()
        app.clock.advance(seconds=seconds_apart)


async def _statuses(app: App, actor: Actor, trigger_id: int) -> dict[str, int]:
    page = await app.run(ListTriggerRuns, ListTriggerRunsCommand(actor, trigger_id, None, PageRequest(1000, 0)))
    counted: dict[str, int] = {}
    for run in page.items:
        counted[run.status] = counted.get(run.status, 0) + 1
    return counted


async def test_a_backlog_of_events_spread_over_minutes_read_in_one_pass_is_not_a_burst(app: App) -> None:
    actor = await app.actor()
    trigger_id = await _trigger(app, actor)
    await _booked(app, actor, 300, seconds_apart=1)  # 60 a minute for five minutes, evaluated late, at once
    assert await app.run(EvaluateTriggers, EvaluateTriggersCommand(limit=500)) >= 300
    assert await _statuses(app, actor, trigger_id) == {"running": 300}
    trigger = await app.run(GetTrigger, GetTriggerCommand(actor, trigger_id))
    assert (trigger.enabled, trigger.disabled_reason) == (True, None)


async def test_a_burst_in_one_pass_is_cut_at_the_101st_run(app: App) -> None:
    actor = await app.actor()
    trigger_id = await _trigger(app, actor)
    await _booked(app, actor, 150, seconds_apart=0.1)  # 150 in 15 seconds
    await app.run(EvaluateTriggers, EvaluateTriggersCommand(limit=500))
    assert await _statuses(app, actor, trigger_id) == {"running": 100, "skipped": 50}
    trigger = await app.run(GetTrigger, GetTriggerCommand(actor, trigger_id))
    assert (trigger.enabled, trigger.disabled_reason) == (False, "run_rate")
    failed = [data for kind, data in await app.events(actor.organization_id) if kind == "trigger.failed"]
    assert [(f["trigger_id"], f["reason"]) for f in failed] == [(trigger_id, "run_rate")]
