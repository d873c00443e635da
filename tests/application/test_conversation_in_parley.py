"""The conversation runtime inside an in-memory Parley: the call's published agent version and its placeholders,
knowledge passages from an uploaded document, booking "tomorrow at 10" on the agent's calendar (the appointment
exists, appointment.booked is emitted), an SMS through the one gate, and custom http tools on a local server
(called with the right, signed arguments; failures told to the model)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from adapters.egress import HttpxSafeHttp
from application.agents import (
    CreateAgent,
    CreateAgentCommand,
    PublishAgent,
    PublishAgentCommand,
    UpdateAgent,
    UpdateAgentCommand,
)
from application.calls import PlaceCall, PlaceCallCommand
from application.context import Actor
from application.conversation.config import (
    BOOK_APPOINTMENT,
    CHECK_AVAILABILITY,
    END_CALL,
    SEND_SMS,
    ConversationConfig,
    HttpTool,
    PublishedConfigs,
)
from application.conversation.knowledge import KnowledgePassages
from application.conversation.session import AgentConversation
from application.knowledge import (
    CreateKnowledgeBase,
    CreateKnowledgeBaseCommand,
    UploadDocuments,
    UploadDocumentsCommand,
    UploadedFile,
)
from application.ports.conversation import ToolSecrets
from application.ports.engines import ChatRequest, ToolCall
from application.ports.media import ConversationOutcome
from application.ports.platform import PageRequest
from application.ports.scheduling import AppointmentFilter
from application.ports.sms import SmsFilter
from application.scheduling.booking import ListAppointments, ListAppointmentsCommand
from application.scheduling.calendars import (
    AddAvailabilityRule,
    AddAvailabilityRuleCommand,
    CreateCalendar,
    CreateCalendarCommand,
)
from application.sms import ListSms, ListSmsCommand
from domain import webhooks as wh
from entrypoints.units import ScopedUnits
from tests.application.conftest import App
from tests.support.conversation import (
    Close,
    FakeMediaSession,
    FixedEngineFactory,
    Reply,
    Say,
    ScriptedModel,
    Silence,
    Step,
    VirtualTime,
    Wait,
    fake_engines,
)
from tests.support.receiver import Receiver
from tests.support.receiver import Reply as HttpReply

PHONE = "+15550100000"


class Loopback:
    async def resolve(self, host: str, port: int) -> list[str]:
        return {"tools.test": ["127.0.0.1"], "internal.test": ["10.0.0.5"]}.get(host, [])


async def make_agent(app: App, actor: Actor, **fields: Any) -> int:
    agent = await app.run(CreateAgent, CreateAgentCommand(actor, **{
        "name": "Ava", "prompt": "You are Ava of Parley Dental. You are calling {{contact_name}} about {{topic}}.",
        "first_message": "Hi {{contact_name}}, this is Ava.", **fields}))
    await app.run(PublishAgent, PublishAgentCommand(actor, agent.id))
    return int(agent.id)


async def place(app: App, actor: Actor, agent_id: int) -> str:
    call = await app.run(PlaceCall, PlaceCallCommand(actor, str(agent_id), PHONE, "Ada", {"topic": "a check-up"}))
    return str(call.id)


async def converse(app: App, actor: Actor, call_id: str, script: list[Step], reply: Any = None,
                   replies: list[Reply] | None = None, *, http: Any = None, config: ConversationConfig | None = None
                   ) -> tuple[ConversationOutcome, ScriptedModel, FakeMediaSession]:
    time = VirtualTime()
    model = ScriptedModel(time, replies or [], reply=reply)
    units = ScopedUnits(app.container)
    configs: Any = PublishedConfigs(units)
    if config is not None:
        fixed = config

        class Fixed:
            async def for_call(self, organization_id: int, call_id: str) -> ConversationConfig:
                return fixed

        configs = Fixed()
    session = FakeMediaSession(script, time=time, call_id=call_id, organization_id=actor.organization_id)
    runtime = AgentConversation(configs, FixedEngineFactory(fake_engines(time, model)), units=units, http=http,
                                passages=KnowledgePassages(units), tool_secrets=await app.container.get(ToolSecrets))
    return await runtime.run(session), model, session


async def test_the_call_runs_the_published_version_with_its_placeholders_filled_not_the_draft(app: App) -> None:
    actor = await app.actor()
    agent_id = await make_agent(app, actor)
    await app.run(UpdateAgent, UpdateAgentCommand(actor, agent_id, {"prompt": "DRAFT prompt, not published",
                                                                     "first_message": "DRAFT greeting"}))
    call_id = await place(app, actor, agent_id)
    outcome, model, _ = await converse(app, actor, call_id, [Silence(2500), Say("Hello", 500), Silence(2000),
                                                             Close()], replies=[["Hello Ada, how are you?"]])
    system = model.conversation_requests()[0].messages[0].content
    assert system.startswith("You are Ava of Parley Dental. You are calling Ada about a check-up.")
    assert "DRAFT" not in system
    assert outcome.transcript[0]["text"] == "Hi Ada, this is Ava."
    assert outcome.details["agent_version"] == 1


async def test_a_question_is_answered_from_the_knowledge_base_and_the_document_recorded(app: App) -> None:
    actor = await app.actor()
    agent_id = await make_agent(app, actor)
    kb = await app.run(CreateKnowledgeBase, CreateKnowledgeBaseCommand(actor, "Clinic", agent_id))
    uploaded = await app.run(UploadDocuments, UploadDocumentsCommand(actor, kb.knowledge_base.id, [
        UploadedFile("parking.txt", b"Parking is free on Sundays in the garage behind the clinic."),
        UploadedFile("hours.txt", b"The clinic opens at nine."),
    ]))
    parking = next(r.document_id for r in uploaded.results if r.file_name == "parking.txt")

    def answer(request: ChatRequest) -> Reply:
        context = "\n".join(m.content for m in request.messages if m.role == "system")
        if "Parking is free on Sundays" in context:
            return ["Parking is free on Sundays, in the garage behind the clinic."]
        return ["I don't know."]

    call_id = await place(app, actor, agent_id)
    outcome, model, _ = await converse(app, actor, call_id, [Silence(2000), Say("Is parking free on Sunday?", 800),
                                                             Silence(4000), Close()], reply=answer)
    assert outcome.transcript[-1]["text"] == "Parking is free on Sundays, in the garage behind the clinic."
    assert outcome.knowledge_documents == [parking]
    user = next(e for e in outcome.transcript if e["role"] == "user")
    assert user["knowledge_documents"] == [parking]
    # the passages come just before the caller's words, for this turn only
    messages = model.conversation_requests()[0].messages
    assert messages[-2].role == "system" and "garage behind the clinic" in messages[-2].content
    assert messages[-1].content == "Is parking free on Sunday?"


async def calendar(app: App, actor: Actor) -> int:
    cal = await app.run(CreateCalendar, CreateCalendarCommand(actor, name="Chairs", timezone="America/New_York"))
    for weekday in range(5):
        await app.run(AddAvailabilityRule, AddAvailabilityRuleCommand(actor, cal.id, weekday, "09:00", "12:00"))
    return int(cal.id)


async def test_booking_tomorrow_at_ten_creates_the_appointment_and_emits_appointment_booked(app: App) -> None:
    actor = await app.actor()
    cal = await calendar(app, actor)
    agent_id = await make_agent(app, actor, calendar_id=cal, timezone="America/New_York")
    call_id = await place(app, actor, agent_id)
    seen: list[str] = []

    def answer(request: ChatRequest) -> Reply:
        last = request.messages[-1]
        if last.role == "user":  # the model reads today's date from the prompt: Monday, 2026-03-02
            seen.append(request.messages[0].content)
            assert [t.name for t in request.tools] == [CHECK_AVAILABILITY, BOOK_APPOINTMENT, END_CALL]
            return ["Let me book that for you.",
                    ToolCall("b1", BOOK_APPOINTMENT, {"slot_start": "2026-03-03T10:00", "attendee_name": "Ada"})]
        result = json.loads(last.content)
        assert last.role == "tool" and result["ok"] is True
        return [f"You're booked for {result['spoken']}."]

    outcome, _, _ = await converse(app, actor, call_id, [Silence(2500), Say("Can I come tomorrow at 10?", 900),
                                                         Silence(8000), Close()], reply=answer)
    assert "Monday, 2026-03-02, 07:00 (America/New_York)" in seen[0]
    page = await app.run(ListAppointments, ListAppointmentsCommand(actor, AppointmentFilter(calendar_id=cal),
                                                                   PageRequest()))
    [appointment] = page.items
    assert appointment.slot_start == datetime(2026, 3, 3, 15, tzinfo=UTC)  # 10:00 in New York
    assert (appointment.call_id, appointment.attendee_name, appointment.attendee_phone) == (call_id, "Ada", PHONE)
    assert outcome.booking is not None and outcome.booking["appointment_id"] == appointment.id
    assert outcome.booking["slot_start"] == "2026-03-03T15:00:00Z"
    booked = [data for kind, data in await app.events(actor.organization_id) if kind == "appointment.booked"]
    assert [b["id"] for b in booked] == [appointment.id]
    assert outcome.transcript[-1]["text"] == "You're booked for Tuesday, March 3 at 10:00 AM."


async def test_a_refused_booking_is_told_to_the_model_and_the_call_goes_on(app: App) -> None:
    actor = await app.actor()
    cal = await calendar(app, actor)
    agent_id = await make_agent(app, actor, calendar_id=cal, timezone="America/New_York")
    call_id = await place(app, actor, agent_id)
    results: list[dict[str, Any]] = []

    def answer(request: ChatRequest) -> Reply:
        last = request.messages[-1]
        if last.role == "user":  # Sunday: no slot
            return [ToolCall("b1", BOOK_APPOINTMENT, {"slot_start": "2026-03-08T10:00"})]
        results.append(json.loads(last.content))
        return ["Sorry, that time is not available."]

    outcome, _, _ = await converse(app, actor, call_id, [Silence(2500), Say("Sunday at 10 please", 900),
                                                         Silence(6000), Close()], reply=answer)
    assert results[0]["ok"] is False and "slot" in results[0]["error"]
    assert outcome.booking is None and outcome.end_reason == "hangup"
    assert outcome.transcript[-1]["text"] == "Sorry, that time is not available."


async def test_send_sms_goes_through_the_one_gate(app: App) -> None:
    actor = await app.actor()
    agent_id = await make_agent(app, actor)
    call_id = await place(app, actor, agent_id)
    config = (await PublishedConfigs(ScopedUnits(app.container)).for_call(actor.organization_id, call_id))
    config = replace(config, built_in_tools=(SEND_SMS, END_CALL))
    answers: list[Any] = [[ToolCall("s1", SEND_SMS, {"body": "Parley Dental: 12 Main Street."})],
                          ["I've sent you our address."]]
    outcome, _model, _ = await converse(app, actor, call_id, [Silence(2500), Say("Text me the address", 900),
                                                             Silence(5000), Close()], replies=answers, config=config)
    sent = await app.run(ListSms, ListSmsCommand(actor, SmsFilter(), PageRequest()))
    assert [(m.to_phone, m.body) for m in sent.items] == [(PHONE, "Parley Dental: 12 Main Street.")]
    assert outcome.details["tool_calls"][0] | {"at_ms": 0} == {"name": SEND_SMS, "ok": True, "at_ms": 0,
                                                              "arguments": {"body": "Parley Dental: 12 Main Street."}}


@pytest.fixture
async def receiver() -> Any:
    server = await Receiver().start()
    yield server
    await server.close()


async def test_a_custom_tool_is_called_with_the_right_signed_arguments_and_failures_are_survived(
        app: App, receiver: Receiver) -> None:
    actor = await app.actor()
    agent_id = await make_agent(app, actor)
    call_id = await place(app, actor, agent_id)
    base = f"http://tools.test:{receiver.port}"
    parameters = {"type": "object", "required": ["order_id"], "additionalProperties": False,
                  "properties": {"order_id": {"type": "string", "pattern": "^[0-9]+$"}}}
    tools = (HttpTool("order_status", "The status of an order", parameters, f"{base}/orders", 2000),
             HttpTool("flaky", "A tool that fails", parameters, f"{base}/flaky", 300, "tool-secret"),
             HttpTool("internal", "A tool on a private address", parameters, "http://internal.test/x", 500, None))
    receiver.script("/orders", HttpReply(200, b'{"status": "shipped", "eta": "Friday"}'))
    receiver.script("/flaky", HttpReply(500, b"boom"), HttpReply(200, b"late", hang=3))
    config = (await PublishedConfigs(ScopedUnits(app.container)).for_call(actor.organization_id, call_id))
    config = replace(config, http_tools=tools)
    results: list[dict[str, Any]] = []
    calls = iter([ToolCall("c1", "order_status", {"order_id": "12345"}),
                  ToolCall("c2", "order_status", {"order_id": "abc", "extra": 1}),
                  ToolCall("c3", "flaky", {"order_id": "1"}),
                  ToolCall("c4", "flaky", {"order_id": "2"}),
                  ToolCall("c5", "internal", {"order_id": "3"})])

    answered: list[str] = []

    def answer(request: ChatRequest) -> Reply:
        last = request.messages[-1]
        if last.role == "tool":
            results.append(json.loads(last.content))
        call = next(calls, None)
        if call is None:
            answered.append("final")
        return [call] if call is not None else ["Your order has shipped and arrives Friday."]

    http = HttpxSafeHttp(Loopback(), allow_loopback=True, user_agent="ParleyTest/1.0",
                         allowed_ports={receiver.port, 80, 443})
    # the tools answer in real time: silence, 2 ms of real time a frame, until the model has had every tool's result
    # (at most 12 s of it), then 3 s to speak the final answer (about 1.7 s: the model, then its 7 words)
    script: list[Step] = [Silence(2500), Say("Where is my order 12345?", 900),
                          Wait(lambda: bool(answered), 12_000, real_ms=2), Silence(3000), Close()]
    outcome, _, _ = await converse(app, actor, call_id, script, reply=answer, http=http,
                                   config=replace(config, max_tool_rounds=6))
    [first] = receiver.on("/orders")
    assert json.loads(first.body) == {"order_id": "12345"}
    headers = first.headers
    assert headers["x-parley-call-id"] == call_id and headers["x-webhook-event"] == "tool.order_status"
    # a tool without a secret of its own is signed with the organization's tool secret
    secret = (await app.container.get(ToolSecrets)).for_organization(actor.organization_id)
    assert len(secret) == 64 and secret != (await app.container.get(ToolSecrets)).for_organization(0)
    assert wh.verify_signature(secret, headers["x-webhook-timestamp"], first.body,
                               headers["x-webhook-signature"], now=datetime.fromtimestamp(
                                   int(headers["x-webhook-timestamp"]), UTC))
    assert results[0] == {"ok": True, "result": {"status": "shipped", "eta": "Friday"}}
    assert results[1]["ok"] is False and "invalid arguments" in results[1]["error"]
    assert results[2]["ok"] is False and "HTTP 500" in results[2]["error"]
    assert results[3]["ok"] is False and "no answer" in results[3]["error"]  # the 300 ms time-out
    assert results[4]["ok"] is False  # the private address is refused before anything is sent
    flaky = receiver.on("/flaky")
    assert len(flaky) == 2 and len(receiver.requests) == 3
    assert wh.verify_signature("tool-secret", flaky[0].headers["x-webhook-timestamp"], flaky[0].body,
                               flaky[0].headers["x-webhook-signature"], now=app.clock.now())
    assert outcome.transcript[-1]["text"] == "Your order has shipped and arrives Friday."
    assert outcome.end_reason == "hangup"
