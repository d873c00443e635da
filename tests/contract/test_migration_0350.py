"""Migration 0350 (drops ``usage_records``, which nothing reads or writes since the usage ledger) on a database
holding a usage record, on both databases: the table is gone, and it downgrades to an empty table that takes rows
again."""

from __future__ import annotations

import asyncio

import pytest

from tests.contract.test_migration_0008 import _migrate, _populate, _sql, empty_url
from tests.contract.test_migration_0130 import NOW

__all__ = ["empty_url"]
RECORD = ("INSERT INTO usage_records (organization_id, kind, quantity, at, reference) VALUES "
          "(1, 'call_seconds', 42, :now, :reference)")
TABLES = ("SELECT count(*) FROM information_schema.tables WHERE table_name = 'usage_records'",
          "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'usage_records'")


@pytest.mark.slow
async def test_0350_drops_usage_records_and_downgrades_to_an_empty_table(empty_url: str) -> None:
    await asyncio.to_thread(_migrate, empty_url, "0330")
    await _populate(empty_url)
    now = NOW.replace(tzinfo=None) if "sqlite" in empty_url else NOW
    tables = TABLES[1] if "sqlite" in empty_url else TABLES[0]
    await _sql(empty_url, RECORD, params={"now": now, "reference": "call:1"})
    await asyncio.to_thread(_migrate, empty_url, "0350")
    [[(present,)]] = await _sql(empty_url, tables)
    assert present == 0
    with pytest.raises(Exception, match="usage_records"):
        await _sql(empty_url, "SELECT count(*) FROM usage_records")
    await asyncio.to_thread(_migrate, empty_url, down="0330")
    await _sql(empty_url, RECORD, params={"now": now, "reference": "call:2"})
    [[(present,)], rows] = await _sql(empty_url, tables, "SELECT reference FROM usage_records")
    assert present == 1 and rows == [("call:2",)]
