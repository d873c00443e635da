"""The payment gateway simulator: Stripe's test tokens, a card reference that says how the card behaves (so every
process answers alike), and charges remembered by idempotency key (asking again answers the first result)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from application.ports.billing import ChargeResult, GatewayCard, GatewayEvent
from domain.billing import ChargeStatus
from domain.errors import NotFound, ValidationFailed


@dataclass(frozen=True, slots=True)
class TestCard:
    brand: str
    last4: str
    decline_code: str | None = None


TEST_CARDS: dict[str, TestCard] = {
    "pm_card_visa": TestCard("visa", "4242"),
    "pm_card_mastercard": TestCard("mastercard", "4444"),
    "pm_card_chargeDeclined": TestCard("visa", "0002", "card_declined"),
    "pm_card_insufficientFunds": TestCard("visa", "9995", "insufficient_funds"),
}
EXP_MONTH, EXP_YEAR = 12, 2034


@dataclass(frozen=True, slots=True)
class SimulatedCharge:
    idempotency_key: str
    amount_cents: int
    currency: str
    gateway_id: str
    result: ChargeResult


class SimulatedPaymentGateway:
    """``PaymentGateway`` without a processor. ``charges`` lists every charge made (not the replays)."""

    def __init__(self) -> None:
        self.charges: list[SimulatedCharge] = []
        self._by_key: dict[str, SimulatedCharge] = {}

    async def attach(self, token: str, customer: str) -> GatewayCard:
        card = TEST_CARDS.get(token)
        if card is None:
            raise ValidationFailed.field("token", f"is not a payment token the gateway knows (test tokens: "
                                                  f"{', '.join(TEST_CARDS)})")
        return GatewayCard(f"{token}.{secrets.token_hex(8)}", card.brand, card.last4, EXP_MONTH, EXP_YEAR)

    async def detach(self, gateway_id: str) -> None:
        return None

    async def parse_event(self, payload: bytes, signature: str | None) -> GatewayEvent | None:
        raise NotFound("payment gateway webhook", "simulator")

    async def charge(self, amount_cents: int, currency: str, gateway_id: str, idempotency_key: str,
                     metadata: Mapping[str, str] | None = None) -> ChargeResult:
        if not isinstance(amount_cents, int) or isinstance(amount_cents, bool) or amount_cents < 0:
            raise ValueError("amount_cents must be a non-negative integer")
        earlier = self._by_key.get(idempotency_key)
        if earlier is not None:
            return earlier.result
        card = TEST_CARDS.get(gateway_id.partition(".")[0])
        if card is None:
            result = ChargeResult(ChargeStatus.DECLINED, None, "invalid_payment_method")
        elif card.decline_code is not None:
            result = ChargeResult(ChargeStatus.DECLINED, f"ch_sim_{secrets.token_hex(8)}", card.decline_code)
        else:
            result = ChargeResult(ChargeStatus.SUCCEEDED, f"ch_sim_{secrets.token_hex(8)}")
        charge = SimulatedCharge(idempotency_key, amount_cents, currency, gateway_id, result)
        self._by_key[idempotency_key] = charge
        self.charges.append(charge)
        return result
