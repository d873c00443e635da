"""audit_events: the audit log, one row per state-changing request made with an API key or by a signed-in user

Who (actor type, id and label as it was), what (action, resource type and id, method, path, status, the field
names of a PATCH), from where (client address, request id) and when. Indexed for an organization's events newest
first, alone and by action, actor or resource, and by age for housekeeping's purge (365 days).

Revision ID: 0470
Revises: 0450
Create Date: 2026-11-28 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0470"
down_revision = "0460"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Stamp = sa.DateTime(timezone=True)
Json = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "audit_events",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("actor_type", sa.String(length=10), nullable=False),
        sa.Column("actor_id", sa.BigInteger(), nullable=False),
        sa.Column("actor_label", sa.String(length=200), nullable=False, server_default=""),
        sa.Column("action", sa.String(length=80), nullable=False),
        sa.Column("resource_type", sa.String(length=60), nullable=False),
        sa.Column("resource_id", sa.String(length=100), nullable=True),
        sa.Column("method", sa.String(length=10), nullable=False),
        sa.Column("path", sa.String(length=500), nullable=False),
        sa.Column("status", sa.SmallInteger(), nullable=False),
        sa.Column("ip", sa.String(length=64), nullable=False),
        sa.Column("request_id", sa.String(length=100), nullable=False),
        sa.Column("fields", Json, nullable=True),
        sa.Column("created_at", Stamp, nullable=False),
        sa.CheckConstraint("actor_type in ('api_key','user')", name=op.f("ck_audit_events_actor_type")),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_audit_events_organization_id_organizations")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_audit_events_org_created", "audit_events", ["organization_id", "created_at", "id"])
    op.create_index("ix_audit_events_org_action_created", "audit_events", ["organization_id", "action", "created_at"])
    op.create_index("ix_audit_events_org_actor_created", "audit_events",
                    ["organization_id", "actor_type", "actor_id", "created_at"])
    op.create_index("ix_audit_events_org_resource_created", "audit_events",
                    ["organization_id", "resource_type", "resource_id", "created_at"])
    op.create_index("ix_audit_events_created_at", "audit_events", ["created_at"])


def downgrade() -> None:
    for name in ("ix_audit_events_created_at", "ix_audit_events_org_resource_created",
                 "ix_audit_events_org_actor_created", "ix_audit_events_org_action_created",
                 "ix_audit_events_org_created"):
        op.drop_index(name, table_name="audit_events")
    op.drop_table("audit_events")
