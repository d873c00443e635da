"""Migration 0480 (sms_messages.error_code holds 50 characters, was 20) on both databases: on PostgreSQL the column
refuses a 22-character code before it and keeps one after it, and a downgrade cuts what is longer than 20; SQLite,
which enforces no VARCHAR length, keeps every code either way."""

from __future__ import annotations

import asyncio

import pytest

from tests.contract.test_migration_0008 import _migrate, _populate, _sql, empty_url
from tests.contract.test_migration_0130 import NOW

__all__ = ["empty_url"]
CODE = "provider_not_supported"  # 22 characters
MESSAGE = ("INSERT INTO sms_messages (organization_id, direction, from_phone, to_phone, body, status, encoding, "
           "segments, error_code, status_events, carrier_state, created_at, updated_at) VALUES (1, 'outbound', "
           "'+15550000000', '+14155550123', 'Hi', 'failed', 'gsm7', 1, :code, '[]', '{}', :now, :now)")


@pytest.mark.slow
async def test_0480_widens_the_error_code_on_postgresql(empty_url: str) -> None:
    postgres = "sqlite" not in empty_url
    now = NOW if postgres else NOW.replace(tzinfo=None)
    await asyncio.to_thread(_migrate, empty_url, "heads")
    await _populate(empty_url)
    await asyncio.to_thread(_migrate, empty_url, down="0470")
    if postgres:
        with pytest.raises(Exception, match="too long"):
            await _sql(empty_url, MESSAGE, params={"code": CODE, "now": now})
    await asyncio.to_thread(_migrate, empty_url, "0480")
    await _sql(empty_url, MESSAGE, params={"code": CODE, "now": now})
    [[(kept,)]] = await _sql(empty_url, "SELECT error_code FROM sms_messages")
    assert kept == CODE
    await asyncio.to_thread(_migrate, empty_url, down="0470")
    [[(after,)]] = await _sql(empty_url, "SELECT error_code FROM sms_messages")
    assert after == (CODE[:20] if postgres else CODE)
