"""Migration 0415 (call_logs.turns and call_logs.analysis, a conversation's latency per turn and its after-call
analysis) on a database holding a call log, on both databases: the log of before has neither, a new log takes both,
and it downgrades."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.contract.test_migration_0008 import _migrate, _populate, _sql, empty_url
from tests.contract.test_migration_0130 import NOW

__all__ = ["empty_url"]
LOG = ("INSERT INTO call_logs (organization_id, call_id, agent_id, direction, from_phone, to_phone, status, "
       "duration_seconds, transcript, summary, created_at{extra}) VALUES "
       "(1, :call_id, 1, 'outbound', '+14155550199', '+14155550100', 'completed', 30, '[]', 'A call.', :now"
       "{values})")


@pytest.mark.slow
async def test_0415_adds_turns_and_analysis_to_call_logs(empty_url: str) -> None:
    await asyncio.to_thread(_migrate, empty_url, "0400")
    await _populate(empty_url)
    now = NOW.replace(tzinfo=None) if "sqlite" in empty_url else NOW
    await _sql(empty_url, LOG.format(extra="", values=""), params={"now": now, "call_id": "before"})
    await asyncio.to_thread(_migrate, empty_url, "0415")
    await _sql(empty_url, LOG.format(extra=", turns, analysis",
                                     values=", '[{\"parley_ms\": 3}]', '{\"summary\": \"ok\"}'"),
               params={"now": now, "call_id": "after"})
    [rows] = await _sql(empty_url, "SELECT call_id, turns, analysis FROM call_logs ORDER BY call_id")
    decoded = [(r[0], *(json.loads(v) if isinstance(v, str) else v for v in r[1:])) for r in rows]
    assert decoded == [("after", [{"parley_ms": 3}], {"summary": "ok"}), ("before", None, None)]
    await asyncio.to_thread(_migrate, empty_url, down="0400")
    with pytest.raises(Exception, match="turns"):
        await _sql(empty_url, "SELECT turns FROM call_logs")
    [[(logs,)]] = await _sql(empty_url, "SELECT count(*) FROM call_logs")
    assert logs == 2
