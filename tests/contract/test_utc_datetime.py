"""UtcDateTime on SQLite: what SQLAlchemy stores reads back as the same aware UTC instant, and text stored by hand
(an offset of its own, a date alone, a 'T' separator) reads back as the instant it names."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.sql.engine import create_engine
from adapters.sql.metadata import UtcDateTime

_T = sa.Table("stamps", sa.MetaData(), sa.Column("n", sa.Integer, primary_key=True), sa.Column("at", UtcDateTime))


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Any]:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'stamps.db'}", pool_size=1)
    async with engine.begin() as conn:
        await conn.run_sync(_T.metadata.create_all)
    try:
        yield engine
    finally:
        await engine.dispose()


async def _read_back(engine: Any, values: list[Any], raw: bool = False) -> list[datetime | None]:
    async with engine.begin() as conn:
        await conn.execute(_T.delete())
        for n, value in enumerate(values):
            if raw:  # the text itself, past the type's bind processing
                await conn.execute(sa.text("INSERT INTO stamps (n, at) VALUES (:n, :at)"), {"n": n, "at": value})
            else:
                await conn.execute(_T.insert().values(n=n, at=value))
        return [row.at for row in await conn.execute(sa.select(_T.c.at).order_by(_T.c.n))]


async def test_stored_values_read_back_as_the_same_aware_utc_instant(engine: Any) -> None:
    paris = timezone(timedelta(hours=1))
    values = [datetime(2026, 11, 24, 12, 53, 43, 825953, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC),
              datetime(2026, 6, 1, 9, 30, tzinfo=paris), None]
    read = await _read_back(engine, values)
    assert read == values
    assert [v.tzinfo for v in read if v is not None] == [UTC, UTC, UTC]
    assert read[2] == datetime(2026, 6, 1, 8, 30, tzinfo=UTC)


async def test_text_in_other_shapes_reads_as_the_instant_it_names(engine: Any) -> None:
    read = await _read_back(engine, ["2026-11-24 10:00:00+02:00", "2026-11-24", "2026-11-24T10:00:00",
                                     "2026-11-24 10:00:00"], raw=True)
    assert read == [datetime(2026, 11, 24, 8, 0, tzinfo=UTC), datetime(2026, 11, 24, tzinfo=UTC),
                    datetime(2026, 11, 24, 10, 0, tzinfo=UTC), datetime(2026, 11, 24, 10, 0, tzinfo=UTC)]
    assert all(v is not None and v.tzinfo is UTC for v in read)


@settings(deadline=None)  # an engine and a table per example: its time is the machine's load, not the rule's
@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)))
async def test_any_instant_round_trips(value: datetime) -> None:
    # hypothesis drives the coroutine itself; one in-memory engine per example
    engine = create_engine("sqlite+aiosqlite:///:memory:", pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_T.metadata.create_all)
            await conn.execute(_T.insert().values(n=1, at=value))
            assert (await conn.execute(sa.select(_T.c.at))).scalar_one() == value
    finally:
        await engine.dispose()
