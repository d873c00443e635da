"""sessions: dashboard sessions, stored by the SHA-256 of their id

Revision ID: 0210
Revises: 0001
Create Date: 2026-11-24 02:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0210"
down_revision = "0001"
branch_labels = ("sessions",)
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "dashboard_sessions",
        sa.Column("id_hash", sa.String(length=64), nullable=False),
        sa.Column("user_id", _ID, nullable=False),
        sa.Column("organization_id", _ID, nullable=False),
        sa.Column("csrf_token", sa.String(length=100), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_dashboard_sessions_user_id_users")),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_dashboard_sessions_organization_id_organizations")),
        sa.PrimaryKeyConstraint("id_hash", name=op.f("pk_dashboard_sessions")),
    )
    op.create_index("ix_dashboard_sessions_user_id", "dashboard_sessions", ["user_id"])
    op.create_index("ix_dashboard_sessions_created_at", "dashboard_sessions", ["created_at"])
    op.create_index("ix_dashboard_sessions_last_seen_at", "dashboard_sessions", ["last_seen_at"])


def downgrade() -> None:
    op.drop_index("ix_dashboard_sessions_last_seen_at", table_name="dashboard_sessions")
    op.drop_index("ix_dashboard_sessions_created_at", table_name="dashboard_sessions")
    op.drop_index("ix_dashboard_sessions_user_id", table_name="dashboard_sessions")
    op.drop_table("dashboard_sessions")
