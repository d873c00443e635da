"""The Stripe adapter (the official SDK, async) against the emulator of Stripe's documented API on 127.0.0.1: one
customer per organization, cards attached from tokens and test PaymentMethods, PaymentIntents charged once per
idempotency key (a retried charge is answered the first one's result, never charged twice), declines and 3-D Secure
(``requires_action``) as results, an authenticated charge answering ``succeeded`` when asked again, and webhook
events verified by their ``Stripe-Signature``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.payments.stripe_gateway import StripePaymentGateway
from domain.errors import NotFound, Unavailable, ValidationFailed
from tests.support.stripe_emulator import StripeEmulator, signed_event

SECRET = "whsec_test_parley"


@pytest.fixture
async def emulator() -> AsyncIterator[StripeEmulator]:
    server = await StripeEmulator().start()
    yield server
    await server.close()


@pytest.fixture
async def gateway(emulator: StripeEmulator) -> AsyncIterator[StripePaymentGateway]:
    made = StripePaymentGateway(emulator.api_key, api_base=emulator.api_base, webhook_secret=SECRET,
                                return_url="https://parley.example.com/dashboard/billing", max_network_retries=0)
    yield made
    await made.close()


async def test_cards_attach_from_tokens_to_one_customer_per_organization(emulator: StripeEmulator,
                                                                         gateway: StripePaymentGateway) -> None:
    visa = await gateway.attach("tok_visa", "org_1")
    master = await gateway.attach("pm_card_mastercard", "org_1")
    other = await gateway.attach("tok_visa", "org_2")
    assert (visa.brand, visa.last4, visa.exp_month, visa.exp_year) == ("visa", "4242", 12, 2034)
    assert (master.brand, master.last4) == ("mastercard", "4444")
    assert visa.gateway_id.split("/")[0] == master.gateway_id.split("/")[0] != other.gateway_id.split("/")[0]
    assert len(emulator.customers) == 2
    assert {c["metadata"]["parley_customer"] for c in emulator.customers.values()} == {"org_1", "org_2"}
    # form-encoded, bracketed keys, as Stripe documents
    created = [p for m, path, p in emulator.requests if (m, path) == ("POST", "/v1/payment_methods")]
    assert created == [{"type": "card", "card": {"token": "tok_visa"}}] * 2

    for bad in ("tok_nonsense", "pm_unknown", "4242424242424242"):
        with pytest.raises(ValidationFailed) as refused:
            await gateway.attach(bad, "org_1")
        assert "token" in (refused.value.details or {})["validation_errors"]

    await gateway.detach(visa.gateway_id)
    assert emulator.payment_methods[visa.gateway_id.split("/")[1]]["customer"] is None
    await gateway.detach(visa.gateway_id)  # gone already: fine


async def test_a_charge_is_made_once_per_idempotency_key(emulator: StripeEmulator,
                                                        gateway: StripePaymentGateway) -> None:
    card = await gateway.attach("tok_visa", "org_1")
    first = await gateway.charge(49_900, "usd", card.gateway_id, "invoice_7_attempt_1",
                                 {"parley_invoice_id": "7", "parley_organization_id": "1"})
    again = await gateway.charge(49_900, "usd", card.gateway_id, "invoice_7_attempt_1",
                                 {"parley_invoice_id": "7", "parley_organization_id": "1"})
    assert first.succeeded and again.succeeded and first.charge_id == again.charge_id
    assert len(emulator.charges) == 1 and emulator.replays == 1
    [intent] = emulator.charges
    assert (intent["amount"], intent["currency"], intent["metadata"]) == (
        49_900, "usd", {"parley_invoice_id": "7", "parley_organization_id": "1"})
    second = await gateway.charge(49_900, "usd", card.gateway_id, "invoice_7_attempt_2")
    assert second.succeeded and second.charge_id != first.charge_id and len(emulator.charges) == 2
    with pytest.raises(Exception, match=r"(?i)idempotent"):  # the same key with another amount is a bug
        await gateway.charge(1, "usd", card.gateway_id, "invoice_7_attempt_1")


async def test_declines_are_results_with_their_codes(emulator: StripeEmulator, gateway: StripePaymentGateway) -> None:
    declined = await gateway.attach("tok_chargeDeclined", "org_1")
    poor = await gateway.attach("tok_chargeDeclinedInsufficientFunds", "org_1")
    result = await gateway.charge(100, "usd", declined.gateway_id, "k1")
    assert (result.status, result.code) == ("declined", "generic_decline") and result.charge_id in emulator.intents
    assert (await gateway.charge(100, "usd", declined.gateway_id, "k1")).code == "generic_decline"  # replayed
    assert (await gateway.charge(100, "usd", poor.gateway_id, "k2")).code == "insufficient_funds"
    assert (await gateway.charge(100, "usd", "pm_card_visa.abc", "k3")).code == "invalid_payment_method"
    assert emulator.succeeded() == []


async def test_3d_secure_is_surfaced_and_an_authenticated_charge_succeeds_when_asked_again(
        emulator: StripeEmulator, gateway: StripePaymentGateway) -> None:
    card = await gateway.attach("tok_threeDSecure2Required", "org_1")
    waiting = await gateway.charge(77_419, "usd", card.gateway_id, "plan_1_up")
    assert (waiting.status, waiting.code) == ("declined", "authentication_required")
    assert waiting.action_url is not None and waiting.charge_id is not None
    assert waiting.action_url.endswith(f"/emulator/3ds/{waiting.charge_id}")
    emulator.authenticate(waiting.charge_id)
    done = await gateway.charge(77_419, "usd", card.gateway_id, "plan_1_up")
    assert done.succeeded and done.charge_id == waiting.charge_id and len(emulator.charges) == 1


async def test_webhook_events_are_verified_by_their_signature(gateway: StripePaymentGateway) -> None:
    intent = {"id": "pi_1", "object": "payment_intent", "status": "succeeded",
              "metadata": {"parley_invoice_id": "7", "parley_organization_id": "1"}}
    payload, signature = signed_event("payment_intent.succeeded", intent, SECRET)
    event = await gateway.parse_event(payload, signature)
    assert event is not None and (event.type, event.charge_id) == ("charge.succeeded", "pi_1")
    assert event.metadata == {"parley_invoice_id": "7", "parley_organization_id": "1"}
    failed, failed_signature = signed_event("payment_intent.payment_failed", {
        **intent, "status": "requires_payment_method",
        "last_payment_error": {"code": "card_declined", "decline_code": "insufficient_funds"}}, SECRET)
    event = await gateway.parse_event(failed, failed_signature)
    assert event is not None and (event.type, event.code) == ("charge.failed", "insufficient_funds")
    ignored, ignored_signature = signed_event("customer.created", {"id": "cus_1"}, SECRET)
    assert await gateway.parse_event(ignored, ignored_signature) is None

    forged, _ = signed_event("payment_intent.succeeded", intent, "whsec_someone_else")
    for bad in (signature.replace("v1=", "v1=0"), None, "t=1,v1=abc"):
        with pytest.raises(ValidationFailed):
            await gateway.parse_event(forged if bad is None else payload + b" ", bad)
    _, old = signed_event("payment_intent.succeeded", intent, SECRET, at=1)
    with pytest.raises(ValidationFailed):  # outside the SDK's 5-minute tolerance
        await gateway.parse_event(payload, old)


async def test_without_a_signing_secret_there_is_no_webhook(emulator: StripeEmulator) -> None:
    gateway = StripePaymentGateway(emulator.api_key, api_base=emulator.api_base)
    try:
        with pytest.raises(NotFound):
            await gateway.parse_event(b"{}", "t=1,v1=x")
    finally:
        await gateway.close()


async def test_an_unreachable_stripe_is_503_and_never_reads_as_the_databases_outage() -> None:
    gateway = StripePaymentGateway("sk_test_parley", api_base="http://127.0.0.1:9", max_network_retries=0,
                                   timeout=2)
    try:
        for attempt in (gateway.attach("tok_visa", "org_1"),
                        gateway.charge(100, "usd", "cus_1/pm_1", "k1")):
            with pytest.raises(Unavailable) as failed:
                await attempt
            assert failed.value.__cause__ is None and failed.value.__context__ is None
            assert "payment gateway" in failed.value.message
    finally:
        await gateway.close()
