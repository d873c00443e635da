"""schedules: business-hours schedules (weekly hours, exceptions and a holiday region as JSON)

Revision ID: 0120
Revises: 0001
Create Date: 2026-11-24 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0120"
down_revision = "0001"
branch_labels = ("schedules",)
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Json = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("weekly", Json, nullable=False),
        sa.Column("exceptions", Json, nullable=False),
        sa.Column("holidays", Json, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_schedules_organization_id_organizations")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedules")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_schedules_organization_id"), "schedules", ["organization_id"], unique=False)
    op.create_index("ix_schedules_org_live", "schedules", ["organization_id", "id"], unique=False,
                    sqlite_where=sa.text("deleted_at IS NULL"), postgresql_where=sa.text("deleted_at IS NULL"))


def downgrade() -> None:
    op.drop_index("ix_schedules_org_live", table_name="schedules")
    op.drop_index(op.f("ix_schedules_organization_id"), table_name="schedules")
    op.drop_table("schedules")
