"""usage_ledger_dimensions: the agent and campaign of each call's ledger rows (usage broken down by agent and
campaign)

usage_ledger.agent_id and usage_ledger.campaign_id, nullable, without foreign keys (the append-only ledger never
blocks deleting an agent or a campaign). Backfilled from the calls for rows whose source is a call; messages and
rows whose call is gone stay null (reported under "none").

Revision ID: 0450
Revises: 0422
Create Date: 2026-11-27 10:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0450"
down_revision = "0422"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("usage_ledger", sa.Column("agent_id", sa.BigInteger, nullable=True))
    op.add_column("usage_ledger", sa.Column("campaign_id", sa.BigInteger, nullable=True))
    # a call's ledger rows have its id (calls.id, a string primary key) as source_id: one indexed look-up a row
    op.execute(
        "UPDATE usage_ledger SET "
        "agent_id = (SELECT calls.agent_id FROM calls WHERE calls.id = usage_ledger.source_id), "
        "campaign_id = (SELECT calls.campaign_id FROM calls WHERE calls.id = usage_ledger.source_id) "
        "WHERE source_type = 'call'")


def downgrade() -> None:
    op.drop_column("usage_ledger", "campaign_id")
    op.drop_column("usage_ledger", "agent_id")
