"""Migration 0372 (``billing_accounts.billing_mode``) on a database holding an account, on both databases: the
account takes ``partner`` (the default), a mode outside partner/direct is refused, and it downgrades."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy.exc import IntegrityError

from tests.contract.test_migration_0008 import _migrate, _populate, _sql, empty_url

__all__ = ["empty_url"]


@pytest.mark.slow
async def test_0372_adds_billing_mode_defaulting_to_partner(empty_url: str) -> None:
    await asyncio.to_thread(_migrate, empty_url, "0370")
    await _populate(empty_url)
    await _sql(empty_url, "INSERT INTO billing_accounts (organization_id, status, cancel_at_period_end) "
                          "VALUES (1, 'active', false)")
    await asyncio.to_thread(_migrate, empty_url, "0372")
    [rows] = await _sql(empty_url, "SELECT billing_mode FROM billing_accounts")
    assert rows == [("partner",)]
    await _sql(empty_url, "UPDATE billing_accounts SET billing_mode = 'direct'")
    with pytest.raises(IntegrityError):
        await _sql(empty_url, "UPDATE billing_accounts SET billing_mode = 'reseller'")
    await asyncio.to_thread(_migrate, empty_url, down="0370")
    with pytest.raises(Exception, match="billing_mode"):
        await _sql(empty_url, "SELECT billing_mode FROM billing_accounts")
    [rows] = await _sql(empty_url, "SELECT status FROM billing_accounts")
    assert rows == [("active",)]
