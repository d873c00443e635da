"""Migration 0290 (published agents, booking caps, rules ending at 24:00) on a populated database, on both
databases: agents changed since their last publication (or never published) have changes to publish, calls of
before name no version, calendars take the default caps, a rule may end at 1440 (the calendar's revision still
follows its rules), and it downgrades."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from tests.contract.test_migration_0008 import _migrate, _populate, _sql, empty_url
from tests.contract.test_migration_0130 import CALL, NOW, OTHER_HEADS

__all__ = ["empty_url"]

AGENTS = ("INSERT INTO agents (organization_id, name, status, agent_mode, language, voice, llm, prompt, "
          "max_call_duration_seconds, voicemail, timezone, metadata, current_version, created_at, updated_at) VALUES "
          "(1, 'Unchanged', 'active', 'outbound', 'en', '{}', '{}', '', 600, '{}', 'UTC', '{}', 1, :now, :now), "
          "(1, 'Edited', 'active', 'outbound', 'en', '{}', '{}', '', 600, '{}', 'UTC', '{}', 1, :now, :later), "
          "(1, 'Draft', 'draft', 'outbound', 'en', '{}', '{}', '', 600, '{}', 'UTC', '{}', NULL, :now, :now)")
VERSIONS = ("INSERT INTO agent_versions (organization_id, agent_id, version, snapshot, created_at) VALUES "
            "(1, 1, 1, '{}', :now), (1, 2, 1, '{}', :now)")
RULE = "INSERT INTO availability_rules (organization_id, calendar_id, weekday, start_minute, end_minute) VALUES " \
       "(1, 1, 0, 540, {end})"


@pytest.mark.slow
async def test_0290_marks_drafts_defaults_caps_and_lets_rules_end_at_midnight(empty_url: str) -> None:
    url = empty_url
    await asyncio.to_thread(_migrate, url, *OTHER_HEADS, "0130", "0180", "0240")
    await _populate(url)
    now = NOW.replace(tzinfo=None) if "sqlite" in url else NOW
    params = {"now": now, "later": now + timedelta(minutes=5), "id": "c1"}
    await _sql(url, AGENTS, VERSIONS, CALL.format(extra="", values=""), RULE.format(end=1020), params=params)
    with pytest.raises(Exception, match=r"(?i)check"):
        await _sql(url, RULE.format(end=1440))
    await asyncio.to_thread(_migrate, url, "0290")

    [agents] = await _sql(url, "SELECT name, has_unpublished_changes FROM agents ORDER BY id")
    assert [(name, bool(flag)) for name, flag in agents] == [("Unchanged", False), ("Edited", True), ("Draft", True)]
    [calls] = await _sql(url, "SELECT id, agent_version FROM calls")
    assert calls == [("c1", None)]
    [calendars] = await _sql(url, "SELECT max_upcoming_per_attendee, max_bookings_per_day FROM calendars")
    assert calendars == [(3, None)]
    [[(before,)]] = await _sql(url, "SELECT revision FROM calendars WHERE id = 1")
    await _sql(url, RULE.format(end=1440))
    [[(after,)]] = await _sql(url, "SELECT revision FROM calendars WHERE id = 1")
    assert after != before  # the revision triggers survived the rebuild
    with pytest.raises(Exception, match=r"(?i)check"):
        await _sql(url, RULE.format(end=1441))
    [rules] = await _sql(url, "SELECT id, end_minute FROM availability_rules ORDER BY id")
    assert [end for _, end in rules] == [1020, 1440]

    await asyncio.to_thread(_migrate, url, down="0240")
    for table, column in (("agents", "has_unpublished_changes"), ("calls", "agent_version"),
                          ("call_logs", "agent_version"), ("calendars", "max_upcoming_per_attendee"),
                          ("calendars", "max_bookings_per_day")):
        with pytest.raises(Exception, match=column):
            await _sql(url, f"SELECT {column} FROM {table}")
    [rules_after] = await _sql(url, "SELECT id, end_minute FROM availability_rules ORDER BY id")
    assert rules_after == [(rules[0][0], 1020), (rules[1][0], 1439)]  # until 24:00 is until 23:59 again
