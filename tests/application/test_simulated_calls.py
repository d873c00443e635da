"""The simulator's calls run the one conversation (application/simulated_call.py): AgentConversation with a scripted
text caller on virtual time, through the calls' pass, on the memory backend. The agent's lines come from the
session code and the offline model; the line's outcome, the call's status and events follow from them."""

from __future__ import annotations

import time
from typing import Any

from application.agents import CreateAgent, CreateAgentCommand, PublishAgent, PublishAgentCommand
from application.call_progress import RunCallProgress
from application.calls import (
    DialNextQueuedCall,
    DialNextQueuedCallCommand,
    GetCall,
    GetCallCommand,
    GetCallLog,
    GetCallLogCommand,
    PlaceCall,
    PlaceCallCommand,
)
from application.ports.calls import CallRef
from application.ports.media import ConversationOutcome
from application.ports.telephony import ScriptedCaller, SimulatedConversations
from domain.agents import Voicemail
from domain.calls import Call, CallLog
from entrypoints.units import ScopedUnits
from tests.application.conftest import App


async def simulate(app: App, number: str, **agent: Any) -> tuple[Call, CallLog, list[tuple[str, dict[str, Any]]]]:
    actor = await app.actor()
    fields = {"name": "Desk", "prompt": "You call {{contact_name}} about the invoice. Be brief.",
              "first_message": "Hello {{contact_name}}!", **agent}
    created = await app.run(CreateAgent, CreateAgentCommand(actor, **fields))
    await app.run(PublishAgent, PublishAgentCommand(actor, created.id))
    call = await app.run(PlaceCall, PlaceCallCommand(actor, str(created.id), number, "Ada", {}))
    await app.run(DialNextQueuedCall, DialNextQueuedCallCommand(actor.organization_id))
    progress = RunCallProgress(ScopedUnits(app.container))
    for _ in range(40):
        app.clock.advance(seconds=1)
        await progress.advance(CallRef(actor.organization_id, call.id))
        ended = await app.run(GetCall, GetCallCommand(actor, call.id))
        if ended.is_final:
            log = await app.run(GetCallLog, GetCallLogCommand(actor, ended.call_log_id))
            return ended, log, await app.events(actor.organization_id)
    raise AssertionError("the call did not end")


def said(log: CallLog) -> list[tuple[str, str]]:
    return [(turn["role"], turn["text"]) for turn in log.transcript]


async def test_a_completed_call_is_the_conversation_of_the_agent_with_the_scripted_caller(app: App) -> None:
    started = time.monotonic()
    call, log, events = await simulate(app, "+1555010000")
    assert time.monotonic() - started < 5  # virtual time: a call of ~15 s takes no real time
    assert said(log) == [
        ("agent", "Hello Ada!"), ("user", "Hi, this is Ada. What is this call about?"),
        ("agent", "I'm calling about the following: You call Ada about the invoice."),
        ("user", "Okay. That's all I needed, thank you."), ("agent", "You're welcome. Have a nice day!")]
    at = [turn["at_ms"] for turn in log.transcript]
    assert at[0] == 0 and at == sorted(at) and at[1] >= 2 * 380  # the caller waits until the greeting is heard
    assert (call.status, call.end_reason, call.outcome) == ("completed", "hangup", "conversation_completed")
    assert max(at) / 1000 < call.duration_seconds < 30  # the last words, the caller's pause, then it hangs up
    assert len(log.turns) == 2 and {t["parley_ms"] for t in log.turns} == {0}  # the text engines take no time
    assert log.analysis is not None and log.analysis["successful"] is True
    assert [kind for kind, _ in events] == ["call.started", "call.answered", "call.ended", "call.completed"]


async def test_the_transfer_number_asks_for_a_person_and_the_agent_transfers(app: App) -> None:
    call, log, events = await simulate(app, "+1555010005", transfer_phone="+14155550199")
    assert (call.status, call.end_reason, call.transferred_to) == ("transferred", "transferred", "+14155550199")
    assert ("user", "Can I speak to a person, please?") in said(log)
    assert said(log)[-1] == ("agent", "Let me transfer you to a colleague.")
    assert [kind for kind, _ in events] == ["call.started", "call.answered", "call.transferred", "call.ended"]
    without = await simulate(app, "+1555010005")  # no transfer number: the agent says so, the caller hangs up
    assert (without[0].status, without[0].end_reason) == ("completed", "hangup")
    assert ("agent", "I'm sorry, I can't transfer calls. Can I help you with something else?") in said(without[1])


async def test_a_voicemail_box_gets_the_agents_message_after_the_beep(app: App) -> None:
    call, log, events = await simulate(app, "+1555010004", voicemail=Voicemail("leave_message", "Call us back."))
    assert (call.status, call.end_reason, call.outcome) == ("voicemail", "voicemail_message_left", "voicemail_left")
    assert log.transcript == [{"role": "agent", "text": "Call us back.", "at_ms": 2000}]
    assert call.duration_seconds == 4  # the beep, then three words
    assert [kind for kind, _ in events] == ["call.started", "call.ended", "call.failed"]
    hung, hung_log, _ = await simulate(app, "+1555010004")
    assert (hung.end_reason, hung.duration_seconds, hung_log.transcript, hung_log.recording_key) == (
        "voicemail_hangup", 2, [], None)


async def test_the_maximum_duration_cuts_the_conversation(app: App) -> None:
    call, log, _ = await simulate(app, "+1555010006", max_call_duration_seconds=10)
    assert (call.status, call.end_reason, call.duration_seconds) == ("completed", "max_duration", 10)
    assert all(turn["at_ms"] < 10_000 for turn in log.transcript)


async def test_without_a_first_message_the_caller_speaks_first(app: App) -> None:
    _, log, _ = await simulate(app, "+1555010000", first_message=None)
    assert said(log)[:2] == [("user", "Hi, this is Ada. What is this call about?"),
                             ("agent", "I'm calling about the following: You call Ada about the invoice.")]


async def test_a_silent_caller_is_ended_by_the_agents_silence_timeout(app: App) -> None:
    actor = await app.actor()
    created = await app.run(CreateAgent, CreateAgentCommand(actor, name="Desk", prompt="Help.",
                                                            first_message="Hello?"))
    await app.run(PublishAgent, PublishAgentCommand(actor, created.id))
    call = await app.run(PlaceCall, PlaceCallCommand(actor, str(created.id), "+1555010000", "Ada", {}))
    runner = await app.container.get(SimulatedConversations)
    outcome: ConversationOutcome = await runner.converse(actor.organization_id, call.id, app.clock.now(),
                                                         ScriptedCaller((), hangs_up=False))
    assert outcome.end_reason == "silence_timeout"
    assert [entry["text"] for entry in outcome.transcript][-1].startswith("I haven't heard from you")
    assert 30_000 <= outcome.details["duration_ms"] < 40_000
