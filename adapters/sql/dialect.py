"""Dialect-specific INSERT for upserts (both databases support ON CONFLICT and RETURNING)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite


def insert(table: sa.Table, dialect: str) -> Any:
    return postgresql.insert(table) if dialect == "postgresql" else sqlite.insert(table)
