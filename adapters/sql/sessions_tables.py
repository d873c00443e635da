"""Tables of dashboard sessions (migration 0210, branch ``sessions``): one row per open session, keyed by the
SHA-256 of its id."""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.metadata import BigId, UtcDateTime, metadata

dashboard_sessions = sa.Table(
    "dashboard_sessions",
    metadata,
    sa.Column("id_hash", sa.String(64), primary_key=True),
    sa.Column("user_id", BigId, sa.ForeignKey("users.id"), nullable=False, index=True),
    sa.Column("organization_id", BigId, sa.ForeignKey("organizations.id"), nullable=False),
    sa.Column("csrf_token", sa.String(100), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False, index=True),
    sa.Column("last_seen_at", UtcDateTime, nullable=False, index=True),
    sa.Column("verified_at", UtcDateTime, nullable=True),  # the last password or code check (migration 0422)
    # the client (a partner's sub-organization) the session works in, null: its own (migration 0460); no foreign
    # key: every request checks it is still a live child of the session's organization
    sa.Column("acting_organization_id", sa.BigInteger, nullable=True),
)
