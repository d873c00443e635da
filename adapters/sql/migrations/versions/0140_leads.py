"""leads: leads received for a call or a campaign, de-duplicated by the sender's external id

Revision ID: 0140
Revises: 0001
Create Date: 2026-11-24 01:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0140"
down_revision = "0001"
branch_labels = ("leads",)
depends_on = ("0015", "0005")  # campaigns (a lead may become a contact) and calls (a lead's call)

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Json = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
Stamp = sa.DateTime(timezone=True)

LEAD_STATUSES = "('queued','called','blocked_dnc','failed')"


def upgrade() -> None:
    op.create_table(
        "leads",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("phone", sa.String(length=20), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("email", sa.String(length=320), nullable=True),
        sa.Column("agent_id", BigId, nullable=True),
        sa.Column("campaign_id", BigId, nullable=True),
        sa.Column("custom_data", Json, nullable=False),
        sa.Column("external_id", sa.String(length=255), nullable=True),
        sa.Column("source", sa.String(length=100), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("reason", sa.String(length=100), nullable=True),
        sa.Column("call_id", sa.String(length=36), nullable=True),
        sa.Column("contact_id", BigId, nullable=True),
        sa.Column("created_at", Stamp, nullable=False),
        sa.Column("updated_at", Stamp, nullable=False),
        sa.CheckConstraint(f"status in {LEAD_STATUSES}", name=op.f("ck_leads_status")),
        sa.CheckConstraint("(agent_id is null) <> (campaign_id is null)", name=op.f("ck_leads_one_target")),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_leads_organization_id_organizations")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_leads")),
        sa.UniqueConstraint("organization_id", "external_id", name=op.f("uq_leads_organization_id_external_id")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_leads_organization_id"), "leads", ["organization_id"])
    op.create_index("ix_leads_org_created_at", "leads", ["organization_id", "created_at"])
    op.create_index("ix_leads_org_status_created_at", "leads", ["organization_id", "status", "created_at"])
    op.create_index("ix_leads_org_source_created_at", "leads", ["organization_id", "source", "created_at"])
    op.create_index("ix_leads_call_id", "leads", ["call_id"])
    op.create_index("ix_leads_contact_id", "leads", ["contact_id"])


def downgrade() -> None:
    for index in ("ix_leads_contact_id", "ix_leads_call_id", "ix_leads_org_source_created_at",
                  "ix_leads_org_status_created_at", "ix_leads_org_created_at", "ix_leads_organization_id"):
        op.drop_index(index, table_name="leads")
    op.drop_table("leads")
