"""Calls and texts through Twilio, through the real HTTP API: a Twilio emulator (a real HTTP server on 127.0.0.1)
answers Parley's REST requests and signs its callbacks with the SDK's RequestValidator, on SQLite and PostgreSQL.

Outbound to completion, busy, no answer, voicemail by answering-machine detection (hang up, leave a message),
cancel and the sweeper hanging up at the carrier, transfer, inbound calls (answered with a media stream, or turned
away), SMS out with receipts, inbound STOP, number search, purchase and release, a carrier that is down (5xx), one
that does not answer (reconciled, never dialled twice), and hostile callbacks (forged, replayed, late, unknown)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from application.carrier_calls import TransferCarrierCall, TransferCarrierCallCommand
from application.ports.platform import UnitOfWork
from tests.http import calls_support
from tests.http.calls_support import ApiWith, drive, events_of, outbox, place
from tests.http.twilio_support import HANG, PUBLIC, REQUEST_TIMEOUT, SHORT_TIMEOUT, Line, app, twilio_line
from tests.support.apps import AppPool
from tests.support.emulators.twilio import TwilioEmulator

# end to end through a carrier's protocol (make test runs it; make test-fast leaves it out)
pytestmark = pytest.mark.slow


@pytest.fixture
async def api_with(tmp_root: Path, app_pool: AppPool) -> AsyncIterator[ApiWith]:
    async for factory in calls_support.apps_with_providers(tmp_root, app_pool):
        yield factory


@pytest.fixture(autouse=True)
async def close_workers() -> AsyncIterator[None]:
    yield
    await calls_support.close_workers()


@pytest.fixture
def emulator() -> Any:
    emulator = TwilioEmulator().start()
    yield emulator
    emulator.stop()


async def line_on(api_with: ApiWith, sql_url: str, emulator: TwilioEmulator, *,
                  request_timeout: float = REQUEST_TIMEOUT, **agent: Any) -> tuple[Line, dict[str, Any]]:
    api, tokens = await app(api_with, sql_url, request_timeout=request_timeout)
    return await twilio_line(api, tokens, emulator, **agent)


async def dialled(line: Line, agent: dict[str, Any], to: str = "+14155550123") -> tuple[str, str]:
    """Place a call through the API and run the worker: (Parley's call id, Twilio's call sid)."""
    placed = await place(line.api, line.tenant, agent, to)
    assert placed.status_code == 201, placed.text
    call_id = placed.json()["data"]["id"]
    await drive(line.api, line.tenant.organization_id)
    call = await line.get(f"/v2/calls/{call_id}")
    assert call["status"] == "ringing", call
    return call_id, line.emulator.only_call().sid


# ------------------------------------------------------------------------------------------------ providers


async def test_a_twilio_provider_needs_its_credentials_and_a_public_https_url(api_with: ApiWith,
                                                                              sqlite_url: str) -> None:
    api, _ = await app(api_with, sqlite_url)
    tenant = await api.tenant()
    missing = await api.client.post("/v2/telephony/providers", headers=tenant.headers, json={
        "name": "Twilio", "type": "twilio", "credentials": {"account_sid": "AC1"}})
    assert missing.status_code == 400
    assert "auth_token" in missing.json()["error"]["details"]["validation_errors"]["credentials"]

    bare, _ = await app(api_with, sqlite_url, public=None)
    tenant = await bare.tenant()
    refused = await bare.client.post("/v2/telephony/providers", headers=tenant.headers, json={
        "name": "Twilio", "type": "twilio", "credentials": {"account_sid": "AC1", "auth_token": "t"}})
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "public_url_required"
    plain, _ = await app(api_with, sqlite_url, public="http://parley.example")
    tenant = await plain.tenant()
    refused = await plain.client.post("/v2/telephony/providers", headers=tenant.headers, json={
        "name": "Twilio", "type": "twilio", "credentials": {"account_sid": "AC1", "auth_token": "t"}})
    assert refused.status_code == 409 and "https" in refused.json()["error"]["message"]


async def test_adding_a_twilio_number_points_it_at_parley(api_with: ApiWith, sql_url: str,
                                                          emulator: TwilioEmulator) -> None:
    line, _ = await line_on(api_with, sql_url, emulator)
    owned = emulator.owned[line.number["phone_number"]]
    pid = line.provider["id"]
    assert owned["VoiceUrl"] == f"{PUBLIC}/v2/carriers/{pid}/voice/inbound"
    assert owned["StatusCallback"] == f"{PUBLIC}/v2/carriers/{pid}/voice/status"
    assert owned["SmsUrl"] == f"{PUBLIC}/v2/carriers/{pid}/sms"


# ------------------------------------------------------------------------------------------------ outbound


async def test_an_outbound_call_through_twilio_to_completion(api_with: ApiWith, sql_url: str,
                                                             emulator: TwilioEmulator) -> None:
    line, agent = await line_on(api_with, sql_url, emulator)
    call_id, sid = await dialled(line, agent)
    sent = emulator.requests_to("/Calls.json")[0]
    assert sent["To"] == ["+14155550123"] and sent["From"] == [line.number["phone_number"]]
    assert sent["StatusCallback"] == [f"{PUBLIC}/v2/carriers/{line.provider['id']}/voice/status?call_id={call_id}"]
    assert sent["StatusCallbackEvent"] == ["initiated", "ringing", "answered", "completed"]
    assert "<Connect><Stream url=\"wss://parley.test/v2/media-streams/tok-" in sent["Twiml"][0]
    assert f'<Parameter name="call_id" value="{call_id}"' in sent["Twiml"][0]
    assert sent["MachineDetection"] == ["DetectMessageEnd"] and sent["AsyncAmd"] == ["true"]
    assert line.tokens.issued and next(iter(line.tokens.issued.values()))[0] == call_id

    for step in (emulator.initiate, emulator.ring, emulator.answer):
        assert (await step(sid)).status_code == 204
    call = await line.get(f"/v2/calls/{call_id}")
    assert call["status"] == "in_progress" and call["answered_at"]
    assert (await emulator.complete(sid, duration=37)).status_code == 204
    call = await line.get(f"/v2/calls/{call_id}")
    assert (call["status"], call["end_reason"], call["duration_seconds"]) == ("completed", "hangup", 37)
    log = await line.get(f"/v2/call-logs/{call['call_log_id']}")
    assert log["direction"] == "outbound" and log["status"] == "completed"
    events = events_of(await outbox(line.api, line.tenant.organization_id), call_id)
    assert events == ["call.started", "call.answered", "call.ended", "call.completed"]

    # late and repeated callbacks change nothing, and are still answered 2xx
    assert (await emulator.ring(sid)).status_code == 204
    assert (await emulator.complete(sid, duration=99)).status_code == 204
    assert (await line.get(f"/v2/calls/{call_id}"))["duration_seconds"] == 37
    assert events_of(await outbox(line.api, line.tenant.organization_id), call_id) == events


@pytest.mark.parametrize(("ending", "status"), [("busy", "busy"), ("no_answer", "no_answer")])
async def test_busy_and_no_answer(api_with: ApiWith, sql_url: str, emulator: TwilioEmulator, ending: str,
                                  status: str) -> None:
    line, agent = await line_on(api_with, sql_url, emulator)
    call_id, sid = await dialled(line, agent)
    await emulator.ring(sid)
    await getattr(emulator, ending)(sid)
    call = await line.get(f"/v2/calls/{call_id}")
    assert (call["status"], call["end_reason"], call["duration_seconds"]) == (status, status, 0)
    assert events_of(await outbox(line.api, line.tenant.organization_id), call_id) == [
        "call.started", "call.ended", "call.failed"]


async def test_a_machine_hangs_up_when_the_agent_hangs_up_on_voicemail(api_with: ApiWith, sql_url: str,
                                                                       emulator: TwilioEmulator) -> None:
    line, agent = await line_on(api_with, sql_url, emulator, voicemail={"action": "hangup"})
    call_id, sid = await dialled(line, agent)
    await emulator.answer(sid)
    assert (await emulator.amd(sid, "machine_end_beep")).status_code == 204
    call = await line.get(f"/v2/calls/{call_id}")
    assert (call["status"], call["end_reason"]) == ("voicemail", "voicemail_hangup")
    assert emulator.calls[sid].updates == [{"Status": "completed"}]  # hung up at Twilio
    await emulator.complete(sid, duration=3)
    assert (await line.get(f"/v2/calls/{call_id}"))["status"] == "voicemail"


async def test_a_machine_gets_the_message_when_the_agent_leaves_one(api_with: ApiWith, sql_url: str,
                                                                    emulator: TwilioEmulator) -> None:
    line, agent = await line_on(api_with, sql_url, emulator, voicemail={
        "action": "leave_message", "message": "Please call us back."})
    call_id, sid = await dialled(line, agent)
    await emulator.answer(sid)
    await emulator.amd(sid, "machine_end_beep")
    assert (await line.get(f"/v2/calls/{call_id}"))["status"] == "in_progress"  # the media session speaks
    assert emulator.calls[sid].updates == []
    await emulator.complete(sid, duration=12)
    call = await line.get(f"/v2/calls/{call_id}")
    assert (call["status"], call["end_reason"], call["outcome"], call["duration_seconds"]) == (
        "voicemail", "voicemail_message_left", "voicemail_left", 12)


async def test_cancel_and_the_sweeper_hang_up_at_twilio(api_with: ApiWith, sqlite_url: str,
                                                        emulator: TwilioEmulator) -> None:
    line, agent = await line_on(api_with, sqlite_url, emulator)
    call_id, sid = await dialled(line, agent)
    await emulator.ring(sid)
    cancelled = await line.api.client.post(f"/v2/calls/{call_id}/cancel", headers=line.tenant.headers)
    assert cancelled.status_code == 200 and cancelled.json()["data"]["status"] == "cancelled"
    assert emulator.calls[sid].updates == [{"Status": "completed"}]

    emulator.calls.clear()
    other, sid = await dialled(line, agent, "+14155550124")
    await emulator.answer(sid)
    line.clock.advance(hours=2)
    await drive(line.api, line.tenant.organization_id)
    call = await line.get(f"/v2/calls/{other}")
    assert (call["status"], call["end_reason"]) == ("failed", "timeout")
    assert emulator.calls[sid].updates[-1] == {"Status": "completed"}


async def test_transfer_moves_the_live_call_at_twilio(api_with: ApiWith, sql_url: str,
                                                      emulator: TwilioEmulator) -> None:
    line, agent = await line_on(api_with, sql_url, emulator)
    call_id, sid = await dialled(line, agent)
    await emulator.answer(sid)
    async with line.api.worker()() as unit:
        moved = await (await unit.get(TransferCarrierCall)).execute(TransferCarrierCallCommand(
            line.tenant.organization_id, call_id, "+14155550199"))
        await (await unit.get(UnitOfWork)).commit()
    assert moved.status == "transferred"
    assert emulator.calls[sid].updates[-1]["Twiml"].endswith("<Response><Dial>+14155550199</Dial></Response>")
    call = await line.get(f"/v2/calls/{call_id}")
    assert (call["status"], call["transferred_to"]) == ("transferred", "+14155550199")
    assert events_of(await outbox(line.api, line.tenant.organization_id), call_id)[-2:] == [
        "call.transferred", "call.ended"]


# ------------------------------------------------------------------------------------------ carrier failures


async def test_twilio_down_fails_the_call_with_its_message(api_with: ApiWith, sql_url: str,
                                                           emulator: TwilioEmulator) -> None:
    line, agent = await line_on(api_with, sql_url, emulator)
    emulator.fail_next("calls.create", 503, "Service temporarily unavailable", 20503)
    placed = await place(line.api, line.tenant, agent, "+14155550123")
    await drive(line.api, line.tenant.organization_id)
    call = await line.get(f"/v2/calls/{placed.json()['data']['id']}")
    assert (call["status"], call["end_reason"]) == ("failed", "carrier_error")
    assert call["end_message"] == "Service temporarily unavailable"


async def test_a_dial_without_an_answer_is_reconciled_and_never_repeated(api_with: ApiWith, sql_url: str,
                                                                         emulator: TwilioEmulator) -> None:
    line, agent = await line_on(api_with, sql_url, emulator, request_timeout=SHORT_TIMEOUT)
    emulator.hang_next("calls.create", HANG, create=True)  # Twilio placed it; its answer never came back
    placed = await place(line.api, line.tenant, agent, "+14155550123")
    call_id = placed.json()["data"]["id"]
    await drive(line.api, line.tenant.organization_id)
    assert (await line.get(f"/v2/calls/{call_id}"))["status"] == "ringing"
    sid = emulator.only_call().sid
    await emulator.initiate(sid)  # its status callback names Parley's call: the sid is learnt
    await emulator.answer(sid)
    for _ in range(3):
        line.clock.advance(seconds=61)
        await drive(line.api, line.tenant.organization_id)
    assert len(emulator.requests_to("/Calls.json")) == 1  # never dialled twice
    emulator.calls[sid].status, emulator.calls[sid].duration = "completed", 20
    line.clock.advance(minutes=6)
    await drive(line.api, line.tenant.organization_id)  # no callback came: reconciled with GET Calls/{sid}.json
    call = await line.get(f"/v2/calls/{call_id}")
    assert (call["status"], call["duration_seconds"]) == ("completed", 20)

    emulator.calls.clear()
    emulator.hang_next("calls.create", HANG, create=False)  # Twilio never created it
    placed = await place(line.api, line.tenant, agent, "+14155550124")
    other = placed.json()["data"]["id"]
    await drive(line.api, line.tenant.organization_id)
    line.clock.advance(seconds=61)
    await drive(line.api, line.tenant.organization_id)
    call = await line.get(f"/v2/calls/{other}")
    assert (call["status"], call["end_reason"]) == ("failed", "carrier_error")
    assert len(emulator.requests_to("/Calls.json")) == 2


async def test_a_carrier_call_needs_a_number_of_its_provider(api_with: ApiWith, sqlite_url: str,
                                                             emulator: TwilioEmulator) -> None:
    line, agent = await line_on(api_with, sqlite_url, emulator)
    deleted = await line.api.client.delete(f"/v2/telephony/phone-numbers/{line.number['id']}",
                                           headers=line.tenant.headers)
    assert deleted.status_code == 204
    refused = await place(line.api, line.tenant, agent, "+14155550123")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "no_phone_number"


# ------------------------------------------------------------------------------------------ hostile callbacks


async def test_hostile_callbacks_change_nothing(api_with: ApiWith, sql_url: str, emulator: TwilioEmulator,
                                                caplog: pytest.LogCaptureFixture) -> None:
    line, agent = await line_on(api_with, sql_url, emulator)
    call_id, sid = await dialled(line, agent)
    call = emulator.calls[sid]
    url = call.status_callback or ""
    with caplog.at_level(logging.INFO):
        forged = await emulator.send(url, emulator.status_params(call, "in-progress"), forged=True)
        assert forged.status_code == 403
        unsigned = await emulator.send(url, emulator.status_params(call, "in-progress"), headers={})
        assert unsigned.status_code == 403
        # signed for another URL (another call's): refused
        params = emulator.status_params(call, "completed", CallDuration="5")
        moved = await emulator.send(url, params, headers=emulator.sign(url.replace(call_id, "someone-else"), params))
        assert moved.status_code == 403
        # a signed callback for an unknown call: 2xx, nothing changes
        unknown_url = url.replace(call_id, "00000000-0000-4000-8000-000000000000")
        assert (await emulator.send(unknown_url, emulator.status_params(call, "completed"))).status_code == 204
        # another provider id: refused (its credentials sign nothing here)
        other = url.replace(f"/carriers/{line.provider['id']}/", "/carriers/999999/")
        assert (await emulator.send(other, emulator.status_params(call, "completed"))).status_code == 403
        # a huge body: refused before anything is read
        huge = await line.api.client.post(url.removeprefix(PUBLIC), content=b"A=" + b"x" * 70_000,
                                          headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert huge.status_code == 413
    assert (await line.get(f"/v2/calls/{call_id}"))["status"] == "ringing"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]

    await emulator.answer(sid)
    replay_params = emulator.status_params(call, "completed", CallDuration="30")
    await emulator.send(url, replay_params)
    await emulator.send(url, replay_params)  # the same callback again
    await emulator.send(url, emulator.status_params(call, "ringing"))  # late
    final = await line.get(f"/v2/calls/{call_id}")
    assert (final["status"], final["duration_seconds"]) == ("completed", 30)
    assert events_of(await outbox(line.api, line.tenant.organization_id), call_id).count("call.ended") == 1


# ------------------------------------------------------------------------------------------------ inbound


async def test_an_inbound_call_reaches_the_numbers_agent(api_with: ApiWith, sql_url: str,
                                                         emulator: TwilioEmulator) -> None:
    line, agent = await line_on(api_with, sql_url, emulator)
    _, turned_away = await emulator.inbound_call("+14155550142", line.number["phone_number"])
    assert turned_away.status_code == 200 and '<Reject reason="busy" />' in turned_away.text

    patched = await line.api.client.patch(f"/v2/telephony/phone-numbers/{line.number['id']}",
                                          headers=line.tenant.headers, json={"inbound_agent_id": agent["id"]})
    assert patched.status_code == 200, patched.text
    assert len([p for p in emulator.requests_to(".json") if "VoiceUrl" in p]) == 2  # pointed at Parley again
    call, answered = await emulator.inbound_call("+14155550142", line.number["phone_number"])
    assert answered.status_code == 200 and answered.headers["content-type"].startswith("text/xml")
    assert '<Connect><Stream url="wss://parley.test/v2/media-streams/tok-' in answered.text
    assert '<Parameter name="direction" value="inbound" />' in answered.text  # the session's direction
    calls = (await line.api.client.get("/v2/calls", headers=line.tenant.headers)).json()["data"]
    inbound = [c for c in calls if c["direction"] == "inbound"]
    assert len(inbound) == 1
    assert (inbound[0]["status"], inbound[0]["from_phone"], inbound[0]["destination_phone"]) == (
        "in_progress", "+14155550142", line.number["phone_number"])
    assert inbound[0]["agent_version"] == 1

    await emulator.complete(call.sid, duration=15)  # the number's status callback
    ended = await line.get(f"/v2/calls/{inbound[0]['id']}")
    assert (ended["status"], ended["duration_seconds"]) == ("completed", 15)
    log = await line.get(f"/v2/call-logs/{ended['call_log_id']}")
    assert log["direction"] == "inbound"


# ------------------------------------------------------------------------------------------------ SMS


async def test_sms_through_twilio_with_receipts(api_with: ApiWith, sql_url: str, emulator: TwilioEmulator) -> None:
    line, _ = await line_on(api_with, sql_url, emulator)
    sent = await line.api.client.post("/v2/sms", headers=line.tenant.headers, json={
        "to": "+14155550123", "body": "Your appointment is at 3 pm."})
    assert sent.status_code == 201, sent.text
    message = sent.json()["data"]
    sid, stored = next(iter(emulator.messages.items()))
    assert stored["From"] == line.number["phone_number"] and stored["Body"] == "Your appointment is at 3 pm."
    assert stored["StatusCallback"] == f"{PUBLIC}/v2/carriers/{line.provider['id']}/sms"
    assert (await emulator.sms_status(sid, "sent")).status_code == 204
    assert (await emulator.sms_status(sid, "delivered")).status_code == 204
    assert (await emulator.sms_status(sid, "sent")).status_code == 204  # late: nothing moves back
    got = await line.get(f"/v2/sms/{message['id']}")
    assert got["status"] == "delivered"
    events = await outbox(line.api, line.tenant.organization_id, "sms.")
    assert [kind for kind, _ in events] == ["sms.sent", "sms.delivered"]

    emulator.fail_next("messages.create", 400, "The 'To' number is not a valid phone number.", 21211)
    refused = await line.api.client.post("/v2/sms", headers=line.tenant.headers, json={
        "to": "+14155550124", "body": "Hello"})
    assert refused.status_code == 201 and refused.json()["data"]["status"] == "failed"
    assert refused.json()["data"]["error_code"] == "21211"


async def test_inbound_stop_reaches_the_opt_out_list(api_with: ApiWith, sql_url: str,
                                                     emulator: TwilioEmulator) -> None:
    line, _ = await line_on(api_with, sql_url, emulator)
    response = await emulator.inbound_sms("+14155550166", line.number["phone_number"], "STOP")
    assert response.status_code == 204
    again = emulator.delivered[-1]
    await emulator.send(again[0], again[1])  # Twilio retries: kept once
    received = (await line.api.client.get("/v2/sms?direction=inbound", headers=line.tenant.headers)).json()
    assert received["meta"]["total"] == 1 and received["data"][0]["body"] == "STOP"
    refused = await line.api.client.post("/v2/sms", headers=line.tenant.headers, json={
        "to": "+14155550166", "body": "Hello again"})
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "recipient_opted_out"
    await emulator.inbound_sms("+14155550166", line.number["phone_number"], "START")
    allowed = await line.api.client.post("/v2/sms", headers=line.tenant.headers, json={
        "to": "+14155550166", "body": "Welcome back"})
    assert allowed.status_code == 201


# ------------------------------------------------------------------------------------------------ numbers


async def test_search_buy_and_release_a_number(api_with: ApiWith, sql_url: str, emulator: TwilioEmulator) -> None:
    line, agent = await line_on(api_with, sql_url, emulator)
    pid = line.provider["id"]
    found = await line.get(f"/v2/telephony/providers/{pid}/available-numbers?country=US&area_code=415")
    assert [n["phone_number"] for n in found] == ["+14155550101", "+14155550177"]
    assert found[0]["locality"] == "San Francisco" and found[0]["capabilities"] == {"voice": True, "sms": True}

    bought = await line.api.client.post("/v2/telephony/phone-numbers", headers=line.tenant.headers, json={
        "phone_number": "+14155550177", "provider_id": pid, "purchase": True, "inbound_agent_id": agent["id"]})
    assert bought.status_code == 201, bought.text
    assert emulator.owned["+14155550177"]["VoiceUrl"] == f"{PUBLIC}/v2/carriers/{pid}/voice/inbound"

    not_for_sale = calls_support.unique_phone()
    taken = await line.api.client.post("/v2/telephony/phone-numbers", headers=line.tenant.headers, json={
        "phone_number": not_for_sale, "provider_id": pid, "purchase": True})
    assert taken.status_code == 502 and taken.json()["error"]["code"] == "carrier_error"
    assert "is not available" in taken.json()["error"]["message"]
    numbers = await line.get("/v2/telephony/phone-numbers")
    assert not_for_sale not in [n["phone_number"] for n in numbers]

    released = await line.api.client.delete(f"/v2/telephony/phone-numbers/{bought.json()['data']['id']}?release=true",
                                            headers=line.tenant.headers)
    assert released.status_code == 204
    assert "+14155550177" not in emulator.owned

    simulator = next(p for p in await line.get("/v2/telephony/providers") if p["type"] == "simulator")
    refused = await line.api.client.get(f"/v2/telephony/providers/{simulator['id']}/available-numbers",
                                        headers=line.tenant.headers)
    assert refused.status_code == 400


async def test_a_campaign_calls_through_twilio_from_its_own_number(api_with: ApiWith, sql_url: str,
                                                                   emulator: TwilioEmulator) -> None:
    from tests.http import dialer_support

    line, agent = await line_on(api_with, sql_url, emulator)
    second = calls_support.unique_phone()  # held until the run ends: no number another test buys
    emulator.own(second)
    number = await line.api.client.post("/v2/telephony/phone-numbers", headers=line.tenant.headers, json={
        "phone_number": second, "provider_id": line.provider["id"]})
    assert number.status_code == 201, number.text
    try:
        campaign = await dialer_support.campaign(
            line.api, line.tenant, [{"phone": "+14155550123", "name": "Ada"}], agent_id=agent["id"],
            from_phone_number_id=number.json()["data"]["id"], timezone_mode="campaign")
        await dialer_support.tick(line.api, seconds=1)
        sent = emulator.requests_to("/Calls.json")
        assert len(sent) == 1 and sent[0]["From"] == [second] and sent[0]["To"] == ["+14155550123"]
        sid = emulator.only_call().sid
        await emulator.answer(sid)
        await emulator.complete(sid, duration=25)
        await dialer_support.tick(line.api, seconds=1)
        calls = await dialer_support.campaign_calls(line.api, line.tenant, campaign["id"])
        assert [(c["status"], c["from_phone"]) for c in calls] == [("completed", second)]
    finally:
        await dialer_support.close_workers()
