"""Triggers end to end through the real HTTP API, on SQLite and PostgreSQL: a call the simulator completes fires a
webhook and a chat message at loopback receivers and an email at a real SMTP server (aiosmtpd on 127.0.0.1), with
the templates filled, while a trigger whose condition does not match sends nothing; a new lead is called by a
trigger's call action . And two workers on PostgreSQL produce exactly one run per
(trigger, event)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from dishka import AsyncContainer

from adapters.memory.clock import ManualClock
from adapters.sql.triggers_tables import trigger_runs
from adapters.sql.uow import SqlUnitOfWork
from application.ports.platform import UnitOfWork
from application.triggers import EvaluateTriggers, EvaluateTriggersCommand
from domain.events import EventType
from entrypoints.features.triggers import TriggerSettings
from entrypoints.ioc import build_container
from entrypoints.units import ScopedUnits
from tests.http import calls_support
from tests.http.calls_support import active_agent, finish_calls, place
from tests.http.triggers_support import SmtpServer, create, evaluate, run_jobs, runs
from tests.support.apps import ApiFactory
from tests.support.receiver import Receiver

pytestmark = pytest.mark.slow

START = datetime(2026, 1, 5, 9, tzinfo=UTC)


@pytest.fixture(autouse=True)
async def close_workers() -> AsyncIterator[None]:
    yield
    await calls_support.close_workers()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = await Receiver().start()
    yield r
    await r.close()


async def test_a_completed_call_fires_a_webhook_a_chat_message_and_an_email(
        make_api: ApiFactory, sql_url: str, receiver: Receiver) -> None:
    with SmtpServer() as smtp:
        api = await make_api(sql_url, clock=ManualClock(START), sections=(TriggerSettings(url=smtp.url),))
        t = await api.tenant()
        agent = await active_agent(api, t)
        made = await create(api, t, name="Completed calls", event="call.completed", conditions={"all": [
            {"field": "data.status", "op": "eq", "value": "completed"},
            {"field": "data.duration_seconds", "op": "gt", "value": 0}]}, actions=[
            {"type": "webhook", "config": {"url": receiver.url("/hook")}},
            {"type": "chat_message", "config": {"url": receiver.url("/slack"),
                                                "text": "Call with {{data.contact_name}} to {{data.destination_phone}}"
                                                        " ended: {{data.end_reason}}"}},
            {"type": "email", "config": {"to": ["ops@example.com"], "subject": "Call {{data.id}} completed",
                                         "body": "{{data.contact_name}} talked for {{data.duration_seconds}} s."}}])
        assert made.status_code == 201, made.text
        never = await create(api, t, name="Long calls", event="call.completed", conditions={"all": [
            {"field": "data.duration_seconds", "op": "gt", "value": 10**9}]}, actions=[
            {"type": "chat_message", "config": {"url": receiver.url("/never"), "text": "long"}}])
        call = (await place(api, t, agent, "+1555010000")).json()["data"]
        await finish_calls(api, t.organization_id)
        await evaluate(api)
        await run_jobs(api)

        mail = await smtp.mailbox.wait_for(1)
        call_view = (await api.client.get(f"/v2/calls/{call['id']}", headers=t.headers)).json()["data"]
        assert mail[0]["Subject"] == f"Call {call['id']} completed" and mail[0]["To"] == "ops@example.com"
        assert mail[0].get_payload(decode=True).decode().strip() == (
            f"Ada talked for {call_view['duration_seconds']} s.")
        [chat] = receiver.on("/slack")
        assert json.loads(chat.body) == {"text": f"Call with Ada to +1555010000 ended: {call_view['end_reason']}"}
        [hook] = receiver.on("/hook")
        assert json.loads(hook.body)["data"]["id"] == call["id"]
        assert receiver.on("/never") == []

        [run] = await runs(api, t, made.json()["data"]["id"])
        assert run["matched"] and run["status"] == "succeeded"
        assert [a["status"] for a in run["actions"]] == ["succeeded"] * 3
        assert [s["result"] for s in run["condition_trace"]] == [True, True]
        [miss] = await runs(api, t, never.json()["data"]["id"])
        assert miss["matched"] is False and miss["status"] == "not_matched"
        assert miss["condition_trace"][0]["actual"] == call_view["duration_seconds"]


async def test_a_new_lead_is_called_by_a_trigger(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant()
    caller = await active_agent(api, t, prompt="You call new leads back.", first_message="Hello.")
    intake = await active_agent(api, t, prompt="You qualify leads.", first_message="Hi.")
    campaign = (await api.client.post("/v2/campaigns", json={"name": "Inbox", "agent_id": intake["id"]},
                                      headers=t.headers)).json()["data"]
    made = (await create(api, t, name="Call new leads", event="lead.created", conditions={"all": [
        {"field": "data.source", "op": "eq", "value": "website"}]}, actions=[{"type": "call", "config": {
            "agent_id": caller["id"], "phone": "{{data.phone}}", "custom_data": {"lead": "{{data.id}}"}}}])).json()
    lead = await api.client.post("/v2/leads", json={"phone": "+1555010000", "name": "Grace",
                                                    "campaign_id": campaign["id"], "source": "website"},
                                 headers=t.headers)
    assert lead.status_code == 201, lead.text
    await evaluate(api)
    await run_jobs(api)
    [run] = await runs(api, t, made["data"]["id"])
    assert run["status"] == "succeeded", run
    calls = (await api.client.get("/v2/calls", headers=t.headers)).json()["data"]
    assert [(c["agent_id"], c["destination_phone"], c["custom_data"]) for c in calls] == [
        (caller["id"], "+1555010000", {"lead": str(lead.json()["data"]["id"])})]
    assert run["actions"][0]["attempts"] == 1


async def test_two_workers_on_postgresql_make_exactly_one_run_per_event(make_api: ApiFactory,
                                                                        postgres_url: str) -> None:
    api = await make_api(postgres_url)
    t = await api.tenant()
    ids = []
    for n in range(3):
        made = await create(api, t, name=f"rule {n}", event="contact.failed", conditions={"all": [
            {"field": "data.attempts", "op": "eq", "value": n}]},  # at most 60 runs each: under the run-rate limit
            actions=[{"type": "chat_message", "config": {"url": "http://127.0.0.1:9/x", "text": "x"}}])
        ids.append(made.json()["data"]["id"])
    workers = [build_container(api.settings), build_container(api.settings)]
    stop = asyncio.Event()

    async def produce() -> None:
        for batch in range(20):
            async with workers[0]() as r:
                uow = await r.get(UnitOfWork)
                for i in range(10):
                    uow.record(EventType.CONTACT_FAILED(t.organization_id, {
                        **EventType.CONTACT_FAILED.example, "contact_id": batch * 10 + i, "attempts": i % 4}))
                await uow.commit()
            await asyncio.sleep(0)
        stop.set()

    async def consume(container: AsyncContainer) -> None:
        units = ScopedUnits(container)
        while True:
            done = stop.is_set()
            while await units.execute(EvaluateTriggers, EvaluateTriggersCommand(limit=7)) > 0:
                pass
            if done:
                return
            await asyncio.sleep(0.001)

    try:
        await asyncio.gather(produce(), consume(workers[0]), consume(workers[1]))
        async with workers[1]() as r:
            conn = await (await r.get(SqlUnitOfWork)).connection()
            rows = (await conn.execute(sa.select(trigger_runs.c.trigger_id, trigger_runs.c.event_id,
                                                 trigger_runs.c.matched).where(
                trigger_runs.c.organization_id == t.organization_id))).all()
    finally:
        for container in workers:
            await container.close()
    assert len(rows) == 3 * 200 == len({(r.trigger_id, r.event_id) for r in rows})
    for n, trigger_id in enumerate(ids):
        matched = sum(1 for r in rows if r.trigger_id == trigger_id and r.matched)
        assert matched == sum(1 for i in range(200) if i % 10 % 4 == n)
