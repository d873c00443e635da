"""drop_usage_records: the calls feature's first usage table, replaced by the usage ledger

``usage_records`` (migration 0005) held call seconds per (organization, kind, reference). Since the usage feature
(``usage_ledger``, ``usage_counters``, ``usage_daily``) every usage write and read goes through the ledger, and
nothing wrote or read this table any more: it is dropped. The downgrade creates it again, empty, as 0008 left it.

Revision ID: 0350
Revises: 0330
Create Date: 2026-11-27 07:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0350"
down_revision = "0330"
branch_labels = None
depends_on = ("0008",)  # usage_records as the never-reused-ids rebuild left it

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.drop_table("usage_records")  # its indexes and constraints go with it


def downgrade() -> None:
    op.create_table(
        "usage_records",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("kind", sa.String(length=50), nullable=False),
        sa.Column("quantity", sa.Float(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reference", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_usage_records_organization_id_organizations")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_usage_records")),
        sa.UniqueConstraint("organization_id", "kind", "reference",
                            name=op.f("uq_usage_records_organization_id_kind_reference")),
        sqlite_autoincrement=True,  # ids are never reused (migration 0008)
    )
    op.create_index(op.f("ix_usage_records_organization_id"), "usage_records", ["organization_id"], unique=False)
    op.create_index("ix_usage_records_org_at", "usage_records", ["organization_id", "at"], unique=False)
