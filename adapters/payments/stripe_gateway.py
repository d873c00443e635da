"""Stripe as the payment gateway, through the official SDK (``stripe``) in its asynchronous mode: ``StripeClient``
with the SDK's ``HTTPXClient`` and its ``*_async`` methods, so no request blocks the event loop.

- **Customers**: one Stripe customer per organization, found by its metadata (``parley_customer: org_<id>``,
  the Search API) or created with an idempotency key of its own (``parley_customer_org_<id>``), so two cards added
  at once make one customer.
- **Payment methods** reach Parley as tokens made by Stripe's client-side library: a card token (``tok_...``) is
  turned into a PaymentMethod (``type=card``, ``card[token]``), a PaymentMethod id (``pm_...``) is used as it is;
  either is attached to the customer. The card's reference is ``<customer id>/<payment method id>``.
- **Charges** are PaymentIntents confirmed at once on the customer's card, each with Stripe's ``Idempotency-Key``
  (the caller's key: Stripe answers a retried request with the first one's response, so a retried charge never
  charges twice). A replayed answer may be older than the PaymentIntent: one waiting for its holder (3-D Secure,
  ``requires_action``) is read again, so a charge the holder has authenticated since answers ``succeeded``.
  Declines (``card_error``) are results: ``decline_code`` (``insufficient_funds``...) or ``code``
  (``card_declined``); ``requires_action`` is ``authentication_required`` with the page where the holder
  authenticates (``next_action.redirect_to_url``, when a return URL is configured). Network errors and Stripe's
  own failures raise: the outcome is unknown, and the caller asks again with the same key.
- **Events**: Stripe's webhook (``Stripe-Signature``) verified by ``stripe.Webhook.construct_event``;
  ``payment_intent.succeeded`` and ``payment_intent.payment_failed`` become ``charge.succeeded`` / ``charge.failed``
  with the metadata the charge carried.

Outbound HTTP goes through the SDK's own HTTP client to the one operator-configured API base (``api.stripe.com``
by default), not through the egress port: the host is fixed by the operator, never given by a customer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any, TypeVar

import stripe
from stripe.params import PaymentIntentCreateParams

from application.ports.billing import ChargeResult, GatewayCard, GatewayEvent
from domain.billing import ChargeStatus
from domain.errors import NotFound, Unavailable, ValidationFailed

CUSTOMER_KEY = "parley_customer"
SIGNATURE_HEADER = "Stripe-Signature"
EVENTS = {"payment_intent.succeeded": "charge.succeeded", "payment_intent.payment_failed": "charge.failed"}
UNSETTLED = ("requires_action", "requires_confirmation", "processing")
"""PaymentIntent statuses a replayed answer may have left behind: read again."""


T = TypeVar("T")


class ChargeOutcomeUnknown(Exception):
    """Stripe has not settled the charge yet (``processing``): ask again later with the same key."""


class GatewayUnavailable(Unavailable):
    """Stripe could not be reached or failed on its side (503): nothing is known to have happened; asking again
    with the same idempotency key never charges twice."""


UNREACHABLE = (stripe.APIConnectionError, stripe.APIError, stripe.RateLimitError, stripe.AuthenticationError,
               stripe.PermissionError, ChargeOutcomeUnknown)


async def guarded(request: Awaitable[T]) -> T:
    """``request``, with Stripe being unreachable (or failing on its side) as 503 ``service_unavailable``. Raised
    outside the handler, so the error does not chain the network failure (which reads as the database's)."""
    try:
        return await request
    except UNREACHABLE as error:
        reason = f"{type(error).__name__}: {error}"[:200]
    raise GatewayUnavailable(f"The payment gateway cannot be reached right now ({reason}); nothing was changed. "
                             "Try again shortly (a retried charge is never charged twice)")


class StripePaymentGateway:
    """``PaymentGateway`` on Stripe. ``api_base``: Stripe's API (an emulator in tests); ``return_url``: where a card
    holder lands after authenticating a charge (3-D Secure); ``webhook_secret``: the endpoint's signing secret
    (``whsec_...``)."""

    def __init__(self, api_key: str, *, api_base: str | None = None, webhook_secret: str | None = None,
                 return_url: str | None = None, timeout: float = 30.0, max_network_retries: int = 2) -> None:
        self.http = stripe.HTTPXClient(timeout=timeout)
        addresses: Any = {"api": api_base} if api_base else None
        self.client = stripe.StripeClient(api_key, base_addresses=addresses, http_client=self.http,
                                          max_network_retries=max_network_retries)
        self.webhook_secret, self.return_url = webhook_secret, return_url

    async def close(self) -> None:
        await self.http.close_async()

    async def customer(self, customer: str) -> str:
        """The Stripe customer of ``customer`` (``org_<id>``), found by its metadata or created."""
        found = (await self.client.v1.customers.search_async(
            params={"query": f"metadata['{CUSTOMER_KEY}']:'{customer}'", "limit": 1})).to_dict()
        if found.get("data"):
            return str(found["data"][0]["id"])
        created = await self.client.v1.customers.create_async(
            params={"description": f"Parley organization {customer}", "metadata": {CUSTOMER_KEY: customer}},
            options={"idempotency_key": f"parley_customer_{customer}"})
        return str(created.id)

    async def attach(self, token: str, customer: str) -> GatewayCard:
        return await guarded(self.attach_now(token, customer))

    async def attach_now(self, token: str, customer: str) -> GatewayCard:
        customer_id = await self.customer(customer)
        methods = self.client.v1.payment_methods
        try:
            method_id = token
            if token.startswith("tok_"):
                method_id = (await methods.create_async(params={"type": "card", "card": {"token": token}})).id
            attached = (await methods.attach_async(method_id, params={"customer": customer_id})).to_dict()
        except stripe.CardError as error:
            raise ValidationFailed.field("token", f"the card was declined ({error.code or 'card_declined'})") \
                from error
        except stripe.InvalidRequestError as error:
            raise ValidationFailed.field("token", f"is not a payment token the gateway accepts "
                                                  f"({error.code or 'invalid_request'})") from error
        card = attached.get("card") or {}
        return GatewayCard(f"{customer_id}/{attached['id']}", str(card.get("brand", "unknown")),
                           str(card.get("last4", "")), int(card.get("exp_month", 0)), int(card.get("exp_year", 0)))

    async def detach(self, gateway_id: str) -> None:
        method_id = gateway_id.partition("/")[2]
        if not method_id:
            return
        try:
            await guarded(self.client.v1.payment_methods.detach_async(method_id))
        except stripe.InvalidRequestError:
            return  # gone already, or never attached

    async def charge(self, amount_cents: int, currency: str, gateway_id: str, idempotency_key: str,
                     metadata: Mapping[str, str] | None = None) -> ChargeResult:
        return await guarded(self.charge_now(amount_cents, currency, gateway_id, idempotency_key, metadata))

    async def charge_now(self, amount_cents: int, currency: str, gateway_id: str, idempotency_key: str,
                         metadata: Mapping[str, str] | None = None) -> ChargeResult:
        if not isinstance(amount_cents, int) or isinstance(amount_cents, bool) or amount_cents < 0:
            raise ValueError("amount_cents must be a non-negative integer")
        customer_id, _, method_id = gateway_id.partition("/")
        if not method_id:
            return ChargeResult(ChargeStatus.DECLINED, None, "invalid_payment_method")
        params: PaymentIntentCreateParams = {"amount": amount_cents, "currency": currency, "customer": customer_id,
                                  "payment_method": method_id, "confirm": True,
                                  "metadata": dict(metadata or {})}
        if self.return_url:  # 3-D Secure answers with the bank's page, which sends the holder back here
            params["return_url"] = self.return_url
        else:  # no page to come back to: Stripe needs to know no redirect can follow
            params["automatic_payment_methods"] = {"enabled": True, "allow_redirects": "never"}
        intents = self.client.v1.payment_intents
        try:
            intent = (await intents.create_async(params=params,
                                                 options={"idempotency_key": idempotency_key})).to_dict()
        except stripe.CardError as error:
            body = (error.json_body or {}).get("error", {}) if isinstance(error.json_body, dict) else {}
            code = body.get("decline_code") or error.code or "card_declined"
            intent_id = (body.get("payment_intent") or {}).get("id")
            return ChargeResult(ChargeStatus.DECLINED, intent_id, str(code))
        except stripe.IdempotencyError:
            raise  # the same key with other parameters: a bug, never a decline
        except stripe.InvalidRequestError as error:
            if error.http_status == 409:  # the first request with this key is still running: unknown yet
                raise
            return ChargeResult(ChargeStatus.DECLINED, None, error.code or "invalid_payment_method")
        if intent.get("status") in UNSETTLED:
            intent = (await intents.retrieve_async(str(intent["id"]))).to_dict()
        return self.result(intent)

    @staticmethod
    def result(intent: dict[str, Any]) -> ChargeResult:
        status, intent_id = intent.get("status"), str(intent.get("id"))
        if status == "succeeded":
            return ChargeResult(ChargeStatus.SUCCEEDED, intent_id)
        if status == "requires_action":
            redirect = ((intent.get("next_action") or {}).get("redirect_to_url") or {}).get("url")
            return ChargeResult(ChargeStatus.DECLINED, intent_id, "authentication_required", action_url=redirect)
        if status == "processing":
            raise ChargeOutcomeUnknown(f"PaymentIntent {intent_id} is processing")
        error = intent.get("last_payment_error") or {}
        return ChargeResult(ChargeStatus.DECLINED, intent_id, str(error.get("decline_code") or error.get("code")
                                                       or "card_declined"))

    async def parse_event(self, payload: bytes, signature: str | None) -> GatewayEvent | None:
        if not self.webhook_secret:
            raise NotFound("payment gateway webhook", "stripe (no signing secret is configured)")
        try:
            event = stripe.Webhook.construct_event(payload, signature or "", self.webhook_secret).to_dict()
        except (stripe.SignatureVerificationError, ValueError) as error:
            raise ValidationFailed.field(SIGNATURE_HEADER, "does not verify against the endpoint's signing "
                                                           "secret (or the payload is not an event)") from error
        kind = EVENTS.get(str(event.get("type")))
        if kind is None:
            return None
        intent = (event.get("data") or {}).get("object") or {}
        failure = intent.get("last_payment_error") or {}
        code = failure.get("decline_code") or failure.get("code")
        return GatewayEvent(str(event.get("id")), kind, str(intent.get("id")),
                            {str(k): str(v) for k, v in (intent.get("metadata") or {}).items()},
                            str(code) if code else None)
