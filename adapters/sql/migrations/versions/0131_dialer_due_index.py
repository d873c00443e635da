"""dialer: every open contact has a due time (a never-tried contact is due from when it was added), and one
partial index orders a campaign's open contacts by it

Revision ID: 0131
Revises: 0130
Create Date: 2026-11-24 01:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0131"
down_revision = "0130"
branch_labels = None
depends_on = None

OPEN_CONTACTS = sa.text("status IN ('pending', 'retry_wait')")


def upgrade() -> None:
    op.execute("UPDATE campaign_contacts SET next_attempt_at = created_at "
               "WHERE next_attempt_at IS NULL AND status IN ('pending', 'retry_wait')")
    op.drop_index("ix_campaign_contacts_campaign_due", table_name="campaign_contacts")
    op.create_index("ix_campaign_contacts_open_due", "campaign_contacts", ["campaign_id", "next_attempt_at", "id"],
                    sqlite_where=OPEN_CONTACTS, postgresql_where=OPEN_CONTACTS)


def downgrade() -> None:
    # the due times stay: a pending contact due from when it was added reads as due to the older dialer too
    op.drop_index("ix_campaign_contacts_open_due", table_name="campaign_contacts")
    op.create_index("ix_campaign_contacts_campaign_due", "campaign_contacts",
                    ["campaign_id", "status", "next_attempt_at"])
