"""Telnyx calls end to end, on SQLite and PostgreSQL: the API places a call, the worker dials the Telnyx emulator
(``POST /v2/calls``), the emulator's signed webhooks drive the call to its end through the carrier routes; busy,
no answer, voicemail by answering-machine detection, a carrier that refuses, is down or never answers (reconciled,
never dialled twice), an inbound call answered by its number's agent or turned away, and hostile webhooks."""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from application.carrier_calls import TransferCarrierCall, TransferCarrierCallCommand
from application.ports.platform import UnitOfWork
from entrypoints.runtime import QUIET_LOGGERS, configure_logging
from tests.e2e.telnyx_support import PUBLIC, Telnyx, telnyx, telnyx_world  # noqa: F401  (the fixture)
from tests.http.calls_support import events_of, outbox
from tests.support.apps import AppPool

# end to end through a carrier's protocol (make test runs it; make test-fast leaves it out)
pytestmark = pytest.mark.slow

SHORT_DEADLINE = 1.0
"""Parley's deadline for a request to Telnyx in the tests whose emulator hangs one on purpose: each hung request
costs its test the deadline in real time (the emulator, on 127.0.0.1, answers the others well within it)."""


@pytest.fixture
async def hasty(tmp_root: Path, app_pool: AppPool, sql_url: str) -> AsyncIterator[Telnyx]:
    async for world in telnyx_world(tmp_root, app_pool, sql_url, carrier_timeout=SHORT_DEADLINE):
        yield world


async def dialled(world: Telnyx) -> str:
    """Run the worker's dial pass; the call Telnyx was asked for."""
    before = sum(1 for c in world.emulator.calls.values() if c.direction == "outgoing")
    await world.drive()
    call = await world.emulator.wait_for_call(count=before + 1, timeout=5)
    return call.call_control_id


async def events(world: Telnyx, call_id: str) -> list[str]:
    return events_of(await outbox(world.api, world.tenant.organization_id), call_id)


async def test_an_outbound_call_to_completion(telnyx: Telnyx) -> None:  # noqa: F811
    agent = await telnyx.agent()
    call_id = await telnyx.place(agent, "+14155550142")
    ccid = await dialled(telnyx)
    call = telnyx.emulator.calls[ccid]
    assert (call.from_phone, call.to_phone) == (telnyx.number, "+14155550142")
    assert call.webhook_url == f"{PUBLIC}/v2/carriers/{telnyx.provider['id']}/voice/status?call_id={call_id}"
    assert call.stream_url == f"wss://parley.example/v2/media-streams/tok-{call_id}"
    assert (call.stream_mode, call.stream_codec, call.stream_track) == ("rtp", "PCMU", "both_tracks")
    assert (await telnyx.call(call_id))["status"] == "ringing"
    assert (await telnyx.emulator.ring(ccid)).status == 204
    telnyx.clock.advance(seconds=3)
    answered = await telnyx.emulator.answer(ccid)  # answered, streaming started, a human by AMD
    assert [d.status for d in answered] == [204] * 3
    assert (await telnyx.call(call_id))["status"] == "in_progress"
    telnyx.clock.advance(seconds=42)
    assert (await telnyx.emulator.hangup(ccid)).status == 204
    ended = await telnyx.call(call_id)
    assert (ended["status"], ended["end_reason"], ended["duration_seconds"]) == ("completed", "hangup", 42)
    assert await events(telnyx, call_id) == ["call.started", "call.answered", "call.ended", "call.completed"]


@pytest.mark.parametrize(("ending", "status", "end_reason"), [
    ("busy", "busy", "busy"), ("no_answer", "no_answer", "no_answer"), ("rejected", "busy", "busy"),
    ("unreachable", "failed", "carrier_error")])
async def test_an_outbound_call_that_is_not_answered(telnyx: Telnyx, ending: str, status: str,  # noqa: F811
                                                     end_reason: str) -> None:
    call_id = await telnyx.place(await telnyx.agent())
    ccid = await dialled(telnyx)
    await telnyx.emulator.ring(ccid)
    telnyx.clock.advance(seconds=25)
    assert (await getattr(telnyx.emulator, ending)(ccid)).status == 204
    ended = await telnyx.call(call_id)
    assert (ended["status"], ended["end_reason"], ended["duration_seconds"]) == (status, end_reason, 0)
    if status == "failed":
        assert ended["end_message"] == "Telnyx ended the call: not_found (SIP 404)"


async def test_a_machine_answers_and_the_agent_hangs_up_as_its_voicemail_action_says(
        telnyx: Telnyx) -> None:  # noqa: F811
    agent = await telnyx.agent(voicemail={"action": "hangup"})
    call_id = await telnyx.place(agent)
    ccid = await dialled(telnyx)
    assert telnyx.emulator.calls[ccid].amd == "detect"
    telnyx.clock.advance(seconds=5)
    await telnyx.emulator.answer(ccid, answered_by="machine")
    ended = await telnyx.call(call_id)
    assert (ended["status"], ended["end_reason"]) == ("voicemail", "voicemail_hangup")
    assert [name for name, _ in telnyx.emulator.calls[ccid].commands] == ["hangup"]
    assert (await telnyx.emulator.hangup(ccid, source="caller")).status == 204  # Telnyx confirms: nothing moves
    assert (await telnyx.call(call_id))["status"] == "voicemail"


async def test_a_carrier_that_refuses_or_is_down_fails_the_call_with_its_words(
        telnyx: Telnyx) -> None:  # noqa: F811
    agent = await telnyx.agent()
    telnyx.emulator.fail("POST", "/v2/calls", 503, detail="Call Control is temporarily unavailable.")
    refused = await telnyx.place(agent)
    await telnyx.drive()
    call = await telnyx.call(refused)
    assert (call["status"], call["end_reason"], call["end_message"]) == (
        "failed", "carrier_error", "Call Control is temporarily unavailable.")
    await telnyx.emulator.close()  # Telnyx is down: nothing answers
    down = await telnyx.place(agent)
    await telnyx.drive()
    call = await telnyx.call(down)
    assert (call["status"], call["end_reason"]) == ("failed", "carrier_error")
    assert "could not be reached" in call["end_message"]


async def test_a_dial_without_an_answer_is_reconciled_never_repeated(hasty: Telnyx) -> None:
    call_id = await hasty.place(await hasty.agent())
    hasty.emulator.hang("POST", "/v2/calls", effect=True)  # Telnyx places the call; its answer is lost
    await hasty.drive()
    assert (await hasty.call(call_id))["status"] == "ringing"
    (placed,) = hasty.emulator.calls.values()
    hasty.clock.advance(seconds=61)
    await hasty.drive()  # asks Telnyx for its active calls and finds the one carrying this call's client_state
    assert hasty.emulator.on("GET", f"/v2/connections/{hasty.emulator.connection_id}/active_calls")
    assert hasty.emulator.on("GET", f"/v2/calls/{placed.call_control_id}")
    assert (await hasty.call(call_id))["status"] == "ringing"
    await hasty.emulator.answer(placed.call_control_id)
    assert (await hasty.call(call_id))["status"] == "in_progress"
    hasty.clock.advance(seconds=30)
    await hasty.emulator.hangup(placed.call_control_id)
    ended = await hasty.call(call_id)
    assert (ended["status"], ended["duration_seconds"]) == ("completed", 30)
    assert len(hasty.emulator.on("POST", "/v2/calls")) == 1


async def test_a_dial_the_carrier_never_made_fails_on_reconciliation(hasty: Telnyx) -> None:
    call_id = await hasty.place(await hasty.agent())
    hasty.emulator.hang("POST", "/v2/calls")  # lost before Telnyx did anything
    await hasty.drive()
    hasty.clock.advance(seconds=61)
    await hasty.drive()
    call = await hasty.call(call_id)
    assert (call["status"], call["end_reason"]) == ("failed", "carrier_error")
    assert len(hasty.emulator.on("POST", "/v2/calls")) == 1 and hasty.emulator.calls == {}


async def test_hostile_webhooks_change_nothing(telnyx: Telnyx, caplog: pytest.LogCaptureFixture) -> None:  # noqa: F811
    caplog.set_level(logging.INFO)
    call_id = await telnyx.place(await telnyx.agent())
    ccid = await dialled(telnyx)
    emulator, call = telnyx.emulator, telnyx.emulator.calls[ccid]
    url = call.webhook_url or ""
    payload = emulator.call_payload(call, state="answered")
    assert (await emulator.send(url, "call.answered", payload, key=Ed25519PrivateKey.generate())).status == 403
    stale = int(telnyx.clock.now().timestamp()) - 301
    assert (await emulator.send(url, "call.answered", payload, timestamp=stale)).status == 403
    assert (await emulator.send(url, "call.answered", payload, tamper=True)).status == 403
    unsigned = await emulator.send(url, "call.answered", payload)
    assert (await telnyx.api.client.post(url.removeprefix(PUBLIC), content=unsigned.body,
                                         headers={"content-type": "application/json"})).status_code == 403
    other_provider = url.replace(f"/carriers/{telnyx.provider['id']}/", "/carriers/999999/")
    assert (await emulator.send(other_provider, "call.answered", payload)).status == 403
    assert (await telnyx.call(call_id))["status"] == "in_progress"  # only the genuine one, sent just above
    unknown = {**payload, "call_control_id": "v3:nobody", "client_state": None}
    assert (await emulator.send(f"{PUBLIC}/v2/carriers/{telnyx.provider['id']}/voice/status", "call.hangup",
                                {**unknown, "hangup_cause": "normal_clearing"})).status == 204
    telnyx.clock.advance(seconds=20)
    hangup = await emulator.hangup(ccid)
    ended = await telnyx.call(call_id)
    assert (ended["status"], ended["duration_seconds"]) == ("completed", 20)
    assert (await emulator.redeliver(hangup)).status == 204  # a replay
    assert (await emulator.initiated(ccid)).status == 204  # late news
    assert (await emulator.send(url, "call.answered", payload)).status == 204
    assert await telnyx.call(call_id) == ended
    assert await events(telnyx, call_id) == ["call.started", "call.answered", "call.ended", "call.completed"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_an_inbound_call_is_answered_by_its_numbers_agent(telnyx: Telnyx) -> None:  # noqa: F811
    agent = await telnyx.agent()
    numbers = await telnyx.get("/v2/telephony/phone-numbers")
    number = next(n for n in numbers if n["phone_number"] == telnyx.number)
    patched = await telnyx.api.client.patch(f"/v2/telephony/phone-numbers/{number['id']}", headers=telnyx.headers,
                                            json={"inbound_agent_id": agent["id"]})
    assert patched.status_code == 200, patched.text
    assert telnyx.emulator.application["webhook_event_url"] == (
        f"{PUBLIC}/v2/carriers/{telnyx.provider['id']}/voice/inbound")
    call, delivery = await telnyx.emulator.inbound_call("+14155550111", telnyx.number)
    assert delivery.status == 200
    assert [name for name, _ in call.commands] == ["answer"]
    calls = await telnyx.get("/v2/calls")
    (taken,) = [c for c in calls if c["direction"] == "inbound"]
    assert (taken["status"], taken["from_phone"], taken["destination_phone"]) == (
        "in_progress", "+14155550111", telnyx.number)
    assert call.webhook_url == (
        f"{PUBLIC}/v2/carriers/{telnyx.provider['id']}/voice/status?call_id={taken['id']}")
    assert call.stream_url == f"wss://parley.example/v2/media-streams/tok-{taken['id']}?direction=inbound"
    await telnyx.emulator.answer(call.call_control_id)
    telnyx.clock.advance(seconds=12)
    await telnyx.emulator.hangup(call.call_control_id, source="caller")
    ended = await telnyx.call(taken["id"])
    assert (ended["status"], ended["direction"], ended["duration_seconds"]) == ("completed", "inbound", 12)


async def test_an_inbound_call_no_agent_answers_is_turned_away_busy(telnyx: Telnyx) -> None:  # noqa: F811
    call, delivery = await telnyx.emulator.inbound_call("+14155550112", telnyx.number)
    assert delivery.status == 200
    assert [(name, body.get("cause")) for name, body in call.commands] == [("reject", "USER_BUSY")]
    assert not call.alive
    assert [c for c in await telnyx.get("/v2/calls") if c["direction"] == "inbound"] == []


async def test_a_machine_gets_the_message_when_the_agent_leaves_one(telnyx: Telnyx) -> None:  # noqa: F811
    agent = await telnyx.agent(voicemail={"action": "leave_message", "message": "Please call us back."})
    call_id = await telnyx.place(agent)
    ccid = await dialled(telnyx)
    assert telnyx.emulator.calls[ccid].amd == "detect"
    await telnyx.emulator.answer(ccid, answered_by="machine")
    assert (await telnyx.call(call_id))["status"] == "in_progress"  # the media session speaks
    assert telnyx.emulator.calls[ccid].commands == []
    telnyx.clock.advance(seconds=12)
    await telnyx.emulator.hangup(ccid)
    call = await telnyx.call(call_id)
    assert (call["status"], call["end_reason"], call["outcome"], call["duration_seconds"]) == (
        "voicemail", "voicemail_message_left", "voicemail_left", 12)


async def test_cancel_and_the_sweeper_hang_up_at_telnyx(telnyx: Telnyx) -> None:  # noqa: F811
    agent = await telnyx.agent()
    call_id = await telnyx.place(agent)
    ccid = await dialled(telnyx)
    await telnyx.emulator.ring(ccid)
    cancelled = await telnyx.api.client.post(f"/v2/calls/{call_id}/cancel", headers=telnyx.headers)
    assert cancelled.status_code == 200 and cancelled.json()["data"]["status"] == "cancelled"
    assert [name for name, _ in telnyx.emulator.calls[ccid].commands] == ["hangup"]
    assert (await telnyx.emulator.hangup(ccid, cause="originator_cancel", sip="487")).status == 204
    assert (await telnyx.call(call_id))["status"] == "cancelled"

    other = await telnyx.place(agent)
    ccid = await dialled(telnyx)
    await telnyx.emulator.answer(ccid)
    telnyx.clock.advance(hours=2)
    await telnyx.drive()
    call = await telnyx.call(other)
    assert (call["status"], call["end_reason"]) == ("failed", "timeout")
    assert [name for name, _ in telnyx.emulator.calls[ccid].commands] == ["hangup"]


async def test_transfer_moves_the_live_call_at_telnyx(telnyx: Telnyx) -> None:  # noqa: F811
    call_id = await telnyx.place(await telnyx.agent())
    ccid = await dialled(telnyx)
    await telnyx.emulator.answer(ccid)
    async with telnyx.api.worker()() as unit:
        moved = await (await unit.get(TransferCarrierCall)).execute(TransferCarrierCallCommand(
            telnyx.tenant.organization_id, call_id, "+14155550199"))
        await (await unit.get(UnitOfWork)).commit()
    assert moved.status == "transferred"
    assert telnyx.emulator.calls[ccid].transferred_to == ["+14155550199"]
    call = await telnyx.call(call_id)
    assert (call["status"], call["transferred_to"]) == ("transferred", "+14155550199")
    assert (await events(telnyx, call_id))[-2:] == ["call.transferred", "call.ended"]


async def test_a_call_whose_hangup_webhook_was_lost_is_read_from_telnyx(telnyx: Telnyx) -> None:  # noqa: F811
    call_id = await telnyx.place(await telnyx.agent())
    ccid = await dialled(telnyx)
    await telnyx.emulator.answer(ccid)
    telnyx.clock.advance(seconds=50)
    await telnyx.emulator.hangup(ccid, lost=True)
    telnyx.clock.advance(minutes=6)
    await telnyx.drive()  # nothing heard for a while: GET /v2/calls/{id} and the leg's event log
    call = await telnyx.call(call_id)
    assert (call["status"], call["end_reason"], call["duration_seconds"]) == ("completed", "hangup", 50)


async def test_a_telnyx_provider_needs_its_four_credentials(telnyx: Telnyx) -> None:  # noqa: F811
    missing = await telnyx.api.client.post("/v2/telephony/providers", headers=telnyx.headers, json={
        "name": "Telnyx 2", "type": "telnyx", "credentials": {"api_key": "KEY1", "public_key": "abc"}})
    assert missing.status_code == 400
    said = missing.json()["error"]["details"]["validation_errors"]["credentials"]
    assert "connection_id" in said and "messaging_profile_id" in said


@contextlib.contextmanager
def json_logs() -> Iterator[io.StringIO]:
    """The logging `parley serve` sets up (JSON lines), at DEBUG, written to a buffer."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level, {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
    stream = io.StringIO()
    configure_logging("DEBUG", "json", stream)
    try:
        yield stream
    finally:
        root.handlers[:], level, quiet = saved
        root.setLevel(level)
        for name, value in quiet.items():
            logging.getLogger(name).setLevel(value)


async def test_telnyx_keys_and_signatures_never_reach_the_logs(telnyx: Telnyx) -> None:  # noqa: F811
    """The API key, and the signature of every webhook (good, forged or stale), appear in no log line while a call is
    dialled, its webhooks received, a carrier error met and a text sent."""
    emulator = telnyx.emulator
    with json_logs() as logs:
        agent = await telnyx.agent()
        call_id = await telnyx.place(agent)
        ccid = await dialled(telnyx)
        deliveries = [await emulator.ring(ccid), *await emulator.answer(ccid), await emulator.hangup(ccid)]
        url = emulator.calls[ccid].webhook_url or ""
        payload = emulator.call_payload(emulator.calls[ccid])
        deliveries.append(await emulator.send(url, "call.answered", payload, key=Ed25519PrivateKey.generate()))
        deliveries.append(await emulator.send(url, "call.answered", payload, timestamp=1_600_000_000))
        emulator.fail("POST", "/v2/calls", 401, code="10009", title="Authentication failed",
                      detail="Could not understand the provided credentials.")
        await telnyx.place(agent)
        await telnyx.drive()
        sent = await telnyx.api.client.post("/v2/sms", headers=telnyx.headers,
                                            json={"to": "+14155550123", "body": "Hi"})
        assert sent.status_code == 201
    assert (await telnyx.call(call_id))["status"] == "completed"
    assert [d.status for d in deliveries[-2:]] == [403, 403]
    text = logs.getvalue()
    assert text, "the run logged"
    for secret in (emulator.api_key, *(d.headers["telnyx-signature-ed25519"] for d in deliveries)):
        assert secret not in text, secret


async def test_a_campaign_calls_through_telnyx_from_its_own_number(telnyx: Telnyx) -> None:  # noqa: F811
    from tests.http import dialer_support

    second = "+14155550178"
    bought = await telnyx.api.client.post("/v2/telephony/phone-numbers", headers=telnyx.headers, json={
        "phone_number": second, "provider_id": telnyx.provider["id"], "purchase": True})
    assert bought.status_code == 201, bought.text
    agent = await telnyx.agent()
    try:
        campaign = await dialer_support.campaign(
            telnyx.api, telnyx.tenant, [{"phone": "+14155550123", "name": "Ada"}], agent_id=agent["id"],
            from_phone_number_id=bought.json()["data"]["id"], timezone_mode="campaign")
        await dialer_support.tick(telnyx.api, seconds=1)
        (call,) = telnyx.emulator.calls.values()
        assert (call.from_phone, call.to_phone) == (second, "+14155550123")
        await telnyx.emulator.answer(call.call_control_id)
        telnyx.clock.advance(seconds=25)
        await telnyx.emulator.hangup(call.call_control_id)
        await dialer_support.tick(telnyx.api, seconds=1)
        calls = await dialer_support.campaign_calls(telnyx.api, telnyx.tenant, campaign["id"])
        assert [(c["status"], c["from_phone"], c["duration_seconds"]) for c in calls] == [
            ("completed", second, 25)]
    finally:
        await dialer_support.close_workers()
