"""Migration 0280 (campaigns.completion) on a database holding a campaign, on both databases: the campaign of
before keeps completing when its queue drains, a new one may be manual, and it downgrades."""

from __future__ import annotations

import asyncio

import pytest

from tests.contract.test_migration_0008 import _migrate, _populate, _sql, empty_url
from tests.contract.test_migration_0130 import AGENT, NOW, OTHER_HEADS

__all__ = ["empty_url"]
CAMPAIGN = ("INSERT INTO campaigns (organization_id, name, agent_id, timezone, timezone_mode, calling_hours, "
            "max_concurrent_calls, retry, status, created_at, updated_at{extra}) VALUES "
            "(1, :name, (SELECT max(id) FROM agents), 'UTC', 'recipient', '{{}}', 5, '{{}}', 'draft', :now, "
            ":now{values})")


@pytest.mark.slow
async def test_0280_keeps_campaigns_of_before_completing_when_empty(empty_url: str) -> None:
    await asyncio.to_thread(_migrate, empty_url, *OTHER_HEADS, "0130", "0180", "0240")
    await _populate(empty_url)
    now = NOW.replace(tzinfo=None) if "sqlite" in empty_url else NOW
    await _sql(empty_url, AGENT, CAMPAIGN.format(extra="", values=""), params={"now": now, "name": "before"})
    await asyncio.to_thread(_migrate, empty_url, "0280")
    await _sql(empty_url, CAMPAIGN.format(extra=", completion", values=", 'manual'"),
               params={"now": now, "name": "after"})
    [rows] = await _sql(empty_url, "SELECT name, completion FROM campaigns WHERE name IN ('before', 'after') "
                                   "ORDER BY id")
    assert [tuple(r) for r in rows] == [("before", "when_empty"), ("after", "manual")]
    await asyncio.to_thread(_migrate, empty_url, down="0240")
    with pytest.raises(Exception, match="completion"):
        await _sql(empty_url, "SELECT completion FROM campaigns")
    [[(campaigns,)]] = await _sql(empty_url, "SELECT count(*) FROM campaigns WHERE name IN ('before', 'after')")
    assert campaigns == 2
