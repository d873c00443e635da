"""Billing use cases: the subscription (upgrades at once and charged at once, prorated to the day; downgrades at
the period's end), payment methods held by the ``PaymentGateway`` as tokens, invoices built from the plans in force
during the period and the usage ledger, the period close and the collection of invoices (run by the worker as
jobs), and ``POST /billing/invoices/{id}/pay``.

Exactly once: an invoice per (organization, period) is guarded by a unique constraint, so closers running at once
(several workers, a lease taken over) never make two; each charge carries an idempotency key derived from the
invoice and its attempt number (``Invoice.charge_key``), so asking the gateway again after a crash never charges
twice. The invoice row is locked while it is charged (PostgreSQL ``FOR UPDATE``; SQLite has one writer).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from application.context import Actor
from application.jobs import JobKind, clock_now, drain_batches
from application.ports.accounts import OrganizationRepository
from application.ports.billing import (
    BillingAccount,
    BillingRepository,
    InvoiceRenderer,
    PaymentGateway,
    Unbilled,
)
from application.ports.jobs import ClaimedJob, JobQueue, NewJob
from application.ports.platform import Clock, Page, PageRequest, UnitOfWork, Units
from application.ports.usage import UsageLedger
from domain.billing import (
    PAYABLE,
    Invoice,
    InvoiceLine,
    InvoiceStatus,
    PaymentMethod,
    PlanChange,
    ServiceHold,
    Subscription,
    SubscriptionStatus,
    after_decline,
    after_payment,
    invoice_number,
    period_invoice,
    period_lines,
    plan_intervals,
    proration_invoice,
    proration_line,
    service_hold,
)
from domain.errors import (
    CardDeclined,
    ChildrenAbovePlan,
    InvalidTransition,
    NotFound,
    PaymentMethodRequired,
    SubOrgForbidden,
    ValidationFailed,
)
from domain.events import DomainEvent, EventType
from domain.identity import persisted
from domain.organizations import PLANS, Organization, plan_rank, require_plan_within_parent
from domain.patching import MergePatch
from domain.rfc3339 import format_utc
from domain.usage import period_bounds, period_of, previous_period

BILLING_MODES = ("partner", "direct")
PARTNER_HOLD = ("your partner's billing is on hold ({reason}): new calls, SMS and campaign starts are paused until "
                "your partner settles it")
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


def _subscription(account: BillingAccount, plan: str, now: datetime, *, child: bool = False) -> Subscription:
    """``child``: the organization is a partner's sub-organization (its billing mode applies)."""
    start, end = period_bounds(period_of(now))
    return Subscription(account.organization_id, plan, account.status, start, end, account.cancel_at_period_end,
                        account.default_payment_method_id, account.pending_plan, account.past_due_since,
                        service_hold(account.status, account.past_due_since, now),
                        account.billing_mode if child else "direct")


def _subscription_updated(subscription: Subscription, previous_plan: str) -> DomainEvent:
    """``subscription.updated`` with the subscription as it now is."""
    return EventType.SUBSCRIPTION_UPDATED(subscription.organization_id, {
        "organization_id": subscription.organization_id,
        "plan": None if subscription.status == SubscriptionStatus.CANCELED else subscription.plan,
        "previous_plan": previous_plan,
        "pending_plan": subscription.pending_plan, "status": subscription.status,
        "cancel_at_period_end": subscription.cancel_at_period_end,
        "current_period_start": format_utc(subscription.current_period_start),
        "current_period_end": format_utc(subscription.current_period_end)})


async def _children_above(orgs: OrganizationRepository, partner: Organization, plan: str) -> list[Organization]:
    """The partner's sub-organizations on a plan above ``plan``."""
    if not partner.is_partner or partner.id is None:
        return []
    above: list[Organization] = []
    offset = 0
    while True:
        page = await orgs.list_children(partner.id, PageRequest(100, offset))
        above += [child for child in page.items if plan_rank(child.plan) > plan_rank(plan)]
        offset += len(page.items)
        if not page.items or offset >= page.total:
            return above


async def _children_within(orgs: OrganizationRepository, partner: Organization, plan: str) -> None:
    """A partner's plan never drops below one of its sub-organizations' plans (409 children_above_plan)."""
    above = await _children_above(orgs, partner, plan)
    if above:
        raise ChildrenAbovePlan(
            f"plan: {len(above)} sub-organization(s) are on a plan above {plan}; lower their plans first "
            f"(PATCH /organizations/{{id}})", details={"field": "plan", "requested_plan": plan, "children": [
                {"organization_id": c.id, "name": c.name, "plan": c.plan} for c in above]})


def _billing_mode(actor: Actor, org: Organization, mode: object) -> str:
    """A sub-organization's billing mode, set by its partner (a partner key acting in it, ``X-Sub-Org-Id``)."""
    if mode not in BILLING_MODES:
        raise ValidationFailed.field("billing_mode", f"must be one of {', '.join(BILLING_MODES)}")
    if org.parent_id is None:
        raise ValidationFailed.field("billing_mode", "only a partner's sub-organization has a billing mode")
    if actor.key_organization_id != org.parent_id:
        raise SubOrgForbidden("billing_mode: a sub-organization's billing mode is set by its partner (a partner key "
                              "with X-Sub-Org-Id)", details={"field": "billing_mode"})
    return str(mode)


# ---------------------------------------------------------------------------------------------- subscription


@dataclass(frozen=True, slots=True)
class GetSubscriptionCommand:
    actor: Actor


class GetSubscription:
    def __init__(self, billing: BillingRepository, orgs: OrganizationRepository, clock: Clock) -> None:
        self.billing, self.orgs, self.clock = billing, orgs, clock

    async def execute(self, command: GetSubscriptionCommand) -> Subscription:
        org_id = command.actor.organization_id
        org = await self.orgs.get(org_id)
        if org is None:
            raise NotFound("organization", org_id)
        return _subscription(await self.billing.account(org_id), org.plan, self.clock.now(),
                             child=org.parent_id is not None)


@dataclass(frozen=True, slots=True)
class Standing:
    """A hold on an organization's new work: why, and whose billing it is (the organization's, or the partner's
    that pays for it)."""

    hold: ServiceHold
    payer: int


async def standing_hold(billing: BillingRepository, orgs: OrganizationRepository, organization_id: int,
                        now: datetime) -> Standing | None:
    """The one rule of who is held (``domain.billing.service_hold``): the organization's own subscription, and for
    a sub-organization billed on its partner's invoice (``billing_mode: partner``), its partner's too."""
    account = await billing.account(organization_id)
    hold = service_hold(account.status, account.past_due_since, now)
    if hold is not None:
        return Standing(hold, organization_id)
    if account.billing_mode == "partner":
        org = await orgs.get(organization_id)
        if org is not None and org.parent_id is not None:
            partner = await billing.account(org.parent_id)
            hold = service_hold(partner.status, partner.past_due_since, now)
            if hold is not None:
                return Standing(hold, org.parent_id)
    return None


@dataclass(frozen=True, slots=True)
class GetServiceHoldCommand:
    organization_id: int


class GetServiceHold:
    """Why billing holds the organization's new work now (the dashboard's banner), None when it does not."""

    def __init__(self, billing: BillingRepository, orgs: OrganizationRepository, clock: Clock) -> None:
        self.billing, self.orgs, self.clock = billing, orgs, clock

    async def execute(self, command: GetServiceHoldCommand) -> ServiceHold | None:
        standing = await standing_hold(self.billing, self.orgs, command.organization_id, self.clock.now())
        if standing is None:
            return None
        if standing.payer != command.organization_id:
            return replace(standing.hold, message=PARTNER_HOLD.format(reason=standing.hold.reason))
        return standing.hold


@dataclass(frozen=True, slots=True)
class UpdateSubscriptionCommand:
    actor: Actor
    patch: MergePatch  # plan, cancel_at_period_end


class UpdateSubscription:
    """Plan changes follow the money:

    - an **upgrade** (a higher plan) is in force at once: it needs a default payment method (402
      ``payment_method_required``), and the price difference for the days left in the period (the day of the
      change included) is charged at once on an invoice of its own; a decline is 402 ``card_declined`` and
      changes nothing;
    - a **downgrade** waits for the period's end (``pending_plan``): the plan in force, its limits and quotas stay
      until the period closes; asking for the plan in force again cancels it;
    - a **canceled** subscription is reactivated by a plan, charged at once like an upgrade from no plan; nothing
      else can change it (409).

    A sub-organization's plan never exceeds its parent's (403 ``plan_required``); a partner's plan never drops
    below a sub-organization's (409 ``children_above_plan``). The change, its invoice, its place in the plan
    history and ``subscription.updated`` are written in the one transaction of the request."""

    def __init__(self, billing: BillingRepository, orgs: OrganizationRepository, gateway: PaymentGateway,
                 uow: UnitOfWork, clock: Clock) -> None:
        self.billing, self.orgs, self.gateway, self.uow, self.clock = billing, orgs, gateway, uow, clock

    async def execute(self, command: UpdateSubscriptionCommand) -> Subscription:
        org_id = command.actor.organization_id
        # the account first: two changes at once queue on its row, and the second reads the plan the first set
        before = await self.billing.account(org_id, for_update=True)
        org = await self.orgs.get(org_id)
        if org is None:
            raise NotFound("organization", org_id)
        account, previous_plan = before, org.plan
        changes = dict(command.patch)
        plan = changes.get("plan")
        if plan is not None and plan not in PLANS:
            raise ValidationFailed.field("plan", f"must be one of {', '.join(PLANS)}")
        if account.status == SubscriptionStatus.CANCELED and plan is None:
            if set(changes) - {"billing_mode"}:
                raise InvalidTransition("subscription", "canceled", "active", action="a change",
                                        allowed_from=("active", "past_due"),
                                        reason="send a plan to reactivate it")
        elif plan is not None:
            await _children_within(self.orgs, org, plan)
            if account.status == SubscriptionStatus.CANCELED:  # reactivation: a new subscription from today
                org = await self._charge_at_once(org, account, None, plan)
                account = replace(account, status="active", cancel_at_period_end=False, pending_plan=None)
            elif plan_rank(plan) > plan_rank(org.plan):
                if org.parent_id is not None and account.billing_mode == "partner":  # its partner pays for it
                    org = await self._on_partners_invoice(org, plan)
                else:
                    org = await self._charge_at_once(org, account, org.plan, plan)
                account = replace(account, pending_plan=None)
            else:  # a downgrade waits for the period's end; the plan in force cancels a waiting one
                account = replace(account, pending_plan=None if plan == org.plan else plan)
        if "cancel_at_period_end" in changes:
            account = replace(account, cancel_at_period_end=bool(changes["cancel_at_period_end"]))
        if "billing_mode" in changes:
            account = replace(account, billing_mode=_billing_mode(command.actor, org, changes["billing_mode"]))
        if account != before:
            await self.billing.save_account(account)
        subscription = _subscription(account, org.plan, self.clock.now(), child=org.parent_id is not None)
        if account != before or org.plan != previous_plan:
            self.uow.record(_subscription_updated(subscription, previous_plan))
        return subscription

    async def _on_partners_invoice(self, org: Organization, plan: str) -> Organization:
        """A partner-mode sub-organization's upgrade: in force at once and charged nothing now, as when its partner
        sets its plan (``PATCH /organizations/{id}``): the partner's invoice bills each plan by the days it held."""
        parent = await self.orgs.get(org.parent_id) if org.parent_id is not None else None
        if parent is not None:
            require_plan_within_parent(plan, parent)
        now = self.clock.now()
        await self.billing.add_plan_change(PlanChange(persisted(org.id), org.plan, plan, now, charged=False))
        return await self.orgs.update(replace(org, plan=plan, updated_at=now))

    async def _charge_at_once(self, org: Organization, account: BillingAccount, previous: str | None,
                              plan: str) -> Organization:
        """Charge ``previous`` → ``plan`` for the rest of the period on the default method, then put ``plan`` in
        force: its invoice (paid), its plan change and the organization's plan."""
        org_id = account.organization_id
        if org.parent_id is not None:
            parent = await self.orgs.get(org.parent_id)
            if parent is not None:
                require_plan_within_parent(plan, parent)
        method = None
        if account.default_payment_method_id is not None:
            method = await self.billing.method(org_id, account.default_payment_method_id)
        if method is None:
            raise PaymentMethodRequired(
                f"plan: the {plan} plan is charged at once; add a payment method first (POST "
                f"/billing/payment-methods)", details={"field": "plan", "requested_plan": plan})
        now = self.clock.now()
        period = period_of(now)
        start, end = period_bounds(period)
        line = proration_line(previous, plan, now, start, end)
        invoice = proration_invoice(org_id, await self.billing.proration_count(org_id, period) + 1, line, now,
                                    period, end)
        # one charge per (change, day, card): a retry after a crash between the charge and the commit is answered
        # the first charge by the gateway instead of charging again
        key = f"plan_{org_id}_{period}_{previous or 'none'}_{plan}_{now:%Y%m%d}_{method.id}"
        result = await self.gateway.charge(invoice.total, invoice.currency, method.gateway_id, key, {
            "parley_organization_id": str(org_id), "parley_purpose": "plan_change", "parley_plan": plan})
        if not result.succeeded:
            code = result.code or "card_declined"
            details: dict[str, object] = {"field": "plan", "decline_code": code, "amount": invoice.total,
                                          "currency": invoice.currency}
            if result.action_url is not None:  # 3-D Secure: the holder authenticates, then sends the same PATCH
                details["next_action_url"] = result.action_url
            why = ("the card needs its holder to authenticate the charge (3-D Secure): open details.next_action_url, "
                   "then send this change again" if code == "authentication_required" else "the plan was not changed")
            raise CardDeclined(
                f"plan: the charge of {invoice.total} cents for the {plan} plan was declined ({code}); {why}",
                details=details)
        stored = await self.billing.add_proration_invoice(after_payment(invoice, now))
        self.uow.record(EventType.INVOICE_CREATED(org_id, stored.view()))
        self.uow.record(EventType.INVOICE_PAID(org_id, stored.view()))
        await self.billing.add_plan_change(PlanChange(org_id, previous, plan, now))
        return await self.orgs.update(replace(org, plan=plan, updated_at=now))


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
class InvoicePdf:
    number: str
    content: bytes


class GetInvoicePdf:
    """GET /billing/invoices/{id}/pdf: the invoice as a PDF document (``InvoiceRenderer``)."""

    def __init__(self, billing: BillingRepository, orgs: OrganizationRepository, renderer: InvoiceRenderer) -> None:
        self.billing, self.orgs, self.renderer = billing, orgs, renderer

    async def execute(self, command: GetInvoiceCommand) -> InvoicePdf:
        org_id = command.actor.organization_id
        invoice = await self.billing.invoice(org_id, command.invoice_id)
        if invoice is None:
            raise NotFound("invoice", command.invoice_id)
        org = await self.orgs.get(org_id)
        return InvoicePdf(invoice.number, await self.renderer.render(invoice, org.name if org else f"#{org_id}"))


@dataclass(frozen=True, slots=True)
class GetUpcomingInvoiceCommand:
    actor: Actor


async def _period_lines(billing: BillingRepository, ledger: UsageLedger, period: str,
                        organizations: list[tuple[int, str]], now: datetime) -> dict[int, Invoice]:
    """The period invoice of each (organization, current plan): the counters when one plan was in force all
    period, else the ledger's usage of each plan's interval."""
    start, end = period_bounds(period)
    ids = [org_id for org_id, _ in organizations]
    used = await ledger.used_by_organization(period, ids)
    history = await billing.plan_changes(ids)
    invoices: dict[int, Invoice] = {}
    for org_id, plan in organizations:
        changes = history.get(org_id, [])
        intervals = plan_intervals(changes, start, end, plan)
        if len(intervals) == 1:
            usage = [used.get(org_id, {})]
        else:
            usage = [await ledger.used_between(org_id, i.start, i.end) for i in intervals]
        invoices[org_id] = period_invoice(org_id, period, start, end,
                                          period_lines(period, start, end, changes, plan, usage), now)
    return invoices


class GetUpcomingInvoice:
    """The current period so far: what its invoice would be if the period closed now (a draft, never stored)."""

    def __init__(self, billing: BillingRepository, ledger: UsageLedger, orgs: OrganizationRepository,
                 clock: Clock) -> None:
        self.billing, self.ledger, self.orgs, self.clock = billing, ledger, orgs, clock

    async def execute(self, command: GetUpcomingInvoiceCommand) -> Invoice:
        org_id = command.actor.organization_id
        plan = await _organization_plan(self.orgs, org_id)
        now = self.clock.now()
        invoices = await _period_lines(self.billing, self.ledger, period_of(now), [(org_id, plan)], now)
        return replace(invoices[org_id], status="draft", next_payment_attempt=None)


class InvoiceCharger:
    """Charges one invoice on the organization's default method and records the outcome with it: paid (the
    subscription active again once nothing is unpaid), or declined (the subscription past_due; the worker's
    attempts follow the dunning schedule, ``domain.billing.after_decline``)."""

    def __init__(self, billing: BillingRepository, gateway: PaymentGateway, clock: Clock, uow: UnitOfWork) -> None:
        self.billing, self.gateway, self.clock, self.uow = billing, gateway, clock, uow

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
        action_url = None
        if method is None:
            code = "no_payment_method"
            succeeded = False
        else:
            result = await self.gateway.charge(invoice.total, invoice.currency, method.gateway_id,
                                               invoice.charge_key(), {
                                                   "parley_organization_id": str(invoice.organization_id),
                                                   "parley_invoice_id": str(invoice.id)})
            succeeded, code = result.succeeded, result.code or "card_declined"
            action_url = result.action_url
        now = self.clock.now()
        if succeeded:
            invoice = after_payment(invoice, now)
            await self.billing.update_invoice(invoice)
            self.uow.record(EventType.INVOICE_PAID(invoice.organization_id, invoice.view()))
            if (account.status == SubscriptionStatus.PAST_DUE
                    and await self.billing.unpaid(invoice.organization_id) == 0):
                # nothing unpaid: full service again from the next request (ServiceOnHold lifted)
                await self.billing.save_account(replace(account, status="active", past_due_since=None))
        else:
            invoice = after_decline(invoice, code, now, automatic=automatic)
            await self.billing.update_invoice(invoice)
            invoice = replace(invoice, next_action_url=action_url)
            self.uow.record(EventType.INVOICE_PAYMENT_FAILED(invoice.organization_id, invoice.view()))
            if account.status == SubscriptionStatus.ACTIVE:
                await self.billing.save_account(replace(account, status="past_due", past_due_since=now))
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


@dataclass(frozen=True, slots=True)
class HandleGatewayEventCommand:
    payload: bytes
    signature: str | None


@dataclass(frozen=True, slots=True)
class GatewayEventHandled:
    event_id: str | None
    invoice_id: int | None = None
    """The invoice the event settled (None: nothing to do)."""


class HandleGatewayEvent:
    """The payment gateway's webhook (Stripe: ``POST /billing/stripe/webhook``): verified by its signature
    (``PaymentGateway.parse_event``), then a charge of an invoice that succeeded at the gateway after Parley's
    attempt ended (its holder authenticated it, 3-D Secure) marks that invoice paid, and the subscription active
    again once nothing is unpaid, lifting a billing hold at once. Anything else is acknowledged and ignored;
    an event for an invoice already paid changes nothing, so a redelivered event is harmless."""

    def __init__(self, billing: BillingRepository, gateway: PaymentGateway, clock: Clock, uow: UnitOfWork) -> None:
        self.billing, self.gateway, self.clock, self.uow = billing, gateway, clock, uow

    async def execute(self, command: HandleGatewayEventCommand) -> GatewayEventHandled:
        event = await self.gateway.parse_event(command.payload, command.signature)
        if event is None:
            return GatewayEventHandled(None)
        org = event.metadata.get("parley_organization_id") or ""
        invoice_id = event.metadata.get("parley_invoice_id") or ""
        if event.type != "charge.succeeded" or not org.isdigit() or not invoice_id.isdigit():
            return GatewayEventHandled(event.id)
        invoice = await self.billing.invoice(int(org), int(invoice_id), for_update=True)
        if invoice is None or invoice.status not in PAYABLE:
            return GatewayEventHandled(event.id)
        now = self.clock.now()
        invoice = replace(invoice, status=InvoiceStatus.PAID, paid_at=now, next_payment_attempt=None,
                          last_payment_error=None)
        await self.billing.update_invoice(invoice)
        self.uow.record(EventType.INVOICE_PAID(invoice.organization_id, invoice.view()))
        account = await self.billing.account(invoice.organization_id, for_update=True)
        if (account.status == SubscriptionStatus.PAST_DUE
                and await self.billing.unpaid(invoice.organization_id) == 0):
            await self.billing.save_account(replace(account, status="active", past_due_since=None))
        return GatewayEventHandled(event.id, invoice.id)


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
    built from the plans in force during the period and its usage; then the period's end takes effect:
    subscriptions set to cancel at the period's end are canceled and waiting downgrades are applied (each with its
    plan change and ``subscription.updated``); the collection job is scheduled."""

    def __init__(self, billing: BillingRepository, ledger: UsageLedger, orgs: OrganizationRepository,
                 jobs: JobQueue, uow: UnitOfWork, clock: Clock) -> None:
        self.billing, self.ledger, self.orgs, self.jobs, self.uow, self.clock = billing, ledger, orgs, jobs, uow, clock

    async def execute(self, command: CloseBillingPeriodCommand) -> ClosedBatch:
        end = period_bounds(command.period)[1]
        now = self.clock.now()
        if now < end:
            raise ValidationFailed.field("period", f"{command.period} has not ended")
        batch = await self.billing.unbilled(command.period, end, command.after_organization_id, command.limit)
        if not batch:
            return ClosedBatch(command.after_organization_id, 0, 0)
        invoices = await _period_lines(self.billing, self.ledger, command.period,
                                       [(o.organization_id, o.plan) for o in batch], now)
        start = period_bounds(command.period)[0]
        for o in batch:
            invoice = invoices[o.organization_id]
            if o.billed_by_partner:  # its plan and usage are lines on its partner's invoice
                partner_invoice = invoice_number(persisted(o.parent_id), command.period)
                line = InvoiceLine(f"Billed on your partner's invoice ({partner_invoice})", 1, 0, 0)
                invoices[o.organization_id] = period_invoice(o.organization_id, command.period, start, end, (line,),
                                                             now)
            elif o.is_partner:
                lines = invoice.lines + await self._children_lines(o.organization_id, command.period, end, now)
                invoices[o.organization_id] = period_invoice(o.organization_id, command.period, start, end, lines,
                                                             now)
        # nothing to charge (no plan at the period's start and no overage): settled as it is issued
        issued = [replace(i, status="paid", paid_at=now, next_payment_attempt=None) if i.total == 0 else i
                  for i in invoices.values()]
        inserted = await self.billing.insert_invoices(issued)
        for invoice in inserted:  # each once: an invoice another closer inserted first is not announced again
            self.uow.record(EventType.INVOICE_CREATED(invoice.organization_id, invoice.view()))
            if invoice.status == InvoiceStatus.PAID:
                self.uow.record(EventType.INVOICE_PAID(invoice.organization_id, invoice.view()))
        invoiced = len(inserted)
        await self._end_of_period(batch, end)
        if invoiced:
            await self.jobs.schedule(NewJob(COLLECT_JOB, now))
        return ClosedBatch(batch[-1].organization_id, len(batch), invoiced)


    async def _children_lines(self, partner_id: int, period: str, end: datetime, now: datetime
                              ) -> tuple[InvoiceLine, ...]:
        """The period's lines of the partner's sub-organizations in partner mode (existing before the period ended),
        each under the sub-organization's name."""
        children: list[Organization] = []
        offset = 0
        while True:
            page = await self.orgs.list_children(partner_id, PageRequest(100, offset))
            children += [c for c in page.items if c.id is not None and c.created_at < end]
            offset += len(page.items)
            if not page.items or offset >= page.total:
                break
        modes = await self.billing.billing_modes([c.id for c in children if c.id is not None])
        billed = [c for c in children if c.id is not None and modes.get(c.id) == "partner"]
        if not billed:
            return ()
        plans = [(persisted(c.id), c.plan) for c in billed]
        invoices = await _period_lines(self.billing, self.ledger, period, plans, now)
        lines: list[InvoiceLine] = []
        for child in sorted(billed, key=lambda c: persisted(c.id)):
            lines += [replace(line, description=f"{child.name} (organization {child.id}): {line.description}")
                      for line in invoices[persisted(child.id)].lines if line.amount]
        return tuple(lines)

    async def _end_of_period(self, batch: list[Unbilled], end: datetime) -> None:
        """Cancellations and waiting downgrades take effect at ``end`` (each applied once, even by two closers)."""
        canceled = set(await self.billing.cancel_at_period_end([o.organization_id for o in batch
                                                                if o.cancel_at_period_end]))
        for o in batch:
            org_id = o.organization_id
            if org_id in canceled:
                await self.billing.add_plan_change(PlanChange(org_id, o.plan, None, end))
                await self._announce(org_id, o.plan)
            elif o.pending_plan is not None and await self.billing.take_pending_plan(org_id, o.pending_plan):
                org = await self.orgs.get(org_id)
                if org is None:
                    continue
                # a partner that raised a sub-organization since it asked stops at that sub-organization's plan
                plan = max([o.pending_plan, *(c.plan for c in await _children_above(self.orgs, org, o.pending_plan))],
                           key=plan_rank)
                if plan != o.plan:
                    await self.orgs.update(replace(org, plan=plan, updated_at=self.clock.now()))
                    await self.billing.add_plan_change(PlanChange(org_id, o.plan, plan, end))
                await self._announce(org_id, o.plan)

    async def _announce(self, organization_id: int, previous_plan: str) -> None:
        org = await self.orgs.get(organization_id)
        plan = org.plan if org is not None else previous_plan
        subscription = _subscription(await self.billing.account(organization_id), plan, self.clock.now(),
                                     child=org is not None and org.parent_id is not None)
        self.uow.record(_subscription_updated(subscription, previous_plan))


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


# --------------------------------------------------------------------------------------------------- the jobs

CLOSE_JOB = "billing.close"
"""The period close: at the start of each month (and once when a runner starts) for the last ended period."""


async def close_period(units: Units, period: str, batch: int = CLOSE_BATCH) -> int:
    """Invoice every organization without an invoice for ``period``, ``batch`` organizations per unit of work;
    returns how many were invoiced."""
    after, invoiced = 0, 0

    async def step() -> int:
        nonlocal after, invoiced
        done = await units.execute(CloseBillingPeriod, CloseBillingPeriodCommand(period, after, batch))
        after, invoiced = done.last_organization_id, invoiced + done.invoiced
        return done.seen

    await drain_batches(step, batch)
    return invoiced


async def collect_due(units: Units, batch: int = 100) -> int:
    """Charge every invoice whose next attempt is due, ``batch`` per unit of work; returns how many were charged."""
    return await drain_batches(lambda: units.execute(CollectDueInvoices, CollectDueInvoicesCommand(batch)), batch)


def close_job(units: Units, batch: int) -> JobKind:
    """``billing.close``: closes the last ended period, then due at the start of the next month."""

    async def close(job: ClaimedJob) -> datetime:
        now = await clock_now(units)
        await close_period(units, period_to_close(now), batch)
        return period_bounds(period_of(now))[1]

    return JobKind(CLOSE_JOB, close, recurring=True, lease=timedelta(minutes=10), backoff_max=timedelta(minutes=30))


def collect_job(units: Units, batch: int) -> JobKind:
    """``billing.collect``: charges due invoices; due again at the earliest next attempt (at most a day later)."""

    async def collect(job: ClaimedJob) -> datetime:
        await collect_due(units, batch)
        upcoming = await units.execute(NextCollection, NextCollectionCommand())
        fallback = await clock_now(units) + timedelta(days=1)
        return min(upcoming, fallback) if upcoming is not None else fallback

    return JobKind(COLLECT_JOB, collect, recurring=True, lease=timedelta(minutes=10), backoff_max=timedelta(minutes=30))
