"""Billing bodies. Every amount is integer cents (``usd``): never a float."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

from application.billing import MethodView
from domain.billing import Invoice, ServiceHold, Subscription
from domain.identity import persisted

Plan = Literal["starter", "business", "enterprise"]
Cents = Annotated[int, Meta(ge=0, description="Integer cents (usd)")]


# A "type: ignore[arg-type]" below marks a field whose domain type is wider than the documented one: a status
# the domain keeps as a str where the schema lists its values, or a field that is None only before the row is stored.

class ServiceHoldOut(Struct, kw_only=True):
    reason: Annotated[Literal["past_due", "canceled"], Meta(description=(
        "past_due: an invoice has been unpaid for more than 7 days; canceled: the subscription ended with its "
        "period"))]
    since: Annotated[datetime | None, Meta(description="When the subscription became past_due (null: canceled)")]
    message: Annotated[str, Meta(description="What happened and what lifts the hold")]

    @classmethod
    def of(cls, hold: ServiceHold) -> ServiceHoldOut:
        return cls(reason=hold.reason, since=hold.since, message=hold.message)  # type: ignore[arg-type]  # the domain's type is wider


class SubscriptionOut(Struct, kw_only=True):
    plan: Plan
    status: Literal["active", "past_due", "canceled"]
    current_period_start: datetime
    current_period_end: datetime
    cancel_at_period_end: bool
    default_payment_method_id: int | None
    pending_plan: Annotated[Plan | None, Meta(description=(
        "A downgrade that takes effect when the current period ends (null: none). PATCH the plan in force to "
        "cancel it."))]
    past_due_since: Annotated[datetime | None, Meta(description=(
        "When the subscription became past_due (null unless it is); 7 days later new work is refused"))]
    service_hold: Annotated[ServiceHoldOut | None, Meta(description=(
        "Why new calls, SMS, campaign starts, leads and widget contacts are refused now (402 payment_required), "
        "and how to lift it; null when they are not"))]
    billing_mode: Annotated[Literal["partner", "direct"], Meta(description=(
        "partner: a sub-organization whose plan and usage are lines on its partner's invoice (the default for "
        "sub-organizations); direct: invoiced and charged on its own (every organization without a partner)"))]

    @classmethod
    def of(cls, s: Subscription) -> SubscriptionOut:
        return cls(plan=s.plan, status=s.status, current_period_start=s.current_period_start,  # type: ignore[arg-type]  # the domain's type is wider
                   current_period_end=s.current_period_end, cancel_at_period_end=s.cancel_at_period_end,
                   default_payment_method_id=s.default_payment_method_id,
                   pending_plan=s.pending_plan,  # type: ignore[arg-type]  # the domain's type is wider
                   past_due_since=s.past_due_since,
                   service_hold=ServiceHoldOut.of(s.hold) if s.hold is not None else None,
                   billing_mode=s.billing_mode)  # type: ignore[arg-type]  # the domain's type is wider


class SubscriptionUpdate(Struct, forbid_unknown_fields=True):
    """A JSON merge patch: an upgrade applies at once (charged at once, prorated to the day), a downgrade at the
    period's end; on a canceled subscription a plan reactivates it."""

    plan: Plan | UnsetType = UNSET
    cancel_at_period_end: bool | UnsetType = UNSET
    billing_mode: Annotated[Literal["partner", "direct"], Meta(description=(
        "A sub-organization's billing mode, set by its partner (a partner key with X-Sub-Org-Id)"))] | UnsetType = (
        UNSET)


class PaymentMethodCreate(Struct, forbid_unknown_fields=True):
    token: Annotated[str, Meta(min_length=1, max_length=255, description=(
        "A payment token made by the gateway's client-side library (simulator: pm_card_visa, pm_card_mastercard, "
        "pm_card_chargeDeclined, pm_card_insufficientFunds); never a card number"))]


class PaymentMethodOut(Struct, kw_only=True):
    id: int
    brand: str
    last4: str
    exp_month: int
    exp_year: int
    is_default: bool
    created_at: datetime

    @classmethod
    def of(cls, view: MethodView) -> PaymentMethodOut:
        m = view.method
        return cls(id=persisted(m.id), brand=m.brand, last4=m.last4, exp_month=m.exp_month, exp_year=m.exp_year,
                   is_default=view.is_default, created_at=m.created_at)


class InvoiceLineOut(Struct, kw_only=True):
    description: str
    quantity: int
    unit_amount: Cents
    amount: Cents


class InvoiceOut(Struct, kw_only=True):
    id: Annotated[int | None, Meta(description="null for the upcoming invoice (not issued yet)")]
    number: str
    period: str
    period_start: datetime
    period_end: datetime
    status: Literal["draft", "open", "paid", "void", "uncollectible"]
    lines: list[InvoiceLineOut]
    subtotal: Cents
    total: Cents
    currency: Literal["usd"]
    created_at: datetime
    paid_at: datetime | None
    attempt_count: int
    next_payment_attempt: Annotated[datetime | None, Meta(description="When the worker charges it next")]
    last_payment_error: Annotated[str | None, Meta(description=(
        "Why the last charge failed: card_declined, insufficient_funds, no_payment_method..."))]

    @classmethod
    def of(cls, i: Invoice) -> InvoiceOut:
        return cls(id=i.id, number=i.number, period=i.period, period_start=i.period_start, period_end=i.period_end,
                   status=i.status,  # type: ignore[arg-type]  # the domain's type is wider
                   lines=[InvoiceLineOut(description=x.description, quantity=x.quantity, unit_amount=x.unit_amount,
                                         amount=x.amount) for x in i.lines],
                   subtotal=i.subtotal, total=i.total, currency=i.currency,  # type: ignore[arg-type]  # the domain's type is wider
                   created_at=i.created_at, paid_at=i.paid_at, attempt_count=i.attempt_count,
                   next_payment_attempt=i.next_payment_attempt, last_payment_error=i.last_payment_error)


StripeEvent = Annotated[dict[str, Any], Meta(description=(
    "A Stripe event object as Stripe sends it (id, type, data.object, ...); its Stripe-Signature is verified on "
    "the raw body, and Stripe's fields are Stripe's to extend"))]


class GatewayEventOut(Struct, kw_only=True):
    received: bool
    event_id: str | None
    invoice_id: Annotated[int | None, Meta(description="The invoice the event marked paid (null: none)")]
