"""The AI providers' table (migration 0400)."""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.metadata import UtcDateTime, id_column, metadata, org_column

ai_providers = sa.Table(
    "ai_providers",
    metadata,
    id_column(),
    org_column(),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("type", sa.String(30), nullable=False),
    sa.Column("base_url", sa.String(2048), nullable=True),
    sa.Column("api_key_sealed", sa.Text, nullable=True),
    sa.Column("builtin_key", sa.String(20), nullable=True),  # "offline" for the organization's built-in one
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.CheckConstraint("type in ('openai_compatible','offline')", name="type"),
    sa.UniqueConstraint("organization_id", "builtin_key"),
    sqlite_autoincrement=True,  # ids are never reused
)
