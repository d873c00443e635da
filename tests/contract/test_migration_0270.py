"""Migration 0270 (the destination policy: organizations.dialing_policy, campaigns.allowed_countries and
widget_max_contacts_per_hour) on a database holding an organization and a campaign, on both databases: what existed
keeps the defaults, new rows may set them, and it downgrades."""

from __future__ import annotations

import asyncio

import pytest

from tests.contract.test_migration_0008 import _migrate, _populate, _sql, empty_url
from tests.contract.test_migration_0130 import AGENT, NOW, OTHER_HEADS

__all__ = ["empty_url"]

CAMPAIGN = ("INSERT INTO campaigns (organization_id, name, agent_id, timezone, timezone_mode, calling_hours, "
            "max_concurrent_calls, retry, status, created_at, updated_at{extra}) VALUES (1, :name, 1, 'UTC', "
            "'recipient', '{{}}', 5, '{{}}', 'draft', :now, :now{values})")


@pytest.mark.slow
async def test_0270_keeps_the_defaults_for_what_existed(empty_url: str) -> None:
    await asyncio.to_thread(_migrate, empty_url, *OTHER_HEADS, "0130", "0240")
    await _populate(empty_url)
    now = NOW.replace(tzinfo=None) if "sqlite" in empty_url else NOW
    await _sql(empty_url, AGENT, CAMPAIGN.format(extra="", values=""), params={"now": now, "name": "Before"})
    await asyncio.to_thread(_migrate, empty_url, "0270")
    await _sql(empty_url, CAMPAIGN.format(extra=", allowed_countries, widget_max_contacts_per_hour",
                                          values=", :countries, 7"),
               params={"now": now, "name": "After", "countries": '["US"]'})
    [rows] = await _sql(empty_url, "SELECT name, allowed_countries, widget_max_contacts_per_hour FROM campaigns "
                                   "ORDER BY id")
    assert [(name, cap) for name, _, cap in rows] == [("Before", 60), ("After", 7)]
    assert rows[0][1] is None and rows[1][1] in ('["US"]', ["US"])
    [[(policy,)]] = await _sql(empty_url, "SELECT dialing_policy FROM organizations WHERE id = 1")
    assert policy is None  # the default policy
    await asyncio.to_thread(_migrate, empty_url, down="0240")
    for column in ("campaigns.allowed_countries", "campaigns.widget_max_contacts_per_hour",
                   "organizations.dialing_policy"):
        table, name = column.split(".")
        with pytest.raises(Exception, match=name):
            await _sql(empty_url, f"SELECT {name} FROM {table}")
    [[(campaigns,)]] = await _sql(empty_url, "SELECT count(*) FROM campaigns")
    assert campaigns == 2
