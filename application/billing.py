"""Billing use cases: the subscription (the organization's plan, changed at once), payment methods held by the
``PaymentGateway`` as tokens, invoices built from the plan price and the usage ledger's period counters, the
period close and the collection of invoices (run by the worker as jobs), and ``POST /billing/invoices/{id}/pay``.

Exactly once: an invoice per (organization, period) is guarded by a unique constraint, so closers running at once
(several workers, a lease taken over) never make two; each charge carries an idempotency key derived from the
invoice and its attempt number (``Invoice.charge_key``), so asking the gateway again after a crash never charges
twice. The invoice row is locked while it is charged (PostgreSQL ``FOR UPDATE``; SQLite has one writer).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from application.context import Actor
from application.ports.accounts import OrganizationRepository
from application.ports.billing import BillingAccount, BillingRepository, PaymentGateway
from application.ports.jobs import JobQueue, NewJob
from application.ports.platform import Clock, Page, PageRequest
from application.ports.usage import UsageLedger
from domain.billing import (
    PAYABLE,
    Invoice,
    PaymentMethod,
    Subscription,
    after_decline,
    after_payment,
    build_invoice,
)
from domain.errors import InvalidTransition, NotFound, ValidationFailed
from domain.organizations import PLANS, require_plan_within_parent
from domain.patching import MergePatch
from domain.usage import period_bounds, period_of, previous_period

COLLECT_JOB = "billing.collect"
"""The job that charges invoices whose next attempt is due (scheduled by the period close)."""
CLOSE_BATCH = 500
"""Organizations invoiced per transaction by the period close."""


def customer_of(organization_id: int) -> str:
    return f"org_{organization_id}"


async def _organization_plan(orgs: OrganizationRepository, organization_id: int) -> str:
    org = await orgs.get(organization_id)
    if org is None:
        raise NotFound("organization", organization_id)
    return org.plan


def _subscription(account: BillingAccount, plan: str, now: datetime) -> Subscription:
    start, end = period_bounds(period_of(now))
    return Subscription(account.organization_id, plan, account.status, start, end, account.cancel_at_period_end,
                        account.default_payment_method_id)


# ---------------------------------------------------------------------------------------------- subscription


@dataclass(frozen=True, slots=True)
class GetSubscriptionCommand:
    actor: Actor


class GetSubscription:
    def __init__(self, billing: BillingRepository, orgs: OrganizationRepository, clock: Clock) -> None:
        self.billing, self.orgs, self.clock = billing, orgs, clock

    async def execute(self, command: GetSubscriptionCommand) -> Subscription:
        org_id = command.actor.organization_id
        plan = await _organization_plan(self.orgs, org_id)
        return _subscription(await self.billing.account(org_id), plan, self.clock.now())


@dataclass(frozen=True, slots=True)
class UpdateSubscriptionCommand:
    actor: Actor
    patch: MergePatch  # plan, cancel_at_period_end


class UpdateSubscription:
    """A plan change applies at once: the organization's plan is what its limits (knowledge bases, concurrent
    calls), quotas and included amounts are read from. A sub-organization's plan never exceeds its parent's.
    A canceled subscription cannot be changed (409)."""

    def __init__(self, billing: BillingRepository, orgs: OrganizationRepository, clock: Clock) -> None:
        self.billing, self.orgs, self.clock = billing, orgs, clock

    async def execute(self, command: UpdateSubscriptionCommand) -> Subscription:
        org_id = command.actor.organization_id
        org = await self.orgs.get(org_id)
        if org is None:
            raise NotFound("organization", org_id)
        account = await self.billing.account(org_id, for_update=True)
        changes = dict(command.patch)
        if account.status == "canceled" and changes:
            raise InvalidTransition("subscription", "canceled", "active", action="a change",
                                    allowed_from=("active", "past_due"))
        plan = changes.get("plan")
        if plan is not None:
            if plan not in PLANS:
                raise ValidationFailed.field("plan", f"must be one of {', '.join(PLANS)}")
            if org.parent_id is not None:
                parent = await self.orgs.get(org.parent_id)
                if parent is not None:
                    require_plan_within_parent(plan, parent)
            if plan != org.plan:
                org = await self.orgs.update(replace(org, plan=plan, updated_at=self.clock.now()))
        if "cancel_at_period_end" in changes:
            account = replace(account, cancel_at_period_end=bool(changes["cancel_at_period_end"]))
            await self.billing.save_account(account)
        return _subscription(account, org.plan, self.clock.now())


# ---------------------------------------------------------------------------------------------- payment methods


@dataclass(frozen=True, slots=True)
class MethodView:
    method: PaymentMethod
    is_default: bool


@dataclass(frozen=True, slots=True)
class AddPaymentMethodCommand:
    actor: Actor
    token: str


class AddPaymentMethod:
    """Attach a gateway token; the organization's first method becomes its default."""

    def __init__(self, billing: BillingRepository, gateway: PaymentGateway, clock: Clock) -> None:
        self.billing, self.gateway, self.clock = billing, gateway, clock

    async def execute(self, command: AddPaymentMethodCommand) -> MethodView:
        org_id = command.actor.organization_id
        card = await self.gateway.attach(command.token, customer_of(org_id))
        method = await self.billing.add_method(PaymentMethod(None, org_id, card.gateway_id, card.brand, card.last4,
                                                             card.exp_month, card.exp_year, self.clock.now()))
        account = await self.billing.account(org_id, for_update=True)
        if account.default_payment_method_id is None:
            account = replace(account, default_payment_method_id=method.id)
            await self.billing.save_account(account)
        return MethodView(method, account.default_payment_method_id == method.id)


@dataclass(frozen=True, slots=True)
class ListPaymentMethodsCommand:
    actor: Actor


class ListPaymentMethods:
    def __init__(self, billing: BillingRepository) -> None:
        self.billing = billing

    async def execute(self, command: ListPaymentMethodsCommand) -> list[MethodView]:
        org_id = command.actor.organization_id
        default = (await self.billing.account(org_id)).default_payment_method_id
        return [MethodView(m, m.id == default) for m in await self.billing.methods(org_id)]


@dataclass(frozen=True, slots=True)
class PaymentMethodCommand:
    actor: Actor
    method_id: int


async def _method(billing: BillingRepository, command: PaymentMethodCommand) -> PaymentMethod:
    method = await billing.method(command.actor.organization_id, command.method_id)
    if method is None:
        raise NotFound("payment method", command.method_id)
    return method


class GetPaymentMethod:
    def __init__(self, billing: BillingRepository) -> None:
        self.billing = billing

    async def execute(self, command: PaymentMethodCommand) -> MethodView:
        method = await _method(self.billing, command)
        default = (await self.billing.account(command.actor.organization_id)).default_payment_method_id
        return MethodView(method, method.id == default)


class DeletePaymentMethod:
    """Detach the card at the gateway and forget it; when it was the default, the oldest remaining method (if
    any) becomes the default."""

    def __init__(self, billing: BillingRepository, gateway: PaymentGateway) -> None:
        self.billing, self.gateway = billing, gateway

    async def execute(self, command: PaymentMethodCommand) -> None:
        method = await _method(self.billing, command)
        org_id = command.actor.organization_id
        account = await self.billing.account(org_id, for_update=True)
        await self.billing.remove_method(org_id, command.method_id)
        if account.default_payment_method_id == command.method_id:
            rest = await self.billing.methods(org_id)
            await self.billing.save_account(replace(account, default_payment_method_id=rest[0].id if rest else None))
        await self.gateway.detach(method.gateway_id)


class SetDefaultPaymentMethod:
    def __init__(self, billing: BillingRepository) -> None:
        self.billing = billing

    async def execute(self, command: PaymentMethodCommand) -> MethodView:
        method = await _method(self.billing, command)
        account = await self.billing.account(command.actor.organization_id, for_update=True)
        await self.billing.save_account(replace(account, default_payment_method_id=method.id))
        return MethodView(method, True)


# ---------------------------------------------------------------------------------------------- invoices


@dataclass(frozen=True, slots=True)
class ListInvoicesCommand:
    actor: Actor
    page: PageRequest


class ListInvoices:
    def __init__(self, billing: BillingRepository) -> None:
        self.billing = billing

    async def execute(self, command: ListInvoicesCommand) -> Page[Invoice]:
        return await self.billing.invoices(command.actor.organization_id, command.page)


@dataclass(frozen=True, slots=True)
class GetInvoiceCommand:
    actor: Actor
    invoice_id: int


class GetInvoice:
    def __init__(self, billing: BillingRepository) -> None:
        self.billing = billing

    async def execute(self, command: GetInvoiceCommand) -> Invoice:
        invoice = await self.billing.invoice(command.actor.organization_id, command.invoice_id)
        if invoice is None:
            raise NotFound("invoice", command.invoice_id)
        return invoice


@dataclass(frozen=True, slots=True)
class GetUpcomingInvoiceCommand:
    actor: Actor


class GetUpcomingInvoice:
    """The current period so far: what its invoice would be if the period closed now (a draft, never stored)."""

    def __init__(self, ledger: UsageLedger, orgs: OrganizationRepository, clock: Clock) -> None:
        self.ledger, self.orgs, self.clock = ledger, orgs, clock

    async def execute(self, command: GetUpcomingInvoiceCommand) -> Invoice:
        org_id = command.actor.organization_id
        plan = await _organization_plan(self.orgs, org_id)
        now = self.clock.now()
        period = period_of(now)
        start, end = period_bounds(period)
        return build_invoice(org_id, plan, period, start, end, await self.ledger.used(org_id, period), now,
                             status="draft")


class InvoiceCharger:
    """Charges one invoice on the organization's default method and records the outcome with it: paid (the
    subscription active again once nothing is unpaid), or declined (the subscription past_due; the worker's
    attempts follow the dunning schedule, ``domain.billing.after_decline``)."""

    def __init__(self, billing: BillingRepository, gateway: PaymentGateway, clock: Clock) -> None:
        self.billing, self.gateway, self.clock = billing, gateway, clock

    async def charge(self, invoice: Invoice, *, automatic: bool,
                     payer: tuple[BillingAccount, PaymentMethod | None] | None = None) -> Invoice:
        """``payer``: the organization's account (locked) and default method when the caller read them already."""
        if payer is None:
            account = await self.billing.account(invoice.organization_id, for_update=True)
            method = None
            if account.default_payment_method_id is not None:
                method = await self.billing.method(invoice.organization_id, account.default_payment_method_id)
        else:
            account, method = payer
        if method is None:
            code = "no_payment_method"
            succeeded = False
        else:
            result = await self.gateway.charge(invoice.total, invoice.currency, method.gateway_id,
                                               invoice.charge_key())
            succeeded, code = result.succeeded, result.code or "card_declined"
        now = self.clock.now()
        if succeeded:
            invoice = after_payment(invoice, now)
            await self.billing.update_invoice(invoice)
            if account.status == "past_due" and await self.billing.unpaid(invoice.organization_id) == 0:
                await self.billing.save_account(replace(account, status="active"))
        else:
            invoice = after_decline(invoice, code, now, automatic=automatic)
            await self.billing.update_invoice(invoice)
            if account.status == "active":
                await self.billing.save_account(replace(account, status="past_due"))
        return invoice


@dataclass(frozen=True, slots=True)
class PayInvoiceCommand:
    actor: Actor
    invoice_id: int


class PayInvoice:
    """POST /billing/invoices/{id}/pay: charge an open or uncollectible invoice at once. A decline is answered
    with the invoice (its ``last_payment_error`` says why) and kept, like the worker's attempts."""

    def __init__(self, billing: BillingRepository, charger: InvoiceCharger) -> None:
        self.billing, self.charger = billing, charger

    async def execute(self, command: PayInvoiceCommand) -> Invoice:
        invoice = await self.billing.invoice(command.actor.organization_id, command.invoice_id, for_update=True)
        if invoice is None:
            raise NotFound("invoice", command.invoice_id)
        if invoice.status not in PAYABLE:
            raise InvalidTransition("invoice", invoice.status, "paid", action="pay", allowed_from=PAYABLE)
        return await self.charger.charge(invoice, automatic=False)


# ---------------------------------------------------------------------------------------------- the worker's side


@dataclass(frozen=True, slots=True)
class CloseBillingPeriodCommand:
    period: str
    after_organization_id: int = 0
    limit: int = CLOSE_BATCH


@dataclass(frozen=True, slots=True)
class ClosedBatch:
    last_organization_id: int
    seen: int
    invoiced: int


class CloseBillingPeriod:
    """One batch of the period close: invoices (open, due now) for organizations that have none for the period,
    built from the plan and the period's usage counters; subscriptions set to cancel at the period's end are
    canceled; the collection job is scheduled."""

    def __init__(self, billing: BillingRepository, ledger: UsageLedger, jobs: JobQueue, clock: Clock) -> None:
        self.billing, self.ledger, self.jobs, self.clock = billing, ledger, jobs, clock

    async def execute(self, command: CloseBillingPeriodCommand) -> ClosedBatch:
        start, end = period_bounds(command.period)
        now = self.clock.now()
        if now < end:
            raise ValidationFailed.field("period", f"{command.period} has not ended")
        batch = await self.billing.unbilled(command.period, end, command.after_organization_id, command.limit)
        if not batch:
            return ClosedBatch(command.after_organization_id, 0, 0)
        used = await self.ledger.used_by_organization(command.period, [o.organization_id for o in batch])
        invoices = [build_invoice(o.organization_id, o.plan, command.period, start, end,
                                  used.get(o.organization_id, {}), now) for o in batch]
        invoiced = await self.billing.add_invoices(invoices)
        await self.billing.cancel_at_period_end([o.organization_id for o in batch if o.cancel_at_period_end])
        if invoiced:
            await self.jobs.schedule(NewJob(COLLECT_JOB, now))
        return ClosedBatch(batch[-1].organization_id, len(batch), invoiced)


def period_to_close(now: datetime) -> str:
    """The last period that has ended."""
    return previous_period(period_of(now))


@dataclass(frozen=True, slots=True)
class CollectDueInvoicesCommand:
    limit: int = 100


class CollectDueInvoices:
    """One pass of the worker's collection: up to ``limit`` open invoices whose next attempt is due, locked (on
    PostgreSQL ``FOR UPDATE SKIP LOCKED``, so two workers take different ones), charged one after another and
    recorded in this one transaction. A crash before the commit leaves each invoice as it was; the next pass asks
    the gateway again with the same idempotency keys and gets the same answers, so nothing is charged twice.
    Returns how many were charged."""

    def __init__(self, billing: BillingRepository, charger: InvoiceCharger, clock: Clock) -> None:
        self.billing, self.charger, self.clock = billing, charger, clock

    async def execute(self, command: CollectDueInvoicesCommand) -> int:
        due = await self.billing.due_invoices(self.clock.now(), command.limit)
        payers = await self.billing.payers([invoice.organization_id for invoice in due])
        seen: set[int] = set()
        for invoice in due:
            org = invoice.organization_id
            # a second invoice of one organization in the batch reads the account the first one changed
            payer = None if org in seen else payers.get(org, (BillingAccount(org), None))
            seen.add(org)
            await self.charger.charge(invoice, automatic=True, payer=payer)
        return len(due)


@dataclass(frozen=True, slots=True)
class NextCollectionCommand:
    pass


class NextCollection:
    """When the earliest open invoice is due to be charged next."""

    def __init__(self, billing: BillingRepository) -> None:
        self.billing = billing

    async def execute(self, command: NextCollectionCommand) -> datetime | None:
        return await self.billing.next_attempt()
