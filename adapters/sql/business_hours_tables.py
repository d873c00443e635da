"""The table of business-hours schedules (migration 0120). Weekly hours, exceptions and the holiday region
are JSON documents in the client's shapes (``domain.business_hours.schedule_document``): they are read and
written whole, never queried."""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.metadata import Json, UtcDateTime, id_column, metadata, org_column

schedules = sa.Table(
    "schedules",
    metadata,
    id_column(),
    org_column(),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("timezone", sa.String(64), nullable=False),
    sa.Column("weekly", Json, nullable=False),
    sa.Column("exceptions", Json, nullable=False),
    sa.Column("holidays", Json, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.Column("deleted_at", UtcDateTime, nullable=True),
    sa.Index("ix_schedules_org_live", "organization_id", "id", sqlite_where=sa.text("deleted_at IS NULL"),
             postgresql_where=sa.text("deleted_at IS NULL")),
    sqlite_autoincrement=True,  # ids are never reused
)
