"""One page of rows and the total, in one round trip where possible."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from application.ports.platform import PageRequest


async def fetch_page(conn: Any, columns: Sequence[Any], condition: Any, order: Sequence[Any], page: PageRequest,
                     *, source: Any = None) -> tuple[list[Any], int]:
    """The page with the total as a window column; a page past the end needs a separate count.
    ``source`` is the FROM clause (a join) when it is not the first column's table."""
    source = source if source is not None else columns[0].table
    rows = (await conn.execute(
        sa.select(*columns, sa.func.count().over().label("page_total")).select_from(source).where(condition)
        .order_by(*order).limit(page.limit).offset(page.offset)
    )).all()
    if rows:
        return rows, rows[0].page_total
    total = (await conn.execute(sa.select(sa.func.count()).select_from(source).where(condition))).scalar_one()
    return rows, total
