"""The Twilio adapter on its own, against the Twilio emulator (a real HTTP server on 127.0.0.1) through the real
egress: what it sends, how it reads Twilio's answers and webhooks, how it tells a refusal (CarrierError) from a
request that may have taken effect (CarrierAmbiguous), and that it verifies signatures the way Twilio signs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from urllib.parse import urlencode

import pytest

from adapters.carriers.twilio import TwilioCarrier
from adapters.egress import HttpxSafeHttp, SystemResolver
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
    WebhookRequest,
)
from tests.support.emulators.twilio import TwilioEmulator

NOW = datetime(2026, 11, 27, 9, tzinfo=UTC)
URLS = CallbackUrls("https://parley.test/v2/carriers/7/voice/status?call_id=c-1",
                    "wss://parley.test/v2/media-streams/tok-1")


@pytest.fixture
def emulator() -> Iterator[TwilioEmulator]:
    emulator = TwilioEmulator().start()
    yield emulator
    emulator.stop()


def carrier() -> TwilioCarrier:
    return TwilioCarrier(HttpxSafeHttp(SystemResolver(), allow_loopback=True, user_agent="test"), timeout=10.0)


def impatient(twilio: TwilioCarrier) -> TwilioCarrier:
    """The same carrier (and its kept-alive connections) giving up after 0.25 s: only for a request meant to go
    unanswered (the others keep a timeout a busy machine cannot reach)."""
    return TwilioCarrier(twilio.http, timeout=0.25)


def account(emulator: TwilioEmulator, **credentials: str) -> CarrierAccount:
    return CarrierAccount(7, 1, "twilio", {**emulator.credentials, **credentials}, emulator.url)


def webhook(emulator: TwilioEmulator, url: str, params: dict[str, str], *, forged: bool = False) -> WebhookRequest:
    return WebhookRequest(url, {k.lower(): v for k, v in emulator.sign(url, params, forged=forged).items()},
                          urlencode(params).encode())


async def test_dial_find_hang_up_and_transfer(emulator: TwilioEmulator) -> None:
    twilio = carrier()
    ref = await twilio.dial(account(emulator), CarrierDial("c-1", "+14155550100", "+14155550123", URLS, True, 600))
    call = emulator.calls[ref.carrier_call_id]
    assert (call.to, call.from_, call.time_limit, call.machine_detection) == (
        "+14155550123", "+14155550100", "600", "DetectMessageEnd")
    assert call.events == ["initiated", "ringing", "answered", "completed"] and call.amd_callback == URLS.status_url
    found = await twilio.find_call(account(emulator), "c-1", ref.carrier_call_id)
    assert found is not None and found.state == "queued"
    assert await twilio.find_call(account(emulator), "c-1", None) is None
    assert await twilio.find_call(account(emulator), "c-1", "CA-unknown") is None
    await twilio.transfer(account(emulator), ref.carrier_call_id, "+14155550199")
    await twilio.hang_up(account(emulator), ref.carrier_call_id)
    assert call.updates[0]["Twiml"].endswith("<Dial>+14155550199</Dial></Response>")
    assert call.updates[1] == {"Status": "completed"}


async def test_refusals_are_definite_and_silence_is_ambiguous(emulator: TwilioEmulator) -> None:
    twilio = carrier()
    dial = CarrierDial("c-1", "+14155550100", "+14155550123", URLS, False, 60)
    with pytest.raises(CarrierError) as refused:
        await twilio.dial(account(emulator, auth_token="wrong"), dial)
    assert (refused.value.status, refused.value.code, refused.value.message) == (401, "20003", "Authenticate")
    emulator.fail_next("calls.create", 500, "Internal Server Error")
    with pytest.raises(CarrierError, match="Internal Server Error"):
        await twilio.dial(account(emulator), dial)
    emulator.hang_next("calls.create", 2.0, create=True)
    with pytest.raises(CarrierAmbiguous):
        await impatient(twilio).dial(account(emulator), dial)
    unreachable = CarrierAccount(7, 1, "twilio", emulator.credentials, "http://127.0.0.1:9")
    with pytest.raises(CarrierError, match="could not be reached"):
        await twilio.dial(unreachable, dial)


async def test_webhooks_are_verified_as_twilio_signs_them_and_read(emulator: TwilioEmulator) -> None:
    twilio = carrier()
    params = {"CallSid": "CA1", "CallStatus": "completed", "CallDuration": "31", "Direction": "outbound-api",
              "SequenceNumber": "3", "Timestamp": "Fri, 27 Nov 2026 09:00:05 +0000"}
    good = webhook(emulator, URLS.status_url, params)
    assert twilio.verify(account(emulator), good, NOW)
    assert not twilio.verify(account(emulator), webhook(emulator, URLS.status_url, params, forged=True), NOW)
    altered = WebhookRequest(good.url, good.headers, good.body.replace(b"31", b"310"))
    assert not twilio.verify(account(emulator), altered, NOW)
    elsewhere = WebhookRequest(good.url.replace("c-1", "c-2"), good.headers, good.body)
    assert not twilio.verify(account(emulator), elsewhere, NOW)
    assert not twilio.verify(account(emulator), WebhookRequest(good.url, {}, good.body), NOW)
    update = twilio.read_voice_webhook(good)
    assert update == VoiceUpdate("CA1", "completed", datetime(2026, 11, 27, 9, 0, 5, tzinfo=UTC),
                                 duration_seconds=31, event_id="CA1:3")
    amd = twilio.read_voice_webhook(webhook(emulator, URLS.status_url, {"CallSid": "CA1",
                                                                        "AnsweredBy": "machine_end_beep"}))
    assert isinstance(amd, VoiceUpdate) and (amd.state, amd.answered_by) == ("answered", "machine")
    inbound = twilio.read_voice_webhook(webhook(emulator, URLS.status_url, {
        "CallSid": "CA2", "CallStatus": "ringing", "Direction": "inbound", "From": "+1415", "To": "+1212"}))
    assert isinstance(inbound, InboundCall) and (inbound.from_phone, inbound.to_phone) == ("+1415", "+1212")
    receipt = twilio.read_sms_webhook(webhook(emulator, URLS.status_url, {
        "MessageSid": "SM1", "MessageStatus": "undelivered", "ErrorCode": "30003"}))
    assert isinstance(receipt, SmsReceipt) and (receipt.status, receipt.error_code) == ("undelivered", "30003")
    text = twilio.read_sms_webhook(webhook(emulator, URLS.status_url, {
        "MessageSid": "SM2", "SmsStatus": "received", "From": "+1415", "To": "+1212", "Body": "STOP"}))
    assert isinstance(text, InboundSms) and text.body == "STOP"


async def test_numbers(emulator: TwilioEmulator) -> None:
    twilio = carrier()
    urls = NumberUrls("https://p/v", "https://p/s", "https://p/m")
    found = await twilio.search_numbers(account(emulator), "US", "212", None, 10)
    assert [n.phone_number for n in found] == ["+12125550123"] and found[0].locality == "New York"
    assert (await twilio.buy_number(account(emulator), "+12125550123", urls)).startswith("PN")
    assert emulator.owned["+12125550123"]["VoiceUrl"] == "https://p/v"
    await twilio.configure_number(account(emulator), "+12125550123", NumberUrls("https://q/v", "https://q/s",
                                                                                "https://q/m"))
    assert emulator.owned["+12125550123"]["SmsUrl"] == "https://q/m"
    with pytest.raises(CarrierError, match="is not available"):
        await twilio.buy_number(account(emulator), "+19995550000", urls)
    with pytest.raises(CarrierError, match="not a number of this Twilio account"):
        await twilio.configure_number(account(emulator), "+19995550000", urls)
    await twilio.release_number(account(emulator), "+12125550123")
    assert emulator.owned == {}
