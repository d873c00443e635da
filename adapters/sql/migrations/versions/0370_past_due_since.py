"""past_due_since: when a subscription became past_due, so service is held once it has been for more than 7 days

New calls, SMS and campaign starts are refused (402 payment_required) when a subscription has been ``past_due``
for more than 7 days. ``billing_accounts.past_due_since`` records when it became so (its first unpaid decline);
accounts already past_due take the creation instant of their oldest unpaid invoice.

Revision ID: 0370
Revises: 0350
Create Date: 2026-11-27 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0370"
down_revision = "0350"
branch_labels = None
depends_on = ("0190",)  # the billing tables

Stamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    # a plain ADD COLUMN on both databases (billing_accounts has no autoincrement to keep)
    op.add_column("billing_accounts", sa.Column("past_due_since", Stamp, nullable=True))
    op.execute(sa.text(
        "UPDATE billing_accounts SET past_due_since = (SELECT min(i.created_at) FROM billing_invoices i "
        "WHERE i.organization_id = billing_accounts.organization_id AND i.status IN ('open', 'uncollectible')) "
        "WHERE status = 'past_due'"))


def downgrade() -> None:
    with op.batch_alter_table("billing_accounts") as batch:
        batch.drop_column("past_due_since")
