"""Migration 0012 on a populated database: the webhooks consumer's cursor comes from dispatched_at
(just below the oldest undispatched event), the column goes, and the downgrade gives it back."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from tests.contract.test_migration_0008 import _migrate, _sql, empty_url  # noqa: F401  (a fixture)

# like every migration's test: the history from an empty database, once per database, with make test's slow tests
pytestmark = pytest.mark.slow

BEFORE = "0008"
NOW = datetime(2026, 1, 5, 9, tzinfo=UTC)


async def _populate(url: str, dispatched: list[bool]) -> None:
    now = NOW.replace(tzinfo=None) if "sqlite" in url else NOW
    await _sql(url, "INSERT INTO organizations (name, plan, org_type, created_at, updated_at) "
                    "VALUES ('A', 'business', 'standard', :now, :now)", params={"now": now})
    for n, done in enumerate(dispatched):
        await _sql(url, "INSERT INTO outbox_events (organization_id, type, data, created_at, dispatched_at) "
                        "VALUES (1, 'call.ended', :data, :now, :done)",
                   params={"data": f'{{"n": {n}}}', "now": now, "done": now if done else None})


async def _columns(url: str) -> set[str]:
    if "sqlite" in url:
        rows = (await _sql(url, "SELECT name FROM pragma_table_info('outbox_events')"))[0]
    else:
        rows = (await _sql(url, "SELECT column_name FROM information_schema.columns "
                                "WHERE table_name = 'outbox_events'"))[0]
    return {name for (name,) in rows}


async def test_0012_turns_dispatched_at_into_the_webhooks_cursor_and_back(empty_url: str) -> None:  # noqa: F811
    url = empty_url
    await asyncio.to_thread(_migrate, url, "heads")
    await asyncio.to_thread(_migrate, url, down=BEFORE)
    assert "dispatched_at" in await _columns(url)
    # 1, 2 dispatched; 3 not; 4 dispatched (a later event may have gone out first): the cursor stays below 3
    await _populate(url, [True, True, False, True])
    await asyncio.to_thread(_migrate, url, "heads")
    assert (await _sql(url, "SELECT consumer, last_id FROM outbox_cursors WHERE consumer = 'webhooks'"))[0] == [
        ("webhooks", 2)]
    # a consumer added later (0420's attendees) starts after the newest event
    assert (await _sql(url, "SELECT last_id FROM outbox_cursors WHERE consumer = 'attendees'"))[0] == [(4,)]
    assert "dispatched_at" not in await _columns(url)
    assert (await _sql(url, "SELECT count(*) FROM outbox_events"))[0] == [(4,)]

    await _sql(url, "UPDATE outbox_cursors SET last_id = 3 WHERE consumer = 'webhooks'")
    await asyncio.to_thread(_migrate, url, down=BEFORE)
    rows = (await _sql(url, "SELECT id, dispatched_at IS NOT NULL FROM outbox_events ORDER BY id"))[0]
    assert [(i, bool(done)) for i, done in rows] == [(1, True), (2, True), (3, True), (4, False)]
    await asyncio.to_thread(_migrate, url, "heads")
    assert (await _sql(url, "SELECT last_id FROM outbox_cursors WHERE consumer = 'webhooks'"))[0] == [(3,)]


async def test_0012_on_an_outbox_without_pending_events(empty_url: str) -> None:  # noqa: F811
    url = empty_url
    await asyncio.to_thread(_migrate, url, "heads")
    await asyncio.to_thread(_migrate, url, down=BEFORE)
    await asyncio.to_thread(_migrate, url, "heads")
    webhooks = "SELECT last_id FROM outbox_cursors WHERE consumer = 'webhooks'"
    assert (await _sql(url, webhooks))[0] == [(0,)]  # empty outbox
    await asyncio.to_thread(_migrate, url, down=BEFORE)
    await _populate(url, [True, True])
    await asyncio.to_thread(_migrate, url, "heads")
    assert (await _sql(url, webhooks))[0] == [(2,)]  # everything was dispatched
