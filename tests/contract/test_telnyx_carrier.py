"""The Telnyx carrier adapter against the Telnyx emulator, through the real egress (HttpxSafeHttp, loopback allowed):
every Carrier method, webhook verification (Ed25519 over ``timestamp|body`` in a 5-minute window), every webhook
read onto Parley's values, Telnyx's errors and silences mapped onto CarrierError / CarrierAmbiguous, and the whole
webhook flow over real HTTP to a receiver standing in for Parley."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from adapters.carriers.telnyx import TelnyxCarrier, call_id_from_client_state, client_state
from adapters.egress import HttpxSafeHttp
from adapters.memory.clock import ManualClock
from application.ports.carriers import (
    CallbackUrls,
    CarrierAccount,
    CarrierAmbiguous,
    CarrierDial,
    CarrierError,
    InboundCall,
    InboundSms,
    NumberUrls,
    SmsReceipt,
    VoiceUpdate,
    WebhookReply,
    WebhookRequest,
)
from application.ports.egress import ResolutionFailed
from tests.support.emulators.telnyx import OwnedNumber, TelnyxEmulator, public_key_of
from tests.support.receiver import Receiver

START = datetime(2026, 3, 2, 14, 0, tzinfo=UTC)
URLS = CallbackUrls(status_url="https://parley.example/v2/carriers/telnyx/7/voice/call_1",
                    stream_url="wss://parley.example/v2/media-streams/tok_abc")
NUMBER_URLS = NumberUrls(voice_url="https://parley.example/v2/carriers/telnyx/7/voice",
                         voice_status_url="https://parley.example/v2/carriers/telnyx/7/status",
                         sms_url="https://parley.example/v2/carriers/telnyx/7/sms")
CALLER, CALLEE, OURS = "+14155550100", "+14155550199", "+14155550123"


class NoDns:
    async def resolve(self, host: str, port: int) -> list[str]:
        raise ResolutionFailed(host)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


async def nowhere(url: str, headers: dict[str, str], body: bytes) -> int:
    return 200


@pytest.fixture
async def telnyx(clock: ManualClock) -> AsyncIterator[TelnyxEmulator]:
    """The emulator; its webhooks go nowhere unless a test gives it a receiver (``telnyx.deliver = None``)."""
    async with TelnyxEmulator(now=clock.now, deliver=nowhere) as emulator:
        yield emulator


@pytest.fixture
def http() -> HttpxSafeHttp:
    return HttpxSafeHttp(NoDns(), allow_loopback=True, user_agent="ParleyTest/1.0")


@pytest.fixture
def carrier(http: HttpxSafeHttp) -> TelnyxCarrier:
    return TelnyxCarrier(http, timeout=10.0)


@pytest.fixture
def impatient(http: HttpxSafeHttp) -> TelnyxCarrier:
    """The carrier (its kept-alive connections too) giving up after 0.25 s: only for a request the emulator is told
    to leave unanswered (the others keep a timeout a busy machine cannot reach)."""
    return TelnyxCarrier(http, timeout=0.25)


@pytest.fixture
def account(telnyx: TelnyxEmulator) -> CarrierAccount:
    return CarrierAccount(7, 1, "telnyx", telnyx.credentials(), telnyx.base_url)


def a_dial(call_id: str = "call_1", *, amd: bool = True, limit: int = 600) -> CarrierDial:
    return CarrierDial(call_id, OURS, CALLEE, URLS, amd, limit)


def webhook(telnyx: TelnyxEmulator, event_type: str, payload: dict[str, object], **signing: object) -> WebhookRequest:
    """A signed webhook as Parley receives it, without the network."""
    body = telnyx.event(event_type, payload, event_id=str(signing.pop("event_id", "ev_1")))
    headers = telnyx.signed_headers(body, **signing)  # type: ignore[arg-type]
    return WebhookRequest(URLS.status_url, headers, body)


def call_payload(**extra: object) -> dict[str, object]:
    payload: dict[str, object] = {"call_control_id": "v3:abc", "call_leg_id": "leg", "call_session_id": "sess",
                                  "from": OURS, "to": CALLEE, "direction": "outgoing"}
    payload.update(extra)
    return payload


# -- dialling ------------------------------------------------------------------------------------------------------


async def test_dial_asks_for_the_bidirectional_stream_and_machine_detection(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, account: CarrierAccount) -> None:
    ref = await carrier.dial(account, a_dial("call_42"))
    call = telnyx.calls[ref.carrier_call_id]
    (request,) = telnyx.on("POST", "/v2/calls")
    assert request.headers["authorization"] == f"Bearer {telnyx.api_key}"
    assert request.headers["content-type"] == "application/json"
    sent = request.json
    assert sent["connection_id"] == telnyx.connection_id
    assert (sent["from"], sent["to"]) == (OURS, CALLEE)
    assert sent["webhook_url"] == URLS.status_url
    assert (call.stream_url, call.stream_track, call.stream_mode, call.stream_codec) == (
        URLS.stream_url, "both_tracks", "rtp", "PCMU")
    assert call.amd == "detect"
    assert call.time_limit_secs == 600
    assert call_id_from_client_state(call.client_state) == "call_42"
    assert base64.b64decode(sent["client_state"]) == b"parley:call_42"


@pytest.mark.parametrize(("limit", "sent"), [(5, 30), (600, 600), (99_999, 14_400)])
async def test_dial_keeps_the_time_limit_within_telnyx_bounds_and_amd_off_unless_asked(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, account: CarrierAccount, limit: int, sent: int) -> None:
    ref = await carrier.dial(account, a_dial(amd=False, limit=limit))
    call = telnyx.calls[ref.carrier_call_id]
    assert (call.amd, call.time_limit_secs) == ("disabled", sent)


async def test_a_refused_dial_is_a_carrier_error_in_telnyx_words(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, account: CarrierAccount) -> None:
    with pytest.raises(CarrierError) as refused:
        await carrier.dial(account, CarrierDial("call_1", OURS, "4155550199", URLS, False, 60))
    assert refused.value.message == "The destination number is not in E.164 format."
    assert (refused.value.status, refused.value.code) == (422, "90015")
    assert telnyx.calls == {}


async def test_a_5xx_is_a_carrier_error_with_the_detail_or_the_status(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, account: CarrierAccount) -> None:
    telnyx.fail("POST", "/v2/calls", 503, detail="Service temporarily unavailable, try later.")
    with pytest.raises(CarrierError) as first:
        await carrier.dial(account, a_dial())
    assert (first.value.message, first.value.status) == ("Service temporarily unavailable, try later.", 503)
    telnyx.fail("POST", "/v2/calls", 502, detail="")
    with pytest.raises(CarrierError) as second:
        await carrier.dial(account, a_dial())
    assert (second.value.message, second.value.status) == ("Telnyx answered HTTP 502", 502)


async def test_a_wrong_api_key_is_a_carrier_error(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, account: CarrierAccount) -> None:
    wrong = CarrierAccount(7, 1, "telnyx", {**telnyx.credentials(), "api_key": "KEYnope"}, telnyx.base_url)
    with pytest.raises(CarrierError) as refused:
        await carrier.dial(wrong, a_dial())
    assert (refused.value.status, refused.value.code) == (401, "10009")
    assert refused.value.message == "Could not understand the provided credentials."


async def test_a_dial_whose_answer_is_lost_is_ambiguous_and_found_again_by_its_client_state(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, impatient: TelnyxCarrier, account: CarrierAccount) -> None:
    await carrier.dial(account, a_dial("call_other"))  # another live call on the connection
    telnyx.hang("POST", "/v2/calls", effect=True)
    with pytest.raises(CarrierAmbiguous):
        await impatient.dial(account, a_dial("call_lost"))
    lost = next(c for c in telnyx.calls.values() if call_id_from_client_state(c.client_state) == "call_lost")
    found = await carrier.find_call(account, "call_lost", None)
    assert found is not None
    assert (found.carrier_call_id, found.state) == (lost.call_control_id, "initiated")
    assert len(telnyx.on("POST", "/v2/calls")) == 2  # reconciled by asking, never dialled again
    assert await carrier.find_call(account, "call_never_made", None) is None


async def test_a_carrier_that_is_down_is_a_carrier_error_not_an_ambiguity(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier) -> None:
    port = telnyx.port
    await telnyx.close()
    down = CarrierAccount(7, 1, "telnyx", telnyx.credentials(), f"http://127.0.0.1:{port}")
    with pytest.raises(CarrierError) as refused:
        await carrier.dial(down, a_dial())
    assert "could not be reached" in refused.value.message


async def test_an_api_address_that_is_not_public_is_a_carrier_error(telnyx: TelnyxEmulator) -> None:
    strict = TelnyxCarrier(HttpxSafeHttp(NoDns(), allow_loopback=False, user_agent="t"), timeout=1.0)
    account = CarrierAccount(7, 1, "telnyx", telnyx.credentials(), telnyx.base_url)
    with pytest.raises(CarrierError) as refused:
        await strict.dial(account, a_dial())
    assert "not allowed" in refused.value.message
    assert telnyx.requests == []


# -- the call's life -----------------------------------------------------------------------------------------------


async def test_find_call_reads_a_live_call_from_its_status_and_event_log(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, account: CarrierAccount, clock: ManualClock) -> None:
    ref = await carrier.dial(account, a_dial())
    await telnyx.initiated(ref.carrier_call_id)
    clock.advance(seconds=20)
    assert await carrier.find_call(account, "call_1", ref.carrier_call_id) == VoiceUpdate(
        ref.carrier_call_id, "initiated", START)  # when Telnyx started it
    answered_at = clock.now()
    await telnyx.answer(ref.carrier_call_id, answered_by="machine")
    clock.advance(seconds=5)
    assert await carrier.find_call(account, "call_1", ref.carrier_call_id) == VoiceUpdate(
        ref.carrier_call_id, "answered", answered_at, answered_by="machine")
    clock.advance(seconds=40)
    await telnyx.hangup(ref.carrier_call_id)
    clock.advance(seconds=600)
    assert await carrier.find_call(account, "call_1", ref.carrier_call_id) == VoiceUpdate(
        ref.carrier_call_id, "completed", answered_at + timedelta(seconds=45), answered_by="machine",
        duration_seconds=45)
    assert await carrier.find_call(account, "call_1", "v3:no-such-call") is None
    assert await carrier.find_call(account, "call_1", None) is None  # no longer among the active calls


@pytest.mark.parametrize(("ending", "state"), [("busy", "busy"), ("no_answer", "no_answer"),
                                               ("unreachable", "failed"), (None, "no_answer")])
async def test_find_call_reads_how_an_unanswered_call_ended(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, account: CarrierAccount, clock: ManualClock,
        ending: str | None, state: str) -> None:
    ref = await carrier.dial(account, a_dial())
    clock.advance(seconds=30)
    if ending is None:  # the log says nothing of the end
        telnyx.calls[ref.carrier_call_id].ended = clock.now()
    else:
        await getattr(telnyx, ending)(ref.carrier_call_id)
    update = await carrier.find_call(account, "call_1", ref.carrier_call_id)
    assert update is not None
    assert (update.state, update.at, update.duration_seconds) == (state, clock.now(), None)
    assert (update.error is not None) == (state == "failed")


async def test_a_status_read_that_times_out_is_a_plain_carrier_error(
        telnyx: TelnyxEmulator, impatient: TelnyxCarrier, account: CarrierAccount) -> None:
    telnyx.hang("GET", "/v2/calls/")
    with pytest.raises(CarrierError):
        await impatient.find_call(account, "call_1", "v3:whatever")


async def test_hang_up_ends_the_call_once_and_is_idempotent(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, account: CarrierAccount) -> None:
    ref = await carrier.dial(account, a_dial())
    await carrier.hang_up(account, ref.carrier_call_id)
    call = telnyx.calls[ref.carrier_call_id]
    assert call.hung_up_by_api and not call.alive
    await carrier.hang_up(account, ref.carrier_call_id)  # the same command_id: ignored by Telnyx
    assert [name for name, _ in call.commands] == ["hangup"]


async def test_hanging_up_a_call_the_callee_already_ended_is_not_an_error(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, account: CarrierAccount) -> None:
    ref = await carrier.dial(account, a_dial())
    telnyx.calls[ref.carrier_call_id].ended = START
    await carrier.hang_up(account, ref.carrier_call_id)
    assert telnyx.calls[ref.carrier_call_id].commands == []


async def test_a_hang_up_without_an_answer_is_ambiguous(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, impatient: TelnyxCarrier, account: CarrierAccount) -> None:
    ref = await carrier.dial(account, a_dial())
    telnyx.hang("POST", f"/v2/calls/{ref.carrier_call_id}/actions/hangup")
    with pytest.raises(CarrierAmbiguous):
        await impatient.hang_up(account, ref.carrier_call_id)


async def test_transfer_sends_the_call_on_and_fails_on_an_ended_call(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, account: CarrierAccount) -> None:
    ref = await carrier.dial(account, a_dial())
    await carrier.transfer(account, ref.carrier_call_id, "+14155550177")
    call = telnyx.calls[ref.carrier_call_id]
    assert call.transferred_to == ["+14155550177"] and call.alive
    call.ended = START
    with pytest.raises(CarrierError) as refused:
        await carrier.transfer(account, ref.carrier_call_id, "+14155550188")
    assert (refused.value.code, refused.value.message) == (
        "90018", "This call is no longer active and can't receive commands.")


async def test_an_inbound_call_is_read_then_answered_with_the_stream_and_an_empty_reply(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, account: CarrierAccount) -> None:
    telnyx.numbers["1"] = OwnedNumber("1", OURS, telnyx.connection_id, telnyx.messaging_profile_id)
    telnyx.application["webhook_event_url"] = NUMBER_URLS.voice_url
    telnyx.deliver = None
    receiver = await Receiver().start()
    try:
        telnyx.application["webhook_event_url"] = receiver.url("/voice")
        call, delivery = await telnyx.inbound_call(CALLER, OURS)
        assert delivery.status == 200
        (received,) = await receiver.wait_for(1, path="/voice")
    finally:
        await receiver.close()
    request = WebhookRequest(NUMBER_URLS.voice_url, received.headers, received.body)
    assert carrier.verify(account, request, START)
    inbound = carrier.read_voice_webhook(request)
    assert inbound == InboundCall(call.call_control_id, CALLER, OURS, START)
    assert isinstance(inbound, InboundCall)
    reply = await carrier.answer_inbound(account, inbound, replace(URLS, direction="inbound"))
    assert reply == WebhookReply(200, "text/plain", b"")
    assert call.answered is not None and call.webhook_url == URLS.status_url
    assert (call.stream_url, call.stream_track, call.stream_mode, call.stream_codec) == (
        URLS.stream_url + "?direction=inbound", "both_tracks", "rtp", "PCMU")  # the session's direction
    assert carrier.stream_reply(URLS) == WebhookReply()


async def test_an_inbound_call_parley_will_not_take_is_rejected_busy(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, account: CarrierAccount) -> None:
    telnyx.numbers["1"] = OwnedNumber("1", OURS, telnyx.connection_id, telnyx.messaging_profile_id)
    telnyx.application["webhook_event_url"] = NUMBER_URLS.voice_url
    call, _ = await telnyx.inbound_call(CALLER, OURS)
    inbound = InboundCall(call.call_control_id, CALLER, OURS, START)
    assert await carrier.reject_inbound(account, inbound) == WebhookReply()
    assert [(name, body["cause"]) for name, body in call.commands] == [("reject", "USER_BUSY")]
    assert not call.alive and call.answered is None
    assert await carrier.reject_inbound(account, inbound) == WebhookReply()  # again: nothing more
    telnyx.fail("POST", "/v2/calls/", 500)
    assert await carrier.reject_inbound(account, InboundCall("v3:x", CALLER, OURS, START)) == WebhookReply()


async def test_an_inbound_call_that_cannot_be_answered_is_a_carrier_error(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, account: CarrierAccount) -> None:
    with pytest.raises(CarrierError) as refused:
        await carrier.answer_inbound(account, InboundCall("v3:gone", CALLER, OURS, START), URLS)
    assert refused.value.status == 404


# -- SMS -----------------------------------------------------------------------------------------------------------


async def test_send_sms_names_the_profile_and_the_status_url(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, account: CarrierAccount) -> None:
    message_id = await carrier.send_sms(account, OURS, CALLEE, "Your appointment is at 3pm.", URLS.status_url)
    message = telnyx.messages[message_id]
    assert (message.from_phone, message.to_phone, message.text) == (OURS, CALLEE, "Your appointment is at 3pm.")
    assert (message.webhook_url, message.messaging_profile_id) == (URLS.status_url, telnyx.messaging_profile_id)


async def test_sms_errors_and_silences(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, impatient: TelnyxCarrier, account: CarrierAccount) -> None:
    with pytest.raises(CarrierError) as refused:
        await carrier.send_sms(account, OURS, CALLEE, "", URLS.status_url)
    assert refused.value.message == "The 'text' parameter is required."
    telnyx.hang("POST", "/v2/messages", effect=True)
    with pytest.raises(CarrierAmbiguous):
        await impatient.send_sms(account, OURS, CALLEE, "hello", URLS.status_url)
    assert len(telnyx.messages) == 1


# -- numbers -------------------------------------------------------------------------------------------------------


async def test_search_numbers_filters_by_area_code_and_digits(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, account: CarrierAccount) -> None:
    found = await carrier.search_numbers(account, "us", "212", "55501", 3)
    assert [n.phone_number for n in found] == ["+12125550100", "+12125550101", "+12125550102"]
    first = found[0]
    assert (first.country, first.region, first.locality, first.voice, first.sms, first.monthly_cost) == (
        "US", "CA", "SAN FRANCISCO", True, True, None)
    assert first.details == {"rate_center": "SAN FRANCISCO"}
    (request,) = telnyx.on("GET", "/v2/available_phone_numbers")
    assert request.query == {"filter[country_code]": "US", "filter[limit]": "3",
                             "filter[national_destination_code]": "212", "filter[phone_number][contains]": "55501"}
    assert await carrier.search_numbers(account, "GB", None, None, 5) == []


async def test_buy_number_orders_it_on_the_connection_and_points_the_webhooks_at_parley(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, account: CarrierAccount) -> None:
    number_id = await carrier.buy_number(account, "+14155550150", NUMBER_URLS)
    owned = telnyx.numbers[number_id]
    assert owned.phone_number == "+14155550150"
    assert (owned.connection_id, owned.messaging_profile_id) == (telnyx.connection_id, telnyx.messaging_profile_id)
    assert telnyx.application["webhook_event_url"] == NUMBER_URLS.voice_url
    assert telnyx.application["application_name"] == "Parley voice"
    assert telnyx.profile["webhook_url"] == NUMBER_URLS.sms_url
    await carrier.buy_number(account, "+14155550151", NUMBER_URLS)
    assert len(telnyx.on("PATCH", "/v2/call_control_applications")) == 1  # already pointed at Parley


async def test_a_number_someone_else_bought_is_a_carrier_error_and_a_lost_order_is_ambiguous(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, impatient: TelnyxCarrier, account: CarrierAccount) -> None:
    telnyx.unavailable.add("+14155550152")
    with pytest.raises(CarrierError):
        await carrier.buy_number(account, "+14155550152", NUMBER_URLS)
    telnyx.hang("POST", "/v2/number_orders")
    with pytest.raises(CarrierAmbiguous):
        await impatient.buy_number(account, "+14155550153", NUMBER_URLS)
    assert telnyx.numbers == {}


async def test_configure_number_routes_a_number_to_the_account_and_parley(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, account: CarrierAccount) -> None:
    telnyx.numbers["9"] = OwnedNumber("9", OURS, "other-connection", None)
    await carrier.configure_number(account, OURS, NUMBER_URLS)
    assert (telnyx.numbers["9"].connection_id, telnyx.numbers["9"].messaging_profile_id) == (
        telnyx.connection_id, telnyx.messaging_profile_id)
    assert telnyx.application["webhook_event_url"] == NUMBER_URLS.voice_url
    assert telnyx.profile["webhook_url"] == NUMBER_URLS.sms_url
    with pytest.raises(CarrierError) as refused:
        await carrier.configure_number(account, "+14155550999", NUMBER_URLS)
    assert refused.value.code == "number_not_found"


async def test_release_number_deletes_it_and_is_idempotent(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, account: CarrierAccount) -> None:
    number_id = await carrier.buy_number(account, "+14155550160", NUMBER_URLS)
    await carrier.release_number(account, "+14155550160")
    assert number_id not in telnyx.numbers
    await carrier.release_number(account, "+14155550160")
    assert len(telnyx.on("DELETE", "/v2/phone_numbers")) == 1


# -- verification --------------------------------------------------------------------------------------------------


async def test_verify_accepts_what_telnyx_signed_within_five_minutes(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, account: CarrierAccount) -> None:
    request = webhook(telnyx, "call.answered", call_payload())
    assert carrier.verify(account, request, START)
    assert carrier.verify(account, request, START + timedelta(seconds=300))
    assert carrier.verify(account, request, START - timedelta(seconds=300))
    upper = WebhookRequest(request.url, {k.title(): v for k, v in request.headers.items()}, request.body)
    assert carrier.verify(account, upper, START)  # header names in any case


async def test_verify_refuses_forged_stale_tampered_and_malformed_webhooks(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, account: CarrierAccount) -> None:
    good = webhook(telnyx, "call.answered", call_payload())
    forged = webhook(telnyx, "call.answered", call_payload(), key=Ed25519PrivateKey.generate())
    stale = webhook(telnyx, "call.answered", call_payload(), timestamp=int(START.timestamp()) - 301)
    future = webhook(telnyx, "call.answered", call_payload(), timestamp=int(START.timestamp()) + 301)
    tampered = WebhookRequest(good.url, good.headers, good.body.replace(b"answered", b"hangup"))
    other_key = CarrierAccount(7, 1, "telnyx", {**telnyx.credentials(),
                                                "public_key": public_key_of(Ed25519PrivateKey.generate())},
                               telnyx.base_url)
    broken_key = CarrierAccount(7, 1, "telnyx", {**telnyx.credentials(), "public_key": "not base64!"},
                                telnyx.base_url)
    signature = good.headers["telnyx-signature-ed25519"]
    stamp = good.headers["telnyx-timestamp"]
    for request in (forged, stale, future, tampered):
        assert not carrier.verify(account, request, START)
    assert not carrier.verify(other_key, good, START)
    assert not carrier.verify(broken_key, good, START)
    assert not carrier.verify(account, good, START + timedelta(seconds=301))
    for headers in ({}, {"telnyx-timestamp": stamp}, {"telnyx-signature-ed25519": signature},
                    {"telnyx-timestamp": "soon", "telnyx-signature-ed25519": signature},
                    {"telnyx-timestamp": "9" * 5000, "telnyx-signature-ed25519": signature},
                    {"telnyx-timestamp": "\uff11\uff17\uff10\uff10", "telnyx-signature-ed25519": signature},
                    {"telnyx-timestamp": stamp, "telnyx-signature-ed25519": "%%%"},
                    {"telnyx-timestamp": stamp, "telnyx-signature-ed25519": base64.b64encode(b"short").decode()},
                    {"telnyx-timestamp": str(int(stamp) + 1), "telnyx-signature-ed25519": signature}):
        assert not carrier.verify(account, WebhookRequest(good.url, headers, good.body), START)


# -- reading voice webhooks ----------------------------------------------------------------------------------------


def read_voice(carrier: TelnyxCarrier, telnyx: TelnyxEmulator, event_type: str,
               **extra: object) -> VoiceUpdate | InboundCall | None:
    return carrier.read_voice_webhook(webhook(telnyx, event_type, call_payload(**extra), event_id="ev_9"))


async def test_call_events_become_voice_updates_with_the_event_id(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier) -> None:
    assert read_voice(carrier, telnyx, "call.initiated") == VoiceUpdate("v3:abc", "initiated", START, event_id="ev_9")
    assert read_voice(carrier, telnyx, "call.answered") == VoiceUpdate("v3:abc", "answered", START, event_id="ev_9")
    assert read_voice(carrier, telnyx, "call.initiated", direction="incoming") == InboundCall(
        "v3:abc", OURS, CALLEE, START)


@pytest.mark.parametrize(("event_type", "result", "answered_by"), [
    ("call.machine.detection.ended", "human", "human"),
    ("call.machine.detection.ended", "machine", "machine"),
    ("call.machine.detection.ended", "not_sure", "unknown"),
    ("call.machine.premium.detection.ended", "human_business", "human"),
    ("call.machine.premium.detection.ended", "human_residence", "human"),
    ("call.machine.premium.detection.ended", "fax_detected", "machine"),
    ("call.machine.premium.detection.ended", "silence", "unknown"),
])
async def test_machine_detection_results(telnyx: TelnyxEmulator, carrier: TelnyxCarrier, event_type: str,
                                         result: str, answered_by: str) -> None:
    assert read_voice(carrier, telnyx, event_type, result=result) == VoiceUpdate(
        "v3:abc", "answered", START, answered_by=answered_by, event_id="ev_9")  # type: ignore[arg-type]


@pytest.mark.parametrize(("cause", "sip", "state"), [
    ("normal_clearing", "16", "completed"),
    ("time_limit", None, "completed"),
    ("user_busy", "486", "busy"),
    ("call_rejected", "603", "busy"),
    ("timeout", "480", "no_answer"),
    ("no_answer", "480", "no_answer"),
    ("originator_cancel", "487", "canceled"),
    ("not_found", "404", "failed"),
    ("unspecified", "486", "busy"),
    ("unspecified", "487", "canceled"),
    ("unspecified", "503", "failed"),
    ("unspecified", "unspecified", "completed"),
    (None, None, "completed"),
])
async def test_hangup_causes_map_onto_end_states(telnyx: TelnyxEmulator, carrier: TelnyxCarrier, cause: str | None,
                                                 sip: str | None, state: str) -> None:
    update = read_voice(carrier, telnyx, "call.hangup", hangup_cause=cause, sip_hangup_cause=sip)
    assert isinstance(update, VoiceUpdate)
    assert (update.state, update.event_id, update.at) == (state, "ev_9", START)
    if state == "failed":
        assert update.error is not None and str(sip) in update.error
    else:
        assert update.error is None


async def test_events_parley_does_not_act_on_and_bodies_it_cannot_read_are_none(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier) -> None:
    for event_type in ("call.streaming.started", "call.streaming.stopped", "call.bridged",
                       "call.machine.greeting.ended", "call.playback.ended"):
        assert read_voice(carrier, telnyx, event_type) is None
    assert carrier.read_voice_webhook(webhook(telnyx, "call.answered", {"to": CALLEE})) is None
    assert carrier.read_voice_webhook(webhook(telnyx, "call.initiated", call_payload(direction="incoming",
                                                                                    to=None))) is None
    for body in (b"", b"not json", b"[]", b'{"data": []}', b'{"data": {"event_type": "call.answered"}}',
                 json.dumps({"data": {"event_type": "call.answered", "payload": call_payload(),
                                      "occurred_at": "yesterday"}}).encode()):
        assert carrier.read_voice_webhook(WebhookRequest(URLS.status_url, {}, body)) is None
        assert carrier.read_sms_webhook(WebhookRequest(URLS.status_url, {}, body)) is None


# -- reading SMS webhooks ------------------------------------------------------------------------------------------


def sms_payload(status: str, **extra: object) -> dict[str, object]:
    payload: dict[str, object] = {"id": "msg_1", "direction": "outbound", "from": {"phone_number": OURS},
                                  "to": [{"phone_number": CALLEE, "status": status}], "text": "hi", "errors": []}
    payload.update(extra)
    return payload


@pytest.mark.parametrize(("event_type", "status", "errors", "expected", "code"), [
    ("message.sent", "sent", [], "sent", None),
    ("message.finalized", "delivered", [], "delivered", None),
    ("message.finalized", "delivery_unconfirmed", [], "sent", None),
    ("message.finalized", "delivery_failed", [{"code": "40300", "title": "Blocked as spam"}], "undelivered", "40300"),
    ("message.finalized", "sending_failed", [{"code": 40008, "title": "Undeliverable"}], "failed", "40008"),
])
async def test_message_receipts(telnyx: TelnyxEmulator, carrier: TelnyxCarrier, event_type: str, status: str,
                                errors: list[dict[str, object]], expected: str, code: str | None) -> None:
    update = carrier.read_sms_webhook(webhook(telnyx, event_type, sms_payload(status, errors=errors)))
    assert update == SmsReceipt("msg_1", expected, START, code)  # type: ignore[arg-type]


async def test_an_inbound_text_and_what_is_not_acted_on(telnyx: TelnyxEmulator, carrier: TelnyxCarrier) -> None:
    received = sms_payload("webhook_delivered", direction="inbound", text="STOP",
                           **{"from": {"phone_number": CALLER}, "to": [{"phone_number": OURS}]})
    assert carrier.read_sms_webhook(webhook(telnyx, "message.received", received)) == InboundSms(
        "msg_1", CALLER, OURS, "STOP", START)
    assert carrier.read_sms_webhook(webhook(telnyx, "message.received", sms_payload("x", id=None))) is None
    assert carrier.read_sms_webhook(webhook(telnyx, "number_order.complete", sms_payload("sent"))) is None
    assert carrier.read_sms_webhook(webhook(telnyx, "message.finalized", sms_payload("weird"))) is None


# -- the whole webhook flow over HTTP ------------------------------------------------------------------------------


async def test_an_outbound_call_and_its_texts_end_to_end_at_the_adapter(
        telnyx: TelnyxEmulator, carrier: TelnyxCarrier, account: CarrierAccount, clock: ManualClock) -> None:
    """Parley's webhook endpoint stands in as a receiver: every callback the emulator sends over HTTP is verified
    and read in order; the hostile ones fail verification or repeat an event id."""
    telnyx.deliver = None
    receiver = await Receiver().start()
    try:
        urls = CallbackUrls(receiver.url("/voice"), URLS.stream_url)
        ref = await carrier.dial(account, CarrierDial("call_7", OURS, CALLEE, urls, True, 300))
        await telnyx.initiated(ref.carrier_call_id)
        clock.advance(seconds=4)
        await telnyx.answer(ref.carrier_call_id, answered_by="machine")
        clock.advance(seconds=30)
        hangup = await telnyx.hangup(ref.carrier_call_id)
        await telnyx.redeliver(hangup)  # a replay, byte for byte
        await telnyx.send(urls.status_url, "call.answered", telnyx.call_payload(telnyx.calls[ref.carrier_call_id]),
                          key=Ed25519PrivateKey.generate())  # forged
        await telnyx.send(urls.status_url, "call.answered", telnyx.call_payload(telnyx.calls[ref.carrier_call_id]),
                          timestamp=int(clock.now().timestamp()) - 600)  # stale
        await telnyx.send(urls.status_url, "call.answered", telnyx.call_payload(telnyx.calls[ref.carrier_call_id]),
                          tamper=True)
        message_id = await carrier.send_sms(account, OURS, CALLEE, "Thanks for your time", receiver.url("/sms"))
        await telnyx.message_sent(message_id)
        await telnyx.message_finalized(message_id, "delivered")
        received = await receiver.wait_for(11)
    finally:
        await receiver.close()
    voice = [WebhookRequest(urls.status_url, r.headers, r.body) for r in received if r.path == "/voice"]
    verified = [r for r in voice if carrier.verify(account, r, clock.now())]
    assert len(voice) == 9 and len(verified) == 6
    updates = [carrier.read_voice_webhook(r) for r in verified]
    assert [(u.state, u.answered_by) for u in updates if isinstance(u, VoiceUpdate)] == [
        ("initiated", None), ("answered", None), ("answered", "machine"), ("completed", None),
        ("completed", None)]
    finals = [u for u in updates if isinstance(u, VoiceUpdate) and u.state == "completed"]
    assert finals[0].event_id == finals[1].event_id is not None  # the replay is recognisable
    assert updates.count(None) == 1  # call.streaming.started
    texts = [WebhookRequest(receiver.url("/sms"), r.headers, r.body) for r in received if r.path == "/sms"]
    assert all(carrier.verify(account, r, clock.now()) for r in texts)
    assert [carrier.read_sms_webhook(r) for r in texts] == [
        SmsReceipt(message_id, "sent", clock.now()), SmsReceipt(message_id, "delivered", clock.now())]


def test_client_state_round_trips_and_ignores_foreign_states() -> None:
    assert call_id_from_client_state(client_state("call_x")) == "call_x"
    assert call_id_from_client_state(base64.b64encode(b"someone else").decode()) is None
    assert call_id_from_client_state("%%%") is None
    assert call_id_from_client_state(None) is None
