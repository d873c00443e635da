"""Migration 0330 (campaign_contacts.cause_depth, the depth of the trigger action that added a contact) on a
database holding a contact, on both databases: the contact is at depth 0, a new contact may give its depth, and it
downgrades."""

from __future__ import annotations

import asyncio

import pytest

from tests.contract.test_migration_0008 import _migrate, _populate, _sql, empty_url
from tests.contract.test_migration_0130 import AGENT, NOW, OTHER_HEADS

__all__ = ["empty_url"]
CAMPAIGN = ("INSERT INTO campaigns (organization_id, name, agent_id, timezone, timezone_mode, calling_hours, "
            "max_concurrent_calls, retry, status, created_at, updated_at) VALUES "
            "(1, 'Spring', (SELECT max(id) FROM agents), 'UTC', 'campaign', '{}', 5, '{}', 'running', :now, :now)")
CONTACT = ("INSERT INTO campaign_contacts (organization_id, campaign_id, phone, custom_data, status, attempts, "
           "next_attempt_at, created_at, updated_at{extra}) VALUES "
           "(1, (SELECT max(id) FROM campaigns), :phone, '{{}}', 'pending', 0, :now, :now, :now{values})")


@pytest.mark.slow
async def test_0330_puts_contacts_of_before_at_depth_zero(empty_url: str) -> None:
    await asyncio.to_thread(_migrate, empty_url, *OTHER_HEADS, "0131", "0180", "0280")
    await _populate(empty_url)
    now = NOW.replace(tzinfo=None) if "sqlite" in empty_url else NOW
    await _sql(empty_url, AGENT, CAMPAIGN, CONTACT.format(extra="", values=""),
               params={"now": now, "phone": "+14155550100"})
    await asyncio.to_thread(_migrate, empty_url, "0330")
    await _sql(empty_url, CONTACT.format(extra=", cause_depth", values=", 2"),
               params={"now": now, "phone": "+14155550101"})
    [rows] = await _sql(empty_url, "SELECT phone, cause_depth FROM campaign_contacts ORDER BY phone")
    assert [tuple(r) for r in rows] == [("+14155550100", 0), ("+14155550101", 2)]
    await asyncio.to_thread(_migrate, empty_url, down="0280")
    with pytest.raises(Exception, match="cause_depth"):
        await _sql(empty_url, "SELECT cause_depth FROM campaign_contacts")
    [[(contacts,)]] = await _sql(empty_url, "SELECT count(*) FROM campaign_contacts")
    assert contacts == 2
