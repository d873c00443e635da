"""Billing: plan prices, overage, invoices built from a period's usage, and the dunning schedule.

Money is integer cents (``usd``), never a float. The billing period is the usage period (domain/usage.py): a
UTC calendar month. An invoice is built from the plan's monthly price and the period's usage counters; plans
with overage (business, enterprise) add the call minutes and SMS segments past their included amounts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from domain.usage import CALL_SECONDS, HARD_STOP_PLANS, SMS_SEGMENTS, included

CURRENCY = "usd"
PLAN_PRICES: dict[str, int] = {"starter": 4_900, "business": 49_900, "enterprise": 249_900}
"""Monthly price of each plan, in cents."""
CALL_MINUTE_OVERAGE = 12
"""Cents per call minute past the included minutes (plans with overage)."""
SMS_SEGMENT_OVERAGE = 2
"""Cents per SMS segment past the included segments (plans with overage)."""

SUBSCRIPTION_STATUSES = ("active", "past_due", "canceled")
INVOICE_STATUSES = ("draft", "open", "paid", "void", "uncollectible")
RETRY_DELAYS = (timedelta(days=1), timedelta(days=3), timedelta(days=5))
"""After the first automatic decline the invoice is retried 1 day later, after the second 3 days later, after
the third 5 days later; a fourth decline makes it uncollectible."""

PAYABLE = ("open", "uncollectible")
"""Invoices ``POST /billing/invoices/{id}/pay`` may charge."""


@dataclass(frozen=True, slots=True)
class Subscription:
    organization_id: int
    plan: str
    status: str
    current_period_start: datetime
    current_period_end: datetime
    cancel_at_period_end: bool
    default_payment_method_id: int | None


@dataclass(frozen=True, slots=True)
class PaymentMethod:
    id: int | None
    organization_id: int
    gateway_id: str
    """The gateway's reference to the card (never a card number)."""
    brand: str
    last4: str
    exp_month: int
    exp_year: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class InvoiceLine:
    description: str
    quantity: int
    unit_amount: int
    amount: int


@dataclass(frozen=True, slots=True)
class Invoice:
    id: int | None
    organization_id: int
    number: str
    period: str
    period_start: datetime
    period_end: datetime
    status: str
    lines: tuple[InvoiceLine, ...]
    subtotal: int
    total: int
    currency: str
    created_at: datetime
    paid_at: datetime | None = None
    attempt_count: int = 0
    """Charges tried so far (each with its own idempotency key, ``charge_key``)."""
    automatic_failures: int = 0
    """Declines of the worker's own attempts (the dunning step)."""
    next_payment_attempt: datetime | None = None
    last_payment_error: str | None = None

    def charge_key(self) -> str:
        """The idempotency key of the next charge: derived from the invoice and the attempt, so a worker that
        dies after the gateway charged but before it recorded the outcome asks the gateway again with the same
        key (and is answered the same charge), while a later retry is a new charge."""
        return f"invoice_{self.id}_attempt_{self.attempt_count + 1}"


def invoice_number(organization_id: int, period: str) -> str:
    return f"PAR-{organization_id}-{period.replace('-', '')}"


def overage_billed(plan: str) -> bool:
    return plan not in HARD_STOP_PLANS


def invoice_lines(plan: str, period: str, used: dict[str, int]) -> tuple[InvoiceLine, ...]:
    """The plan's monthly price, then (plans with overage) the call minutes (billable seconds past the included
    ones, rounded up to whole minutes) and SMS segments past the included amounts."""
    lines = [InvoiceLine(f"{plan.capitalize()} plan ({period})", 1, PLAN_PRICES[plan], PLAN_PRICES[plan])]
    if overage_billed(plan):
        seconds_over = max(0, used.get(CALL_SECONDS, 0) - (included(plan, CALL_SECONDS) or 0))
        minutes_over = math.ceil(seconds_over / 60)
        if minutes_over:
            lines.append(InvoiceLine("Call minutes over the included amount", minutes_over, CALL_MINUTE_OVERAGE,
                                     minutes_over * CALL_MINUTE_OVERAGE))
        segments_over = max(0, used.get(SMS_SEGMENTS, 0) - (included(plan, SMS_SEGMENTS) or 0))
        if segments_over:
            lines.append(InvoiceLine("SMS segments over the included amount", segments_over, SMS_SEGMENT_OVERAGE,
                                     segments_over * SMS_SEGMENT_OVERAGE))
    return tuple(lines)


def build_invoice(organization_id: int, plan: str, period: str, period_start: datetime, period_end: datetime,
                  used: dict[str, int], now: datetime, *, status: str = "open") -> Invoice:
    lines = invoice_lines(plan, period, used)
    subtotal = sum(line.amount for line in lines)
    return Invoice(None, organization_id, invoice_number(organization_id, period), period, period_start, period_end,
                   status, lines, subtotal, subtotal, CURRENCY, now,
                   next_payment_attempt=now if status == "open" else None)


def after_decline(invoice: Invoice, code: str, now: datetime, *, automatic: bool) -> Invoice:
    """The invoice after a declined charge: the next automatic retry per ``RETRY_DELAYS``, or uncollectible once
    they are spent. A manual attempt (``POST .../pay``) leaves the dunning schedule as it was."""
    attempts = invoice.attempt_count + 1
    if not automatic:
        return replace(invoice, attempt_count=attempts, last_payment_error=code)
    failures = invoice.automatic_failures + 1
    if failures > len(RETRY_DELAYS):
        return replace(invoice, attempt_count=attempts, automatic_failures=failures, last_payment_error=code,
                       status="uncollectible", next_payment_attempt=None)
    return replace(invoice, attempt_count=attempts, automatic_failures=failures, last_payment_error=code,
                   next_payment_attempt=now + RETRY_DELAYS[failures - 1])


def after_payment(invoice: Invoice, now: datetime) -> Invoice:
    return replace(invoice, attempt_count=invoice.attempt_count + 1, status="paid", paid_at=now,
                   next_payment_attempt=None, last_payment_error=None)
