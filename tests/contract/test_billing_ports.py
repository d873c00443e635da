"""The billing storage port on every backend (memory, SQLite, PostgreSQL): the default account, payment methods
scoped to their organization, one invoice per (organization, period), the organizations a close still has to
invoice, due invoices, payers read in one go, and the usage counters of many organizations."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from application.ports.billing import BillingAccount, BillingRepository
from application.ports.platform import PageRequest, UnitOfWork
from application.ports.usage import UsageLedger
from domain.billing import PaymentMethod, PlanChange, build_invoice, proration_invoice, proration_line
from domain.usage import SMS_SEGMENTS, LedgerEntry, period_bounds
from tests.support.apps import new_organization

PERIOD = "2099-01"  # ends after every organization the tests create (they are created at the real time)
START, END = period_bounds(PERIOD)
CLOSED = END + timedelta(seconds=5)


async def test_accounts_methods_and_invoices_keep_to_their_organization(container: Any) -> None:
    a = await new_organization(container, plan="business")
    b = await new_organization(container, plan="starter")
    async with container() as r:
        billing: BillingRepository = await r.get(BillingRepository)
        assert await billing.account(a) == BillingAccount(a)
        card = await billing.add_method(PaymentMethod(None, a, "pm_card_visa.x", "visa", "4242", 12, 2034, CLOSED))
        await billing.save_account(BillingAccount(a, "active", False, card.id))
        assert await billing.method(b, card.id or 0) is None and await billing.methods(b) == []
        assert [m.id for m in await billing.methods(a)] == [card.id]

        invoices = [build_invoice(org, plan, PERIOD, START, END, {}, CLOSED) for org, plan in
                    ((a, "business"), (b, "starter"))]
        assert await billing.add_invoices(invoices) == 2
        assert await billing.add_invoices(invoices) == 0  # one per organization and period
        page = await billing.invoices(a, PageRequest(10, 0))
        assert page.total == 1 and page.items[0].total == 49_900 and page.items[0].status == "open"
        assert await billing.invoice(b, page.items[0].id or 0) is None
        assert await billing.unpaid(a) == 1
        await (await r.get(UnitOfWork)).commit()

    async with container() as r:
        billing = await r.get(BillingRepository)
        due = [i for i in await billing.due_invoices(CLOSED, 10_000) if i.organization_id in (a, b)]
        assert sorted(i.organization_id for i in due) == sorted([a, b])
        payers = await billing.payers([a, b])
        assert payers[a][0].default_payment_method_id == card.id and payers[a][1] is not None
        assert payers[a][1].gateway_id == "pm_card_visa.x" and b not in payers
        paid = replace(due[0], status="paid", paid_at=CLOSED, next_payment_attempt=None, attempt_count=1)
        await billing.update_invoice(paid)
        assert (await billing.invoice(paid.organization_id, paid.id or 0)) == paid
        await billing.remove_method(b, card.id or 0)  # another organization's: nothing
        assert [m.id for m in await billing.methods(a)] == [card.id]
        await (await r.get(UnitOfWork)).rollback()


async def test_the_close_finds_unbilled_organizations_and_cancels_at_the_periods_end(container: Any) -> None:
    orgs = [await new_organization(container, plan=p) for p in ("starter", "business", "enterprise")]
    async with container() as r:
        billing: BillingRepository = await r.get(BillingRepository)
        ledger: UsageLedger = await r.get(UsageLedger)
        await billing.save_account(BillingAccount(orgs[1], "active", True, None))
        await ledger.append(LedgerEntry(orgs[2], SMS_SEGMENTS, 7, PERIOD, "sms", str(uuid.uuid4()),
                                        START.replace(tzinfo=UTC)))
        found = await billing.unbilled(PERIOD, END, orgs[0] - 1, 3)
        assert [(u.organization_id, u.plan, u.cancel_at_period_end) for u in found] == [
            (orgs[0], "starter", False), (orgs[1], "business", True), (orgs[2], "enterprise", False)]
        assert await billing.unbilled(PERIOD, datetime(2000, 1, 1, tzinfo=UTC), orgs[0] - 1, 3) == []
        assert await ledger.used_by_organization(PERIOD, orgs) == {orgs[2]: {SMS_SEGMENTS: 7}}
        await billing.add_invoices([build_invoice(orgs[0], "starter", PERIOD, START, END, {}, CLOSED)])
        await billing.cancel_at_period_end([orgs[1]])
        assert (await billing.account(orgs[1])).status == "canceled"
        assert [u.organization_id for u in await billing.unbilled(PERIOD, END, orgs[0] - 1, 3)] == [orgs[2]]
        await (await r.get(UnitOfWork)).rollback()


async def test_upgrade_invoices_plan_changes_and_pending_plans(container: Any) -> None:
    """Upgrade invoices are any number per period and never count as the period's invoice; the plan history comes
    back oldest first per organization; a pending plan is taken once; the ledger's usage splits by instant."""
    a = await new_organization(container, plan="business")
    b = await new_organization(container, plan="enterprise")
    async with container() as r:
        billing: BillingRepository = await r.get(BillingRepository)
        ledger: UsageLedger = await r.get(UsageLedger)
        line = proration_line("business", "enterprise", START + timedelta(days=3), START, END)
        for n in (1, 2):
            stored = await billing.add_proration_invoice(proration_invoice(a, n, line, START, PERIOD, END))
            assert stored.id is not None and stored.kind == "proration"
            assert (await billing.invoice(a, stored.id)) == stored
        assert await billing.proration_count(a, PERIOD) == 2 and await billing.proration_count(b, PERIOD) == 0
        assert a in [u.organization_id for u in await billing.unbilled(PERIOD, END, a - 1, 2)]
        assert await billing.add_invoices([build_invoice(a, "business", PERIOD, START, END, {}, CLOSED)]) == 1
        assert await billing.add_invoices([build_invoice(a, "business", PERIOD, START, END, {}, CLOSED)]) == 0

        late, early = START + timedelta(days=9), START + timedelta(days=2)
        await billing.add_plan_change(PlanChange(a, "enterprise", None, late))
        await billing.add_plan_change(PlanChange(a, "business", "enterprise", early))
        await billing.add_plan_change(PlanChange(b, "starter", "enterprise", early, charged=False))
        changes = await billing.plan_changes([a])
        assert list(changes) == [a] and [c.effective_at for c in changes[a]] == [early, late]
        assert changes[a][0] == PlanChange(a, "business", "enterprise", early)
        assert (await billing.plan_changes([b]))[b] == [PlanChange(b, "starter", "enterprise", early, charged=False)]

        await billing.save_account(BillingAccount(b, pending_plan="business"))
        assert (await billing.account(b)).pending_plan == "business"
        assert not await billing.take_pending_plan(b, "starter")
        assert await billing.take_pending_plan(b, "business")
        assert not await billing.take_pending_plan(b, "business")
        assert (await billing.account(b)).pending_plan is None

        for n, at in enumerate((START, START + timedelta(days=5), START + timedelta(days=5, seconds=1))):
            await ledger.append(LedgerEntry(b, SMS_SEGMENTS, 10 ** n, PERIOD, "sms", str(uuid.uuid4()), at))
        assert await ledger.used_between(b, START, START + timedelta(days=5)) == {SMS_SEGMENTS: 1}
        assert await ledger.used_between(b, START + timedelta(days=5), END) == {SMS_SEGMENTS: 110}
        assert await ledger.used_between(a, START, END) == {}
        await (await r.get(UnitOfWork)).rollback()
