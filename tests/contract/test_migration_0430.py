"""Migration 0430 (calls.direction, for web calls) on both databases: calls of before are outbound, a web call is
stored, and a database where another migration already added the column migrates without a second one."""

from __future__ import annotations

import asyncio

import pytest

from tests.contract.test_migration_0008 import _migrate, _populate, _sql, empty_url
from tests.contract.test_migration_0130 import AGENT, CALL, NOW

__all__ = ["empty_url"]


@pytest.mark.slow
async def test_0430_marks_calls_of_before_outbound_and_takes_web_calls(empty_url: str) -> None:
    await asyncio.to_thread(_migrate, empty_url, "0415")
    await _populate(empty_url)
    now = NOW.replace(tzinfo=None) if "sqlite" in empty_url else NOW
    await _sql(empty_url, AGENT, CALL.format(extra="", values=""), params={"now": now, "id": "before"})
    await asyncio.to_thread(_migrate, empty_url, "0430")
    await _sql(empty_url, CALL.format(extra=", direction", values=", 'web'"), params={"now": now, "id": "web"})
    [rows] = await _sql(empty_url, "SELECT id, direction FROM calls ORDER BY id")
    assert rows == [("before", "outbound"), ("web", "web")]
    await asyncio.to_thread(_migrate, empty_url, down="0415")  # the column stays (another migration may own it)
    [[(count,)]] = await _sql(empty_url, "SELECT count(*) FROM calls WHERE direction = 'web'")
    assert count == 1


@pytest.mark.slow
async def test_0430_leaves_a_direction_column_that_is_already_there(empty_url: str) -> None:
    await asyncio.to_thread(_migrate, empty_url, "0415")
    await _sql(empty_url, "ALTER TABLE calls ADD COLUMN direction VARCHAR(10) NOT NULL DEFAULT 'outbound'")
    await asyncio.to_thread(_migrate, empty_url, "0430")
    [[(count,)]] = await _sql(empty_url, "SELECT count(*) FROM calls WHERE direction = 'outbound'")
    assert count == 0
