"""SMS through the real HTTP API on SQLite and PostgreSQL: sending (Idempotency-Key, encoding and segments,
sender numbers), the carrier simulator's receipts applied forward-only by the receipts job (also out of order),
DNC and opt-out screening in the one gate, inbound STOP / START keeping the opt-out list, history filters, scopes
and the sms.* events."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from adapters.memory.clock import ManualClock
from application.ports.sms import CarrierReceipt
from application.sms import ApplySmsReceipt, ApplySmsReceiptCommand, receipts_once
from domain.calls import SIMULATOR_CALLER_ID
from entrypoints.features.sms import KIND, receipts_job
from entrypoints.ioc import build_container
from entrypoints.units import ScopedUnits
from entrypoints.worker import jobs, make_runner
from tests.http.calls_support import active_agent, outbox, unique_phone
from tests.http.test_calls_http import FailingScreenerProvider
from tests.support.apps import Api, ApiFactory, Tenant

START = datetime(2026, 1, 5, 9, tzinfo=UTC)
ZONE = "2026-01-05T09:00:00Z"


async def receipts(api: Api) -> int:
    """One pass of the receipts job on the app's database and clock, as the worker runs it."""
    container = api.worker()
    return await receipts_once(ScopedUnits(container))


async def inject(api: Api, carrier_id: str, status: str, at: datetime, error_code: str | None = None) -> None:
    """A carrier receipt as a status callback delivers it (in any order)."""
    container = api.worker()
    await ScopedUnits(container).execute(ApplySmsReceipt,
                                         ApplySmsReceiptCommand(CarrierReceipt(carrier_id, status, at, error_code)))


async def send(api: Api, t: Tenant, to: str, body: str = "Hello", *, headers: dict[str, str] | None = None,
               **extra: Any) -> Any:
    return await api.client.post("/v2/sms", json={"to": to, "body": body, **extra},
                                 headers={**t.headers, **(headers or {})})


async def sent(api: Api, t: Tenant, to: str, body: str = "Hello", **extra: Any) -> dict[str, Any]:
    response = await send(api, t, to, body, **extra)
    assert response.status_code == 201, response.text
    return response.json()["data"]  # type: ignore[no-any-return]


async def get_sms(api: Api, t: Tenant, sms_id: int) -> dict[str, Any]:
    response = await api.client.get(f"/v2/sms/{sms_id}", headers=t.headers)
    assert response.status_code == 200, response.text
    return response.json()["data"]  # type: ignore[no-any-return]


async def sms_number(api: Api, t: Tenant, *, sms: bool = True) -> dict[str, Any]:
    created = await api.client.post("/v2/telephony/phone-numbers", headers=t.headers, json={
        "phone_number": unique_phone(), "capabilities": {"voice": True, "sms": sms}})
    assert created.status_code == 201, created.text
    return created.json()["data"]  # type: ignore[no-any-return]


async def inbound(api: Api, t: Tenant, sender: str, to: str, body: str) -> Any:
    return await api.client.post("/v2/telephony/simulator/inbound-sms", headers=t.headers,
                                 json={"from": sender, "to": to, "body": body})


async def carrier_id_of(api: Api, sms_id: int) -> str:
    from adapters.sql.sms_tables import sms_messages
    from adapters.sql.uow import SqlUnitOfWork

    container = api.worker()
    async with container() as r:
        conn = await (await r.get(SqlUnitOfWork)).connection()
        row = (await conn.execute(sms_messages.select().where(sms_messages.c.id == sms_id))).one()
        return str(row.carrier_id)


async def test_send_then_receipts_move_it_to_delivered(make_api: ApiFactory, private_sql_url: str) -> None:
    """On a database of its own: the receipts pass reports every organization's due receipts, and other tests'
    messages on a shared database would be counted too."""
    clock = ManualClock(START)
    api = await make_api(private_sql_url, clock=clock)
    t = await api.tenant()
    number = await sms_number(api, t)
    headers = {"Idempotency-Key": "sms-1"}
    first = await send(api, t, "+1 415 555 0123", "Your table is ready.", headers=headers)
    assert first.status_code == 201, first.text
    message = first.json()["data"]
    assert first.headers["location"].endswith(f"/sms/{message['id']}")
    assert {k: message[k] for k in ("direction", "from", "to", "body", "status", "encoding", "segments",
                                    "error_code", "from_phone_number_id", "sent_at", "delivered_at")} == {
        "direction": "outbound", "from": number["phone_number"], "to": "+14155550123", "body": "Your table is ready.",
        "status": "queued", "encoding": "gsm7", "segments": 1, "error_code": None,
        "from_phone_number_id": number["id"], "sent_at": None, "delivered_at": None}
    assert message["status_events"] == [{"status": "queued", "at": message["created_at"], "applied": True,
                                         "error_code": None}]
    replay = await send(api, t, "+1 415 555 0123", "Your table is ready.", headers=headers)
    assert replay.status_code == 201 and replay.headers["idempotency-replayed"] == "true"
    assert replay.json()["data"]["id"] == message["id"]
    assert (await api.client.get("/v2/sms", headers=t.headers)).json()["meta"]["total"] == 1  # sent once

    assert await receipts(api) == 0  # nothing has happened yet
    clock.advance(seconds=1)
    assert await receipts(api) == 1
    assert (await get_sms(api, t, message["id"]))["status"] == "sent"
    clock.advance(seconds=2)
    await receipts(api)
    done = await get_sms(api, t, message["id"])
    assert (done["status"], done["sent_at"] is not None, done["delivered_at"] is not None) == ("delivered", True, True)
    assert [(e["status"], e["applied"]) for e in done["status_events"]] == [
        ("queued", True), ("sent", True), ("delivered", True)]
    events = await outbox(api, t.organization_id, "sms.")
    assert [(kind, data["id"], data["status"]) for kind, data in events] == [
        ("sms.sent", message["id"], "sent"), ("sms.delivered", message["id"], "delivered")]
    assert await receipts(api) == 0  # nothing left to report


async def test_simulator_test_numbers_fail_or_go_undelivered(make_api: ApiFactory, sql_url: str) -> None:
    clock = ManualClock(START)
    api = await make_api(sql_url, clock=clock)
    t = await api.tenant()
    failed = await sent(api, t, "+1555010003")
    undelivered = await sent(api, t, "+1555010007")
    assert failed["from"] == "+1555010099"  # no SMS number of its own: the simulator's caller id
    clock.advance(seconds=5)
    await receipts(api)
    f, u = await get_sms(api, t, failed["id"]), await get_sms(api, t, undelivered["id"])
    assert (f["status"], f["error_code"], f["sent_at"]) == ("failed", "30008", None)
    assert (u["status"], u["error_code"], u["delivered_at"]) == ("undelivered", "30003", None)
    assert [e["status"] for e in u["status_events"]] == ["queued", "sent", "undelivered"]
    events = [(kind, data["id"]) for kind, data in await outbox(api, t.organization_id, "sms.")]
    assert ("sms.failed", failed["id"]) in events and ("sms.failed", undelivered["id"]) in events
    assert ("sms.delivered", undelivered["id"]) not in events


async def test_out_of_order_receipts_never_move_the_status_back(make_api: ApiFactory, sql_url: str) -> None:
    clock = ManualClock(START)
    api = await make_api(sql_url, clock=clock)
    t = await api.tenant()
    message = await sent(api, t, "+14155550124")
    carrier_id = await carrier_id_of(api, message["id"])
    await inject(api, carrier_id, "delivered", START + timedelta(seconds=3))   # before its "sent"
    await inject(api, carrier_id, "sent", START + timedelta(seconds=1))
    await inject(api, carrier_id, "failed", START + timedelta(seconds=4), "30008")  # after a final status
    got = await get_sms(api, t, message["id"])
    assert (got["status"], got["error_code"], got["delivered_at"]) == ("delivered", None, "2026-01-05T09:00:03Z")
    assert [(e["status"], e["at"], e["applied"], e["error_code"]) for e in got["status_events"]] == [
        ("queued", ZONE, True, None), ("delivered", "2026-01-05T09:00:03Z", True, None),
        ("sent", "2026-01-05T09:00:01Z", False, None), ("failed", "2026-01-05T09:00:04Z", False, "30008")]
    # the simulator's own receipts come later: kept, and changing nothing
    clock.advance(seconds=5)
    await receipts(api)
    got = await get_sms(api, t, message["id"])
    assert got["status"] == "delivered" and len(got["status_events"]) == 6
    assert [e["applied"] for e in got["status_events"][4:]] == [False, False]
    events = [kind for kind, data in await outbox(api, t.organization_id, "sms.")]
    assert events == ["sms.delivered"]  # only moves emit events


async def test_encoding_segments_and_body_rules(any_api: Api) -> None:
    t = await any_api.tenant()
    cases = {"A" * 161: ("gsm7", 2), "^{}[]~|€\\": ("gsm7", 1), "Görüşürüz 😀": ("ucs2", 1), "😀" * 36: ("ucs2", 2)}
    for body, expected in cases.items():
        message = await sent(any_api, t, "+14155550125", body)
        assert (message["encoding"], message["segments"], message["body"]) == (*expected, body)
    for body in ("", " \n ", "x" * 1601):
        refused = await send(any_api, t, "+14155550125", body)
        assert refused.status_code == 400, refused.text
        assert "body" in refused.json()["error"]["details"]["validation_errors"]
    refused = await send(any_api, t, "not a number")
    assert refused.status_code == 400 and "to" in refused.json()["error"]["details"]["validation_errors"]


async def test_the_sender_number_must_be_an_active_sms_number_of_the_organization(any_api: Api) -> None:
    t, other = await any_api.tenant(), await any_api.tenant()
    voice_only = await sms_number(any_api, t, sms=False)
    theirs = await sms_number(any_api, other)
    refused = await send(any_api, t, "+14155550126", from_phone_number_id=voice_only["id"])
    assert refused.status_code == 400
    assert "from_phone_number_id" in refused.json()["error"]["details"]["validation_errors"]
    missing = await send(any_api, t, "+14155550126", from_phone_number_id=theirs["id"])
    assert missing.status_code == 404 and missing.json()["error"]["details"] == {"field": "from_phone_number_id"}
    mine = await sms_number(any_api, t)
    assert (await sent(any_api, t, "+14155550126", from_phone_number_id=mine["id"]))["from"] == mine["phone_number"]


async def test_dnc_listed_recipients_are_blocked_by_the_gate(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url)
    t = await api.tenant()
    listed = (await api.client.post("/v2/dnc/lists", json={"name": "Do not contact"}, headers=t.headers)).json()
    await api.client.post(f"/v2/dnc/lists/{listed['data']['id']}/entries", headers=t.headers,
                          json={"phone_numbers": ["+14155550127"]})
    blocked = await send(api, t, "+1 (415) 555-0127", headers={"Idempotency-Key": "dnc-1"})
    assert blocked.status_code == 422 and blocked.json()["error"]["code"] == "dnc_blocked"
    assert blocked.json()["error"]["details"]["list_ids"] == [listed["data"]["id"]]
    replay = await send(api, t, "+1 (415) 555-0127", headers={"Idempotency-Key": "dnc-1"})
    assert replay.status_code == 422 and replay.headers["idempotency-replayed"] == "true"
    assert (await api.client.get("/v2/sms", headers=t.headers)).json()["meta"]["total"] == 0
    assert await outbox(api, t.organization_id, "sms.") == []
    other = await api.tenant()  # lists are the organization's own
    assert (await send(api, other, "+14155550127")).status_code == 201


async def test_screening_that_cannot_be_done_sends_nothing(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, overrides=(FailingScreenerProvider(),))
    t = await api.tenant()
    refused = await send(api, t, "+14155550128")
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "dnc_unavailable"
    assert (await api.client.get("/v2/sms", headers=t.headers)).json()["meta"]["total"] == 0


async def test_stop_and_start_keep_the_opt_out_list(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url)
    t = await api.tenant()
    number = await sms_number(api, t)
    person = "+14155550129"
    chat = await inbound(api, t, person, number["phone_number"], "Is the shop open today?")
    assert chat.status_code == 201, chat.text
    message = chat.json()["data"]
    assert (message["direction"], message["status"], message["from"], message["to"], message["keyword"],
            message["from_phone_number_id"]) == ("inbound", "received", person, number["phone_number"], None,
                                                 number["id"])
    assert (await api.client.get("/v2/dnc/lists", headers=t.headers)).json()["meta"]["total"] == 0

    stop = await inbound(api, t, person, number["phone_number"], "  Stop \n")
    assert stop.status_code == 201 and stop.json()["data"]["keyword"] == "stop"
    lists = (await api.client.get("/v2/dnc/lists", headers=t.headers)).json()["data"]
    assert [(x["name"], x["entry_count"]) for x in lists] == [("SMS opt-outs", 1)]
    opted_out = await send(api, t, person)
    assert opted_out.status_code == 422 and opted_out.json()["error"]["code"] == "recipient_opted_out"
    checked = await api.client.post("/v2/dnc/check", json={"phone_numbers": [person]}, headers=t.headers)
    assert checked.json()["data"][0]["blocked"] is True  # a DNC list like any other: it blocks calls too
    agent = await active_agent(api, t)
    call = await api.client.post("/v2/calls", headers=t.headers, json={
        "bot_id": str(agent["id"]), "destination_phone": person, "contact_name": "Ada"})
    # and the call's refusal says why: the recipient replied STOP by text
    assert call.status_code == 422, call.text
    assert call.json()["error"]["code"] == "recipient_opted_out"
    assert call.json()["error"]["details"]["channel"] == "sms"
    # a second STOP (any keyword) keeps one entry in the one list
    assert (await inbound(api, t, person, number["phone_number"], "unsubscribe")).json()["data"]["keyword"] == "stop"
    lists = (await api.client.get("/v2/dnc/lists", headers=t.headers)).json()["data"]
    assert [(x["name"], x["entry_count"]) for x in lists] == [("SMS opt-outs", 1)]
    # a number on an ordinary list as well: dnc_blocked wins
    ordinary = (await api.client.post("/v2/dnc/lists", json={"name": "Legal"}, headers=t.headers)).json()["data"]
    await api.client.post(f"/v2/dnc/lists/{ordinary['id']}/entries", headers=t.headers,
                          json={"phone_numbers": [person]})
    assert (await send(api, t, person)).json()["error"]["code"] == "dnc_blocked"
    await api.client.delete(f"/v2/dnc/lists/{ordinary['id']}/entries/{person}", headers=t.headers)

    start = await inbound(api, t, person, number["phone_number"], "START")
    assert start.json()["data"]["keyword"] == "start"
    assert (await send(api, t, person)).status_code == 201
    assert (await inbound(api, t, person, number["phone_number"], "stop please")).json()["data"]["keyword"] is None
    assert (await send(api, t, person)).status_code == 201  # not a keyword: nothing changed
    received = [(data["body"], data["keyword"]) for kind, data in await outbox(api, t.organization_id, "sms.received")]
    assert received == [("Is the shop open today?", None), ("  Stop \n", "stop"), ("unsubscribe", "stop"),
                        ("START", "start"), ("stop please", None)]


async def test_simultaneous_first_stops_make_one_opt_out_list(concurrent_api: Api) -> None:
    """A new organization's first STOP messages, arriving at once, share one opt-out list (a unique index on the
    list's purpose guards it: on PostgreSQL the requests really run side by side)."""
    api = concurrent_api
    for _ in range(3):
        t = await api.tenant()
        number = (await sms_number(api, t))["phone_number"]
        senders = [f"+1415555{index:04d}" for index in range(6)]
        stops = await asyncio.gather(*(inbound(api, t, sender, number, "STOP") for sender in senders))
        assert [stop.status_code for stop in stops] == [201] * len(senders), [stop.text for stop in stops]
        lists = (await api.client.get("/v2/dnc/lists", headers=t.headers)).json()["data"]
        assert [(x["name"], x["entry_count"]) for x in lists] == [("SMS opt-outs", len(senders))]


async def test_inbound_goes_to_one_of_the_organizations_numbers(any_api: Api) -> None:
    t, other = await any_api.tenant(), await any_api.tenant()
    theirs = await sms_number(any_api, other)
    refused = await inbound(any_api, t, "+14155550130", theirs["phone_number"], "STOP")
    assert refused.status_code == 404 and refused.json()["error"]["details"] == {"field": "to"}
    bad = await inbound(any_api, t, "nope", theirs["phone_number"], "hi")
    assert bad.status_code == 400
    assert (await any_api.client.get("/v2/dnc/lists", headers=other.headers)).json()["meta"]["total"] == 0


async def test_history_filters_and_pages(make_api: ApiFactory, sql_url: str) -> None:
    clock = ManualClock(START)
    api = await make_api(sql_url, clock=clock)
    t = await api.tenant()
    number = await sms_number(api, t)
    first = await sent(api, t, "+14155550131", "one")
    clock.advance(minutes=1)
    second = await sent(api, t, "+14155550132", "two")
    clock.advance(minutes=1)
    received = (await inbound(api, t, "+14155550131", number["phone_number"], "hi")).json()["data"]
    clock.advance(minutes=1)
    await sent(api, t, "+1555010003", "three")
    clock.advance(seconds=5)
    await receipts(api)

    async def ids(**params: Any) -> list[int]:
        response = await api.client.get("/v2/sms", headers=t.headers, params=params)
        assert response.status_code == 200, response.text
        return [x["id"] for x in response.json()["data"]]

    everything = await ids()
    assert len(everything) == 4 and everything[1:] == [received["id"], second["id"], first["id"]]
    assert await ids(to="+1 415 555 0131") == [first["id"]]
    assert await ids(direction="inbound") == [received["id"]]
    assert await ids(status="failed") == [everything[0]]
    assert await ids(status="delivered") == [second["id"], first["id"]]
    assert await ids(created_after="2026-01-05T09:01:00Z", created_before="2026-01-05T09:03:00Z") == [
        received["id"], second["id"]]
    page = (await api.client.get("/v2/sms", headers=t.headers, params={"limit": 2, "offset": 1})).json()
    assert [x["id"] for x in page["data"]] == everything[1:3] and page["meta"] == {"total": 4, "limit": 2,
                                                                                 "offset": 1}
    for params in ({"to": "nope"}, {"status": "lost"}, {"direction": "sideways"}, {"created_after": "yesterday"}):
        assert (await api.client.get("/v2/sms", headers=t.headers, params=params)).status_code == 400
    assert (await api.client.get("/v2/sms/999999", headers=t.headers)).status_code == 404
    other = await api.tenant()
    assert (await api.client.get(f"/v2/sms/{first['id']}", headers=other.headers)).status_code == 404


async def test_scopes(any_api: Api) -> None:
    t = await any_api.tenant()
    reader = await any_api.key_for(t.organization_id, ("sms:read",))
    writer = await any_api.key_for(t.organization_id, ("sms:write",))
    assert (await send(any_api, reader, "+14155550133")).status_code == 403
    assert (await send(any_api, writer, "+14155550133")).status_code == 201
    assert (await any_api.client.get("/v2/sms", headers=writer.headers)).status_code == 403
    assert (await any_api.client.get("/v2/sms", headers=reader.headers)).status_code == 200
    number = await sms_number(any_api, t)
    assert (await inbound(any_api, writer, "+14155550133", number["phone_number"], "STOP")).status_code == 403


async def test_the_receipts_job_is_a_worker_job_woken_by_sends(make_api: ApiFactory, sql_url: str) -> None:
    clock = ManualClock(START)
    api = await make_api(sql_url, clock=clock)
    t = await api.tenant()
    assert receipts_job in jobs()
    container = build_container(api.settings, *api.overrides)
    try:
        kind = receipts_job(container, api.settings)
        assert (kind.name, kind.on_wake, kind.recurring) == (KIND, True, True)
        runner = await make_runner(container, api.settings, kinds=[kind])
        await runner.start()
        assert await runner.run_due() == 1  # a fresh start runs it once
        message = await sent(api, t, "+14155550134")
        assert await runner.run_due() == 0  # idle until its re-check, unless the send's commit wakes it
        assert await runner.run_due(woken=True) == 1  # then due when the message's next receipt is
        assert await runner.run_due() == 0
        clock.advance(seconds=1)
        assert await runner.run_due() == 1
        assert (await get_sms(api, t, message["id"]))["status"] == "sent"
        clock.advance(seconds=2)
        assert await runner.run_due() == 1
        assert (await get_sms(api, t, message["id"]))["status"] == "delivered"
    finally:
        await container.close()


async def test_a_stop_sent_back_to_the_shared_sender_opts_the_recipient_out(any_api: Api) -> None:
    """An organization without an SMS number texts from the simulator's shared sender; the recipient's STOP
    to that sender reaches the organization that last texted it from there, and blocks calls too, saying why."""
    api = any_api
    first, last = await api.tenant(), await api.tenant()
    person = unique_phone()
    shared = (await sent(api, first, person))["from"]
    assert shared == SIMULATOR_CALLER_ID
    assert (await sent(api, last, person))["from"] == shared
    elsewhere = await inbound(api, first, person, shared, "STOP")  # not the last to text: nothing to reach
    assert elsewhere.status_code == 404 and elsewhere.json()["error"]["details"] == {"field": "from"}
    stop = await inbound(api, last, person, shared, "STOP")
    assert stop.status_code == 201, stop.text
    assert stop.json()["data"]["keyword"] == "stop" and stop.json()["data"]["from_phone_number_id"] is None
    refused = await send(api, last, person)
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "recipient_opted_out"
    agent = await active_agent(api, last)
    call = await api.client.post("/v2/calls", headers=last.headers, json={
        "bot_id": str(agent["id"]), "destination_phone": person, "contact_name": "Ada"})
    assert call.status_code == 422, call.text
    assert call.json()["error"]["code"] == "recipient_opted_out"
    assert call.json()["error"]["details"]["channel"] == "sms"
    assert (await send(api, first, person)).status_code == 201  # the other organization's opt-outs are its own
    stranger = await inbound(api, last, unique_phone(), shared, "STOP")  # never texted from there
    assert stranger.status_code == 404


async def test_the_default_sender_is_an_sms_number_of_the_organization(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    await sms_number(api, t, sms=False)
    number = await sms_number(api, t)
    message = await sent(api, t, unique_phone())
    assert (message["from"], message["from_phone_number_id"]) == (number["phone_number"], number["id"])
    stop = await inbound(api, t, message["to"], number["phone_number"], "stop")
    assert stop.status_code == 201 and stop.json()["data"]["keyword"] == "stop"


async def test_inbound_on_a_number_that_is_not_sms_capable_is_refused(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    voice_only = await sms_number(api, t, sms=False)
    refused = await inbound(api, t, unique_phone(), voice_only["phone_number"], "STOP")
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "sms_not_enabled" and error["details"]["validation_errors"] == {"to": "is not SMS-capable"}
    assert (await api.client.get("/v2/sms?direction=inbound", headers=t.headers)).json()["meta"]["total"] == 0
    assert (await api.client.get("/v2/dnc/lists", headers=t.headers)).json()["meta"]["total"] == 0


@pytest.mark.parametrize(("body", "word"), [
    ("\uff33\uff34\uff2f\uff30", "stop"),  # full-width letters
    ("S\u200bTOP", "stop"),  # a zero-width space inside
    ("\ufeffUnsubscribe\u200d", "stop"),
    ("\uff53\uff54\uff41\uff52\uff54", "start"),  # full-width
    ("STOP IT", None),
])
async def test_keywords_are_read_after_nfkc_without_zero_width_characters(any_api: Api, body: str,
                                                                          word: str | None) -> None:
    api = any_api
    t = await api.tenant()
    number = await sms_number(api, t)
    person = unique_phone()
    received = await inbound(api, t, person, number["phone_number"], body)
    assert received.status_code == 201, received.text
    assert received.json()["data"]["keyword"] == word
    opted_out = (await send(api, t, person)).status_code == 422
    assert opted_out is (word == "stop")


@pytest.mark.parametrize("provider_type", ["vonage", "sip"])
async def test_a_text_from_a_provider_parley_cannot_send_through_fails_and_says_why(any_api: Api,
                                                                                    provider_type: str) -> None:
    """As its calls do (provider_not_supported): never passed to the simulator and reported delivered."""
    t = await any_api.tenant()
    provider = await any_api.client.post("/v2/telephony/providers", headers=t.headers,
                                         json={"name": "Elsewhere", "type": provider_type})
    assert provider.status_code == 201, provider.text
    number = await any_api.client.post("/v2/telephony/phone-numbers", headers=t.headers, json={
        "phone_number": unique_phone(), "provider_id": provider.json()["data"]["id"],
        "capabilities": {"voice": True, "sms": True}})
    assert number.status_code == 201, number.text
    message = await sent(any_api, t, unique_phone(), from_phone_number_id=number.json()["data"]["id"])
    assert (message["status"], message["error_code"]) == ("failed", "provider_not_supported")
    await receipts(any_api)
    assert (await get_sms(any_api, t, message["id"]))["status"] == "failed"
    assert [e[0] for e in await outbox(any_api, t.organization_id, "sms.")] == ["sms.failed"]
    used = (await any_api.client.get("/v2/usage", headers=t.headers)).json()["data"]["metrics"]["sms_segments"]
    assert used["used"] == 0  # nothing went out: nothing counted or billed
