"""Migration 0013 (the jobs table) on a database populated at the other heads, on both databases: the table
works (ids never reused on SQLite), the rows of before are untouched, and it downgrades."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from tests.contract.test_migration_0008 import _migrate, _populate, _sql, empty_url

__all__ = ["empty_url"]
OTHER_HEADS = ("0008", "0009", "0110")
NOW = datetime(2026, 1, 5, 9, tzinfo=UTC)


@pytest.mark.slow
async def test_0013_adds_the_jobs_table_to_a_populated_database_and_downgrades(empty_url: str) -> None:
    await asyncio.to_thread(_migrate, empty_url, *OTHER_HEADS)
    await _populate(empty_url)
    await asyncio.to_thread(_migrate, empty_url, "0013")
    now = NOW.replace(tzinfo=None) if "sqlite" in empty_url else NOW
    insert = ("INSERT INTO jobs (kind, key, payload, priority, due_at, attempts, version, created_at) VALUES "
              "('k', :key, '{}', 0, :now, 0, 0, :now)")
    await _sql(empty_url, insert, params={"now": now, "key": "a"})
    await _sql(empty_url, "DELETE FROM jobs")
    await _sql(empty_url, insert, params={"now": now, "key": "b"})
    [[(job_id,)]] = await _sql(empty_url, "SELECT id FROM jobs")
    assert job_id == 2  # never reused
    [[(orgs,)]] = await _sql(empty_url, "SELECT count(*) FROM organizations")
    assert orgs == 2
    await asyncio.to_thread(_migrate, empty_url, down="jobs@-1")
    [tables] = await _sql(empty_url, "SELECT version_num FROM alembic_version")
    assert "0013" not in {v for (v,) in tables} and "0008" in {v for (v,) in tables}
    with pytest.raises(Exception, match="jobs"):
        await _sql(empty_url, "SELECT count(*) FROM jobs")
    [[(orgs,)]] = await _sql(empty_url, "SELECT count(*) FROM organizations")
    assert orgs == 2



@pytest.mark.slow
async def test_0013_puts_queued_calls_of_before_in_the_dial_queue_in_creation_order(empty_url: str) -> None:
    await asyncio.to_thread(_migrate, empty_url, *OTHER_HEADS)
    await _populate(empty_url)
    now = NOW.replace(tzinfo=None) if "sqlite" in empty_url else NOW
    await _sql(empty_url,
               "INSERT INTO agents (organization_id, name, status, agent_mode, language, voice, llm, prompt, "
               "max_call_duration_seconds, voicemail, timezone, metadata, created_at, updated_at) VALUES "
               "(1, 'Desk', 'active', 'outbound', 'en', '{}', '{}', '', 600, '{}', 'UTC', '{}', :now, :now)",
               "INSERT INTO calls (id, organization_id, agent_id, destination_phone, from_phone, custom_data, prompt, "
               "max_duration_seconds, status, telephony_state, created_at, updated_at) VALUES "
               "('c1', 1, 1, '+14155550100', '+14155550199', '{}', '', 600, 'queued', '{}', :now, :now)",
               params={"now": now})
    await asyncio.to_thread(_migrate, empty_url, "0013")
    [[row]] = await _sql(empty_url, "SELECT priority, due_at = created_at FROM calls WHERE id = 'c1'")
    assert tuple(row) == (100, True) or tuple(row) == (100, 1)
    await asyncio.to_thread(_migrate, empty_url, down="jobs@-1")
    [[(count,)]] = await _sql(empty_url, "SELECT count(*) FROM calls")
    assert count == 1
