"""agent_counts: live agents per organization, so an unfiltered list does not count its rows

Revision ID: 0100
Revises: 0001
Create Date: 2026-11-22 13:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0100"
down_revision = "0001"
branch_labels = ("agent_counts",)
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "agent_counts",
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("live", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_agent_counts_organization_id_organizations")),
        sa.PrimaryKeyConstraint("organization_id", name=op.f("pk_agent_counts")),
    )
    op.execute(
        "INSERT INTO agent_counts (organization_id, live) "
        "SELECT organization_id, count(*) FROM agents WHERE deleted_at IS NULL GROUP BY organization_id"
    )


def downgrade() -> None:
    op.drop_table("agent_counts")
