"""Ports of billing: the payment gateway (a card processor such as Stripe; a simulator by default) and the billing
storage (accounts, payment methods, invoices)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from application.ports.platform import Page, PageRequest
from domain.billing import ChargeStatus, Invoice, PaymentMethod, PlanChange


@dataclass(frozen=True, slots=True)
class GatewayCard:
    """A card the gateway holds for us: its reference and what may be shown of it (never the number)."""

    gateway_id: str
    brand: str
    last4: str
    exp_month: int
    exp_year: int


@dataclass(frozen=True, slots=True)
class ChargeResult:
    status: ChargeStatus
    """``succeeded`` or ``declined``."""
    charge_id: str | None = None
    code: str | None = None
    """Why it was declined (``card_declined``, ``insufficient_funds``, ``authentication_required``, ...)."""
    action_url: str | None = None
    """A card that needs its holder to authenticate the charge (3-D Secure; code ``authentication_required``): the
    page where they do. Once done, asking again with the same idempotency key answers ``succeeded``."""

    @property
    def succeeded(self) -> bool:
        return self.status == ChargeStatus.SUCCEEDED


class PaymentGateway(Protocol):
    """A card processor. Cards reach it from the client as tokens (made by the processor's own client-side
    library), so card numbers never pass through Parley."""

    async def attach(self, token: str, customer: str) -> GatewayCard:
        """Turn a client-side token into a reusable card of ``customer`` (``org_<id>``); an unknown or unusable
        token raises ValidationFailed naming ``token``."""
        ...

    async def detach(self, gateway_id: str) -> None:
        """Forget the card (a card already gone is fine)."""
        ...

    async def charge(self, amount_cents: int, currency: str, gateway_id: str, idempotency_key: str,
                     metadata: Mapping[str, str] | None = None) -> ChargeResult:
        """Charge the card once per ``idempotency_key``: asking again with the same key answers that charge
        (as it is now: one its holder has authenticated since has succeeded) without charging again. A decline is a
        result, not an exception; an exception means the outcome is unknown (the caller retries with the same key).
        ``metadata`` travels with the charge and comes back in the gateway's events (``parse_event``)."""
        ...

    async def parse_event(self, payload: bytes, signature: str | None) -> GatewayEvent | None:
        """A notification the gateway sent (its webhook), verified by its signature: raise ValidationFailed naming
        the signature header when it does not verify, NotFound when this gateway sends none; None for an event
        Parley does not act on."""
        ...


@dataclass(frozen=True, slots=True)
class GatewayEvent:
    """A charge's outcome the gateway announced later (a card authenticated after 3-D Secure, say)."""

    id: str
    type: str
    """``charge.succeeded`` or ``charge.failed``."""
    charge_id: str
    metadata: Mapping[str, str]
    code: str | None = None


class InvoiceRenderer(Protocol):
    """Invoices as documents a customer files."""

    async def render(self, invoice: Invoice, organization_name: str) -> bytes:
        """The invoice as a PDF document."""
        ...


@dataclass(frozen=True, slots=True)
class BillingAccount:
    """An organization's subscription state (its plan is the organization's)."""

    organization_id: int
    status: str = "active"
    cancel_at_period_end: bool = False
    default_payment_method_id: int | None = None
    pending_plan: str | None = None
    """A downgrade that takes effect when the current period closes."""
    past_due_since: datetime | None = None
    """When the subscription became past_due (its first unpaid decline); None unless it is past_due."""
    billing_mode: str = "partner"
    """A partner's sub-organization: ``partner`` (its plan and usage are lines on the partner's invoice) or
    ``direct`` (invoiced and charged on its own). Organizations without a parent are always billed directly."""


@dataclass(frozen=True, slots=True)
class Unbilled:
    """An organization with no invoice yet for the period being closed."""

    organization_id: int
    plan: str
    cancel_at_period_end: bool
    pending_plan: str | None = None
    parent_id: int | None = None
    billing_mode: str = "partner"
    is_partner: bool = False

    @property
    def billed_by_partner(self) -> bool:
        """A sub-organization in partner mode: its period is billed on its partner's invoice."""
        return self.parent_id is not None and self.billing_mode == "partner"


class BillingRepository(Protocol):
    async def account(self, organization_id: int, *, for_update: bool = False) -> BillingAccount:
        """The organization's account (the default one, active, when none was stored)."""
        ...

    async def save_account(self, account: BillingAccount) -> None: ...

    async def payers(self, organization_ids: Sequence[int]) -> dict[int, tuple[BillingAccount, PaymentMethod | None]]:
        """Each organization's account (locked for this transaction) and default payment method, in one go (the
        collection's batch); organizations without a stored account are absent."""
        ...

    async def add_method(self, method: PaymentMethod) -> PaymentMethod: ...

    async def methods(self, organization_id: int) -> list[PaymentMethod]:
        """Oldest first."""
        ...

    async def method(self, organization_id: int, method_id: int) -> PaymentMethod | None: ...

    async def remove_method(self, organization_id: int, method_id: int) -> None: ...

    async def add_invoices(self, invoices: Sequence[Invoice]) -> int:
        """Insert each period invoice unless its (organization, period) has one already (a unique constraint, so
        concurrent closers never make two); returns how many were inserted."""
        ...

    async def insert_invoices(self, invoices: Sequence[Invoice]) -> list[Invoice]:
        """``add_invoices`` (at most one invoice per organization), answering the invoices inserted, with their
        ids (for their ``invoice.created`` events)."""
        ...

    async def add_proration_invoice(self, invoice: Invoice) -> Invoice:
        """Insert an upgrade's own invoice (kind ``proration``; any number per period)."""
        ...

    async def proration_count(self, organization_id: int, period: str) -> int:
        """How many upgrade invoices the organization has for the period."""
        ...

    async def add_plan_change(self, change: PlanChange) -> None: ...

    async def plan_changes(self, organization_ids: Sequence[int]) -> dict[int, list[PlanChange]]:
        """Each organization's plan changes, oldest first (organizations without any are absent)."""
        ...

    async def invoice(self, organization_id: int, invoice_id: int, *, for_update: bool = False) -> Invoice | None: ...

    async def invoices(self, organization_id: int, page: PageRequest) -> Page[Invoice]:
        """Newest period first."""
        ...

    async def update_invoice(self, invoice: Invoice) -> None:
        """Store the invoice's status, attempts, next attempt, last error and paid_at."""
        ...

    async def unpaid(self, organization_id: int) -> int:
        """Invoices of the organization that are open or uncollectible."""
        ...

    async def unpaid_invoice_ids(self, organization_id: int) -> list[int]:
        """Ids of the organization's open or uncollectible invoices, oldest first."""
        ...

    async def due_invoices(self, now: datetime, limit: int) -> list[Invoice]:
        """Open invoices whose next attempt is due, earliest first, locked for this transaction (PostgreSQL: rows
        another transaction holds are skipped)."""
        ...

    async def next_attempt(self) -> datetime | None:
        """The earliest next attempt of any open invoice."""
        ...

    async def unbilled(self, period: str, period_end: datetime, after_organization_id: int,
                       limit: int) -> list[Unbilled]:
        """Organizations (not deleted, created before ``period_end``, subscription not canceled) without a period
        invoice for ``period``, by id after ``after_organization_id``."""
        ...

    async def cancel_at_period_end(self, organization_ids: Sequence[int]) -> list[int]:
        """Cancel the subscriptions of these organizations that are set to cancel at the period's end and not
        canceled yet (their period closed), dropping any pending downgrade; returns the ones canceled now."""
        ...

    async def billing_modes(self, organization_ids: Sequence[int]) -> dict[int, str]:
        """Each organization's billing mode (``partner`` when no account is stored), in one go."""
        ...

    async def take_pending_plan(self, organization_id: int, plan: str) -> bool:
        """Clear the account's pending plan if it is still ``plan`` (one conditional UPDATE, so of two closers only
        one applies a downgrade); True when this call cleared it."""
        ...
