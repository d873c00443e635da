"""In-memory billing storage (one transaction at a time, so each method is atomic as it is)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from adapters.memory.store import InMemoryUnitOfWork
from application.ports.billing import BillingAccount, Unbilled
from application.ports.platform import Page, PageRequest
from domain.billing import Invoice, InvoiceStatus, PaymentMethod, PlanChange, SubscriptionStatus
from domain.identity import persisted

ACCOUNTS, METHODS, INVOICES = "billing_accounts", "billing_payment_methods", "billing_invoices"
CHANGES = "billing_plan_changes"
UNPAID = ("open", "uncollectible")


class InMemoryBillingRepository:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def account(self, organization_id: int, *, for_update: bool = False) -> BillingAccount:
        found = (await self.uow.tables())[ACCOUNTS].get(organization_id)
        return found if found is not None else BillingAccount(organization_id)

    async def save_account(self, account: BillingAccount) -> None:
        (await self.uow.tables())[ACCOUNTS][account.organization_id] = account

    async def payers(self, organization_ids: Sequence[int]) -> dict[int, tuple[BillingAccount, PaymentMethod | None]]:
        tables = await self.uow.tables()
        found: dict[int, tuple[BillingAccount, PaymentMethod | None]] = {}
        for org_id in organization_ids:
            account = tables[ACCOUNTS].get(org_id)
            if account is not None:
                method_id = account.default_payment_method_id
                found[org_id] = (account, None if method_id is None else await self.method(org_id, method_id))
        return found

    async def add_method(self, method: PaymentMethod) -> PaymentMethod:
        stored = replace(method, id=self.uow.store.next_id(METHODS))
        (await self.uow.tables())[METHODS][stored.id] = stored
        return stored

    async def methods(self, organization_id: int) -> list[PaymentMethod]:
        rows = (await self.uow.tables())[METHODS]
        return sorted((m for m in rows.values() if m.organization_id == organization_id), key=lambda m: persisted(m.id))

    async def method(self, organization_id: int, method_id: int) -> PaymentMethod | None:
        found = (await self.uow.tables())[METHODS].get(method_id)
        return found if found is not None and found.organization_id == organization_id else None

    async def remove_method(self, organization_id: int, method_id: int) -> None:
        if await self.method(organization_id, method_id) is not None:
            del (await self.uow.tables())[METHODS][method_id]

    async def add_invoices(self, invoices: Sequence[Invoice]) -> int:
        return len(await self.insert_invoices(invoices))

    async def insert_invoices(self, invoices: Sequence[Invoice]) -> list[Invoice]:
        rows = (await self.uow.tables())[INVOICES]
        taken = {(i.organization_id, i.period) for i in rows.values() if i.kind == "period"}
        added: list[Invoice] = []
        for invoice in invoices:
            if (invoice.organization_id, invoice.period) in taken:
                continue
            stored = replace(invoice, id=self.uow.store.next_id(INVOICES))
            rows[stored.id] = stored
            taken.add((invoice.organization_id, invoice.period))
            added.append(stored)
        return added

    async def add_proration_invoice(self, invoice: Invoice) -> Invoice:
        stored = replace(invoice, id=self.uow.store.next_id(INVOICES))
        (await self.uow.tables())[INVOICES][stored.id] = stored
        return stored

    async def proration_count(self, organization_id: int, period: str) -> int:
        rows = (await self.uow.tables())[INVOICES]
        return sum(1 for i in rows.values()
                   if i.organization_id == organization_id and i.period == period and i.kind == "proration")

    async def add_plan_change(self, change: PlanChange) -> None:
        (await self.uow.tables())[CHANGES][self.uow.store.next_id(CHANGES)] = change

    async def plan_changes(self, organization_ids: Sequence[int]) -> dict[int, list[PlanChange]]:
        wanted = set(organization_ids)
        rows = (await self.uow.tables())[CHANGES]
        found: dict[int, list[PlanChange]] = {}
        for change_id in sorted(rows, key=lambda k: (rows[k].effective_at, k)):
            change = rows[change_id]
            if change.organization_id in wanted:
                found.setdefault(change.organization_id, []).append(change)
        return found

    async def invoice(self, organization_id: int, invoice_id: int, *, for_update: bool = False) -> Invoice | None:
        found = (await self.uow.tables())[INVOICES].get(invoice_id)
        return found if found is not None and found.organization_id == organization_id else None

    async def invoices(self, organization_id: int, page: PageRequest) -> Page[Invoice]:
        rows = (await self.uow.tables())[INVOICES]
        mine = sorted((i for i in rows.values() if i.organization_id == organization_id),
                      key=lambda i: (i.period, persisted(i.id)), reverse=True)
        return page.slice(mine)

    async def update_invoice(self, invoice: Invoice) -> None:
        (await self.uow.tables())[INVOICES][invoice.id] = invoice

    async def unpaid(self, organization_id: int) -> int:
        rows = (await self.uow.tables())[INVOICES]
        return sum(1 for i in rows.values() if i.organization_id == organization_id and i.status in UNPAID)

    async def unpaid_invoice_ids(self, organization_id: int) -> list[int]:
        rows = (await self.uow.tables())[INVOICES]
        return sorted(i.id for i in rows.values()
                      if i.organization_id == organization_id and i.status in UNPAID and i.id is not None)

    def _open(self, rows: dict[int, Invoice]) -> list[Invoice]:
        return [i for i in rows.values() if i.status == InvoiceStatus.OPEN and i.next_payment_attempt is not None]

    async def due_invoices(self, now: datetime, limit: int) -> list[Invoice]:
        due = [i for i in self._open((await self.uow.tables())[INVOICES])
               if i.next_payment_attempt is not None and i.next_payment_attempt <= now]
        due.sort(key=lambda i: (i.next_payment_attempt, i.id))
        return due[:limit]

    async def next_attempt(self) -> datetime | None:
        return min((i.next_payment_attempt for i in self._open((await self.uow.tables())[INVOICES])
                    if i.next_payment_attempt is not None), default=None)

    async def unbilled(self, period: str, period_end: datetime, after_organization_id: int,
                       limit: int) -> list[Unbilled]:
        tables = await self.uow.tables()
        invoiced = {i.organization_id for i in tables[INVOICES].values() if i.period == period and i.kind == "period"}
        found = []
        for org, deleted_at in sorted(tables["organizations"].values(), key=lambda e: e[0].id):
            account = tables[ACCOUNTS].get(org.id) or BillingAccount(org.id)
            if (org.id > after_organization_id and deleted_at is None and org.created_at < period_end
                    and org.id not in invoiced and account.status != SubscriptionStatus.CANCELED):
                found.append(Unbilled(org.id, org.plan, account.cancel_at_period_end, account.pending_plan,
                                      org.parent_id, account.billing_mode, org.is_partner))
                if len(found) == limit:
                    break
        return found

    async def billing_modes(self, organization_ids: Sequence[int]) -> dict[int, str]:
        accounts = (await self.uow.tables())[ACCOUNTS]
        return {org_id: (accounts.get(org_id) or BillingAccount(org_id)).billing_mode for org_id in organization_ids}

    async def cancel_at_period_end(self, organization_ids: Sequence[int]) -> list[int]:
        accounts = (await self.uow.tables())[ACCOUNTS]
        canceled = []
        for org_id in sorted(set(organization_ids)):
            account = accounts.get(org_id)
            if account is not None and account.cancel_at_period_end and account.status != SubscriptionStatus.CANCELED:
                accounts[org_id] = replace(account, status="canceled", pending_plan=None)
                canceled.append(org_id)
        return canceled

    async def take_pending_plan(self, organization_id: int, plan: str) -> bool:
        accounts = (await self.uow.tables())[ACCOUNTS]
        account = accounts.get(organization_id)
        if account is None or account.pending_plan != plan:
            return False
        accounts[organization_id] = replace(account, pending_plan=None)
        return True
