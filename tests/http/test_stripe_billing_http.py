"""Billing on the Stripe gateway (PARLEY_BILLING_GATEWAY=stripe) through the real HTTP API on SQLite and
PostgreSQL, the official SDK pointed at the Stripe emulator: cards from Stripe tokens, a declined upgrade (402
card_declined with Stripe's decline code), a 3-D Secure upgrade surfaced to the user (402 with
details.next_action_url) that goes through once the holder authenticated it, a period's invoice whose charge needs
authentication (past_due) marked paid by Stripe's signed webhook, and a webhook whose signature does not verify
refused. Each test closes a period, so it runs on a database of its own."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.memory.clock import ManualClock
from application.jobs import JobRunner
from entrypoints.features.billing import BillingSettings, close_job, collect_job
from entrypoints.ioc import build_container
from entrypoints.worker import make_runner
from tests.http.test_billing_http import FEB, JAN, add_card, get, post
from tests.support.apps import Api, ApiFactory
from tests.support.stripe_emulator import StripeEmulator, signed_event

SECRET = "whsec_parley_tests"


@pytest.fixture
async def emulator() -> AsyncIterator[StripeEmulator]:
    server = await StripeEmulator().start()
    yield server
    await server.close()


async def stripe_app(make_api: ApiFactory, url: str, emulator: StripeEmulator) -> tuple[Api, ManualClock]:
    clock = ManualClock(JAN)
    section = BillingSettings(gateway="stripe", stripe_api_key=emulator.api_key, stripe_api_base=emulator.api_base,
                              stripe_webhook_secret=SECRET,
                              stripe_return_url="https://parley.example.com/dashboard/billing")
    return await make_api(url, clock=clock, sections=(section,)), clock


async def test_upgrades_declines_and_3d_secure_on_stripe(make_api: ApiFactory, private_sql_url: str,
                                                         emulator: StripeEmulator) -> None:
    api, _ = await stripe_app(make_api, private_sql_url, emulator)
    t = await api.tenant(plan="business")
    poor = await add_card(api, t, "tok_chargeDeclinedInsufficientFunds")
    assert (poor["brand"], poor["last4"], poor["is_default"]) == ("visa", "9995", True)
    refused = await api.client.post("/v2/billing/payment-methods", json={"token": "tok_bogus"}, headers=t.headers)
    assert refused.status_code == 400 and "token" in refused.json()["error"]["details"]["validation_errors"]

    declined = await api.client.patch("/v2/billing/subscription", json={"plan": "enterprise"}, headers=t.headers)
    assert declined.status_code == 402, declined.text
    error = declined.json()["error"]
    assert error["code"] == "card_declined" and error["details"]["decline_code"] == "insufficient_funds"
    assert error["details"]["amount"] == 77_419  # (249,900 - 49,900) x 12 / 31, from January 20th

    secure = await add_card(api, t, "tok_threeDSecure2Required")
    await post(api, t, f"/billing/payment-methods/{secure['id']}/default")
    waiting = await api.client.patch("/v2/billing/subscription", json={"plan": "enterprise"}, headers=t.headers)
    assert waiting.status_code == 402, waiting.text
    details = waiting.json()["error"]["details"]
    assert details["decline_code"] == "authentication_required" and "3-D Secure" in waiting.json()["error"]["message"]
    intent_id = details["next_action_url"].rsplit("/", 1)[-1]
    assert emulator.intents[intent_id]["status"] == "requires_action"
    assert (await get(api, t, "/billing/subscription"))["data"]["plan"] == "business"  # nothing changed yet

    emulator.authenticate(intent_id)  # the holder completes 3-D Secure on the bank's page
    done = await api.client.patch("/v2/billing/subscription", json={"plan": "enterprise"}, headers=t.headers)
    assert done.status_code == 200 and done.json()["data"]["plan"] == "enterprise", done.text
    assert [(i["id"], i["amount"]) for i in emulator.succeeded()] == [(intent_id, 77_419)]  # charged once
    [upgrade] = (await get(api, t, "/billing/invoices"))["data"]
    assert upgrade["status"] == "paid" and upgrade["total"] == 77_419
    assert emulator.intents[intent_id]["metadata"]["parley_organization_id"] == str(t.organization_id)

    await api.client.delete(f"/v2/billing/payment-methods/{poor['id']}", headers=t.headers)
    gone = [m for m in emulator.payment_methods.values() if m["card"]["last4"] == "9995"]
    assert [m["customer"] for m in gone] == [None]  # detached at Stripe


async def test_an_invoice_waiting_for_3d_secure_is_paid_by_stripes_signed_webhook(
        make_api: ApiFactory, private_sql_url: str, emulator: StripeEmulator) -> None:
    api, clock = await stripe_app(make_api, private_sql_url, emulator)
    container = build_container(api.settings, *api.overrides)
    try:
        t = await api.tenant(plan="business")
        await add_card(api, t, "pm_card_authenticationRequired")
        runner: JobRunner = await make_runner(container, api.settings, kinds=[close_job(container, api.settings),
                                                                    collect_job(container, api.settings)])
        await runner.start()
        await runner.run_due()
        clock.set(FEB)
        await runner.run_due()
        [invoice] = (await get(api, t, "/billing/invoices"))["data"]
        assert invoice["status"] == "open" and invoice["last_payment_error"] == "authentication_required"
        assert (await get(api, t, "/billing/subscription"))["data"]["status"] == "past_due"
        [intent] = [i for i in emulator.charges if i["metadata"].get("parley_invoice_id") == str(invoice["id"])]
        assert intent["amount"] == invoice["total"] == 49_900

        emulator.authenticate(intent["id"])
        payload, signature = signed_event("payment_intent.succeeded", emulator.intents[intent["id"]], SECRET)
        forged = await api.client.post("/v2/billing/stripe/webhook", content=payload, headers={
            "Content-Type": "application/json", "Stripe-Signature": signature.replace("v1=", "v1=00")})
        assert forged.status_code == 400 and "Stripe-Signature" in forged.json()["error"]["message"], forged.text
        assert (await get(api, t, f"/billing/invoices/{invoice['id']}"))["data"]["status"] == "open"

        for _ in range(2):  # Stripe may deliver an event twice: the second changes nothing
            received = await api.client.post("/v2/billing/stripe/webhook", content=payload, headers={
                "Content-Type": "application/json", "Stripe-Signature": signature})
            assert received.status_code == 200, received.text
        assert received.json()["data"] == {"received": True, "event_id": received.json()["data"]["event_id"],
                                           "invoice_id": None}
        paid = (await get(api, t, f"/billing/invoices/{invoice['id']}"))["data"]
        assert paid["status"] == "paid" and paid["last_payment_error"] is None
        assert (await get(api, t, "/billing/subscription"))["data"]["status"] == "active"
        assert len(emulator.succeeded()) == 1
    finally:
        await container.close()


async def test_the_webhook_is_404_on_the_simulator(any_api: Api) -> None:
    payload, signature = signed_event("payment_intent.succeeded", {"id": "pi_1"}, SECRET)
    response = await any_api.client.post("/v2/billing/stripe/webhook", content=payload, headers={
        "Content-Type": "application/json", "Stripe-Signature": signature})
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
