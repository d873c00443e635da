"""Migration 0250 (sms_messages.cause_depth, triggers.disabled_reason, trigger_runs.event_at) on a database holding
a message and a trigger with a run, on both databases: they stay as they were (depth 0, enabled, no event time),
new rows may carry the new columns, and it downgrades."""

from __future__ import annotations

import asyncio

import pytest

from tests.contract.test_migration_0008 import _migrate, _populate, _sql, empty_url
from tests.contract.test_migration_0130 import NOW, OTHER_HEADS

__all__ = ["empty_url"]

SMS = ("INSERT INTO sms_messages (organization_id, direction, from_phone, to_phone, body, status, encoding, "
       "segments, status_events, carrier_state, created_at, updated_at{extra}) VALUES "
       "(1, 'outbound', '+15550100', '+14155550100', 'Hi', 'queued', 'gsm7', 1, '[]', '{{}}', :now, :now{values})")
TRIGGER = ("INSERT INTO triggers (organization_id, name, event, actions, enabled, sealed_secret, created_at, "
           "updated_at) VALUES (1, 'T', 'sms.sent', '[]', true, 's', :now, :now)")
RUN = ("INSERT INTO trigger_runs (organization_id, trigger_id, event, event_id, depth, matched, status, "
       "condition_trace, actions, data, created_at{extra}) VALUES "
       "(1, 1, 'sms.sent', :event, 0, true, 'running', '[]', '[]', '{{}}', :now{values})")


@pytest.mark.slow
async def test_0250_keeps_messages_and_triggers_of_before(empty_url: str) -> None:
    await asyncio.to_thread(_migrate, empty_url, *OTHER_HEADS, "0130", "0150", "0240")
    await _populate(empty_url)
    now = NOW.replace(tzinfo=None) if "sqlite" in empty_url else NOW
    await _sql(empty_url, SMS.format(extra="", values=""), TRIGGER, RUN.format(extra="", values=""),
               params={"now": now, "event": 1})
    await asyncio.to_thread(_migrate, empty_url, "0250")
    await _sql(empty_url, SMS.format(extra=", cause_depth", values=", 2"), RUN.format(extra=", event_at",
                                                                                       values=", :now"),
               params={"now": now, "event": 2})
    [depths, reasons, times] = await _sql(
        empty_url, "SELECT cause_depth FROM sms_messages ORDER BY id", "SELECT enabled, disabled_reason FROM triggers",
        "SELECT event_id, event_at IS NULL FROM trigger_runs ORDER BY id")
    assert depths == [(0,), (2,)] and reasons == [(True, None)] and times == [(1, True), (2, False)]
    await asyncio.to_thread(_migrate, empty_url, down="0240")
    for column, table in (("cause_depth", "sms_messages"), ("disabled_reason", "triggers"),
                          ("event_at", "trigger_runs")):
        with pytest.raises(Exception, match=column):
            await _sql(empty_url, f"SELECT {column} FROM {table}")
    [[(messages,)], [(runs,)]] = await _sql(empty_url, "SELECT count(*) FROM sms_messages",
                                             "SELECT count(*) FROM trigger_runs")
    assert (messages, runs) == (2, 2)
