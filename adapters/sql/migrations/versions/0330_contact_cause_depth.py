"""contact_cause_depth: the depth of the trigger action that added a campaign contact (campaign_contacts.cause_depth)

A contact added by a trigger's campaign_contact action is dialled later, by the campaign dialer, outside the
action's unit of work: its call and its events (contact.completed, contact.failed) took depth 0, so a relay of
triggers through campaigns ran past the loop guard. The contact now keeps the depth of the unit that added it, and
the dialer gives it to the contact's calls and events (as calls.cause_depth does, migration 0240).

Revision ID: 0330
Revises: 0300
Create Date: 2026-11-27 06:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0330"
down_revision = "0300"
branch_labels = None
depends_on = None  # campaign_contacts exists (0015), and 0280 before it already follows the dialer (0130)


def upgrade() -> None:
    # a plain ADD COLUMN on both databases: every existing contact was added at depth 0
    op.add_column("campaign_contacts", sa.Column("cause_depth", sa.SmallInteger(), nullable=False,
                                                 server_default="0"))


def downgrade() -> None:
    op.drop_column("campaign_contacts", "cause_depth")  # SQLite drops a plain column in place (no rebuild)
