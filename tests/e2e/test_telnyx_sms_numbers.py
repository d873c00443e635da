"""Telnyx texts and numbers end to end, on SQLite and PostgreSQL: a text sent through the API reaches the Telnyx
emulator (``POST /v2/messages``) and its receipts come back through the carrier's SMS webhook (forward only,
replays change nothing); a refusal fails it with Telnyx's code; inbound STOP / START keep the opt-out list;
number search, purchase (the number set up at Telnyx to reach Parley) and release."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.telnyx_support import PUBLIC, Telnyx, telnyx  # noqa: F401  (the fixture)

# end to end through a carrier's protocol (make test runs it; make test-fast leaves it out)
pytestmark = pytest.mark.slow


async def send(world: Telnyx, to: str, body: str = "Your table is booked for 8pm.") -> Any:
    return await world.api.client.post("/v2/sms", headers=world.headers, json={"to": to, "body": body})


async def test_a_text_out_and_its_receipts(telnyx: Telnyx) -> None:  # noqa: F811
    sent = await send(telnyx, "+14155550161")
    assert sent.status_code == 201, sent.text
    sms_id = sent.json()["data"]["id"]
    message = await telnyx.emulator.wait_for_message()
    assert (message.from_phone, message.to_phone, message.text) == (
        telnyx.number, "+14155550161", "Your table is booked for 8pm.")
    assert message.webhook_url == f"{PUBLIC}/v2/carriers/{telnyx.provider['id']}/sms"
    assert message.messaging_profile_id == telnyx.emulator.messaging_profile_id
    assert (await telnyx.emulator.message_sent(message.id)).status == 204
    assert (await telnyx.get(f"/v2/sms/{sms_id}"))["status"] == "sent"
    telnyx.clock.advance(seconds=2)
    delivered = await telnyx.emulator.message_finalized(message.id, "delivered")
    assert delivered.status == 204
    done = await telnyx.get(f"/v2/sms/{sms_id}")
    assert (done["status"], done["error_code"]) == ("delivered", None)
    assert (await telnyx.emulator.redeliver(delivered)).status == 204  # a replay
    assert (await telnyx.emulator.message_sent(message.id)).status == 204  # late news
    assert (await telnyx.get(f"/v2/sms/{sms_id}"))["status"] == "delivered"


async def test_a_text_that_is_not_delivered_or_refused(telnyx: Telnyx) -> None:  # noqa: F811
    sent = await send(telnyx, "+14155550162")
    message = await telnyx.emulator.wait_for_message()
    await telnyx.emulator.message_sent(message.id)
    await telnyx.emulator.message_finalized(message.id, "delivery_failed")
    got = await telnyx.get(f"/v2/sms/{sent.json()['data']['id']}")
    assert (got["status"], got["error_code"]) == ("undelivered", "40300")
    telnyx.emulator.fail("POST", "/v2/messages", 422, code="40310", title="Invalid 'to' address",
                         detail="The destination is not a mobile number.")
    refused = await send(telnyx, "+14155550163")
    assert refused.status_code == 201, refused.text
    got = await telnyx.get(f"/v2/sms/{refused.json()['data']['id']}")
    assert (got["status"], got["error_code"]) == ("failed", "40310")


async def test_inbound_stop_and_start_through_the_telnyx_webhook(telnyx: Telnyx) -> None:  # noqa: F811
    person = "+14155550164"
    assert telnyx.emulator.profile["webhook_url"] == f"{PUBLIC}/v2/carriers/{telnyx.provider['id']}/sms"
    stop = await telnyx.emulator.inbound_sms(person, telnyx.number, "STOP")
    assert stop.status == 204
    assert (await telnyx.emulator.redeliver(stop)).status == 204  # kept once
    inbound = [m for m in await telnyx.get("/v2/sms") if m["direction"] == "inbound"]
    assert [(m["from"], m["to"], m["body"]) for m in inbound] == [(person, telnyx.number, "STOP")]
    opted_out = await send(telnyx, person)
    assert opted_out.status_code == 422 and opted_out.json()["error"]["code"] == "recipient_opted_out"
    assert telnyx.emulator.messages == {}
    assert (await telnyx.emulator.inbound_sms(person, telnyx.number, "START")).status == 204
    assert (await send(telnyx, person)).status_code == 201
    assert len(telnyx.emulator.messages) == 1


async def test_number_search_purchase_and_release(telnyx: Telnyx) -> None:  # noqa: F811
    pid = telnyx.provider["id"]
    found = await telnyx.get(f"/v2/telephony/providers/{pid}/available-numbers?country=US&area_code=212"
                             "&contains=55501&limit=2")
    assert [n["phone_number"] for n in found] == ["+12125550100", "+12125550101"]
    assert found[0]["capabilities"] == {"voice": True, "sms": True} and "monthly_cost" not in found[0]
    bought = await telnyx.api.client.post("/v2/telephony/phone-numbers", headers=telnyx.headers, json={
        "provider_id": pid, "phone_number": "+12125550100", "purchase": True})
    assert bought.status_code == 201, bought.text
    owned = next(n for n in telnyx.emulator.numbers.values() if n.phone_number == "+12125550100")
    assert (owned.connection_id, owned.messaging_profile_id) == (
        telnyx.emulator.connection_id, telnyx.emulator.messaging_profile_id)
    telnyx.emulator.unavailable.add("+12125550101")
    taken = await telnyx.api.client.post("/v2/telephony/phone-numbers", headers=telnyx.headers, json={
        "provider_id": pid, "phone_number": "+12125550101", "purchase": True})
    assert taken.status_code == 502 and taken.json()["error"]["code"] == "carrier_error"
    released = await telnyx.api.client.delete(
        f"/v2/telephony/phone-numbers/{bought.json()['data']['id']}?release=true", headers=telnyx.headers)
    assert released.status_code == 204, released.text
    assert all(n.phone_number != "+12125550100" for n in telnyx.emulator.numbers.values())
