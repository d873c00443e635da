"""Call use cases on the simulator: placing validates and queues, the dialler keeps to the plan's lines,
the line's reports move the call to its end with a call log and events, cancel and the sweeper end
calls where the machine allows, and another organization's calls do not exist."""

from __future__ import annotations

from typing import Any

import pytest

from application.agents import CreateAgent, CreateAgentCommand, PublishAgent, PublishAgentCommand
from application.call_progress import RunCallProgress
from application.calls import (
    AgentNotCallable,
    CancelCall,
    CancelCallCommand,
    DialNextQueuedCall,
    DialNextQueuedCallCommand,
    GetCall,
    GetCallCommand,
    GetCallLog,
    GetCallLogCommand,
    ListCalls,
    ListCallsCommand,
    PlaceCall,
    PlaceCallCommand,
    SweepOverdueCall,
    SweepOverdueCallCommand,
)
from application.context import Actor
from application.ports.calls import CallFilter, CallRef
from application.ports.platform import PageRequest
from domain.calls import Call
from domain.errors import InvalidTransition, NotFound, ValidationFailed
from entrypoints.units import ScopedUnits
from tests.application.conftest import App

COMPLETES, BUSY = "+1555010000", "+1555010001"


async def agent(app: App, actor: Actor, *, publish: bool = True, **fields: Any) -> int:
    created = await app.run(CreateAgent, CreateAgentCommand(actor, **{
        "name": "Desk", "prompt": "Call {{contact_name}} about {{topic}}.", **fields}))
    if publish:
        await app.run(PublishAgent, PublishAgentCommand(actor, created.id))
    return int(created.id)


async def place(app: App, actor: Actor, agent_id: int, number: str = COMPLETES, **extra: Any) -> Call:
    custom = extra.pop("custom_data", {"topic": "the invoice"})
    return await app.run(PlaceCall, PlaceCallCommand(actor, str(agent_id), number, "Ada", custom, **extra))


async def advance_until_final(app: App, call: Call, *, rounds: int = 20) -> Call:
    ref = CallRef(call.organization_id, call.id)
    for _ in range(rounds):
        app.clock.advance(seconds=15)
        await RunCallProgress(ScopedUnits(app.container)).advance(ref)  # the line's news, its conversation
        current = await app.run(GetCall, GetCallCommand(Actor.system(call.organization_id), call.id))
        if current.is_final:
            return current
    raise AssertionError(f"call {call.id} did not end")


async def test_placing_validates_before_anything_is_queued(app: App) -> None:
    actor = await app.actor()
    draft = await agent(app, actor, publish=False)
    active = await agent(app, actor)
    for bot_id, number, field in [("abc", COMPLETES, "bot_id"), (str(active), "12", "destination_phone")]:
        with pytest.raises(ValidationFailed) as invalid:
            await app.run(PlaceCall, PlaceCallCommand(actor, bot_id, number, "Ada", {"topic": "x"}))
        assert field in str(invalid.value.details)
    with pytest.raises(NotFound):
        await place(app, actor, 99999)
    with pytest.raises(AgentNotCallable):
        await place(app, actor, draft)
    with pytest.raises(ValidationFailed) as missing:
        await place(app, actor, active, custom_data={})
    assert missing.value.details["missing_placeholders"] == ["topic"]
    assert (await app.run(ListCalls, ListCallsCommand(actor, CallFilter(), PageRequest()))).items == []


async def test_a_placed_call_is_queued_with_its_rendered_prompt_and_no_event(app: App) -> None:
    actor = await app.actor()
    call = await place(app, actor, await agent(app, actor), "+1 555 0100 00")
    assert (call.status, call.destination_phone, call.prompt) == ("queued", COMPLETES,
                                                                  "Call Ada about the invoice.")
    assert call.created_at == app.clock.now() and call.deadline_at is not None and call.deadline_at > app.clock.now()
    assert await app.events(actor.organization_id) == []


async def test_the_dialler_keeps_to_the_plans_lines_oldest_first(app: App) -> None:
    actor = await app.actor(plan="starter")  # two lines
    agent_id = await agent(app, actor)
    calls = []
    for _ in range(3):
        calls.append(await place(app, actor, agent_id))
        app.clock.advance(seconds=1)
    dialled = [await app.run(DialNextQueuedCall, DialNextQueuedCallCommand(actor.organization_id)) for _ in range(3)]
    assert [c.id if c else None for c in dialled] == [calls[0].id, calls[1].id, None]
    assert (await app.run(GetCall, GetCallCommand(actor, calls[2].id))).status == "queued"
    assert [t for t, _ in await app.events(actor.organization_id)] == ["call.started", "call.started"]

    await advance_until_final(app, dialled[0])  # a line frees up
    third = await app.run(DialNextQueuedCall, DialNextQueuedCallCommand(actor.organization_id))
    assert third is not None and third.id == calls[2].id


async def test_a_completed_call_has_a_log_and_its_events_in_order(app: App) -> None:
    actor = await app.actor()
    call = await place(app, actor, await agent(app, actor))
    await app.run(DialNextQueuedCall, DialNextQueuedCallCommand(actor.organization_id))
    ended = await advance_until_final(app, call)
    assert ended.status == "completed" and ended.call_log_id is not None
    log = await app.run(GetCallLog, GetCallLogCommand(actor, ended.call_log_id))
    assert (log.call_id, log.status, log.to_phone) == (call.id, "completed", COMPLETES)
    assert log.transcript and log.summary
    events = [(t, d["id"]) for t, d in await app.events(actor.organization_id)]
    assert events == [(t, call.id) for t in ("call.started", "call.answered", "call.ended", "call.completed")]


async def test_a_busy_line_fails_the_call_with_its_reason(app: App) -> None:
    actor = await app.actor()
    call = await place(app, actor, await agent(app, actor), BUSY)
    await app.run(DialNextQueuedCall, DialNextQueuedCallCommand(actor.organization_id))
    ended = await advance_until_final(app, call)
    assert (ended.status, ended.end_reason, ended.duration_seconds) == ("busy", "busy", 0)
    assert [t for t, _ in await app.events(actor.organization_id)] == ["call.started", "call.ended", "call.failed"]


async def test_cancel_ends_a_queued_call_once_and_a_finished_call_cannot_be_cancelled(app: App) -> None:
    actor = await app.actor()
    agent_id = await agent(app, actor)
    queued = await place(app, actor, agent_id)
    cancelled = await app.run(CancelCall, CancelCallCommand(actor, queued.id))
    assert (cancelled.status, cancelled.call_log_id) == ("cancelled", None)  # never reached the network
    with pytest.raises(InvalidTransition):
        await app.run(CancelCall, CancelCallCommand(actor, queued.id))
    assert [t for t, _ in await app.events(actor.organization_id)] == ["call.ended"]
    # nothing left to dial
    assert await app.run(DialNextQueuedCall, DialNextQueuedCallCommand(actor.organization_id)) is None


async def test_the_sweeper_times_out_only_overdue_calls(app: App) -> None:
    actor = await app.actor()
    call = await place(app, actor, await agent(app, actor))
    ref = CallRef(actor.organization_id, call.id)
    assert await app.run(SweepOverdueCall, SweepOverdueCallCommand(ref)) is None  # not due yet
    app.clock.set(call.deadline_at)
    app.clock.advance(seconds=1)
    swept = await app.run(SweepOverdueCall, SweepOverdueCallCommand(ref))
    assert (swept.status, swept.end_reason) == ("failed", "timeout")
    assert await app.run(SweepOverdueCall, SweepOverdueCallCommand(ref)) is None  # a final call is never swept again
    assert [t for t, _ in await app.events(actor.organization_id)] == ["call.ended", "call.failed"]


async def test_a_paused_agent_fails_its_queued_call_at_dial_time(app: App) -> None:
    from application.agents import UpdateAgent, UpdateAgentCommand

    actor = await app.actor()
    agent_id = await agent(app, actor)
    call = await place(app, actor, agent_id)
    await app.run(UpdateAgent, UpdateAgentCommand(actor, agent_id, {"status": "paused"}))
    failed = await app.run(DialNextQueuedCall, DialNextQueuedCallCommand(actor.organization_id))
    assert (failed.id, failed.status, failed.end_reason) == (call.id, "failed", "agent_not_active")


async def test_calls_of_another_organization_do_not_exist(app: App) -> None:
    mine, theirs = await app.actor(), await app.actor()
    call = await place(app, theirs, await agent(app, theirs))
    with pytest.raises(NotFound):
        await app.run(GetCall, GetCallCommand(mine, call.id))
    with pytest.raises(NotFound):
        await app.run(CancelCall, CancelCallCommand(mine, call.id))
    with pytest.raises(NotFound):  # an agent of another organization cannot be called either
        await place(app, mine, call.agent_id)
    assert (await app.run(ListCalls, ListCallsCommand(mine, CallFilter(), PageRequest()))).items == []
    assert await app.run(DialNextQueuedCall, DialNextQueuedCallCommand(mine.organization_id)) is None
    assert (await app.run(GetCall, GetCallCommand(theirs, call.id))).status == "queued"
