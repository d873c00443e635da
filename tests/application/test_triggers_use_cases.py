"""Trigger use cases on the memory backend, besides the run-rate breaker (test_trigger_breaker_use_cases.py): a
trigger is checked as a whole when saved (the member at fault named), each event is evaluated once into a run
(matched with its actions pending, not matched with its trace, skipped past the loop guard), an action's attempts
are recorded forward only (retried with backoff, then failed for good with trigger.failed one level deeper), an
in-Parley action goes through the rules the API applies (DNC), and a test run stores and sends nothing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from adapters.memory.store import InMemoryStore
from application import triggers as cases
from application.agents import CreateAgent, CreateAgentCommand
from application.context import Actor
from application.dnc import AddDncEntries, AddDncEntriesCommand, CreateDncList, CreateDncListCommand
from application.ports.platform import PageRequest, UnitOfWork
from application.ports.sms import SmsFilter
from application.ports.triggers import TriggerRepository
from application.sms import ListSms, ListSmsCommand
from application.triggers import (
    ActionOutcome,
    ActionRef,
    CreateTrigger,
    CreateTriggerCommand,
    EvaluateTriggers,
    EvaluateTriggersCommand,
    GetTrigger,
    GetTriggerCommand,
    ListTriggerRuns,
    ListTriggerRunsCommand,
    PerformTriggerAction,
    PrepareTriggerAction,
    RecordTriggerAction,
    UpdateTrigger,
    UpdateTriggerCommand,
    failure_of,
)
from domain.errors import DncBlocked, NotFound, ValidationFailed
from domain.events import DomainEvent, EventType
from domain.triggers import MAX_ATTEMPTS
from tests.application.conftest import App

BOOKED = {**EventType.APPOINTMENT_BOOKED.example}
CONFIRMED = {"all": [{"field": "data.status", "op": "eq", "value": "confirmed"}]}
CHAT = {"type": "chat_message", "config": {"url": "https://hooks.example.com/x",
                                           "text": "Booked: {{data.attendee_name}}"}}


async def trigger(app: App, actor: Actor, actions: list[Any] | None = None, **fields: Any) -> int:
    made = await app.run(CreateTrigger, CreateTriggerCommand(actor, fields.pop("name", "Bookings"),
                                                             fields.pop("event", "appointment.booked"),
                                                             actions or [CHAT], **fields))
    return int(made.trigger.id)


async def record(app: App, *events: DomainEvent) -> None:
    """Events as another part of Parley records them: in a unit of work, to the outbox."""
    async with app.container() as r:
        uow = await r.get(UnitOfWork)
        for event in events:
            uow.record(event)
        await uow.commit()


async def evaluate(app: App) -> int:
    return await app.run(EvaluateTriggers, EvaluateTriggersCommand())  # type: ignore[no-any-return]


async def runs(app: App, actor: Actor, trigger_id: int) -> list[Any]:
    page = await app.run(ListTriggerRuns, ListTriggerRunsCommand(actor, trigger_id, None, PageRequest(100, 0)))
    return sorted(page.items, key=lambda run: run.id)


async def attempt(app: App, ref: ActionRef, outcome: ActionOutcome) -> Any:
    """One attempt of an action that leaves Parley, as the action job makes it, its outcome given."""
    async with app.container() as r:
        work = await (await r.get(PrepareTriggerAction)).execute(ref)
    if work is None:
        return None
    return await app.run(RecordTriggerAction, work, outcome)


async def perform(app: App, ref: ActionRef) -> None:
    """One attempt of an in-Parley action, as the action job makes it: a failure recorded in a unit of its own."""
    async with app.container() as r:
        work = await (await r.get(PrepareTriggerAction)).execute(ref)
    assert work is not None
    try:
        await app.run(PerformTriggerAction, work)
    except Exception as exc:
        await app.run(RecordTriggerAction, work, failure_of(exc))


def failed_events(events: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [data for kind, data in events if kind == "trigger.failed"]


async def test_a_trigger_is_checked_as_a_whole_naming_the_member_at_fault(app: App) -> None:
    actor = await app.actor()
    for fields, member in (
            ({"event": "lead.exploded"}, "event"),
            ({"conditions": {"all": [{"field": "data.no_such_member", "op": "eq", "value": 1}]}}, "conditions"),
            ({"actions": [{**CHAT, "config": {**CHAT["config"], "text": "{{data.no_such_member}}"}}]},
             "actions[0].config.text"),
            ({"actions": [{"type": "sms", "config": {"to": "12", "body": "b"}}]}, "actions[0].config.to"),
            ({"actions": [{"type": "webhook", "config": {"url": "ftp://example.com/x"}}]},
             "actions[0].config.url")):
        with pytest.raises(ValidationFailed) as refused:
            await trigger(app, actor, **fields)
        assert member in str(refused.value.details or refused.value.message), (member, refused.value.details)
    foreign = await app.run(CreateAgent, CreateAgentCommand(await app.actor(), name="Theirs"))
    with pytest.raises(NotFound) as not_theirs:
        await trigger(app, actor, [{"type": "call", "config": {"agent_id": foreign.id, "phone": "+14155550100"}}])
    assert "actions[0].config.agent_id" in str(not_theirs.value.details)


async def test_each_event_is_evaluated_once_into_a_matched_or_unmatched_run(app: App) -> None:
    actor, other = await app.actor(), await app.actor()
    trigger_id = await trigger(app, actor, conditions=CONFIRMED)
    await record(app, EventType.APPOINTMENT_BOOKED(actor.organization_id, {**BOOKED, "status": "confirmed"}),
                 EventType.APPOINTMENT_BOOKED(actor.organization_id, {**BOOKED, "id": 78, "status": "pending"}),
                 EventType.APPOINTMENT_BOOKED(other.organization_id, {**BOOKED, "status": "confirmed"}))
    assert await evaluate(app) >= 3
    assert await evaluate(app) == 0  # nothing new: no event is evaluated twice
    matched, missed = await runs(app, actor, trigger_id)
    assert (matched.status, matched.matched, [a.status for a in matched.actions]) == ("running", True, ["pending"])
    assert (missed.status, missed.matched, missed.actions) == ("not_matched", False, ())
    assert missed.condition_trace  # which predicate failed, for the run log


async def test_the_loop_guard_skips_events_caused_three_levels_deep(app: App) -> None:
    actor = await app.actor()
    trigger_id = await trigger(app, actor)
    await record(app, DomainEvent(EventType.APPOINTMENT_BOOKED, actor.organization_id, BOOKED, depth=2),
                 DomainEvent(EventType.APPOINTMENT_BOOKED, actor.organization_id, {**BOOKED, "id": 78}, depth=3))
    await evaluate(app)
    ran, skipped = await runs(app, actor, trigger_id)
    assert (ran.status, ran.depth) == ("running", 2)
    assert (skipped.status, skipped.matched, skipped.depth) == ("skipped", False, 3)
    assert "3 levels deep" in (skipped.reason or "")


async def test_a_failing_action_is_retried_with_backoff_then_fails_the_run_and_says_so_one_level_deeper(
        app: App) -> None:
    actor = await app.actor()
    trigger_id = await trigger(app, actor, name="Flaky")
    await record(app, DomainEvent(EventType.APPOINTMENT_BOOKED, actor.organization_id, BOOKED, depth=1))
    await evaluate(app)
    [run] = await runs(app, actor, trigger_id)
    ref = ActionRef(actor.organization_id, run.id, 0)
    retry_at = await attempt(app, ref, ActionOutcome(False, "the receiver answered HTTP 500"))
    assert retry_at is not None and retry_at > app.clock.now()
    [run] = await runs(app, actor, trigger_id)
    assert (run.status, run.actions[0].status, run.actions[0].attempts) == ("running", "retrying", 1)
    assert failed_events(await app.events(actor.organization_id)) == []
    for _ in range(2, MAX_ATTEMPTS + 1):
        app.clock.advance(hours=3)
        await attempt(app, ref, ActionOutcome(False, "the receiver answered HTTP 500"))
    [run] = await runs(app, actor, trigger_id)
    assert (run.status, run.actions[0].status, run.actions[0].attempts) == ("failed", "failed", MAX_ATTEMPTS)
    assert await attempt(app, ref, ActionOutcome(True)) is None  # done: a late attempt changes nothing
    [failed] = failed_events(await app.events(actor.organization_id))
    assert (failed["trigger_id"], failed["run_id"], failed["reason"], failed["attempts"]) == (
        trigger_id, run.id, "action_failed", MAX_ATTEMPTS)
    async with app.container() as r:  # the failure is caused by the run's action: one level deeper
        store = await r.get(InMemoryStore)
        assert [e.depth for _, e, _ in store.outbox if e.type == "trigger.failed"] == [2]


async def test_a_final_outcome_fails_at_once_and_a_success_settles_the_run(app: App) -> None:
    actor = await app.actor()
    trigger_id = await trigger(app, actor, [CHAT, CHAT])
    await record(app, EventType.APPOINTMENT_BOOKED(actor.organization_id, BOOKED))
    await evaluate(app)
    [run] = await runs(app, actor, trigger_id)
    await attempt(app, ActionRef(actor.organization_id, run.id, 0), ActionOutcome(True))
    [run] = await runs(app, actor, trigger_id)
    assert (run.status, [a.status for a in run.actions]) == ("running", ["succeeded", "pending"])
    await attempt(app, ActionRef(actor.organization_id, run.id, 1),
                  ActionOutcome(False, "blocked_address: 10.0.0.8", final=True))
    [run] = await runs(app, actor, trigger_id)
    assert (run.status, [a.status for a in run.actions], run.actions[1].attempts) == (
        "failed", ["succeeded", "failed"], 1)


async def test_an_sms_action_goes_through_the_dnc_gate_and_keeps_the_next_depth(app: App) -> None:
    actor = await app.actor()
    dnc = await app.run(CreateDncList, CreateDncListCommand(actor, "Never"))
    await app.run(AddDncEntries, AddDncEntriesCommand(actor, dnc.id, ("+14155550111",)))
    trigger_id = await trigger(app, actor, [{"type": "sms", "config": {
        "to": "{{data.attendee_phone}}", "body": "See you, {{data.attendee_name}}"}}])
    await record(app, DomainEvent(EventType.APPOINTMENT_BOOKED, actor.organization_id,
                                  {**BOOKED, "attendee_phone": "+14155550110"}, depth=1),
                 EventType.APPOINTMENT_BOOKED(actor.organization_id, {**BOOKED, "id": 78,
                                                                      "attendee_phone": "+14155550111"}))
    await evaluate(app)
    free, listed = await runs(app, actor, trigger_id)
    for run in (free, listed):
        await perform(app, ActionRef(actor.organization_id, run.id, 0))
    free, listed = await runs(app, actor, trigger_id)
    assert free.status == "succeeded"
    assert (listed.status, listed.actions[0].attempts) == ("failed", 1)
    assert (listed.actions[0].error or "").startswith(DncBlocked.code)
    [sent] = (await app.run(ListSms, ListSmsCommand(actor, SmsFilter(), PageRequest()))).items
    assert (sent.to_phone, sent.body, sent.cause_depth) == ("+14155550110", f"See you, {BOOKED['attendee_name']}", 2)


async def test_a_test_run_renders_the_sample_and_stores_nothing(app: App) -> None:
    actor = await app.actor()
    trigger_id = await trigger(app, actor, conditions=CONFIRMED)
    sample = {**BOOKED, "status": "confirmed", "attendee_name": "Ada"}
    tested = await app.run(cases.TestTrigger, cases.TestTriggerCommand(actor, trigger_id, sample))
    assert tested.run.matched and tested.rendered == [
        {"type": "chat_message", "config": {"url": "https://hooks.example.com/x", "text": "Booked: Ada"}}]
    missed = await app.run(cases.TestTrigger, cases.TestTriggerCommand(actor, trigger_id, {**sample, "status": "x"}))
    assert (missed.run.status, missed.rendered) == ("not_matched", [])
    assert await runs(app, actor, trigger_id) == []


async def test_enabling_a_trigger_again_clears_why_parley_disabled_it(app: App) -> None:
    actor = await app.actor()
    trigger_id = await trigger(app, actor)
    async with app.container() as r:
        triggers = await r.get(TriggerRepository)
        current = await triggers.get(actor.organization_id, trigger_id)
        await triggers.update(replace(current, enabled=False, disabled_reason="run_rate"))
        await (await r.get(UnitOfWork)).commit()
    renamed = await app.run(UpdateTrigger, UpdateTriggerCommand(actor, trigger_id, {"name": "Renamed"}))
    assert (renamed.enabled, renamed.disabled_reason) == (False, "run_rate")  # another change keeps the reason
    enabled = await app.run(UpdateTrigger, UpdateTriggerCommand(actor, trigger_id, {"enabled": True}))
    assert (enabled.enabled, enabled.disabled_reason) == (True, None)
    with pytest.raises(ValidationFailed):
        await app.run(UpdateTrigger, UpdateTriggerCommand(actor, trigger_id, {"enabled": "yes"}))
    with pytest.raises(NotFound):
        await app.run(GetTrigger, GetTriggerCommand(await app.actor(), trigger_id))
