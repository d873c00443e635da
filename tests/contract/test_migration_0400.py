"""Migration 0400 (AI providers, the agent's engine settings) on a database holding an agent, on both databases: the
agent takes the defaults (no transcriber settings, no tools, no analysis schema, 500 ms), the providers' table takes
rows, and the downgrade removes both and keeps the agent."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.contract.test_migration_0008 import _migrate, _populate, _sql, empty_url
from tests.contract.test_migration_0130 import NOW

__all__ = ["empty_url"]
AGENT = ("INSERT INTO agents (organization_id, name, status, agent_mode, language, voice, llm, prompt, "
         "max_call_duration_seconds, voicemail, timezone, metadata, created_at, updated_at) VALUES "
         "(1, 'Desk', 'draft', 'outbound', 'en-US', '{\"provider\": \"simulator\", \"voice_id\": \"default\"}', "
         "'{\"model\": \"parley-sim-1\", \"temperature\": 0.7}', 'Hi', 600, '{\"action\": \"hangup\"}', 'UTC', '{}', "
         ":now, :now)")
PROVIDER = ("INSERT INTO ai_providers (organization_id, name, type, base_url, builtin_key, created_at, updated_at) "
            "VALUES (1, 'Parley offline', 'offline', NULL, 'offline', :now, :now)")


def _json(value: object) -> object:
    return json.loads(value) if isinstance(value, str) else value


@pytest.mark.slow
async def test_0400_gives_existing_agents_the_defaults_and_downgrades(empty_url: str) -> None:
    await asyncio.to_thread(_migrate, empty_url, "0350")
    await _populate(empty_url)
    now = NOW.replace(tzinfo=None) if "sqlite" in empty_url else NOW
    await _sql(empty_url, AGENT, params={"now": now})
    await asyncio.to_thread(_migrate, empty_url, "0400")
    [[row]] = await _sql(empty_url, "SELECT transcriber, tools, analysis_schema, end_of_turn_silence_ms FROM agents")
    assert (_json(row[0]), _json(row[1]), row[2], row[3]) == ({}, [], None, 500)
    await _sql(empty_url, PROVIDER, params={"now": now})
    with pytest.raises(Exception, match=r"(?i)unique"):
        await _sql(empty_url, PROVIDER, params={"now": now})  # one built-in provider per organization
    await asyncio.to_thread(_migrate, empty_url, down="0350")
    [[(name,)]] = await _sql(empty_url, "SELECT name FROM agents")
    assert name == "Desk"
    with pytest.raises(Exception, match="ai_providers"):
        await _sql(empty_url, "SELECT count(*) FROM ai_providers")
