"""webhook delivery order: the resource a delivery is about

``webhook_deliveries.resource`` (``call:<id>``, ``appointment:<id>``...) lets the delivery loop send
one resource's events to one subscription in event order: a delivery waits while an earlier one
of the same resource to the same subscription is pending. Rows from before stay NULL (unordered).

Revision ID: 0009
Revises: 0002
Create Date: 2026-11-23 22:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0002"
branch_labels = None
depends_on = None

INDEX = "ix_webhook_deliveries_resource_pending"
PENDING = sa.text("status = 'pending'")


def upgrade() -> None:
    op.add_column("webhook_deliveries", sa.Column("resource", sa.String(length=160), nullable=True))
    op.create_index(INDEX, "webhook_deliveries", ["subscription_id", "resource", "event_id"],
                    sqlite_where=PENDING, postgresql_where=PENDING)


def downgrade() -> None:
    op.drop_index(INDEX, table_name="webhook_deliveries")
    op.drop_column("webhook_deliveries", "resource")  # SQLite 3.35+ drops a column in place
