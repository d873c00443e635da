"""The job queue (migration 0013, branch ``jobs``): one row per pending job, claimed under a lease."""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.metadata import Json, UtcDateTime, id_column, metadata

jobs = sa.Table(
    "jobs",
    metadata,
    id_column(),
    sa.Column("kind", sa.String(100), nullable=False),
    sa.Column("key", sa.String(200), nullable=False),
    sa.Column("payload", Json, nullable=False),
    sa.Column("priority", sa.Integer, nullable=False),
    sa.Column("due_at", UtcDateTime, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("lease_owner", sa.String(100), nullable=True),
    sa.Column("lease_expires_at", UtcDateTime, nullable=True),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Column("failed_at", UtcDateTime, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.UniqueConstraint("kind", "key"),
    sa.Index("ix_jobs_claim", "kind", "priority", "due_at", "id",
             sqlite_where=sa.text("failed_at IS NULL"), postgresql_where=sa.text("failed_at IS NULL")),
    sqlite_autoincrement=True,  # ids are never reused
)
