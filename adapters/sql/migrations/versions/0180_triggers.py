"""triggers: automation rules on events, their runs (one per trigger and event), and the outbox's event depth

Revision ID: 0180
Revises: 0001
Create Date: 2026-11-24 03:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0180"
down_revision = "0001"
branch_labels = ("triggers",)
depends_on = ("0008",)  # after the outbox is rebuilt with its autoincrement on SQLite (0008 rebuilds it)

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Json = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
Stamp = sa.DateTime(timezone=True)

RUN_STATUSES = "('not_matched','skipped','running','succeeded','failed')"


def upgrade() -> None:
    # a plain ADD COLUMN on both databases (no table rebuild: the outbox keeps its autoincrement)
    op.add_column("outbox_events", sa.Column("depth", sa.SmallInteger(), nullable=False, server_default="0"))
    op.create_table(
        "triggers",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("event", sa.String(length=100), nullable=False),
        sa.Column("conditions", Json, nullable=True),
        sa.Column("actions", Json, nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("sealed_secret", sa.Text(), nullable=False),
        sa.Column("created_at", Stamp, nullable=False),
        sa.Column("updated_at", Stamp, nullable=False),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_triggers_organization_id_organizations")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_triggers")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_triggers_organization_id"), "triggers", ["organization_id"])
    op.create_index("ix_triggers_org_event_enabled", "triggers", ["organization_id", "event", "enabled"])
    op.create_table(
        "trigger_runs",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("trigger_id", BigId, nullable=False),
        sa.Column("event", sa.String(length=100), nullable=False),
        sa.Column("event_id", BigId, nullable=False),
        sa.Column("depth", sa.SmallInteger(), nullable=False),
        sa.Column("matched", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("condition_trace", Json, nullable=False),
        sa.Column("actions", Json, nullable=False),
        sa.Column("data", Json, nullable=False),
        sa.Column("reason", sa.String(length=300), nullable=True),
        sa.Column("created_at", Stamp, nullable=False),
        sa.Column("finished_at", Stamp, nullable=True),
        sa.CheckConstraint(f"status in {RUN_STATUSES}", name=op.f("ck_trigger_runs_status")),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_trigger_runs_organization_id_organizations")),
        sa.ForeignKeyConstraint(["trigger_id"], ["triggers.id"], ondelete="CASCADE",
                                name=op.f("fk_trigger_runs_trigger_id_triggers")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trigger_runs")),
        sa.UniqueConstraint("trigger_id", "event_id", name=op.f("uq_trigger_runs_trigger_id_event_id")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_trigger_runs_organization_id"), "trigger_runs", ["organization_id"])
    op.create_index("ix_trigger_runs_trigger_status_id", "trigger_runs", ["trigger_id", "status", "id"])


def downgrade() -> None:
    op.drop_index("ix_trigger_runs_trigger_status_id", table_name="trigger_runs")
    op.drop_index(op.f("ix_trigger_runs_organization_id"), table_name="trigger_runs")
    op.drop_table("trigger_runs")
    op.drop_index("ix_triggers_org_event_enabled", table_name="triggers")
    op.drop_index(op.f("ix_triggers_organization_id"), table_name="triggers")
    op.drop_table("triggers")
    op.drop_column("outbox_events", "depth")
