"""SQL billing storage: accounts (upserted), payment methods, plan changes, and period invoices inserted in bulk
with ``ON CONFLICT (organization_id, period) WHERE kind = 'period' DO NOTHING`` so closers running at once never
invoice a period twice (upgrade invoices, kind ``proration``, are not limited)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from adapters.sql.billing_tables import (
    PERIOD_INVOICE,
    billing_accounts,
    billing_invoices,
    billing_payment_methods,
    billing_plan_changes,
)
from adapters.sql.dialect import insert
from adapters.sql.paging import fetch_page
from adapters.sql.tables import organizations
from adapters.sql.uow import SqlUnitOfWork
from application.ports.billing import BillingAccount, Unbilled
from application.ports.platform import Page, PageRequest
from domain.billing import Invoice, InvoiceLine, InvoiceStatus, PaymentMethod, PlanChange, SubscriptionStatus

UNPAID = ("open", "uncollectible")


def _lines(invoice: Invoice) -> list[dict[str, Any]]:
    return [{"description": x.description, "quantity": x.quantity, "unit_amount": x.unit_amount, "amount": x.amount}
            for x in invoice.lines]


def _invoice(row: Any) -> Invoice:
    return Invoice(
        row.id, row.organization_id, row.number, row.period, row.period_start, row.period_end, row.status,
        tuple(InvoiceLine(x["description"], int(x["quantity"]), int(x["unit_amount"]), int(x["amount"]))
              for x in row.lines),
        int(row.subtotal), int(row.total), row.currency, row.created_at, row.paid_at, row.attempt_count,
        row.automatic_failures, row.next_payment_attempt, row.last_payment_error, row.kind)


def _invoice_row(i: Invoice) -> dict[str, Any]:
    return {"organization_id": i.organization_id, "number": i.number, "period": i.period,
            "period_start": i.period_start, "period_end": i.period_end, "status": i.status,
            "lines": _lines(i), "subtotal": i.subtotal, "total": i.total, "currency": i.currency,
            "attempt_count": i.attempt_count, "automatic_failures": i.automatic_failures,
            "next_payment_attempt": i.next_payment_attempt, "last_payment_error": i.last_payment_error,
            "created_at": i.created_at, "paid_at": i.paid_at, "kind": i.kind}


def _method(row: Any) -> PaymentMethod:
    return PaymentMethod(row.id, row.organization_id, row.gateway_id, row.brand, row.last4, row.exp_month,
                         row.exp_year, row.created_at)


def billing_account(organization_id: int, row: Any | None) -> BillingAccount:
    """An organization's billing account from its row (None: no row yet, the defaults)."""
    if row is None:
        return BillingAccount(organization_id)
    return BillingAccount(organization_id, row.status, row.cancel_at_period_end, row.default_payment_method_id,
                          row.pending_plan, row.past_due_since, row.billing_mode)


def _account_values(account: BillingAccount) -> dict[str, Any]:
    return {"status": account.status, "cancel_at_period_end": account.cancel_at_period_end,
            "default_payment_method_id": account.default_payment_method_id, "pending_plan": account.pending_plan,
            "past_due_since": account.past_due_since, "billing_mode": account.billing_mode}


class SqlBillingRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def account(self, organization_id: int, *, for_update: bool = False) -> BillingAccount:
        ahead: BillingAccount | None = None if for_update else self.uow.read_ahead.pop(
            ("billing_account", organization_id), None)  # read ahead of a call placed (SqlCallPlacementReads)
        if ahead is not None:
            return ahead
        conn = await self.uow.connection()
        if for_update:
            # a row to lock: an organization without one yet gets its defaults stored first, so two requests that
            # both found none (two first cards, each meaning to be the default) wait for each other here
            fresh = insert(billing_accounts, self.uow.dialect).values(
                organization_id=organization_id, **_account_values(BillingAccount(organization_id)))
            await conn.execute(fresh.on_conflict_do_nothing(index_elements=["organization_id"]))
        query = sa.select(billing_accounts).where(billing_accounts.c.organization_id == organization_id)
        row = (await conn.execute(query.with_for_update() if for_update else query)).first()
        return billing_account(organization_id, row)

    async def save_account(self, account: BillingAccount) -> None:
        conn = await self.uow.connection()
        values = _account_values(account)
        upsert = insert(billing_accounts, self.uow.dialect).values(organization_id=account.organization_id, **values)
        await conn.execute(upsert.on_conflict_do_update(index_elements=["organization_id"], set_=values))

    async def payers(self, organization_ids: Sequence[int]) -> dict[int, tuple[BillingAccount, PaymentMethod | None]]:
        if not organization_ids:
            return {}
        conn = await self.uow.connection()
        rows = await conn.execute(
            sa.select(billing_accounts, billing_payment_methods.c.id.label("method_id"),
                      billing_payment_methods.c.gateway_id, billing_payment_methods.c.brand,
                      billing_payment_methods.c.last4, billing_payment_methods.c.exp_month,
                      billing_payment_methods.c.exp_year, billing_payment_methods.c.created_at)
            .select_from(billing_accounts.outerjoin(billing_payment_methods, sa.and_(
                billing_payment_methods.c.id == billing_accounts.c.default_payment_method_id,
                billing_payment_methods.c.organization_id == billing_accounts.c.organization_id)))
            .where(billing_accounts.c.organization_id.in_(sorted(set(organization_ids))))
            .order_by(billing_accounts.c.organization_id)
            .with_for_update(of=billing_accounts))
        found: dict[int, tuple[BillingAccount, PaymentMethod | None]] = {}
        for row in rows:
            account = BillingAccount(row.organization_id, row.status, row.cancel_at_period_end,
                                     row.default_payment_method_id, row.pending_plan, row.past_due_since,
                                     row.billing_mode)
            method = None if row.method_id is None else PaymentMethod(
                row.method_id, row.organization_id, row.gateway_id, row.brand, row.last4, row.exp_month,
                row.exp_year, row.created_at)
            found[int(row.organization_id)] = (account, method)
        return found

    async def add_method(self, method: PaymentMethod) -> PaymentMethod:
        conn = await self.uow.connection()
        new_id = (await conn.execute(billing_payment_methods.insert().values(
            organization_id=method.organization_id, gateway_id=method.gateway_id, brand=method.brand,
            last4=method.last4, exp_month=method.exp_month, exp_year=method.exp_year, created_at=method.created_at,
        ).returning(billing_payment_methods.c.id))).scalar_one()
        return PaymentMethod(int(new_id), method.organization_id, method.gateway_id, method.brand, method.last4,
                             method.exp_month, method.exp_year, method.created_at)

    async def methods(self, organization_id: int) -> list[PaymentMethod]:
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(billing_payment_methods).where(
            billing_payment_methods.c.organization_id == organization_id).order_by(billing_payment_methods.c.id))
        return [_method(row) for row in rows]

    async def method(self, organization_id: int, method_id: int) -> PaymentMethod | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(billing_payment_methods).where(
            billing_payment_methods.c.organization_id == organization_id,
            billing_payment_methods.c.id == method_id))).first()
        return _method(row) if row is not None else None

    async def remove_method(self, organization_id: int, method_id: int) -> None:
        conn = await self.uow.connection()
        await conn.execute(billing_payment_methods.delete().where(
            billing_payment_methods.c.organization_id == organization_id, billing_payment_methods.c.id == method_id))

    async def add_invoices(self, invoices: Sequence[Invoice]) -> int:
        return len(await self.insert_invoices(invoices))

    async def insert_invoices(self, invoices: Sequence[Invoice]) -> list[Invoice]:
        if not invoices:
            return []
        conn = await self.uow.connection()
        inserted = await conn.execute(
            insert(billing_invoices, self.uow.dialect).values([_invoice_row(i) for i in invoices])
            .on_conflict_do_nothing(index_elements=["organization_id", "period"], index_where=PERIOD_INVOICE)
            .returning(billing_invoices.c.id, billing_invoices.c.organization_id, billing_invoices.c.period))
        ids = {(int(org), period): int(new_id) for new_id, org, period in inserted.all()}
        return [replace(i, id=ids[(i.organization_id, i.period)]) for i in invoices
                if (i.organization_id, i.period) in ids]

    async def add_proration_invoice(self, invoice: Invoice) -> Invoice:
        conn = await self.uow.connection()
        new_id = (await conn.execute(billing_invoices.insert().values(_invoice_row(invoice))
                                     .returning(billing_invoices.c.id))).scalar_one()
        return replace(invoice, id=int(new_id))

    async def proration_count(self, organization_id: int, period: str) -> int:
        conn = await self.uow.connection()
        return int((await conn.execute(sa.select(sa.func.count()).select_from(billing_invoices).where(
            billing_invoices.c.organization_id == organization_id, billing_invoices.c.period == period,
            billing_invoices.c.kind == "proration"))).scalar_one())

    async def add_plan_change(self, change: PlanChange) -> None:
        conn = await self.uow.connection()
        await conn.execute(billing_plan_changes.insert().values(
            organization_id=change.organization_id, previous_plan=change.previous_plan, plan=change.plan,
            effective_at=change.effective_at, charged=change.charged))

    async def plan_changes(self, organization_ids: Sequence[int]) -> dict[int, list[PlanChange]]:
        if not organization_ids:
            return {}
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(billing_plan_changes).where(
            billing_plan_changes.c.organization_id.in_(sorted(set(organization_ids))))
            .order_by(billing_plan_changes.c.organization_id, billing_plan_changes.c.effective_at,
                      billing_plan_changes.c.id))
        found: dict[int, list[PlanChange]] = {}
        for row in rows:
            found.setdefault(int(row.organization_id), []).append(
                PlanChange(int(row.organization_id), row.previous_plan, row.plan, row.effective_at,
                           bool(row.charged)))
        return found

    async def invoice(self, organization_id: int, invoice_id: int, *, for_update: bool = False) -> Invoice | None:
        conn = await self.uow.connection()
        query = sa.select(billing_invoices).where(billing_invoices.c.organization_id == organization_id,
                                                  billing_invoices.c.id == invoice_id)
        row = (await conn.execute(query.with_for_update() if for_update else query)).first()
        return _invoice(row) if row is not None else None

    async def invoices(self, organization_id: int, page: PageRequest) -> Page[Invoice]:
        conn = await self.uow.connection()
        rows, total = await fetch_page(conn, list(billing_invoices.c),
                                       billing_invoices.c.organization_id == organization_id,
                                       [billing_invoices.c.period.desc(), billing_invoices.c.id.desc()], page)
        return Page([_invoice(row) for row in rows], int(total), page.limit, page.offset)

    async def update_invoice(self, invoice: Invoice) -> None:
        conn = await self.uow.connection()
        await conn.execute(billing_invoices.update().where(billing_invoices.c.id == invoice.id).values(
            status=invoice.status, attempt_count=invoice.attempt_count,
            automatic_failures=invoice.automatic_failures, next_payment_attempt=invoice.next_payment_attempt,
            last_payment_error=invoice.last_payment_error, paid_at=invoice.paid_at))

    async def unpaid(self, organization_id: int) -> int:
        conn = await self.uow.connection()
        return int((await conn.execute(sa.select(sa.func.count()).select_from(billing_invoices).where(
            billing_invoices.c.organization_id == organization_id,
            billing_invoices.c.status.in_(UNPAID)))).scalar_one())

    async def unpaid_invoice_ids(self, organization_id: int) -> list[int]:
        conn = await self.uow.connection()
        return [int(i) for i in (await conn.execute(sa.select(billing_invoices.c.id).where(
            billing_invoices.c.organization_id == organization_id,
            billing_invoices.c.status.in_(UNPAID)).order_by(billing_invoices.c.id))).scalars()]

    async def due_invoices(self, now: datetime, limit: int) -> list[Invoice]:
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(billing_invoices).where(
            billing_invoices.c.status == InvoiceStatus.OPEN, billing_invoices.c.next_payment_attempt <= now,
        ).order_by(billing_invoices.c.next_payment_attempt, billing_invoices.c.id).limit(limit)
            .with_for_update(skip_locked=True))
        return [_invoice(row) for row in rows]

    async def next_attempt(self) -> datetime | None:
        conn = await self.uow.connection()
        return (await conn.execute(sa.select(sa.func.min(billing_invoices.c.next_payment_attempt)).where(
            billing_invoices.c.status == InvoiceStatus.OPEN))).scalar()

    async def unbilled(self, period: str, period_end: datetime, after_organization_id: int,
                       limit: int) -> list[Unbilled]:
        conn = await self.uow.connection()
        invoiced = sa.select(billing_invoices.c.id).where(billing_invoices.c.organization_id == organizations.c.id,
                                                          billing_invoices.c.period == period,
                                                          billing_invoices.c.kind == "period")
        rows = await conn.execute(
            sa.select(organizations.c.id, organizations.c.plan,
                      sa.func.coalesce(billing_accounts.c.cancel_at_period_end, sa.false()),
                      billing_accounts.c.pending_plan, organizations.c.parent_id,
                      sa.func.coalesce(billing_accounts.c.billing_mode, "partner"), organizations.c.org_type)
            .select_from(organizations.outerjoin(billing_accounts,
                                                 billing_accounts.c.organization_id == organizations.c.id))
            .where(organizations.c.id > after_organization_id, organizations.c.deleted_at.is_(None),
                   organizations.c.created_at < period_end,
                   sa.or_(billing_accounts.c.status.is_(None),
                          billing_accounts.c.status != SubscriptionStatus.CANCELED),
                   ~sa.exists(invoiced))
            .order_by(organizations.c.id).limit(limit))
        return [Unbilled(int(org_id), plan, bool(cancel), pending, None if parent is None else int(parent), mode,
                         org_type == "partner")
                for org_id, plan, cancel, pending, parent, mode, org_type in rows]

    async def billing_modes(self, organization_ids: Sequence[int]) -> dict[int, str]:
        modes = dict.fromkeys(organization_ids, "partner")
        if organization_ids:
            conn = await self.uow.connection()
            rows = await conn.execute(sa.select(billing_accounts.c.organization_id, billing_accounts.c.billing_mode)
                                      .where(billing_accounts.c.organization_id.in_(sorted(set(organization_ids)))))
            modes.update({int(org_id): mode for org_id, mode in rows})
        return modes

    async def cancel_at_period_end(self, organization_ids: Sequence[int]) -> list[int]:
        if not organization_ids:
            return []
        conn = await self.uow.connection()
        canceled = await conn.execute(billing_accounts.update().where(
            billing_accounts.c.organization_id.in_(list(organization_ids)),
            billing_accounts.c.cancel_at_period_end.is_(True), billing_accounts.c.status != SubscriptionStatus.CANCELED,
        ).values(status="canceled", pending_plan=None).returning(billing_accounts.c.organization_id))
        return sorted(int(org_id) for org_id in canceled.scalars())

    async def take_pending_plan(self, organization_id: int, plan: str) -> bool:
        conn = await self.uow.connection()
        taken = await conn.execute(billing_accounts.update().where(
            billing_accounts.c.organization_id == organization_id, billing_accounts.c.pending_plan == plan,
        ).values(pending_plan=None).returning(billing_accounts.c.organization_id))
        return taken.first() is not None
