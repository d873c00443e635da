"""Migration 0370 (``billing_accounts.past_due_since``) on a database holding a past_due account with two unpaid
invoices and an active one, on both databases: the past_due account takes its oldest unpaid invoice's creation
instant, the active one none, and it downgrades."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from tests.contract.test_migration_0008 import _migrate, _populate, _sql, empty_url
from tests.contract.test_migration_0130 import NOW
from tests.contract.test_migration_0300 import INVOICE

__all__ = ["empty_url"]
UNPAID = (INVOICE.replace("'paid'", ":status").replace("(1, :number", "(:org, :number")
          .replace("'2026-01'", ":period"))


@pytest.mark.slow
async def test_0370_backfills_past_due_since_from_the_oldest_unpaid_invoice(empty_url: str) -> None:
    await asyncio.to_thread(_migrate, empty_url, "0350")
    await _populate(empty_url)
    sqlite = "sqlite" in empty_url
    now = NOW.replace(tzinfo=None) if sqlite else NOW
    later = now + timedelta(days=31)
    for org, number, status, at in ((1, "PAR-1-202601", "uncollectible", now), (1, "PAR-1-202602", "open", later),
                                    (2, "PAR-2-202601", "paid", now)):
        await _sql(empty_url, UNPAID.format(extra="", values=""),
                   params={"now": at, "number": number, "status": status, "org": org,
                           "period": f"{number[-6:-2]}-{number[-2:]}"})
    await _sql(empty_url, "INSERT INTO billing_accounts (organization_id, status, cancel_at_period_end) "
                          "VALUES (1, 'past_due', false), (2, 'active', false)")
    await asyncio.to_thread(_migrate, empty_url, "0370")

    [rows] = await _sql(empty_url, "SELECT organization_id, past_due_since FROM billing_accounts "
                                   "ORDER BY organization_id")
    since = {org: value for org, value in rows}
    assert since[2] is None
    assert since[1] is not None and str(since[1]).startswith(str(now)[:19])

    await asyncio.to_thread(_migrate, empty_url, down="0350")
    with pytest.raises(Exception, match="past_due_since"):
        await _sql(empty_url, "SELECT past_due_since FROM billing_accounts")
