"""Billing: plan prices, overage, plan changes within a period, invoices, and the dunning schedule.

Money is integer cents (``usd``), never a float. The billing period is the usage period (domain/usage.py): a
UTC calendar month. A period's invoice bills the plan that was in force when the period began; an upgrade during
the period is charged at once for the rest of the period (``proration_line``), and a downgrade waits for the
period's end. Usage past the included amounts is billed at the overage rate of the plan that was in force when it
was used (``usage_lines``), against included amounts prorated by the days each plan was in force
(``prorated_included``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from itertools import pairwise

from domain.organizations import plan_rank
from domain.rfc3339 import format_utc
from domain.usage import CALL_SECONDS, HARD_STOP_PLANS, SMS_SEGMENTS, included, period_bounds

CURRENCY = "usd"
PLAN_PRICES: dict[str, int] = {"starter": 4_900, "business": 49_900, "enterprise": 249_900}
"""Monthly price of each plan, in cents."""
CALL_MINUTE_OVERAGE = 12
"""Cents per call minute past the included minutes (plans with overage)."""
SMS_SEGMENT_OVERAGE = 2
"""Cents per SMS segment past the included segments (plans with overage)."""

OVERAGE_RATES: dict[str, dict[str, int]] = {
    "business": {CALL_SECONDS: CALL_MINUTE_OVERAGE, SMS_SEGMENTS: SMS_SEGMENT_OVERAGE},
    "enterprise": {CALL_SECONDS: CALL_MINUTE_OVERAGE, SMS_SEGMENTS: SMS_SEGMENT_OVERAGE},
}
"""Cents per call minute and per SMS segment past the included amounts, by plan; starter has none (it stops)."""

class SubscriptionStatus(StrEnum):
    """The status of an organization's subscription."""

    ACTIVE = "active"
    PAST_DUE = "past_due"
    CANCELED = "canceled"


SUBSCRIPTION_STATUSES = tuple(SubscriptionStatus)


class InvoiceStatus(StrEnum):
    """The status of an invoice."""

    DRAFT = "draft"
    OPEN = "open"
    PAID = "paid"
    VOID = "void"
    UNCOLLECTIBLE = "uncollectible"


INVOICE_STATUSES = tuple(InvoiceStatus)
RETRY_DELAYS = (timedelta(days=1), timedelta(days=3), timedelta(days=5))
"""After the first automatic decline the invoice is retried 1 day later, after the second 3 days later, after
the third 5 days later; a fourth decline makes it uncollectible."""

PAYABLE = (InvoiceStatus.OPEN, InvoiceStatus.UNCOLLECTIBLE)
"""Invoices ``POST /billing/invoices/{id}/pay`` may charge."""

PAST_DUE_GRACE = timedelta(days=7)
"""How long a past_due subscription keeps full service: past it, new calls, SMS and campaign starts are refused
(402 payment_required) until nothing is unpaid."""


class ChargeStatus(StrEnum):
    """What the card processor answered to one charge (a decline is an answer, not an error)."""

    SUCCEEDED = "succeeded"
    DECLINED = "declined"


@dataclass(frozen=True, slots=True)
class Subscription:
    organization_id: int
    plan: str
    status: str
    current_period_start: datetime
    current_period_end: datetime
    cancel_at_period_end: bool
    default_payment_method_id: int | None
    pending_plan: str | None = None
    """A downgrade waiting for the period's end (None: none)."""
    past_due_since: datetime | None = None
    """When the subscription became past_due (None unless it is)."""
    hold: ServiceHold | None = None
    """Why new work is refused now (402 payment_required), None when it is not."""
    billing_mode: str = "direct"
    """``partner``: a sub-organization billed on its partner's invoice; ``direct``: invoiced on its own."""


@dataclass(frozen=True, slots=True)
class ServiceHold:
    """Why new work (calls, SMS, campaign starts) is refused with 402 payment_required, and how to lift it."""

    reason: str
    """``past_due`` (unpaid for more than ``PAST_DUE_GRACE``) or ``canceled`` (the subscription's period ended)."""
    since: datetime | None
    message: str
    """What happened and what lifts it, in a customer's words."""


def service_hold(status: str, past_due_since: datetime | None, now: datetime) -> ServiceHold | None:
    """The hold on new work an organization's subscription puts (None: full service). ``past_due`` keeps full
    service for ``PAST_DUE_GRACE`` after it began (a subscription past_due since an unknown instant is held at
    once); ``canceled`` is only ever set when the subscription's period closed, so it always holds."""
    if status == SubscriptionStatus.CANCELED:
        return ServiceHold("canceled", None,
                           "the subscription was canceled when its period ended: new calls, SMS and campaign starts "
                           "are paused. Reactivate it with a plan (PATCH /billing/subscription {\"plan\": ...}, "
                           "with a default payment method that works); service resumes at once.")
    if status == SubscriptionStatus.PAST_DUE and (past_due_since is None or now - past_due_since > PAST_DUE_GRACE):
        when = f" since {past_due_since.astimezone(UTC).date().isoformat()}" if past_due_since else ""
        return ServiceHold("past_due", past_due_since,
                           f"an invoice has been unpaid{when}, more than {PAST_DUE_GRACE.days} days: new calls, SMS "
                           "and campaign starts are paused. Pay the open invoice (POST /billing/invoices/{id}/pay, "
                           "after adding a working default payment method if the card was declined); service "
                           "resumes at once.")
    return None


@dataclass(frozen=True, slots=True)
class PlanChange:
    """The plan an organization is subscribed to changed at ``effective_at``. ``None`` stands for no subscription
    (canceled): a cancellation is a change to None, a reactivation a change from None."""

    organization_id: int
    previous_plan: str | None
    plan: str | None
    effective_at: datetime
    charged: bool = True
    """False for an upgrade made without a charge (a partner raising a sub-organization's plan): the period's
    invoice bills its price difference for the days left instead."""


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
    kind: str = "period"
    """``period``: the one invoice of a closed period; ``proration``: an upgrade charged at once."""
    next_action_url: str | None = field(default=None, compare=False)
    """On the answer to a charge declined for 3-D Secure (``authentication_required``) only, never stored: the
    page where the card's holder authenticates the charge; once done, paying again goes through."""

    def view(self) -> dict[str, object]:
        """What the ``invoice.*`` events carry (the lines stay behind ``GET /billing/invoices/{id}``)."""
        def instant(at: datetime | None) -> str | None:
            return format_utc(at) if at is not None else None
        return {"id": self.id, "organization_id": self.organization_id, "number": self.number,
                "period": self.period, "kind": self.kind, "status": self.status, "total": self.total,
                "currency": self.currency, "attempt_count": self.attempt_count,
                "last_payment_error": self.last_payment_error,
                "next_payment_attempt": instant(self.next_payment_attempt), "paid_at": instant(self.paid_at),
                "created_at": instant(self.created_at)}

    def charge_key(self) -> str:
        """The idempotency key of the next charge: derived from the invoice and the attempt, so a worker that
        dies after the gateway charged but before it recorded the outcome asks the gateway again with the same
        key (and is answered the same charge), while a later retry is a new charge."""
        return f"invoice_{self.id}_attempt_{self.attempt_count + 1}"


def invoice_number(organization_id: int, period: str) -> str:
    return f"PAR-{organization_id}-{period.replace('-', '')}"


def overage_billed(plan: str) -> bool:
    return plan not in HARD_STOP_PLANS


# ---------------------------------------------------------------------------------------------- plans in time


def plan_at(changes: Sequence[PlanChange], at: datetime, current: str | None) -> str | None:
    """The plan in force at ``at`` from the organization's plan changes (oldest first): the last change made by
    then, else what the first change replaced, else ``current`` (the plan never changed)."""
    made = [c for c in changes if c.effective_at <= at]
    if made:
        return made[-1].plan
    return changes[0].previous_plan if changes else current


def charged_at_once(change: PlanChange) -> bool:
    """An upgrade or a reactivation: charged on its own invoice when it is made."""
    if change.plan is None:
        return False
    return change.previous_plan is None or plan_rank(change.plan) > plan_rank(change.previous_plan)


def opening_plan(changes: Sequence[PlanChange], start: datetime, current: str | None) -> str | None:
    """The plan whose price a period's invoice bills: the plan in force just before the period began, or the
    downgrade or cancellation that took effect as it began. An upgrade made at the very first instant is charged on
    its own invoice, like any upgrade."""
    plan = plan_at(changes, start - timedelta(microseconds=1), current)
    for change in changes:
        if change.effective_at == start and not charged_at_once(change):
            plan = change.plan
    return plan


@dataclass(frozen=True, slots=True)
class PlanInterval:
    start: datetime
    end: datetime
    plan: str | None


def plan_intervals(changes: Sequence[PlanChange], start: datetime, end: datetime,
                   current: str | None) -> list[PlanInterval]:
    """[start, end) cut where the plan changed, each piece with the plan in force in it."""
    cuts = sorted({c.effective_at for c in changes if start < c.effective_at < end})
    bounds = [start, *cuts, end]
    return [PlanInterval(a, b, plan_at(changes, a, current)) for a, b in pairwise(bounds)]


def period_days(start: datetime, end: datetime) -> int:
    return (end - start).days


def days_left(at: datetime, end: datetime) -> int:
    """Days of the period from the day of ``at`` (counted whole) to its end."""
    return (end.astimezone(UTC).date() - at.astimezone(UTC).date()).days


def prorated_included(changes: Sequence[PlanChange], start: datetime, end: datetime, current: str | None,
                      metric: str) -> int:
    """The period's included amount of ``metric``: each day brings the daily share of the included amount of
    the plan in force at the day's end (the day of an upgrade counts for the new plan, as its price does), rounded
    down. A period on one plan includes exactly that plan's amount."""
    days = period_days(start, end)
    total = 0
    for day in range(days):
        plan = plan_at(changes, start + timedelta(days=day + 1) - timedelta(microseconds=1), current)
        total += (included(plan, metric) or 0) if plan is not None else 0
    return total // days


# ---------------------------------------------------------------------------------------------- invoice lines


def plan_line(plan: str, period: str) -> InvoiceLine:
    return InvoiceLine(f"{plan.capitalize()} plan ({period})", 1, PLAN_PRICES[plan], PLAN_PRICES[plan])


_OVERAGE_DESCRIPTIONS = {CALL_SECONDS: "Call minutes over the included amount",
                         SMS_SEGMENTS: "SMS segments over the included amount"}


def usage_lines(used: Sequence[tuple[str | None, dict[str, int]]], allowance: dict[str, int]
                ) -> tuple[InvoiceLine, ...]:
    """Overage lines from the usage of each plan interval, oldest first (plan, metric → quantity): the included
    amount is spent in the order the usage happened; what is left over is billed at the overage rate of the plan
    in force when it was used (none on starter). Usage while no plan was in force (canceled) is not billed and
    spends nothing. Call seconds past the included ones are rounded up to whole minutes."""
    lines: list[InvoiceLine] = []
    for metric in (CALL_SECONDS, SMS_SEGMENTS):
        left = allowance.get(metric, 0)
        over_by_rate: dict[int, int] = {}
        for plan, quantities in used:
            if plan is None:
                continue
            quantity = quantities.get(metric, 0)
            spent = min(left, quantity)
            left -= spent
            rate = OVERAGE_RATES.get(plan, {}).get(metric)
            if rate and quantity > spent:
                over_by_rate[rate] = over_by_rate.get(rate, 0) + quantity - spent
        for rate, over in sorted(over_by_rate.items()):
            units = math.ceil(over / 60) if metric == CALL_SECONDS else over
            lines.append(InvoiceLine(_OVERAGE_DESCRIPTIONS[metric], units, rate, units * rate))
    return tuple(lines)


def period_lines(period: str, start: datetime, end: datetime, changes: Sequence[PlanChange], current: str | None,
                 used: Sequence[dict[str, int]]) -> tuple[InvoiceLine, ...]:
    """A period's invoice: the price of the plan in force when the period began (``opening_plan``; none when no
    plan was), the upgrades made during the period that were not charged at once (prorated like those that were),
    then the overage (``usage_lines``). ``used``: the usage of each of
    ``plan_intervals(changes, start, end, current)``."""
    intervals = plan_intervals(changes, start, end, current)
    first = opening_plan(changes, start, current)
    allowance = {m: prorated_included(changes, start, end, current, m) for m in (CALL_SECONDS, SMS_SEGMENTS)}
    fee = (plan_line(first, period),) if first is not None else ()
    uncharged = tuple(proration_line(c.previous_plan, c.plan, c.effective_at, start, end) for c in changes
                      if start <= c.effective_at < end and not c.charged and charged_at_once(c) and c.plan)
    return fee + uncharged + usage_lines([(i.plan, u) for i, u in zip(intervals, used, strict=True)], allowance)


def invoice_lines(plan: str, period: str, used: dict[str, int]) -> tuple[InvoiceLine, ...]:
    """A period on one plan throughout: its price, then the overage of the period's usage."""
    start, end = period_bounds(period)
    return period_lines(period, start, end, (), plan, [used])


def proration_line(previous: str | None, plan: str, at: datetime, start: datetime, end: datetime) -> InvoiceLine:
    """An upgrade (or a reactivation, from no plan) at ``at``: the price difference for the days left in the
    period, the day of the change included, rounded down to the cent."""
    days, left = period_days(start, end), days_left(at, end)
    difference = PLAN_PRICES[plan] - (PLAN_PRICES[previous] if previous is not None else 0)
    amount = max(0, difference * left // days)
    last_day = (end - timedelta(days=1)).date().isoformat()
    description = (f"{plan.capitalize()} plan from {at.astimezone(UTC).date().isoformat()} to {last_day} "
                   f"({left} of {days} days)")
    if previous is not None:
        description += f", less the {previous.capitalize()} plan"
    return InvoiceLine(description, 1, amount, amount)


def build_invoice(organization_id: int, plan: str, period: str, period_start: datetime, period_end: datetime,
                  used: dict[str, int], now: datetime, *, status: str = "open") -> Invoice:
    """The invoice of a period on one plan throughout."""
    return period_invoice(organization_id, period, period_start, period_end, invoice_lines(plan, period, used), now,
                          status=status)


def period_invoice(organization_id: int, period: str, period_start: datetime, period_end: datetime,
                   lines: Sequence[InvoiceLine], now: datetime, *, status: str = "open") -> Invoice:
    subtotal = sum(line.amount for line in lines)
    return Invoice(None, organization_id, invoice_number(organization_id, period), period, period_start, period_end,
                   status, tuple(lines), subtotal, subtotal, CURRENCY, now,
                   next_payment_attempt=now if status == InvoiceStatus.OPEN else None)


def proration_invoice(organization_id: int, sequence: int, line: InvoiceLine, at: datetime, period: str,
                      period_end: datetime) -> Invoice:
    """An upgrade's own invoice (``sequence``: its number among the period's upgrades of the organization), to be
    charged at once."""
    return Invoice(None, organization_id, f"{invoice_number(organization_id, period)}-U{sequence}", period, at,
                   period_end, "open", (line,), line.amount, line.amount, CURRENCY, at, kind="proration")


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
