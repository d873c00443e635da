"""The audit log's table (migration 0470): one row per state-changing request made with a key or by a signed-in
user. Its indexes serve the list (an organization's events newest first, alone or by action, by actor, by
resource) and housekeeping's purge by age."""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.metadata import BigId, Json, UtcDateTime, id_column, metadata

audit_events = sa.Table(
    "audit_events",
    metadata,
    id_column(),
    sa.Column("organization_id", BigId, sa.ForeignKey("organizations.id"), nullable=False),
    sa.Column("actor_type", sa.String(10), nullable=False),
    sa.Column("actor_id", sa.BigInteger, nullable=False),  # no foreign key: the log outlives keys and users
    sa.Column("actor_label", sa.String(200), nullable=False, server_default=""),
    sa.Column("action", sa.String(80), nullable=False),
    sa.Column("resource_type", sa.String(60), nullable=False),
    sa.Column("resource_id", sa.String(100), nullable=True),
    sa.Column("method", sa.String(10), nullable=False),
    sa.Column("path", sa.String(500), nullable=False),
    sa.Column("status", sa.SmallInteger, nullable=False),
    sa.Column("ip", sa.String(64), nullable=False),
    sa.Column("request_id", sa.String(100), nullable=False),
    sa.Column("fields", Json, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.CheckConstraint("actor_type in ('api_key','user')", name="actor_type"),
    sa.Index("ix_audit_events_org_created", "organization_id", "created_at", "id"),
    sa.Index("ix_audit_events_org_action_created", "organization_id", "action", "created_at"),
    sa.Index("ix_audit_events_org_actor_created", "organization_id", "actor_type", "actor_id", "created_at"),
    sa.Index("ix_audit_events_org_resource_created", "organization_id", "resource_type", "resource_id",
             "created_at"),
    sa.Index("ix_audit_events_created_at", "created_at"),
    sqlite_autoincrement=True,
)
