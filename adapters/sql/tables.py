"""Tables of the platform foundation: organizations, keys, users, agents, idempotency, limits, outbox."""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.metadata import BigId, Json, UtcDateTime, id_column, metadata, org_column

organizations = sa.Table(
    "organizations",
    metadata,
    id_column(),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("plan", sa.String(20), nullable=False),
    sa.Column("org_type", sa.String(20), nullable=False),
    sa.Column("parent_id", BigId, sa.ForeignKey("organizations.id"), nullable=True, index=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.Column("deleted_at", UtcDateTime, nullable=True),
    sa.Column("dialing_policy", Json, nullable=True),  # NULL: the default policy (migration 0270)
    sa.CheckConstraint("plan in ('starter','business','enterprise')", name="plan"),
    sa.CheckConstraint("org_type in ('standard','partner')", name="org_type"),
    sqlite_autoincrement=True,  # ids are never reused (migration 0008)
)

api_keys = sa.Table(
    "api_keys",
    metadata,
    id_column(),
    org_column(),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("prefix", sa.String(20), nullable=False),
    sa.Column("last_four", sa.String(4), nullable=False),
    sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("scopes", Json, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("expires_at", UtcDateTime, nullable=True),
    sa.Column("last_used_at", UtcDateTime, nullable=True),
    sa.Column("lineage_id", BigId, nullable=True, index=True),
    sa.Column("rotated_to_id", BigId, nullable=True),
    sqlite_autoincrement=True,  # ids are never reused (migration 0008)
)

users = sa.Table(
    "users",
    metadata,
    id_column(),
    org_column(),
    sa.Column("email", sa.String(320), nullable=False, unique=True),
    sa.Column("password_hash", sa.String(200), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sqlite_autoincrement=True,  # ids are never reused (migration 0008)
)

agents = sa.Table(
    "agents",
    metadata,
    id_column(),
    org_column(),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("description", sa.Text, nullable=True),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("agent_mode", sa.String(20), nullable=False),
    sa.Column("language", sa.String(35), nullable=False),
    sa.Column("voice", Json, nullable=False),
    sa.Column("llm", Json, nullable=False),
    sa.Column("prompt", sa.Text, nullable=False),
    sa.Column("first_message", sa.Text, nullable=True),
    sa.Column("max_call_duration_seconds", sa.Integer, nullable=False),
    sa.Column("voicemail", Json, nullable=False),
    sa.Column("transfer_phone", sa.String(20), nullable=True),
    sa.Column("calendar_id", BigId, nullable=True),
    sa.Column("timezone", sa.String(64), nullable=False),
    sa.Column("metadata", Json, nullable=False),
    sa.Column("current_version", sa.Integer, nullable=True),
    # whether the draft differs from the latest published version, which calls run (migration 0290)
    sa.Column("has_unpublished_changes", sa.Boolean, nullable=False, server_default=sa.true()),
    # the engine settings (migration 0400): speech recognition, custom tools, the analysis schema, end of turn
    sa.Column("transcriber", Json, nullable=False, server_default=sa.text("'{}'")),
    sa.Column("tools", Json, nullable=False, server_default=sa.text("'[]'")),
    sa.Column("analysis_schema", Json, nullable=True),
    sa.Column("end_of_turn_silence_ms", sa.Integer, nullable=False, server_default="500"),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.Column("deleted_at", UtcDateTime, nullable=True),
    sa.CheckConstraint("status in ('draft','active','paused','archived')", name="status"),
    sa.Index("ix_agents_org_live", "organization_id", "id", sqlite_where=sa.text("deleted_at IS NULL"),
             postgresql_where=sa.text("deleted_at IS NULL")),
    sqlite_autoincrement=True,  # ids are never reused (migration 0008)
)

agent_versions = sa.Table(
    "agent_versions",
    metadata,
    id_column(),
    org_column(),
    sa.Column("agent_id", BigId, sa.ForeignKey("agents.id"), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("snapshot", Json, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("created_by", BigId, nullable=True),
    sa.UniqueConstraint("agent_id", "version"),
    sqlite_autoincrement=True,  # ids are never reused (migration 0008)
)

idempotency_keys = sa.Table(
    "idempotency_keys",
    metadata,
    sa.Column("organization_id", BigId, nullable=False),
    sa.Column("lineage_id", BigId, nullable=False),  # the API-key lineage that stored it (migration 0110)
    sa.Column("key", sa.String(255), nullable=False),
    sa.Column("fingerprint", sa.String(600), nullable=False),
    sa.Column("token", sa.String(64), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("locked_at", UtcDateTime, nullable=True),
    sa.Column("response_status", sa.Integer, nullable=True),
    sa.Column("response_headers", Json, nullable=True),
    sa.Column("response_body", sa.LargeBinary, nullable=True),  # sealed when response_sealed
    sa.Column("response_sealed", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.PrimaryKeyConstraint("organization_id", "lineage_id", "key"),
    sa.Index("ix_idempotency_keys_created_at", "created_at"),
)

rate_limit_counters = sa.Table(
    "rate_limit_counters",
    metadata,
    sa.Column("bucket", sa.String(100), nullable=False),
    sa.Column("window_seconds", sa.Integer, nullable=False),
    sa.Column("window_start", sa.BigInteger, nullable=False),
    sa.Column("count", sa.Integer, nullable=False),
    sa.PrimaryKeyConstraint("bucket", "window_seconds", "window_start"),
)

outbox_events = sa.Table(
    "outbox_events",
    metadata,
    id_column(),
    org_column(),
    sa.Column("type", sa.String(100), nullable=False),
    sa.Column("data", Json, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    # how many trigger actions led to the event (0: none); the triggers' loop guard (migration 0180)
    sa.Column("depth", sa.SmallInteger, nullable=False, server_default="0"),
    sqlite_autoincrement=True,  # ids are never reused (migration 0008)
)

outbox_cursors = sa.Table(
    "outbox_cursors",
    metadata,
    sa.Column("consumer", sa.String(60), primary_key=True),
    sa.Column("last_id", BigId, nullable=False),  # the last outbox event this consumer has processed (0012)
    sa.Column("updated_at", UtcDateTime, nullable=True),
)
