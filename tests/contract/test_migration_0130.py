"""Migration 0130 (the dialer's columns and indexes) on a database populated at the other heads, on both
databases: calls of before stay single calls, one call per attempt key, and it downgrades."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from tests.contract.test_migration_0008 import _migrate, _populate, _sql, empty_url

__all__ = ["empty_url"]
OTHER_HEADS = ("0008", "0009", "0013", "0015", "0110", "0120")
NOW = datetime(2026, 1, 5, 9, tzinfo=UTC)
AGENT = ("INSERT INTO agents (organization_id, name, status, agent_mode, language, voice, llm, prompt, "
         "max_call_duration_seconds, voicemail, timezone, metadata, created_at, updated_at) VALUES "
         "(1, 'Desk', 'active', 'outbound', 'en', '{}', '{}', '', 600, '{}', 'UTC', '{}', :now, :now)")
CALL = ("INSERT INTO calls (id, organization_id, agent_id, destination_phone, from_phone, custom_data, prompt, "
        "max_duration_seconds, status, telephony_state, created_at, updated_at{extra}) VALUES "
        "(:id, 1, 1, '+14155550100', '+14155550199', '{{}}', '', 600, 'queued', '{{}}', :now, :now{values})")


@pytest.mark.slow
async def test_0130_keeps_calls_of_before_single_and_keys_campaign_attempts_once(empty_url: str) -> None:
    await asyncio.to_thread(_migrate, empty_url, *OTHER_HEADS)
    await _populate(empty_url)
    now = NOW.replace(tzinfo=None) if "sqlite" in empty_url else NOW
    await _sql(empty_url, AGENT, CALL.format(extra="", values=""), params={"now": now, "id": "c1"})
    await asyncio.to_thread(_migrate, empty_url, "0130")
    [[row]] = await _sql(empty_url, "SELECT campaign_id, contact_id, idempotency_key FROM calls WHERE id = 'c1'")
    assert tuple(row) == (None, None, None)
    keyed = CALL.format(extra=", campaign_id, contact_id, idempotency_key", values=", 7, 9, 'k-1'")
    await _sql(empty_url, keyed, params={"now": now, "id": "c2"})
    with pytest.raises(Exception, match=r"(?i)unique"):
        await _sql(empty_url, keyed, params={"now": now, "id": "c3"})
    await _sql(empty_url, CALL.format(extra="", values=""), params={"now": now, "id": "c4"})  # null keys repeat
    [[(count,)]] = await _sql(empty_url, "SELECT count(*) FROM campaigns WHERE last_dialled_at IS NULL")
    assert count == 0
    await asyncio.to_thread(_migrate, empty_url, down="dialer@-1")
    with pytest.raises(Exception, match="campaign_id"):
        await _sql(empty_url, "SELECT campaign_id FROM calls")
    [[(calls,)]] = await _sql(empty_url, "SELECT count(*) FROM calls")
    assert calls == 3
