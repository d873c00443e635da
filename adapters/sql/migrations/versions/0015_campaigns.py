"""campaigns: campaigns, their contacts (one per phone number) and the contacts' attempts

Revision ID: 0015
Revises: 0001
Create Date: 2026-11-24 00:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0015"
down_revision = "0001"
branch_labels = ("campaigns",)
depends_on = "0005"  # calls (a contact's attempts are calls)

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Json = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
Stamp = sa.DateTime(timezone=True)

CAMPAIGN_STATUSES = "('draft','running','paused','completed','cancelled','failed')"
CONTACT_STATUSES = "('pending','dialing','retry_wait','completed','failed','skipped_dnc','cancelled')"


def upgrade() -> None:
    op.create_table(
        "campaigns",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("agent_id", BigId, nullable=False),
        sa.Column("schedule_id", BigId, nullable=True),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("timezone_mode", sa.String(length=20), nullable=False),
        sa.Column("calling_hours", Json, nullable=False),
        sa.Column("max_concurrent_calls", sa.Integer(), nullable=False),
        sa.Column("retry", Json, nullable=False),
        sa.Column("from_phone_number_id", BigId, nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("status_reason", sa.String(length=100), nullable=True),
        sa.Column("created_at", Stamp, nullable=False),
        sa.Column("updated_at", Stamp, nullable=False),
        sa.Column("started_at", Stamp, nullable=True),
        sa.Column("ended_at", Stamp, nullable=True),
        sa.CheckConstraint(f"status in {CAMPAIGN_STATUSES}", name=op.f("ck_campaigns_status")),
        sa.CheckConstraint("timezone_mode in ('recipient','campaign')", name=op.f("ck_campaigns_timezone_mode")),
        sa.CheckConstraint("max_concurrent_calls between 1 and 50",
                           name=op.f("ck_campaigns_max_concurrent_calls")),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_campaigns_organization_id_organizations")),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], name=op.f("fk_campaigns_agent_id_agents")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_campaigns")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_campaigns_organization_id"), "campaigns", ["organization_id"])
    op.create_index("ix_campaigns_org_status", "campaigns", ["organization_id", "status"])

    op.create_table(
        "campaign_contacts",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("campaign_id", BigId, nullable=False),
        sa.Column("phone", sa.String(length=20), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("timezone", sa.String(length=64), nullable=True),
        sa.Column("custom_data", Json, nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", Stamp, nullable=True),
        sa.Column("last_call_id", sa.String(length=36), nullable=True),
        sa.Column("reason", sa.String(length=100), nullable=True),
        sa.Column("created_at", Stamp, nullable=False),
        sa.Column("updated_at", Stamp, nullable=False),
        sa.CheckConstraint(f"status in {CONTACT_STATUSES}", name=op.f("ck_campaign_contacts_status")),
        sa.ForeignKeyConstraint(["campaign_id"], ["campaigns.id"], ondelete="CASCADE",
                                name=op.f("fk_campaign_contacts_campaign_id_campaigns")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_campaign_contacts")),
        sa.UniqueConstraint("campaign_id", "phone", name=op.f("uq_campaign_contacts_campaign_id_phone")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_campaign_contacts_campaign_status", "campaign_contacts", ["campaign_id", "status"])
    op.create_index("ix_campaign_contacts_status_next_attempt_at", "campaign_contacts",
                    ["status", "next_attempt_at"])

    op.create_table(
        "contact_attempts",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("contact_id", BigId, nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("call_id", sa.String(length=36), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("started_at", Stamp, nullable=True),
        sa.Column("ended_at", Stamp, nullable=True),
        sa.ForeignKeyConstraint(["contact_id"], ["campaign_contacts.id"], ondelete="CASCADE",
                                name=op.f("fk_contact_attempts_contact_id_campaign_contacts")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_contact_attempts")),
        sa.UniqueConstraint("contact_id", "attempt", name=op.f("uq_contact_attempts_contact_id_attempt")),
        sqlite_autoincrement=True,
    )


def downgrade() -> None:
    op.drop_table("contact_attempts")
    op.drop_index("ix_campaign_contacts_status_next_attempt_at", table_name="campaign_contacts")
    op.drop_index("ix_campaign_contacts_campaign_status", table_name="campaign_contacts")
    op.drop_table("campaign_contacts")
    op.drop_index("ix_campaigns_org_status", table_name="campaigns")
    op.drop_index(op.f("ix_campaigns_organization_id"), table_name="campaigns")
    op.drop_table("campaigns")
