"""jsonb values are read by Parley's own codec (adapters/sql/postgres_driver.py), set after SQLAlchemy's on every
new connection, with the results json.loads gives, a number beyond a double included."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import sqlalchemy as sa

from adapters.sql import postgres_driver
from adapters.sql.engine import create_engine


async def test_jsonb_is_read_by_the_codec_set_after_the_dialects(postgres_url: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    original = postgres_driver._JSONB_IN

    class Counting:
        def decode(self, text: str) -> Any:
            calls.append(text)
            return original.decode(text)

    monkeypatch.setattr(postgres_driver, "_JSONB_IN", Counting())
    engine = create_engine(postgres_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            row = (await conn.execute(sa.text(
                """SELECT '{"s": "é", "f": 0.5, "l": [1, null]}'::jsonb, '1e30'::jsonb,
                          '12345678901234567890123'::jsonb, 'null'::jsonb, CAST(:v AS jsonb),
                          CAST(repeat('9', 400) || '.5' AS jsonb)"""),
                {"v": '{"written": true}'})).one()
    finally:
        await engine.dispose()
    assert row[0] == {"s": "é", "f": 0.5, "l": [1, None]}
    assert row[1] == 10**30  # jsonb keeps numbers as written: an integer past 64 bits, for json.loads
    assert row[2] == 12345678901234567890123
    assert row[3] is None
    assert row[4] == {"written": True}
    assert row[5] == json.loads("9" * 400 + ".5") == math.inf  # past a double, as json.loads reads it
    assert len(calls) == 6
