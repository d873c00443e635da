"""Triggers that cannot run away or wedge, through the real HTTP API on SQLite and PostgreSQL: the cause depth
survives work a job finishes later (SMS receipts, calls, campaign contacts the dialer dials), so loops through SMS
and relays through campaigns stop at the guard; the run-rate
breaker disables a trigger that runs more than 100 times in a minute; any exception in an action fails it at
once with trigger.failed; event data never adds a line to an email; actions naming another organization's agent
or campaign are refused when saved."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

import pytest
import sqlalchemy as sa

from adapters.memory.clock import ManualClock
from adapters.sql.tables import outbox_events
from adapters.sql.uow import SqlUnitOfWork
from application.dialer_pass import RunDialerPassCommand
from application.ports.triggers import EmailMessage, EmailSender
from application.sms import receipts_once
from domain.events import EventType
from entrypoints.features import campaigns as campaigns_feature
from entrypoints.features.triggers import TriggerSettings
from entrypoints.overrides import Pinned
from entrypoints.units import ScopedUnits
from tests.http.calls_support import active_agent, finish_calls, outbox, unique_phone
from tests.http.test_triggers_http import BOOKED, record
from tests.http.triggers_support import SmtpServer, create, evaluate, run_jobs, runs
from tests.support.apps import Api, ApiFactory, Tenant
from tests.support.receiver import Receiver

EVENING = datetime(2026, 3, 2, 18, tzinfo=UTC)  # 10:00 in California


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = await Receiver().start()
    yield r
    await r.close()


async def _receipts(api: Api) -> None:
    container = api.worker()
    await receipts_once(ScopedUnits(container))


async def _rounds(api: Api, t: Tenant, rounds: int = 8) -> None:
    """Rounds of the workers: SMS receipts, calls to their end, the triggers' consumer and their actions."""
    assert api.clock is not None
    for _ in range(rounds):
        api.clock.advance(seconds=60)
        await _receipts(api)
        await finish_calls(api, t.organization_id)
        await evaluate(api)
        await run_jobs(api)


async def _depths(api: Api, organization_id: int, event: str) -> list[int]:
    container = api.worker()
    async with container() as r:
        conn = await (await r.get(SqlUnitOfWork)).connection()
        return list((await conn.execute(sa.select(outbox_events.c.depth).where(
            outbox_events.c.organization_id == organization_id, outbox_events.c.type == event)
            .order_by(outbox_events.c.id))).scalars().all())


async def _depths_run(api: Api, t: Tenant, trigger_id: int) -> list[tuple[int, str]]:
    return sorted((run["depth"], run["status"]) for run in await runs(api, t, trigger_id))


async def _total(api: Api, t: Tenant, path: str) -> int:
    listed = await api.client.get(path, params={"limit": 100}, headers=t.headers)
    assert listed.status_code == 200, listed.text
    return int(listed.json()["meta"]["total"])


# -- the cause depth through deferred work -----------------------------------------------------------------


@pytest.mark.slow
async def test_a_trigger_on_sms_sent_that_texts_stops_at_the_guard(make_api: ApiFactory, sql_url: str) -> None:
    """sms.sent comes later, from the receipts job: it carries the depth of the action that sent the message."""
    api = await make_api(sql_url, clock=ManualClock(EVENING))
    t = await api.tenant()
    made = await create(api, t, name="Echo", event="sms.sent", actions=[
        {"type": "sms", "config": {"to": "{{data.to}}", "body": "Again"}}])
    assert made.status_code == 201, made.text
    await evaluate(api)
    first = await api.client.post("/v2/sms", json={"to": unique_phone(), "body": "Hello"}, headers=t.headers)
    assert first.status_code == 201, first.text
    await _rounds(api, t)  # without the depth, every round sent one more message, for ever
    assert await _total(api, t, "/v2/sms") == 4  # the first, and one per depth 0, 1 and 2
    assert await _depths_run(api, t, made.json()["data"]["id"]) == [
        (0, "succeeded"), (1, "succeeded"), (2, "succeeded"), (3, "skipped")]
    assert await _depths(api, t.organization_id, "sms.sent") == [0, 1, 2, 3]
    assert await _depths(api, t.organization_id, "sms.delivered") == [0, 1, 2, 3]


@pytest.mark.slow
async def test_a_loop_through_sms_and_calls_stops_at_the_guard(make_api: ApiFactory, sql_url: str) -> None:
    """sms.delivered → call → call.completed → sms → ...: each deferred event keeps the depth of its cause."""
    api = await make_api(sql_url, clock=ManualClock(EVENING))
    t = await api.tenant()
    agent = await active_agent(api, t, prompt="You call back.", first_message="Hello again.")
    call_back = await create(api, t, name="Call back", event="sms.delivered", actions=[
        {"type": "call", "config": {"agent_id": agent["id"], "phone": "{{data.to}}"}}])
    text_back = await create(api, t, name="Text back", event="call.completed", actions=[
        {"type": "sms", "config": {"to": "{{data.destination_phone}}", "body": "Thanks for talking"}}])
    assert call_back.status_code == text_back.status_code == 201, (call_back.text, text_back.text)
    await evaluate(api)
    first = await api.client.post("/v2/sms", json={"to": unique_phone(), "body": "Hello"}, headers=t.headers)
    assert first.status_code == 201, first.text
    await _rounds(api, t)  # without the depth, every round called and texted once more, for ever
    assert await _depths_run(api, t, call_back.json()["data"]["id"]) == [(0, "succeeded"), (2, "succeeded")]
    assert await _depths_run(api, t, text_back.json()["data"]["id"]) == [(1, "succeeded"), (3, "skipped")]
    assert await _total(api, t, "/v2/sms") == 2 and await _total(api, t, "/v2/calls") == 2
    assert await _depths(api, t.organization_id, "sms.delivered") == [0, 2]
    assert await _depths(api, t.organization_id, "call.completed") == [1, 3]


async def _dial(api: Api) -> None:
    container = api.worker()
    await campaigns_feature.dial_pass(container, api.settings).execute(RunDialerPassCommand())


@pytest.mark.slow
async def test_a_relay_of_contacts_through_campaigns_stops_at_the_guard(make_api: ApiFactory, sql_url: str) -> None:
    """A contact added by a trigger's action is dialled later, by the campaign dialer: its call and its events
    (contact.completed) carry the depth of that action. Five campaigns relay a number (a campaign takes a number
    once, so each link needs another campaign): contact.completed in the first adds it to the second, and so on;
    the fourth link is past the guard, so the fifth campaign never gets the number."""
    api = await make_api(sql_url, clock=ManualClock(EVENING))
    t = await api.tenant()
    agent = await active_agent(api, t, prompt="You call back.", first_message="Hello again.")
    relay = []
    for n in range(5):
        made = await api.client.post("/v2/campaigns", json={"name": f"Relay {n}", "agent_id": agent["id"],
                                                            "completion": "manual"}, headers=t.headers)
        assert made.status_code == 201, made.text
        relay.append(made.json()["data"]["id"])
        started = await api.client.post(f"/v2/campaigns/{relay[-1]}/start", headers=t.headers)
        assert started.status_code == 200, started.text
    links = []
    for here, onward in pairwise(relay):
        link = await create(api, t, name=f"Onward from {here}", event="contact.completed",
                            conditions={"field": "data.campaign_id", "op": "eq", "value": here}, actions=[
                                {"type": "campaign_contact", "config": {"campaign_id": onward,
                                                                        "phone": "{{data.phone}}"}}])
        assert link.status_code == 201, link.text
        links.append(link.json()["data"]["id"])
    await evaluate(api)
    phone = unique_phone()
    first = await api.client.post(f"/v2/campaigns/{relay[0]}/contacts", json={"contacts": [{"phone": phone}]},
                                  headers=t.headers)
    assert first.status_code == 201, first.text
    for _ in range(6):  # the dialer, the calls to their end, the outcomes, then the triggers and their actions
        await _dial(api)
        await finish_calls(api, t.organization_id)
        await _dial(api)
        await evaluate(api)
        await run_jobs(api)
    ran = [await _depths_run(api, t, link) for link in links]
    assert [[depth for depth, status in runs if status == "succeeded"] for runs in ran] == [[0], [1], [2], []]
    assert all(runs[-1] == (3, "skipped") for runs in ran)  # the last contact.completed is past the guard
    held = [await _total(api, t, f"/v2/campaigns/{campaign}/contacts") for campaign in relay]
    assert held == [1, 1, 1, 1, 0]  # without the depth, every link ran and the last campaign dialled it too
    assert await _total(api, t, "/v2/calls") == 4
    assert await _depths(api, t.organization_id, "call.ended") == [0, 1, 2, 3]
    assert await _depths(api, t.organization_id, "contact.completed") == [0, 1, 2, 3]


# -- the run-rate breaker --------------------------------------------------------------------------------


async def _booked(api: Api, t: Tenant, count: int, first_id: int) -> None:
    await record(api, *(EventType.APPOINTMENT_BOOKED(t.organization_id, {**BOOKED, "id": first_id + i})
                        for i in range(count)))
    await evaluate(api)


async def test_a_trigger_that_runs_more_than_100_times_a_minute_is_disabled_until_enabled_again(
        make_api: ApiFactory, sql_url: str) -> None:
    clock = ManualClock(EVENING)
    api = await make_api(sql_url, clock=clock)
    t = await api.tenant()
    made = await create(api, t, name="Busy", event="appointment.booked", actions=[
        {"type": "chat_message", "config": {"url": "http://127.0.0.1:9/never", "text": "booked"}}])
    trigger_id = made.json()["data"]["id"]
    await evaluate(api)
    clock.advance(seconds=1)
    await _booked(api, t, 100, 1)
    clock.advance(seconds=61)  # the first hundred are out of the window now
    await _booked(api, t, 100, 101)
    shown = (await api.client.get(f"/v2/triggers/{trigger_id}", headers=t.headers)).json()["data"]
    assert (shown["enabled"], shown["disabled_reason"]) == (True, None)
    assert await outbox(api, t.organization_id, "trigger.") == []

    clock.advance(seconds=30)
    await _booked(api, t, 1, 201)  # the 101st run within a minute
    shown = (await api.client.get(f"/v2/triggers/{trigger_id}", headers=t.headers)).json()["data"]
    assert (shown["enabled"], shown["disabled_reason"]) == (False, "run_rate")
    [last] = await runs(api, t, trigger_id, limit=1)
    assert (last["status"], last["matched"], last["actions"]) == ("skipped", False, [])
    assert "more than 100 times" in last["reason"]
    [(_kind, failed)] = await outbox(api, t.organization_id, "trigger.")
    assert failed == {"trigger_id": trigger_id, "trigger_name": "Busy", "run_id": last["id"],
                      "event": "appointment.booked", "event_id": last["event_id"], "reason": "run_rate",
                      "failed_action": None, "error": last["reason"], "attempts": 0}
    await _booked(api, t, 1, 202)  # disabled: not evaluated
    assert (await runs(api, t, trigger_id, limit=1))[0]["id"] == last["id"]

    enabled = await api.client.patch(f"/v2/triggers/{trigger_id}", json={"enabled": True}, headers=t.headers)
    assert enabled.status_code == 200, enabled.text
    assert (enabled.json()["data"]["enabled"], enabled.json()["data"]["disabled_reason"]) == (True, None)
    await _booked(api, t, 1, 203)  # within the same minute: counted from the moment it was enabled again
    [again] = await runs(api, t, trigger_id, limit=1)
    assert (again["status"], again["matched"]) == ("running", True)


# -- actions that raise, event data that would add a header ----------------------------------------------


class _Broken:
    async def send(self, message: EmailMessage) -> None:
        raise RuntimeError("the mail library raised")


async def test_any_exception_in_an_action_fails_it_at_once_with_trigger_failed(
        make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(EVENING))
    t = await api.tenant()
    made = await create(api, t, name="Mail", event="appointment.booked", actions=[
        {"type": "email", "config": {"to": ["ops@example.com"], "subject": "Booked", "body": "x"}}])
    await evaluate(api)
    await record(api, EventType.APPOINTMENT_BOOKED(t.organization_id, BOOKED))
    await evaluate(api)
    await run_jobs(api, overrides=(Pinned(EmailSender, _Broken()),))  # the worker's mail sender raises
    [run] = await runs(api, t, made.json()["data"]["id"])
    assert run["status"] == "failed" and run["finished_at"] is not None
    assert (run["actions"][0]["status"], run["actions"][0]["attempts"]) == ("failed", 1)
    assert "RuntimeError: the mail library raised" in run["actions"][0]["error"]
    [(_kind, failed)] = await outbox(api, t.organization_id, "trigger.")
    assert (failed["reason"], failed["failed_action"], failed["run_id"]) == ("action_failed", "email", run["id"])


async def test_event_data_with_line_breaks_never_adds_a_mail_header(make_api: ApiFactory, sql_url: str) -> None:
    with SmtpServer() as smtp:
        api = await make_api(sql_url, clock=ManualClock(EVENING), sections=(TriggerSettings(url=smtp.url),))
        t = await api.tenant()
        made = await create(api, t, name="Mail", event="appointment.booked", actions=[
            {"type": "email", "config": {"to": ["ops@example.com"], "subject": "Booked: {{data.attendee_name}}",
                                         "body": "Notes:\n{{data.notes}}"}}])
        await evaluate(api)
        await record(api, EventType.APPOINTMENT_BOOKED(t.organization_id, {
            **BOOKED, "attendee_name": "Eve\r\nBcc: x@y.example", "notes": "line 1\nline 2"}))
        await evaluate(api)
        await run_jobs(api)
        [mail] = await smtp.mailbox.wait_for(1)
        assert mail["Subject"] == "Booked: Eve  Bcc: x@y.example"
        assert mail["Bcc"] is None and mail["To"] == "ops@example.com"
        assert mail.get_payload(decode=True).decode().splitlines() == ["Notes:", "line 1", "line 2"]  # lines stay
        [run] = await runs(api, t, made.json()["data"]["id"])
        assert run["status"] == "succeeded"


# -- references checked when saved ---------------------------------------------------------------------


async def test_actions_naming_another_organizations_agent_or_campaign_are_refused(any_api: Api) -> None:
    api = any_api
    mine, theirs = await api.tenant(), await api.tenant()
    my_agent, their_agent = await active_agent(api, mine), await active_agent(api, theirs)
    their_campaign = (await api.client.post("/v2/campaigns", json={"name": "Theirs", "agent_id": their_agent["id"]},
                                            headers=theirs.headers)).json()["data"]

    def call(agent_id: int) -> dict[str, Any]:
        return {"type": "call", "config": {"agent_id": agent_id, "phone": "{{data.attendee_phone}}"}}

    def contact(campaign_id: int) -> dict[str, Any]:
        return {"type": "campaign_contact", "config": {"campaign_id": campaign_id, "phone": "+1555010000"}}

    for actions, field in (([call(their_agent["id"])], "actions[0].config.agent_id"),
                           ([call(my_agent["id"]), call(10**12)], "actions[1].config.agent_id"),
                           ([contact(their_campaign["id"])], "actions[0].config.campaign_id")):
        refused = await create(api, mine, name="Cross", event="appointment.booked", actions=actions)
        assert refused.status_code == 404, refused.text
        assert refused.json()["error"]["code"] == "not_found"
        assert refused.json()["error"]["details"]["field"] == field
    made = await create(api, mine, name="Mine", event="appointment.booked", actions=[call(my_agent["id"])])
    assert made.status_code == 201, made.text
    patched = await api.client.patch(f"/v2/triggers/{made.json()['data']['id']}", json={
        "actions": [contact(their_campaign["id"])]}, headers=mine.headers)
    assert patched.status_code == 404 and patched.json()["error"]["code"] == "not_found"
    assert (await api.client.get(f"/v2/triggers/{made.json()['data']['id']}", headers=mine.headers)).json()[
        "data"]["actions"] == [call(my_agent["id"]) | {"config": {**call(my_agent["id"])["config"],
                                                                   "custom_data": {}}}]
