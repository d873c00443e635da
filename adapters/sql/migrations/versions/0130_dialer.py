"""dialer: campaign calls are ordinary calls that name their campaign and contact and carry a per-attempt key;
campaigns remember when they last dialled (round-robin) and when they dial next; contacts are found by their
next due time per campaign

Revision ID: 0130
Revises: 0015
Create Date: 2026-11-24 00:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0130"
down_revision = "0015"
branch_labels = ("dialer",)
depends_on = ("0005", "0013")  # the calls table and its dial-queue columns

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Stamp = sa.DateTime(timezone=True)
CAMPAIGN_CALLS = sa.text("campaign_id IS NOT NULL")
KEYED = sa.text("idempotency_key IS NOT NULL")


def upgrade() -> None:
    op.add_column("calls", sa.Column("campaign_id", BigId, nullable=True))
    op.add_column("calls", sa.Column("contact_id", BigId, nullable=True))
    op.add_column("calls", sa.Column("idempotency_key", sa.String(length=200), nullable=True))
    # the cap: calls of a campaign not yet final are counted by this index
    op.create_index("ix_calls_campaign_status", "calls", ["campaign_id", "status"],
                    sqlite_where=CAMPAIGN_CALLS, postgresql_where=CAMPAIGN_CALLS)
    # one call per attempt key: a restarted dialer never places one attempt twice
    op.create_index("uq_calls_org_idempotency_key", "calls", ["organization_id", "idempotency_key"], unique=True,
                    sqlite_where=KEYED, postgresql_where=KEYED)
    op.add_column("campaigns", sa.Column("last_dialled_at", Stamp, nullable=True))
    op.add_column("campaigns", sa.Column("next_dial_at", Stamp, nullable=True))
    op.create_index("ix_campaigns_status_last_dialled", "campaigns", ["status", "last_dialled_at"])
    op.create_index("ix_campaign_contacts_campaign_due", "campaign_contacts",
                    ["campaign_id", "status", "next_attempt_at"])


def downgrade() -> None:
    op.drop_index("ix_campaign_contacts_campaign_due", table_name="campaign_contacts")
    op.drop_index("ix_campaigns_status_last_dialled", table_name="campaigns")
    op.drop_column("campaigns", "next_dial_at")
    op.drop_column("campaigns", "last_dialled_at")
    op.drop_index("uq_calls_org_idempotency_key", table_name="calls")
    op.drop_index("ix_calls_campaign_status", table_name="calls")
    op.drop_column("calls", "idempotency_key")
    op.drop_column("calls", "contact_id")
    op.drop_column("calls", "campaign_id")
