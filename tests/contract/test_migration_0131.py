"""Migration 0131 (every open contact has a due time; the partial index of open contacts by due time) on a
database populated at 0130, on both databases: never-tried contacts become due from when they were added, the
others keep theirs, and it downgrades."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from tests.contract.test_migration_0008 import _migrate, _populate, _sql, empty_url
from tests.contract.test_migration_0130 import OTHER_HEADS

__all__ = ["empty_url"]
ADDED = datetime(2026, 1, 5, 9, tzinfo=UTC)
RETRY_AT = datetime(2026, 1, 5, 10, tzinfo=UTC)
CONTACT = ("INSERT INTO campaign_contacts (organization_id, campaign_id, phone, custom_data, status, attempts, "
           "next_attempt_at, created_at, updated_at) VALUES (1, 1, :phone, '{}', :status, 0, :next, :now, :now)")


@pytest.mark.slow
async def test_0131_gives_never_tried_contacts_their_added_time_as_due_time(empty_url: str) -> None:
    await asyncio.to_thread(_migrate, empty_url, *OTHER_HEADS, "0130")
    await _populate(empty_url)
    sqlite = "sqlite" in empty_url
    now, retry_at = (ADDED.replace(tzinfo=None), RETRY_AT.replace(tzinfo=None)) if sqlite else (ADDED, RETRY_AT)
    await _sql(empty_url,
               "INSERT INTO agents (organization_id, name, status, agent_mode, language, voice, llm, prompt, "
               "max_call_duration_seconds, voicemail, timezone, metadata, created_at, updated_at) VALUES "
               "(1, 'Desk', 'active', 'outbound', 'en', '{}', '{}', '', 600, '{}', 'UTC', '{}', :now, :now)",
               "INSERT INTO campaigns (organization_id, name, agent_id, timezone, timezone_mode, calling_hours, "
               "max_concurrent_calls, retry, status, created_at, updated_at) VALUES "
               "(1, 'Spring', 1, 'UTC', 'campaign', '{}', 5, '{}', 'running', :now, :now)", params={"now": now})
    for phone, status, next_at in (("+14155550100", "pending", None), ("+14155550101", "retry_wait", retry_at),
                                   ("+14155550102", "completed", None)):
        await _sql(empty_url, CONTACT, params={"phone": phone, "status": status, "next": next_at, "now": now})
    await asyncio.to_thread(_migrate, empty_url, "0131")
    rows = (await _sql(empty_url, "SELECT phone, next_attempt_at FROM campaign_contacts ORDER BY phone"))[0]
    got = [(phone, at if at is None or not isinstance(at, str) else datetime.fromisoformat(at)) for phone, at in rows]
    as_stored = [(p, a.replace(tzinfo=None) if sqlite and a is not None and a.tzinfo else a) for p, a in got]
    assert as_stored == [("+14155550100", now), ("+14155550101", retry_at), ("+14155550102", None)]
    await asyncio.to_thread(_migrate, empty_url, down="dialer@-1")
    [[(count,)]] = await _sql(empty_url, "SELECT count(*) FROM campaign_contacts")
    assert count == 3
