"""Migration 0390 (``media_stream_tokens``) on both databases: the table takes a token's hash and refuses a second
row with the same hash, and the downgrade drops it."""

from __future__ import annotations

import asyncio

import pytest

from tests.contract.test_migration_0008 import _migrate, _populate, _sql, empty_url
from tests.contract.test_migration_0130 import NOW

__all__ = ["empty_url"]
TOKEN = ("INSERT INTO media_stream_tokens (token_hash, organization_id, call_id, expires_at, created_at) VALUES "
         "(:hash, 1, 'call-1', :now, :now)")


@pytest.mark.slow
async def test_0390_creates_the_token_table_and_downgrades_without_it(empty_url: str) -> None:
    await asyncio.to_thread(_migrate, empty_url, "0350")
    await _populate(empty_url)
    now = NOW.replace(tzinfo=None) if "sqlite" in empty_url else NOW
    await asyncio.to_thread(_migrate, empty_url, "0390")
    await _sql(empty_url, TOKEN, params={"hash": "a" * 64, "now": now})
    with pytest.raises(Exception, match=r"(?i)unique|duplicate"):
        await _sql(empty_url, TOKEN, params={"hash": "a" * 64, "now": now})
    [[(count,)]] = await _sql(empty_url, "SELECT count(*) FROM media_stream_tokens WHERE redeemed_at IS NULL")
    assert count == 1
    await asyncio.to_thread(_migrate, empty_url, down="0350")
    with pytest.raises(Exception, match="media_stream_tokens"):
        await _sql(empty_url, "SELECT count(*) FROM media_stream_tokens")
