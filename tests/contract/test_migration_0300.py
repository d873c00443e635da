"""Migration 0300 (plan changes: pending_plan, invoice kinds, the plan history) on a database holding an invoice
and an account, on both databases: the invoice becomes the period's invoice and still allows no second one, an
upgrade invoice fits beside it, the table keeps its autoincrement on SQLite, and it downgrades."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy.exc import IntegrityError

from tests.contract.test_migration_0008 import _migrate, _populate, _sql, empty_url
from tests.contract.test_migration_0130 import NOW, OTHER_HEADS

__all__ = ["empty_url"]
INVOICE = ("INSERT INTO billing_invoices (organization_id, number, period, period_start, period_end, status, lines, "
           "subtotal, total, currency, attempt_count, automatic_failures, created_at{extra}) VALUES "
           "(1, :number, '2026-01', :now, :now, 'paid', '[]', 4900, 4900, 'usd', 1, 0, :now{values})")


@pytest.mark.slow
async def test_0300_keeps_one_period_invoice_and_makes_room_for_upgrades(empty_url: str) -> None:
    await asyncio.to_thread(_migrate, empty_url, *OTHER_HEADS, "0130", "0180", "0190", "0240")
    await _populate(empty_url)
    now = NOW.replace(tzinfo=None) if "sqlite" in empty_url else NOW
    await _sql(empty_url, INVOICE.format(extra="", values=""), params={"now": now, "number": "PAR-1-202601"},)
    await _sql(empty_url, "INSERT INTO billing_accounts (organization_id, status, cancel_at_period_end) "
                          "VALUES (1, 'active', false)")
    await asyncio.to_thread(_migrate, empty_url, "0300")

    [rows] = await _sql(empty_url, "SELECT number, kind FROM billing_invoices")
    assert rows == [("PAR-1-202601", "period")]
    [[(pending,)]] = await _sql(empty_url, "SELECT pending_plan FROM billing_accounts")
    assert pending is None
    with pytest.raises(IntegrityError):
        await _sql(empty_url, INVOICE.format(extra="", values=""), params={"now": now, "number": "PAR-1-202601-B"})
    await _sql(empty_url, INVOICE.format(extra=", kind", values=", 'proration'"),
               params={"now": now, "number": "PAR-1-202601-U1"})
    await _sql(empty_url, "INSERT INTO billing_plan_changes (organization_id, previous_plan, plan, effective_at) "
                          "VALUES (1, 'starter', 'business', :now)", params={"now": now})
    if "sqlite" in empty_url:
        [[(sql,)]] = await _sql(empty_url, "SELECT sql FROM sqlite_master WHERE name = 'billing_invoices'")
        assert "AUTOINCREMENT" in sql.upper()

    await asyncio.to_thread(_migrate, empty_url, down="0240")
    [rows] = await _sql(empty_url, "SELECT number FROM billing_invoices")
    assert rows == [("PAR-1-202601",)]
    with pytest.raises(Exception, match="billing_plan_changes"):
        await _sql(empty_url, "SELECT count(*) FROM billing_plan_changes")
