"""outbox consumers: one cursor per consumer instead of one dispatched flag

* ``outbox_cursors``: consumer name -> the id of the last outbox event it has processed. The webhook
  dispatcher is the consumer ``webhooks``; triggers, usage... get cursors of their own and read the same
  events independently.
* ``outbox_events.dispatched_at`` and its partial index go: the upgrade turns them into the ``webhooks``
  cursor (just below the oldest undispatched event, or the newest event when every one was dispatched),
  the downgrade back (every event at or below that cursor dispatched).

Revision ID: 0012
Revises: 0008
Create Date: 2026-11-23 23:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0008"
branch_labels = None
depends_on = None

PENDING_INDEX = "ix_outbox_events_pending"
PENDING = sa.text("dispatched_at IS NULL")


def upgrade() -> None:
    op.create_table(
        "outbox_cursors",
        sa.Column("consumer", sa.String(length=60), nullable=False),
        sa.Column("last_id", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("consumer", name=op.f("pk_outbox_cursors")),
    )
    op.execute(sa.text(
        "INSERT INTO outbox_cursors (consumer, last_id) SELECT 'webhooks', COALESCE("
        "(SELECT min(id) - 1 FROM outbox_events WHERE dispatched_at IS NULL), "
        "(SELECT max(id) FROM outbox_events), 0)"))
    op.drop_index(PENDING_INDEX, table_name="outbox_events", sqlite_where=PENDING, postgresql_where=PENDING)
    op.drop_column("outbox_events", "dispatched_at")  # SQLite 3.35+ drops a column in place (no rebuild)


def downgrade() -> None:
    op.add_column("outbox_events", sa.Column("dispatched_at", sa.DateTime(timezone=True), nullable=True))
    op.execute(sa.text(
        "UPDATE outbox_events SET dispatched_at = created_at WHERE id <= "
        "(SELECT last_id FROM outbox_cursors WHERE consumer = 'webhooks')"))
    op.create_index(PENDING_INDEX, "outbox_events", ["id"], sqlite_where=PENDING, postgresql_where=PENDING)
    op.drop_table("outbox_cursors")
