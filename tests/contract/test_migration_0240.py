"""Migration 0240 (calls.cause_depth, the depth of the trigger action that placed a call) on a database holding a
call, on both databases: the call is at depth 0, a new call may give its depth, and it downgrades."""

from __future__ import annotations

import asyncio

import pytest

from tests.contract.test_migration_0008 import _migrate, _populate, _sql, empty_url
from tests.contract.test_migration_0130 import AGENT, CALL, NOW, OTHER_HEADS

__all__ = ["empty_url"]


@pytest.mark.slow
async def test_0240_puts_calls_of_before_at_depth_zero(empty_url: str) -> None:
    await asyncio.to_thread(_migrate, empty_url, *OTHER_HEADS, "0130", "0180")
    await _populate(empty_url)
    now = NOW.replace(tzinfo=None) if "sqlite" in empty_url else NOW
    await _sql(empty_url, AGENT, CALL.format(extra="", values=""), params={"now": now, "id": "c1"})
    await asyncio.to_thread(_migrate, empty_url, "0240")
    await _sql(empty_url, CALL.format(extra=", cause_depth", values=", 2"), params={"now": now, "id": "c2"})
    [rows] = await _sql(empty_url, "SELECT id, cause_depth FROM calls ORDER BY id")
    assert rows == [("c1", 0), ("c2", 2)]
    await asyncio.to_thread(_migrate, empty_url, down="0180")
    with pytest.raises(Exception, match="cause_depth"):
        await _sql(empty_url, "SELECT cause_depth FROM calls")
    [[(calls,)]] = await _sql(empty_url, "SELECT count(*) FROM calls")
    assert calls == 2
