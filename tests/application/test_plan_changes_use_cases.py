"""Plan changes and the invoice of a period on the memory backend, with a manual clock.

The property test drives random sequences of plan changes and usage through a month (upgrades charged at once,
downgrades waiting for the month's end, usage recorded through the one usage recorder), closes the month as the
worker does, and compares every invoice with an oracle written plainly below: the price of the plan in force on
the 1st, each upgrade's price difference for the days left (the day of the change included), included amounts
prorated by the days each plan was in force, and usage past them billed at the rate of the plan in force when it
was used. Besides: no amount is negative, and the usage of the plan intervals adds up to the month's usage (no
minute counted twice or lost)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.memory.clock import ManualClock
from adapters.memory.store import InMemoryStore
from adapters.payments.simulator import SimulatedPaymentGateway
from application import billing as uc
from application.accounts import (
    CreateOrganization,
    CreateOrganizationCommand,
    CreateSubOrganization,
    CreateSubOrganizationCommand,
    UpdateSubOrganization,
    UpdateSubOrganizationCommand,
)
from application.context import Actor
from application.ports.billing import BillingRepository, PaymentGateway
from application.ports.platform import PageRequest, UnitOfWork
from application.ports.usage import UsageLedger, UsageRecorder
from domain.billing import plan_intervals
from domain.errors import CardDeclined, ChildrenAbovePlan, InvalidTransition, PaymentMethodRequired
from domain.scopes import ScopeSet
from entrypoints.ioc import build_container
from entrypoints.overrides import ClockProvider, Pinned
from entrypoints.settings import Settings
from tests.support.apps import CHEAP_HASHING

JAN_1 = datetime(2026, 1, 1, tzinfo=UTC)
FEB_1 = datetime(2026, 2, 1, tzinfo=UTC)
DAYS = 31
PRICE = {"starter": 4_900, "business": 49_900, "enterprise": 249_900}
RANK = {"starter": 0, "business": 1, "enterprise": 2}
INCLUDED_SECONDS = {"starter": 100 * 60, "business": 2_000 * 60, "enterprise": 20_000 * 60}
INCLUDED_SEGMENTS = {"starter": 500, "business": 10_000, "enterprise": 100_000}
RATE_PER_MINUTE = {"starter": 0, "business": 12, "enterprise": 12}
RATE_PER_SEGMENT = {"starter": 0, "business": 2, "enterprise": 2}


@dataclass
class Billing:
    container: Any
    clock: ManualClock
    gateway: SimulatedPaymentGateway

    async def run(self, case: type, command: Any) -> Any:
        async with self.container() as r:
            try:
                result = await (await r.get(case)).execute(command)
            except Exception:
                await (await r.get(UnitOfWork)).rollback()
                raise
            await (await r.get(UnitOfWork)).commit()
        return result

    async def port(self, port: type, work: Any) -> Any:
        async with self.container() as r:
            result = await work(await r.get(port))
            await (await r.get(UnitOfWork)).commit()
        return result

    async def organization(self, plan: str, *, partner: bool = False) -> Actor:
        org = await self.run(CreateOrganization, CreateOrganizationCommand(
            "Acme", plan, "partner" if partner else "standard"))
        return Actor(org.id, org.id, None, ScopeSet.of(["*"]))

    async def card(self, actor: Actor, token: str = "pm_card_visa") -> None:
        await self.run(uc.AddPaymentMethod, uc.AddPaymentMethodCommand(actor, token))

    async def change(self, actor: Actor, **patch: Any) -> Any:
        return await self.run(uc.UpdateSubscription, uc.UpdateSubscriptionCommand(actor, dict(patch)))

    async def use(self, actor: Actor, metric: str, quantity: int, at: datetime, reference: str) -> None:
        async def record(recorder: Any) -> None:
            await recorder.record(actor.organization_id, metric, quantity, at, reference)
        await self.port(UsageRecorder, record)

    async def close(self, period: str = "2026-01") -> None:
        await self.run(uc.CloseBillingPeriod, uc.CloseBillingPeriodCommand(period))

    async def invoices(self, actor: Actor) -> list[Any]:
        page = await self.run(uc.ListInvoices, uc.ListInvoicesCommand(actor, PageRequest(100, 0)))
        return sorted(page.items, key=lambda i: i.id)

    async def events(self, actor: Actor) -> list[dict[str, Any]]:
        store = await self.container.get(InMemoryStore)
        return [e.data for _, e, _ in store.outbox
                if e.organization_id == actor.organization_id and e.type == "subscription.updated"]


def make_billing(tmp: Path, now: datetime) -> Billing:
    clock = ManualClock(now)
    gateway = SimulatedPaymentGateway()
    settings_ = Settings(database_url="memory://", var_dir=tmp / "var", secret_key="test-secret-key",
                         allow_loopback_targets=False, public_base_url="https://api.example.test", **CHEAP_HASHING)
    return Billing(build_container(settings_, ClockProvider(clock), Pinned(PaymentGateway, gateway)), clock, gateway)


@pytest.fixture
async def billing(tmp_path: Path) -> Any:
    made = make_billing(tmp_path, datetime(2026, 1, 20, 9, tzinfo=UTC))
    yield made
    await made.container.close()


# ---------------------------------------------------------------------------------------------- the oracle


def oracle(start_plan: str, steps: list[tuple[datetime, str, Any]]) -> tuple[list[int], int]:
    """(each upgrade's charge, the January invoice's total), written without the billing code.

    steps: (instant, "plan", target) or (instant, "calls" | "sms", quantity), in time order."""
    plan = start_plan
    charges = []
    upgrades = []  # (instant, new plan)
    usage = []  # (metric, quantity, plan in force)
    for at, kind, value in steps:
        if kind == "plan":
            if RANK[value] > RANK[plan]:
                days_left = (FEB_1.date() - at.date()).days
                charges.append((PRICE[value] - PRICE[plan]) * days_left // DAYS)
                upgrades.append((at, value))
                plan = value
        else:
            usage.append((kind, value, plan))

    def plan_on_day(day: int) -> str:
        last_moment = JAN_1 + timedelta(days=day + 1) - timedelta(microseconds=1)
        in_force = start_plan
        for at, new in upgrades:
            if at <= last_moment:
                in_force = new
        return in_force

    included_seconds = sum(INCLUDED_SECONDS[plan_on_day(d)] for d in range(DAYS)) // DAYS
    included_segments = sum(INCLUDED_SEGMENTS[plan_on_day(d)] for d in range(DAYS)) // DAYS
    over_seconds = {12: 0}
    over_segments = {2: 0}
    for kind, quantity, in_force in usage:
        if kind == "calls":
            free = min(included_seconds, quantity)
            included_seconds -= free
            if RATE_PER_MINUTE[in_force]:
                over_seconds[RATE_PER_MINUTE[in_force]] += quantity - free
        else:
            free = min(included_segments, quantity)
            included_segments -= free
            if RATE_PER_SEGMENT[in_force]:
                over_segments[RATE_PER_SEGMENT[in_force]] += quantity - free
    total = PRICE[start_plan]
    total += math.ceil(over_seconds[12] / 60) * 12
    total += over_segments[2] * 2
    return charges, total


# ---------------------------------------------------------------------------------------------- the property

PLANS = st.sampled_from(["starter", "business", "enterprise"])
STEP = st.one_of(
    st.tuples(st.just("plan"), PLANS),
    st.tuples(st.just("calls"), st.integers(1, 30_000 * 60)),
    st.tuples(st.just("sms"), st.integers(1, 150_000)),
)
MINUTES_IN_JANUARY = DAYS * 24 * 60


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start_plan=PLANS,
       steps=st.lists(st.tuples(st.integers(0, MINUTES_IN_JANUARY - 1), STEP), max_size=8,
                      unique_by=lambda s: s[0]))
@pytest.mark.slow
async def test_the_invoice_of_a_month_of_plan_changes_and_usage_is_the_oracles(
        tmp_path: Path, start_plan: str, steps: list[tuple[int, tuple[str, Any]]]) -> None:
    b = make_billing(tmp_path, JAN_1)
    try:
        actor = await b.organization(start_plan)
        await b.card(actor)
        timeline = sorted((JAN_1 + timedelta(minutes=m), kind, value) for m, (kind, value) in steps)
        for n, (at, kind, value) in enumerate(timeline):
            b.clock.set(at)
            if kind == "plan":
                await b.change(actor, plan=value)
            else:
                await b.use(actor, "call_seconds" if kind == "calls" else "sms_segments", value, at, f"x:{n}")
        b.clock.set(FEB_1 + timedelta(seconds=5))
        await b.close()

        charges, total = oracle(start_plan, timeline)
        invoices = await b.invoices(actor)
        upgrades = [i for i in invoices if i.kind == "proration"]
        [closed] = [i for i in invoices if i.kind == "period"]
        assert [i.total for i in upgrades] == charges
        assert all(i.status == "paid" for i in upgrades)
        assert closed.total == total and closed.period == "2026-01"
        assert all(x.amount >= 0 and x.quantity >= 0 for i in invoices for x in i.lines)
        assert all(i.total == i.subtotal == sum(x.amount for x in i.lines) for i in invoices)
        assert sum(c.amount_cents for c in b.gateway.charges if c.idempotency_key.startswith("plan_")) == sum(charges)

        # every unit of usage falls in exactly one plan interval: the intervals add up to the month
        async def split(ledger: UsageLedger) -> tuple[dict[str, int], dict[str, int]]:
            async def changes(repo: BillingRepository) -> Any:
                return (await repo.plan_changes([actor.organization_id])).get(actor.organization_id, [])
            history = await b.port(BillingRepository, changes)
            summed: dict[str, int] = {}
            for interval in plan_intervals(history, JAN_1, FEB_1, start_plan):
                for metric, used in (await ledger.used_between(actor.organization_id, interval.start,
                                                               interval.end)).items():
                    summed[metric] = summed.get(metric, 0) + used
            return summed, await ledger.used(actor.organization_id, "2026-01")
        summed, month = await b.port(UsageLedger, split)
        assert {k: v for k, v in summed.items() if k != "calls"} == {k: v for k, v in month.items() if k != "calls"}
    finally:
        await b.container.close()


# ---------------------------------------------------------------------------------------------- the rules


async def test_an_upgrade_needs_a_default_payment_method_and_a_declined_one_changes_nothing(billing: Billing) -> None:
    actor = await billing.organization("business")
    with pytest.raises(PaymentMethodRequired):
        await billing.change(actor, plan="enterprise")
    await billing.card(actor, "pm_card_insufficientFunds")
    with pytest.raises(CardDeclined) as declined:
        await billing.change(actor, plan="enterprise")
    assert declined.value.details is not None and declined.value.details["decline_code"] == "insufficient_funds"
    subscription = await billing.run(uc.GetSubscription, uc.GetSubscriptionCommand(actor))
    assert subscription.plan == "business" and subscription.pending_plan is None
    assert await billing.invoices(actor) == [] and await billing.events(actor) == []


async def test_an_upgrade_is_charged_at_once_and_announced_in_its_transaction(billing: Billing) -> None:
    actor = await billing.organization("business")
    await billing.card(actor)
    upgraded = await billing.change(actor, plan="enterprise")  # January 20th: 12 of 31 days left
    assert upgraded.plan == "enterprise"
    [invoice] = await billing.invoices(actor)
    assert (invoice.kind, invoice.status, invoice.total) == ("proration", "paid", 200_000 * 12 // 31)
    assert invoice.lines[0].description == ("Enterprise plan from 2026-01-20 to 2026-01-31 (12 of 31 days), less "
                                            "the Business plan")
    assert [c.amount_cents for c in billing.gateway.charges] == [77_419]
    [event] = await billing.events(actor)
    assert (event["plan"], event["previous_plan"], event["pending_plan"]) == ("enterprise", "business", None)


async def test_a_downgrade_waits_for_the_period_and_the_close_applies_it(billing: Billing) -> None:
    actor = await billing.organization("enterprise")
    waiting = await billing.change(actor, plan="starter")
    assert (waiting.plan, waiting.pending_plan) == ("enterprise", "starter")
    assert (await billing.change(actor, plan="enterprise")).pending_plan is None  # cancelled
    await billing.change(actor, plan="business")
    billing.clock.set(FEB_1 + timedelta(seconds=5))
    await billing.close()
    after = await billing.run(uc.GetSubscription, uc.GetSubscriptionCommand(actor))
    assert (after.plan, after.pending_plan) == ("business", None)
    [january] = await billing.invoices(actor)
    assert january.total == PRICE["enterprise"]
    assert [(e["plan"], e["pending_plan"]) for e in await billing.events(actor)] == [
        ("enterprise", "starter"), ("enterprise", None), ("enterprise", "business"), ("business", None)]
    await billing.close()  # a second close changes nothing
    assert len(await billing.events(actor)) == 4


async def test_a_canceled_subscription_is_reactivated_by_a_plan_with_a_working_card(billing: Billing) -> None:
    actor = await billing.organization("business")
    await billing.card(actor, "pm_card_chargeDeclined")
    await billing.change(actor, cancel_at_period_end=True)
    billing.clock.set(FEB_1 + timedelta(seconds=5))
    await billing.close()
    assert (await billing.run(uc.GetSubscription, uc.GetSubscriptionCommand(actor))).status == "canceled"
    with pytest.raises(InvalidTransition):
        await billing.change(actor, cancel_at_period_end=False)
    with pytest.raises(CardDeclined):
        await billing.change(actor, plan="business")
    await billing.card(actor)
    methods = await billing.run(uc.ListPaymentMethods, uc.ListPaymentMethodsCommand(actor))
    await billing.run(uc.SetDefaultPaymentMethod, uc.PaymentMethodCommand(actor, methods[-1].method.id))
    billing.clock.set(datetime(2026, 2, 15, 12, tzinfo=UTC))  # 14 of 28 days left
    back = await billing.change(actor, plan="business")
    assert (back.status, back.plan, back.cancel_at_period_end) == ("active", "business", False)
    billing.clock.set(datetime(2026, 3, 1, 0, 0, 5, tzinfo=UTC))
    await billing.close("2026-02")
    invoices = await billing.invoices(actor)
    assert [(i.period, i.kind, i.total) for i in invoices] == [
        ("2026-01", "period", 49_900), ("2026-02", "proration", 49_900 * 14 // 28), ("2026-02", "period", 0)]
    assert invoices[-1].status == "paid"  # no plan on February 1st: nothing more to bill


async def test_a_partner_cannot_drop_below_a_childs_plan(billing: Billing) -> None:
    partner = await billing.organization("enterprise", partner=True)
    await billing.run(CreateSubOrganization, CreateSubOrganizationCommand(partner, "Client", "business"))
    with pytest.raises(ChildrenAbovePlan) as refused:
        await billing.change(partner, plan="starter")
    assert refused.value.details is not None and [c["plan"] for c in refused.value.details["children"]] == [
        "business"]
    assert (await billing.change(partner, plan="business")).pending_plan == "business"


async def test_a_partner_that_raised_a_child_after_asking_for_a_downgrade_stops_at_the_childs_plan(
        billing: Billing) -> None:
    partner = await billing.organization("enterprise", partner=True)
    child = await billing.run(CreateSubOrganization, CreateSubOrganizationCommand(partner, "Client", "starter"))
    assert (await billing.change(partner, plan="starter")).pending_plan == "starter"
    await billing.run(UpdateSubOrganization, UpdateSubOrganizationCommand(partner, child.id, {"plan": "business"}))
    billing.clock.set(FEB_1 + timedelta(seconds=5))
    await billing.close()
    after = await billing.run(uc.GetSubscription, uc.GetSubscriptionCommand(partner))
    assert (after.plan, after.pending_plan) == ("business", None)


async def test_a_childs_plan_set_by_its_partner_is_billed_by_the_plans_it_held(billing: Billing) -> None:
    """A partner raises a child mid-month and lowers it on the last day (at once, as PATCH /organizations/{id}
    does): the child's month still bills its plan of the 1st, the raise for the days left, and its usage at the
    rate of the plan in force when it was used."""
    partner = await billing.organization("enterprise", partner=True)
    made = await billing.run(CreateSubOrganization, CreateSubOrganizationCommand(partner, "Client", "business"))
    child = Actor(made.id, made.id, None, ScopeSet.of(["*"]))
    # billed on its own (in partner mode these lines go to the partner's invoice: test_partner_billing_http.py)
    await billing.change(Actor(made.id, partner.organization_id, None, ScopeSet.of(["*"])), billing_mode="direct")
    billing.clock.set(datetime(2026, 1, 10, 12, tzinfo=UTC))  # 22 of 31 days left
    await billing.run(UpdateSubOrganization, UpdateSubOrganizationCommand(partner, made.id, {"plan": "enterprise"}))
    await billing.use(child, "call_seconds", 25_000 * 60, datetime(2026, 1, 15, tzinfo=UTC), "call:1")
    billing.clock.set(datetime(2026, 1, 31, 22, tzinfo=UTC))
    await billing.run(UpdateSubOrganization, UpdateSubOrganizationCommand(partner, made.id, {"plan": "starter"}))
    billing.clock.set(FEB_1 + timedelta(seconds=5))
    await billing.close()
    [january] = await billing.invoices(child)
    included = (9 * INCLUDED_SECONDS["business"] + 21 * INCLUDED_SECONDS["enterprise"]
                + INCLUDED_SECONDS["starter"]) // DAYS
    minutes_over = math.ceil((25_000 * 60 - included) / 60)
    assert [(x.description, x.amount) for x in january.lines] == [
        ("Business plan (2026-01)", 49_900),
        ("Enterprise plan from 2026-01-10 to 2026-01-31 (22 of 31 days), less the Business plan",
         200_000 * 22 // 31),
        ("Call minutes over the included amount", minutes_over * 12)]
