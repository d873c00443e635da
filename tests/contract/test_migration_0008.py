"""Migration 0008 on a database populated at the earlier heads: rows, indexes and the calendar revision triggers
survive the SQLite rebuild, ids are no longer reused, a phone number has one owner; and it downgrades."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy.exc import IntegrityError

from adapters.sql.engine import create_engine
from adapters.sql.schema import alembic_config
from tests.support.databases import asyncpg_dsn, named, require_postgres

# like every migration's test: the history from an empty database, once per database, with make test's slow tests
pytestmark = pytest.mark.slow

EARLIER_HEADS = ("0002", "0004", "0005", "0006", "0100")
NOW = datetime(2026, 1, 5, 9, tzinfo=UTC)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'm.db'}"
        return
    import asyncpg

    admin = await require_postgres()
    dsn = asyncpg_dsn(admin)
    name = f"parley_mig_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(dsn)
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()
    yield named(admin, name)
    conn = await asyncpg.connect(dsn)
    await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await conn.close()


def _migrate(url: str, *targets: str, down: str | None = None) -> None:
    config = alembic_config(url)
    if down is not None:
        command.downgrade(config, down)
    for target in targets:
        command.upgrade(config, target)


async def _sql(url: str, *statements: str, params: dict[str, object] | None = None) -> list[list[tuple]]:
    engine = create_engine(url, pool_size=1)
    out = []
    try:
        async with engine.begin() as conn:
            for statement in statements:
                result = await conn.execute(sa.text(statement), params or {})
                out.append([tuple(r) for r in result] if result.returns_rows else [])
    finally:
        await engine.dispose()
    return out


async def _populate(url: str) -> None:
    """Two organizations (ids 1, 2: a fresh database), a calendar with a confirmed and a cancelled appointment
    in one slot, a provider and a number of organization 1."""
    p = {"now": NOW, "start": datetime(2026, 1, 6, 10, tzinfo=UTC), "end": datetime(2026, 1, 6, 10, 30, tzinfo=UTC)}
    if "sqlite" in url:
        p = {k: v.replace(tzinfo=None) for k, v in p.items()}
    await _sql(url,
               "INSERT INTO organizations (name, plan, org_type, created_at, updated_at) VALUES "
               "('A', 'business', 'standard', :now, :now), ('B', 'business', 'standard', :now, :now)",
               "INSERT INTO calendars (organization_id, name, timezone, slot_duration_minutes, buffer_minutes, "
               "min_notice_minutes, horizon_days, created_at, updated_at) VALUES "
               "(1, 'Sales', 'UTC', 30, 0, 0, 30, :now, :now)",
               "INSERT INTO appointments (organization_id, calendar_id, status, slot_start, slot_end, sequence, "
               "created_at, updated_at) VALUES (1, 1, 'confirmed', :start, :end, 0, :now, :now), "
               "(1, 1, 'cancelled', :start, :end, 1, :now, :now)",
               "INSERT INTO telephony_providers (organization_id, name, type, status, is_default, "
               "credential_fields, settings, created_at, updated_at) VALUES "
               "(1, 'Sim', 'simulator', 'active', true, '[]', '{}', :now, :now)",
               "INSERT INTO telephony_numbers (organization_id, phone_number, provider_id, voice, sms, status, "
               "created_at, updated_at) VALUES (1, '+14155550100', 1, true, false, 'active', :now, :now)",
               params=p)


async def test_0008_keeps_rows_triggers_and_indexes_and_downgrades(empty_url: str) -> None:
    url = empty_url
    await asyncio.to_thread(_migrate, url, *EARLIER_HEADS)
    await _populate(url)
    await asyncio.to_thread(_migrate, url, "0008")
    assert (await _sql(url, "SELECT version_num FROM alembic_version"))[0] == [("0008",)]

    (orgs, appointments, numbers) = await _sql(
        url, "SELECT id, name FROM organizations ORDER BY id", "SELECT id, status FROM appointments ORDER BY id",
        "SELECT organization_id, phone_number FROM telephony_numbers")
    assert orgs == [(1, "A"), (2, "B")] and appointments == [(1, "confirmed"), (2, "cancelled")]
    assert numbers == [(1, "+14155550100")]
    # the revision triggers are back: changing an appointment changes its calendar's revision
    before = (await _sql(url, "SELECT revision FROM calendars WHERE id = 1"))[0]
    await _sql(url, "UPDATE appointments SET sequence = 5 WHERE id = 1")
    assert (await _sql(url, "SELECT revision FROM calendars WHERE id = 1"))[0] != before
    # the partial unique index over active appointments is still there
    with pytest.raises(IntegrityError):
        await _sql(url, "INSERT INTO appointments (organization_id, calendar_id, status, slot_start, slot_end, "
                        "sequence, created_at, updated_at) SELECT organization_id, calendar_id, 'pending', "
                        "slot_start, slot_end, 0, created_at, updated_at FROM appointments WHERE id = 1")
    # a number has one owner
    with pytest.raises(IntegrityError):
        await _sql(url, "INSERT INTO telephony_numbers (organization_id, phone_number, provider_id, voice, sms, "
                        "status, created_at, updated_at) SELECT 2, phone_number, provider_id, voice, sms, status, "
                        "created_at, updated_at FROM telephony_numbers WHERE id = 1")
    # a hard-deleted newest id is not handed out again
    await _sql(url, "DELETE FROM appointments WHERE id = 2")
    (new_id,) = (await _sql(url, "INSERT INTO appointments (organization_id, calendar_id, status, slot_start, "
                                 "slot_end, sequence, created_at, updated_at) SELECT organization_id, calendar_id, "
                                 "'cancelled', slot_start, slot_end, 0, created_at, updated_at FROM appointments "
                                 "WHERE id = 1 RETURNING id"))[0]
    assert new_id[0] > 2  # PostgreSQL: the refused inserts above used sequence values too

    # down to one parent of the merge: every earlier head is restored
    await asyncio.to_thread(_migrate, url, down="0006")
    versions = sorted(v for (v,) in (await _sql(url, "SELECT version_num FROM alembic_version"))[0])
    assert versions == sorted(EARLIER_HEADS)
    assert (await _sql(url, "SELECT count(*) FROM appointments"))[0] == [(2,)]
    before = (await _sql(url, "SELECT revision FROM calendars WHERE id = 1"))[0]
    await _sql(url, "UPDATE appointments SET sequence = 6 WHERE id = 1")
    assert (await _sql(url, "SELECT revision FROM calendars WHERE id = 1"))[0] != before
    await asyncio.to_thread(_migrate, url, "0008")
    assert (await _sql(url, "SELECT count(*) FROM organizations"))[0] == [(2,)]


async def test_0008_stops_when_a_number_is_held_by_several_organizations(empty_url: str) -> None:
    url = empty_url
    await asyncio.to_thread(_migrate, url, *EARLIER_HEADS)
    await _populate(url)
    await _sql(url, "INSERT INTO telephony_numbers (organization_id, phone_number, provider_id, voice, sms, status, "
                    "created_at, updated_at) SELECT 2, phone_number, provider_id, voice, sms, status, created_at, "
                    "updated_at FROM telephony_numbers WHERE id = 1")
    with pytest.raises(RuntimeError, match=r"\+14155550100"):
        await asyncio.to_thread(_migrate, url, "0008")
    versions = sorted(v for (v,) in (await _sql(url, "SELECT version_num FROM alembic_version"))[0])
    assert versions == sorted(EARLIER_HEADS)
    assert (await _sql(url, "SELECT count(*) FROM telephony_numbers"))[0] == [(2,)]
