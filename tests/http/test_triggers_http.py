"""Triggers through the real HTTP API on SQLite and PostgreSQL: rules checked against the event's declared
fields (the member named), hostile templates refused, the run log (matched or not, with its trace), signed
webhooks and chat messages at loopback receivers, retries with backoff on a moved clock then trigger.failed,
SMS through DNC, exactly one run per (trigger, event) after a crash, the loop guard and POST /test."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from adapters.memory.clock import ManualClock
from adapters.sql.tables import outbox_cursors, outbox_events
from adapters.sql.triggers_tables import trigger_runs
from adapters.sql.uow import SqlUnitOfWork
from application import triggers as cases
from application.outbox import TRIGGERS
from application.ports.platform import UnitOfWork
from domain.events import DomainEvent, EventType
from domain.rfc3339 import format_utc_millis
from domain.webhooks import verify_signature
from entrypoints.ioc import build_container
from tests.http.calls_support import active_agent, finish_calls, outbox, place, unique_phone
from tests.http.triggers_support import create, evaluate, run_jobs, runs
from tests.support.apps import Api, ApiFactory, Tenant
from tests.support.receiver import Receiver, Reply

START = datetime(2026, 3, 2, 9, tzinfo=UTC)
BOOKED = {**EventType.APPOINTMENT_BOOKED.example}


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = await Receiver().start()
    yield r
    await r.close()


async def record(api: Api, *events: DomainEvent) -> None:
    """Events as another part of Parley records them: in a unit of work, to the outbox."""
    container = api.worker()
    async with container() as r:
        uow = await r.get(UnitOfWork)
        for event in events:
            uow.record(event)
        await uow.commit()


def chat(url: str, text: str = "Booked: {{data.attendee_name}} at {{data.slot_start}}") -> dict[str, Any]:
    return {"type": "chat_message", "config": {"url": url, "text": text}}


CONFIRMED = {"all": [{"field": "data.status", "op": "eq", "value": "confirmed"}]}


async def _event_times(api: Api, event_id: int) -> list[tuple[str]]:
    """When the outbox says the event happened, as the API writes instants."""
    container = api.worker()
    async with container() as r:
        conn = await (await r.get(SqlUnitOfWork)).connection()
        rows = (await conn.execute(sa.select(outbox_events.c.created_at).where(
            outbox_events.c.id == event_id))).scalars().all()
    return [(format_utc_millis(at),) for at in rows]


async def test_crud_with_the_secret_shown_once_and_scopes(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    made = await create(api, t, name=" Slack on bookings ", event="appointment.booked", conditions=CONFIRMED,
                        actions=[chat("http://127.0.0.1:9/slack"), {"type": "webhook",
                                                                     "config": {"url": "http://127.0.0.1:9/h"}}])
    assert made.status_code == 201, made.text
    data = made.json()["data"]
    assert made.headers["location"].endswith(f"/triggers/{data['id']}")
    assert data["name"] == "Slack on bookings" and len(data["secret"]) == 64 and data["enabled"] is True
    assert data["conditions"] == CONFIRMED
    got = (await api.client.get(f"/v2/triggers/{data['id']}", headers=t.headers)).json()["data"]
    assert "secret" not in got and got["actions"] == data["actions"]
    listed = (await api.client.get("/v2/triggers", headers=t.headers)).json()
    assert listed["meta"]["total"] == 1 and listed["data"][0]["id"] == data["id"]

    patched = await api.client.patch(f"/v2/triggers/{data['id']}", json={"enabled": False, "conditions": None},
                                     headers=t.headers)
    assert patched.status_code == 200, patched.text
    assert patched.json()["data"]["enabled"] is False and patched.json()["data"]["conditions"] is None
    refused = await api.client.patch(f"/v2/triggers/{data['id']}", json={"event": "sms.sent"}, headers=t.headers)
    assert refused.status_code == 400  # its chat text names data.attendee_name, which sms.sent does not carry
    assert "actions[0].config.text" in refused.json()["error"]["details"]["validation_errors"]

    reader = await api.key_for(t.organization_id, ("triggers:read",))
    assert (await create(api, reader, name="x", event="lead.created",
                         actions=[chat("http://127.0.0.1:9/x", "hi")])).status_code == 403
    assert (await api.client.delete(f"/v2/triggers/{data['id']}", headers=reader.headers)).status_code == 403
    other = await api.tenant()
    assert (await api.client.get(f"/v2/triggers/{data['id']}", headers=other.headers)).status_code == 404
    assert (await api.client.delete(f"/v2/triggers/{data['id']}", headers=t.headers)).status_code == 204
    assert (await api.client.get(f"/v2/triggers/{data['id']}", headers=t.headers)).status_code == 404


async def test_a_patch_that_changes_nothing_writes_nothing(make_api: ApiFactory, sql_url: str) -> None:
    """As for every resource (docs/api.md, "PATCH"): ``{}`` or the stored values again leave ``updated_at`` alone."""
    clock = ManualClock(START)
    api = await make_api(sql_url, clock=clock)
    t = await api.tenant()
    actions = [chat("http://127.0.0.1:9/slack"), {"type": "webhook", "config": {"url": "http://127.0.0.1:9/h"}}]
    made = (await create(api, t, name="Bookings", event="appointment.booked", conditions=CONFIRMED,
                         actions=actions)).json()["data"]
    path = f"/v2/triggers/{made['id']}"
    clock.advance(seconds=60)
    for body in ({}, {"name": "Bookings", "event": "appointment.booked", "conditions": CONFIRMED,
                      "actions": made["actions"], "enabled": True}):
        same = await api.client.patch(path, json=body, headers=t.headers)
        assert same.status_code == 200, same.text
        assert same.json()["data"]["updated_at"] == made["updated_at"], body
    renamed = (await api.client.patch(path, json={"name": "Renamed"}, headers=t.headers)).json()["data"]
    assert renamed["updated_at"] > made["updated_at"]


@pytest.mark.parametrize(("conditions", "actions", "member"), [
    ({"all": [{"field": "data.colour", "op": "eq", "value": "red"}]}, None, "conditions.all[0].field"),
    ({"all": [{"field": "data.status", "op": "gt", "value": 3}]}, None, "conditions.all[0].op"),
    ({"any": [{"field": "data.calendar_id", "op": "eq", "value": "3"}]}, None, "conditions.any[0].value"),
    ({"all": [{"all": [{"all": [{"all": [{"field": "data.id", "op": "exists"}]}]}]}]}, None,
     "conditions.all[0].all[0].all[0]"),
    ({"field": "status", "op": "eq", "value": "x"}, None, "conditions.field"),
    (None, [chat("http://127.0.0.1:9/x", "{{__class__}}")], "actions[0].config.text"),
    (None, [chat("http://127.0.0.1:9/x", "{{data.__class__.__init__}}")], "actions[0].config.text"),
    (None, [chat("http://127.0.0.1:9/x", "{{data.attendee_name}")], "actions[0].config.text"),
    (None, [chat("http://127.0.0.1:9/x", "}} {{ {{data.id}}")], "actions[0].config.text"),
    (None, [chat("http://127.0.0.1:9/x", "{{ data.id | upper }}")], "actions[0].config.text"),
    (None, [chat("http://127.0.0.1:9/x", "{{data.no_such_member}}")], "actions[0].config.text"),
    (None, [{"type": "email", "config": {"to": ["not-an-address"], "subject": "s", "body": "b"}}],
     "actions[0].config.to[0]"),
    (None, [{"type": "sms", "config": {"to": "12", "body": "b"}}], "actions[0].config.to"),
    (None, [{"type": "call", "config": {"agent_id": 1}}], "actions[0].config.phone"),
    (None, [{"type": "call", "config": {"agent_id": 1, "phone": "+14155550123", "custom_data": {"k" * 41: "x"}}}],
     "actions[0].config.custom_data"),  # a key no {{placeholder}} could have: as every call's custom_data
    (None, [{"type": "webhook", "config": {"url": "ftp://example.com/x"}}], "actions[0].config.url"),
])
async def test_a_rule_the_event_cannot_satisfy_is_refused_naming_the_member(
        any_api: Api, conditions: Any, actions: Any, member: str) -> None:
    t = await any_api.tenant(scopes=("triggers:write",))
    body: dict[str, Any] = {"name": "x", "event": "appointment.booked",
                            "actions": actions or [chat("http://127.0.0.1:9/x", "hi")]}
    if conditions is not None:
        body["conditions"] = conditions
    r = await create(any_api, t, **body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "bad_request"
    assert member in r.json()["error"]["details"]["validation_errors"], r.text


async def test_hostile_targets_and_huge_texts_are_refused(any_api: Api) -> None:
    t = await any_api.tenant(scopes=("triggers:write",))
    blocked = await create(any_api, t, name="x", event="lead.created",
                           actions=[{"type": "webhook", "config": {"url": "http://10.0.0.8/hook"}}])
    assert blocked.status_code == 400 and blocked.json()["error"]["code"] == "blocked_address"
    assert blocked.json()["error"]["details"] == {"field": "actions[0].config.url"}
    unknown = await create(any_api, t, name="x", event="lead.exploded", actions=[chat("http://127.0.0.1:9/x", "a")])
    assert unknown.status_code == 400 and "event" in unknown.json()["error"]["details"]["validation_errors"]
    huge = await create(any_api, t, name="x", event="lead.created",
                        actions=[chat("http://127.0.0.1:9/x", "{{data.name}}" + "x" * 1_000_000)])
    assert huge.status_code in (400, 413)
    assert (await any_api.client.get("/v2/triggers", headers=(await any_api.key_for(
        t.organization_id, ("triggers:read",))).headers)).json()["meta"]["total"] == 0


async def test_a_matching_event_fires_a_signed_webhook_and_a_chat_message_and_a_miss_sends_nothing(
        any_api: Api, receiver: Receiver) -> None:
    api = any_api
    t = await api.tenant()
    made = (await create(api, t, name="Bookings", event="appointment.booked", conditions=CONFIRMED, actions=[
        {"type": "webhook", "config": {"url": receiver.url("/hook")}}, chat(receiver.url("/slack"))])).json()["data"]
    await evaluate(api)  # earlier events of the shared database are read (none is this organization's)
    await record(api, EventType.APPOINTMENT_BOOKED(t.organization_id, {**BOOKED, "status": "pending"}),
                 EventType.APPOINTMENT_BOOKED(t.organization_id, BOOKED))
    assert await evaluate(api) == 2
    await run_jobs(api)
    hooks, chats = receiver.on("/hook"), receiver.on("/slack")
    assert len(hooks) == 1 and len(chats) == 1
    assert json.loads(chats[0].body) == {"text": "Booked: Ada Lovelace at 2026-01-06T10:00:00Z"}
    hook = hooks[0]
    assert verify_signature(made["secret"], hook.headers["x-webhook-timestamp"], hook.body,
                            hook.headers["x-webhook-signature"], now=int(hook.headers["x-webhook-timestamp"]))
    assert hook.headers["x-webhook-event"] == "appointment.booked"

    log = await runs(api, t, made["id"])
    assert [r["matched"] for r in log] == [True, False]
    hit, miss = log
    [(occurred,)] = await _event_times(api, hit["event_id"])
    # the envelope webhook subscriptions deliver ({event, timestamp, data}), with the trigger's members added
    assert json.loads(hook.body) == {"event": "appointment.booked", "timestamp": occurred, "data": BOOKED,
                                     "trigger_id": made["id"], "trigger_name": "Bookings",
                                     "trigger_run_id": hit["id"], "event_id": hit["event_id"]}
    assert hit["status"] == "succeeded" and [(a["type"], a["status"], a["attempts"]) for a in hit["actions"]] == [
        ("webhook", "succeeded", 1), ("chat_message", "succeeded", 1)]
    assert miss["status"] == "not_matched" and miss["actions"] == []
    assert miss["condition_trace"] == [{"field": "data.status", "op": "eq", "expected": "confirmed",
                                        "actual": "pending", "result": False}]
    assert [r["id"] for r in await runs(api, t, made["id"], status="not_matched")] == [miss["id"]]
    await run_jobs(api)
    assert len(receiver.requests) == 2  # nothing is sent twice


async def test_runs_stored_before_traces_were_compact_are_served_the_same(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    made = (await create(api, t, name="Either", event="appointment.booked", conditions={"any": [
        CONFIRMED, {"field": "data.attendee_name", "op": "in", "value": ["Ada Lovelace", "Grace"]}]},
        actions=[chat("http://127.0.0.1:9/x")])).json()["data"]
    await evaluate(api)
    await record(api, EventType.APPOINTMENT_BOOKED(t.organization_id, {**BOOKED, "status": "pending",
                                                                       "attendee_name": "Linus"}))
    await evaluate(api)
    [now] = await runs(api, t, made["id"])
    assert now["condition_trace"] == [
        {"field": "data.status", "op": "eq", "expected": "confirmed", "actual": "pending", "result": False},
        {"field": "data.attendee_name", "op": "in", "expected": ["Ada Lovelace", "Grace"], "actual": "Linus",
         "result": False}]
    container = build_container(api.settings, *api.overrides)
    try:
        async with container() as r:  # the run as it was stored before: each step an object
            uow = await r.get(SqlUnitOfWork)
            await (await uow.connection()).execute(trigger_runs.update().where(trigger_runs.c.id == now["id"]).values(
                condition_trace=now["condition_trace"]))
            await uow.commit()
    finally:
        await container.close()
    assert await runs(api, t, made["id"]) == [now]
    assert [r["id"] for r in await runs(api, t, made["id"], status="not_matched")] == [now["id"]]


async def test_a_failing_target_is_retried_with_backoff_then_the_run_fails_and_says_so(
        make_api: ApiFactory, sql_url: str, receiver: Receiver) -> None:
    clock = ManualClock(START)
    api = await make_api(sql_url, clock=clock)
    t = await api.tenant()
    receiver.default = Reply(500, b"down")
    made = (await create(api, t, name="Flaky", event="appointment.booked",
                         actions=[chat(receiver.url("/slack"))])).json()["data"]
    await evaluate(api)
    await record(api, EventType.APPOINTMENT_BOOKED(t.organization_id, BOOKED))
    await run_jobs(api)
    assert len(receiver.on("/slack")) == 1
    [run] = await runs(api, t, made["id"])
    assert run["status"] == "running" and run["actions"][0]["status"] == "retrying"
    assert run["actions"][0]["attempts"] == 1 and "HTTP 500" in run["actions"][0]["error"]
    await run_jobs(api)  # not due yet: nothing is sent
    assert len(receiver.on("/slack")) == 1
    for attempt in range(2, 6):
        clock.advance(seconds=3 * 3600)
        await run_jobs(api)
        assert len(receiver.on("/slack")) == attempt
    [run] = await runs(api, t, made["id"])
    assert run["status"] == "failed" and run["finished_at"] is not None
    assert run["actions"][0] | {"error": None} == run["actions"][0] | {
        "status": "failed", "attempts": 5, "error": None, "next_attempt_at": None}
    failed = [data for kind, data in await outbox(api, t.organization_id, "trigger.")]
    assert failed == [{"trigger_id": made["id"], "trigger_name": "Flaky", "run_id": run["id"],
                       "event": "appointment.booked", "event_id": run["event_id"], "reason": "action_failed",
                       "failed_action": "chat_message",
                       "error": run["actions"][0]["error"], "attempts": 5}]
    clock.advance(seconds=24 * 3600)
    await run_jobs(api)
    assert len(receiver.on("/slack")) == 5


async def test_sms_actions_go_through_dnc(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    listed, free = unique_phone(), unique_phone()
    dnc = (await api.client.post("/v2/dnc/lists", json={"name": "Never"}, headers=t.headers)).json()["data"]
    await api.client.post(f"/v2/dnc/lists/{dnc['id']}/entries", json={"phone_numbers": [listed]}, headers=t.headers)
    made = (await create(api, t, name="Text", event="appointment.booked", actions=[{"type": "sms", "config": {
        "to": "{{data.attendee_phone}}", "body": "See you at {{data.slot_start}}, {{data.attendee_name}}"}}])).json()
    await evaluate(api)
    await record(api, EventType.APPOINTMENT_BOOKED(t.organization_id, {**BOOKED, "attendee_phone": free}),
                 EventType.APPOINTMENT_BOOKED(t.organization_id, {**BOOKED, "id": 78, "attendee_phone": listed}))
    await evaluate(api)
    await run_jobs(api)
    log = await runs(api, t, made["data"]["id"])
    assert [r["status"] for r in log] == ["failed", "succeeded"]
    assert log[0]["actions"][0]["attempts"] == 1 and log[0]["actions"][0]["error"].startswith("dnc_blocked")
    sent = (await api.client.get("/v2/sms", headers=t.headers)).json()["data"]
    assert [(m["to"], m["body"]) for m in sent] == [(free, "See you at 2026-01-06T10:00:00Z, Ada Lovelace")]


async def test_a_crash_between_claiming_and_recording_neither_loses_nor_doubles_a_run(
        any_api: Api, receiver: Receiver) -> None:
    api = any_api
    t = await api.tenant()
    made = (await create(api, t, name="Once", event="appointment.booked",
                         actions=[chat(receiver.url("/once"))])).json()["data"]
    await evaluate(api)
    await record(api, *(EventType.APPOINTMENT_BOOKED(t.organization_id, {**BOOKED, "id": i}) for i in range(3)))
    container = build_container(api.settings, *api.overrides)
    try:
        async with container() as r:  # claims the events and stores their runs, then dies before committing
            assert await (await r.get(cases.EvaluateTriggers)).execute(cases.EvaluateTriggersCommand()) > 0
            await (await r.get(UnitOfWork)).rollback()
        assert await runs(api, t, made["id"]) == []
        await evaluate(api)  # another pass finds the events again
        first = await runs(api, t, made["id"])
        assert len(first) == 3
        async with container() as r:  # a pass whose cursor was lost after its runs committed reads them again
            uow = await r.get(SqlUnitOfWork)
            await (await uow.connection()).execute(
                outbox_cursors.update().where(outbox_cursors.c.consumer == TRIGGERS).values(last_id=0))
            await uow.commit()
        await evaluate(api)
        assert await runs(api, t, made["id"]) == first
        await run_jobs(api)
        assert len(receiver.on("/once")) == 3
        assert {r["status"] for r in await runs(api, t, made["id"])} == {"succeeded"}
    finally:
        await container.close()


async def test_the_loop_guard_stops_chains_deeper_than_three(any_api: Api, receiver: Receiver) -> None:
    api = any_api
    t = await api.tenant()
    made = (await create(api, t, name="Chain", event="appointment.booked",
                         actions=[chat(receiver.url("/chain"))])).json()["data"]
    await evaluate(api)
    await record(api, DomainEvent(EventType.APPOINTMENT_BOOKED, t.organization_id, BOOKED, depth=2),
                 DomainEvent(EventType.APPOINTMENT_BOOKED, t.organization_id, {**BOOKED, "id": 78}, depth=3))
    await evaluate(api)
    await run_jobs(api)
    skipped, ran = await runs(api, t, made["id"])
    assert (skipped["status"], skipped["matched"], skipped["depth"]) == ("skipped", False, 3)
    assert "3 levels deep" in skipped["reason"]
    assert (ran["status"], ran["depth"]) == ("succeeded", 2)
    assert len(receiver.on("/chain")) == 1


async def test_a_failure_event_caused_by_an_action_carries_the_next_depth(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    await create(api, t, name="Bad number", event="appointment.booked",
                 actions=[{"type": "sms", "config": {"to": "{{data.notes}}", "body": "hi"}}])
    await evaluate(api)
    await record(api, DomainEvent(EventType.APPOINTMENT_BOOKED, t.organization_id, BOOKED, depth=1))
    await evaluate(api)
    await run_jobs(api)
    container = build_container(api.settings, *api.overrides)
    try:
        async with container() as r:
            conn = await (await r.get(SqlUnitOfWork)).connection()
            depths = (await conn.execute(sa.select(outbox_events.c.depth).where(
                outbox_events.c.organization_id == t.organization_id,
                outbox_events.c.type == "trigger.failed"))).scalars().all()
    finally:
        await container.close()
    assert list(depths) == [2]


async def test_test_evaluates_a_sample_without_acting(any_api: Api, receiver: Receiver) -> None:
    api = any_api
    t = await api.tenant()
    made = (await create(api, t, name="T", event="appointment.booked", conditions={"any": [
        {"field": "data.status", "op": "eq", "value": "confirmed"},
        {"field": "data.calendar_id", "op": "in", "value": [1, 2]}]},
        actions=[chat(receiver.url("/t"))])).json()["data"]
    tested = await api.client.post(f"/v2/triggers/{made['id']}/test", json={"data": {"status": "pending",
                                                                                      "calendar_id": 2}},
                                   headers=t.headers)
    assert tested.status_code == 200, tested.text
    data = tested.json()["data"]
    assert data["matched"] is True and [s["result"] for s in data["condition_trace"]] == [False, True]
    assert data["actions"] == [{"type": "chat_message", "config": {"url": receiver.url("/t"),
                                                                   "text": "Booked:  at "}}]
    miss = (await api.client.post(f"/v2/triggers/{made['id']}/test", json={"data": {"status": 5}},
                                  headers=t.headers)).json()["data"]
    assert miss["matched"] is False and miss["actions"] == []
    example = (await api.client.post(f"/v2/triggers/{made['id']}/test", json={}, headers=t.headers)).json()["data"]
    assert example["matched"] is True and example["actions"][0]["config"]["text"].startswith("Booked: Ada")
    assert receiver.requests == [] and await runs(api, t, made["id"]) == []
    path = f"/v2/triggers/{made['id']}/test"
    for body, field in ((b'{"data": "x"}', "data"), (b'{"data": 5}', "data"), (b'"x"', "body"), (b"[]", "body")):
        refused = await api.client.post(path, content=body, headers={**t.headers, "Content-Type": "application/json"})
        assert refused.status_code == 400, refused.text
        assert list(refused.json()["error"]["details"]["validation_errors"]) == [field], body


async def test_renders_hostile_event_data_literally(any_api: Api, receiver: Receiver) -> None:
    api = any_api
    t = await api.tenant()
    made = (await create(api, t, name="Literal", event="appointment.booked",
                         actions=[chat(receiver.url("/lit"), "{{data.attendee_name}}|{{data.notes}}")])).json()
    await evaluate(api)
    await record(api, EventType.APPOINTMENT_BOOKED(t.organization_id, {
        **BOOKED, "attendee_name": "{{data.__class__}}", "notes": "{{__import__('os')}}" + "}" * 3}))
    await evaluate(api)
    await run_jobs(api)
    [got] = receiver.on("/lit")
    assert json.loads(got.body) == {"text": "{{data.__class__}}|{{__import__('os')}}}}}"}
    assert (await runs(api, t, made["data"]["id"]))[0]["status"] == "succeeded"


CHAIN_STOPPED_AT_THREE = [(0, "succeeded"), (1, "succeeded"), (2, "succeeded"), (3, "skipped")]


async def _let_the_chain_run(api: Api, t: Tenant, rounds: int = 6) -> None:
    """Rounds of the telephony worker (every call to its end), the triggers' consumer and their action jobs."""
    for _ in range(rounds):
        await finish_calls(api, t.organization_id)
        await evaluate(api)
        await run_jobs(api)
    await finish_calls(api, t.organization_id)


async def _depths_run(api: Api, t: Tenant, trigger_id: int) -> list[tuple[int, str]]:
    return sorted((run["depth"], run["status"]) for run in await runs(api, t, trigger_id))


@pytest.mark.slow
async def test_a_call_placed_by_an_action_keeps_its_depth_so_a_call_ended_loop_stops(
        make_api: ApiFactory, sql_url: str) -> None:
    """A trigger on call.ended that calls the number again: each call's events (recorded later, by the telephony
    worker) are as deep as the action that placed it, so the chain stops at the guard instead of dialling for
    ever."""
    api = await make_api(sql_url, clock=ManualClock(datetime(2026, 3, 2, 18, tzinfo=UTC)))  # 10:00 in California
    t = await api.tenant()
    agent = await active_agent(api, t, prompt="You call back.", first_message="Hello again.")
    made = await create(api, t, name="Call again", event="call.ended", actions=[
        {"type": "call", "config": {"agent_id": agent["id"], "phone": "{{data.destination_phone}}"}}])
    assert made.status_code == 201, made.text
    await evaluate(api)
    first = await place(api, t, agent, unique_phone())
    assert first.status_code == 201, first.text
    await _let_the_chain_run(api, t)  # without the depth, every round placed one more call
    listed = await api.client.get("/v2/calls?limit=100", headers=t.headers)
    assert listed.json()["meta"]["total"] == 4  # the first, and one per depth 0, 1 and 2
    assert await _depths_run(api, t, made.json()["data"]["id"]) == CHAIN_STOPPED_AT_THREE
    ended = [data["id"] for kind, data in await outbox(api, t.organization_id, "call.ended")]
    assert len(ended) == 4
    container = build_container(api.settings, *api.overrides)
    try:
        async with container() as r:
            conn = await (await r.get(SqlUnitOfWork)).connection()
            depths = (await conn.execute(sa.select(outbox_events.c.depth).where(
                outbox_events.c.organization_id == t.organization_id, outbox_events.c.type == "call.started")
                .order_by(outbox_events.c.id))).scalars().all()
    finally:
        await container.close()
    assert list(depths) == [0, 1, 2, 3]  # every event of a call, the first one included


@pytest.mark.slow
async def test_a_booking_during_a_call_placed_by_an_action_keeps_its_depth(make_api: ApiFactory, sql_url: str) -> None:
    """A trigger on appointment.booked that places a call to a number that books again: the booking made during
    the call is as deep as the action that placed the call, so the chain stops at the guard."""
    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant()
    calendar = await api.client.post("/v2/scheduling/calendars", json={  # one attendee books every round: no cap
        "name": "Sales", "timezone": "UTC", "slot_duration_minutes": 30, "max_upcoming_per_attendee": None},
        headers=t.headers)
    calendar_id = calendar.json()["data"]["id"]
    for weekday in range(7):
        rule = await api.client.post(f"/v2/scheduling/calendars/{calendar_id}/rules", json={
            "weekday": weekday, "start_time": "10:00", "end_time": "16:00"}, headers=t.headers)
        assert rule.status_code == 201, rule.text
    agent = await active_agent(api, t, calendar_id=calendar_id)
    made = await create(api, t, name="Book again", event="appointment.booked", actions=[
        {"type": "call", "config": {"agent_id": agent["id"], "phone": "+1555010006",
                                    "custom_data": {"contact_name": "Ada"}}}])
    assert made.status_code == 201, made.text
    await evaluate(api)
    assert (await place(api, t, agent, "+1555010006")).status_code == 201
    await _let_the_chain_run(api, t)  # without the depth, every round booked one more appointment
    booked = await api.client.get("/v2/scheduling/appointments?limit=100", headers=t.headers)
    assert booked.json()["meta"]["total"] == 4  # the first call's, and one per depth 0, 1 and 2
    assert await _depths_run(api, t, made.json()["data"]["id"]) == CHAIN_STOPPED_AT_THREE
