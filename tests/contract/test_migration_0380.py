"""Migration 0380 (calls.direction, calls.end_message, the index finding a call by its carrier's id) on a database
holding a call, on both databases: the call of before is outbound without a message, a new call may be inbound,
and it downgrades."""

from __future__ import annotations

import asyncio

import pytest

from tests.contract.test_migration_0008 import _migrate, _populate, _sql, empty_url
from tests.contract.test_migration_0130 import AGENT, CALL, NOW

__all__ = ["empty_url"]


@pytest.mark.slow
async def test_0380_makes_calls_of_before_outbound_and_downgrades(empty_url: str) -> None:
    await asyncio.to_thread(_migrate, empty_url, "0350")
    await _populate(empty_url)
    now = NOW.replace(tzinfo=None) if "sqlite" in empty_url else NOW
    await _sql(empty_url, AGENT, CALL.format(extra="", values=""), params={"now": now, "id": "before"})
    await asyncio.to_thread(_migrate, empty_url, "0380")
    await _sql(empty_url, CALL.format(extra=", direction, end_message, telephony_ref",
                                      values=", 'inbound', 'the carrier said no', 'CA1'"),
               params={"now": now, "id": "after"})
    [rows] = await _sql(empty_url, "SELECT id, direction, end_message FROM calls ORDER BY id")
    assert [tuple(r) for r in rows] == [("after", "inbound", "the carrier said no"), ("before", "outbound", None)]
    await asyncio.to_thread(_migrate, empty_url, down="0350")
    with pytest.raises(Exception, match="direction"):
        await _sql(empty_url, "SELECT direction FROM calls")
    [[(calls,)]] = await _sql(empty_url, "SELECT count(*) FROM calls")
    assert calls == 2
