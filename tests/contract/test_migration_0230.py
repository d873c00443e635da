"""Migration 0230 (at most one SMS opt-out list per organization) on a database holding two lists named
"SMS opt-outs" for one organization (as two simultaneous first STOPs made them), on both databases: the oldest
becomes the opt-out list, the other stays an ordinary list, a second opt-out list is refused, and it downgrades."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from sqlalchemy.exc import IntegrityError

from tests.contract.test_migration_0008 import _migrate, _populate, _sql, empty_url
from tests.contract.test_migration_0130 import OTHER_HEADS

__all__ = ["empty_url"]
NOW = datetime(2026, 1, 5, 9, tzinfo=UTC)
LIST = ("INSERT INTO dnc_lists (organization_id, name, description, created_at, updated_at) VALUES "
        "(:org, :name, NULL, :now, :now)")


@pytest.mark.slow
async def test_0230_keeps_the_oldest_opt_out_list_of_each_organization(empty_url: str) -> None:
    await asyncio.to_thread(_migrate, empty_url, *OTHER_HEADS)
    await _populate(empty_url)
    now = NOW.replace(tzinfo=None) if "sqlite" in empty_url else NOW
    for org, name in ((1, "SMS opt-outs"), (1, "SMS opt-outs"), (1, "Legal"), (2, "SMS opt-outs")):
        await _sql(empty_url, LIST, params={"org": org, "name": name, "now": now})
    await asyncio.to_thread(_migrate, empty_url, "0230")
    [rows] = await _sql(empty_url, "SELECT id, organization_id, purpose FROM dnc_lists ORDER BY id")
    assert [(org, purpose) for _, org, purpose in rows] == [
        (1, "sms_opt_out"), (1, None), (1, None), (2, "sms_opt_out")]
    with pytest.raises(IntegrityError):
        await _sql(empty_url, "INSERT INTO dnc_lists (organization_id, name, created_at, updated_at, purpose) "
                              "VALUES (1, 'SMS opt-outs', :now, :now, 'sms_opt_out')", params={"now": now})
    await asyncio.to_thread(_migrate, empty_url, down="sms_opt_out_list@-1")
    [[(count,)]] = await _sql(empty_url, "SELECT count(*) FROM dnc_lists")
    assert count == 4
