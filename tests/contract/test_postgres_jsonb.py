"""jsonb values read back as json.loads reads their text, on every connection of the pool (adapters/sql/engine.py
sets its codec on each new one), a number beyond a double included."""

from __future__ import annotations

import json
import math

import sqlalchemy as sa

from adapters.sql.engine import create_engine


async def test_jsonb_reads_as_json_loads_reads_it(postgres_url: str) -> None:
    engine = create_engine(postgres_url, pool_size=1)
    try:
        rows = []
        for _ in range(2):  # the pool's connection, and one opened after it was invalidated
            async with engine.connect() as conn:
                rows.append((await conn.execute(sa.text(
                    """SELECT '{"s": "é", "f": 0.5, "l": [1, null]}'::jsonb, '1e30'::jsonb,
                              '12345678901234567890123'::jsonb, 'null'::jsonb, CAST(:v AS jsonb),
                              CAST(repeat('9', 400) || '.5' AS jsonb)"""),
                    {"v": '{"written": true}'})).one())
                await conn.invalidate()
    finally:
        await engine.dispose()
    for row in rows:
        assert row[0] == {"s": "é", "f": 0.5, "l": [1, None]}
        assert row[1] == 10**30  # jsonb keeps numbers as written: an integer past 64 bits, for json.loads
        assert row[2] == 12345678901234567890123
        assert row[3] is None
        assert row[4] == {"written": True}
        assert row[5] == json.loads("9" * 400 + ".5") == math.inf  # past a double, as json.loads reads it
