"""Migration 0450 (usage_ledger.agent_id and usage_ledger.campaign_id, the dimensions of the usage breakdowns) on a
database holding a call and its ledger rows, on both databases: a call's rows are backfilled with its agent and
campaign, a message's and a gone call's stay null, and it downgrades keeping the rows."""

from __future__ import annotations

import asyncio

import pytest

from tests.contract.test_migration_0008 import _migrate, _populate, _sql, empty_url
from tests.contract.test_migration_0130 import AGENT, CALL, NOW

__all__ = ["empty_url"]
ROW = ("INSERT INTO usage_ledger (organization_id, metric, quantity, period, source_type, source_id, occurred_at) "
       "VALUES (1, :metric, 60, '2026-01', :type, :source, :now)")


@pytest.mark.slow
async def test_0450_backfills_the_agent_and_campaign_of_call_rows(empty_url: str) -> None:
    await asyncio.to_thread(_migrate, empty_url, "0422", "0160")
    await _populate(empty_url)
    now = NOW.replace(tzinfo=None) if "sqlite" in empty_url else NOW
    await _sql(empty_url, AGENT, params={"now": now})
    await _sql(empty_url, CALL.format(extra=", campaign_id", values=", 7"), params={"now": now, "id": "c1"})
    await _sql(empty_url, CALL.format(extra="", values=""), params={"now": now, "id": "c2"})
    for metric, kind, source in (("call_seconds", "call", "c1"), ("calls", "call", "c1"),
                                 ("call_seconds", "call", "c2"), ("call_seconds", "call", "gone"),
                                 ("sms_segments", "sms", "c1")):
        await _sql(empty_url, ROW, params={"now": now, "metric": metric, "type": kind, "source": source})
    await asyncio.to_thread(_migrate, empty_url, "0450")
    [rows] = await _sql(empty_url, "SELECT source_type, source_id, metric, agent_id, campaign_id FROM usage_ledger "
                                   "ORDER BY source_type, source_id, metric")
    assert [tuple(r) for r in rows] == [
        ("call", "c1", "call_seconds", 1, 7), ("call", "c1", "calls", 1, 7), ("call", "c2", "call_seconds", 1, None),
        ("call", "gone", "call_seconds", None, None), ("sms", "c1", "sms_segments", None, None)]
    await asyncio.to_thread(_migrate, empty_url, down="0422")
    with pytest.raises(Exception, match="agent_id"):
        await _sql(empty_url, "SELECT agent_id FROM usage_ledger")
    [[(count,)]] = await _sql(empty_url, "SELECT count(*) FROM usage_ledger")
    assert count == 5
