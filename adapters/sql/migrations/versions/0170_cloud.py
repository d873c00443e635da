"""cloud: worker heartbeats (the cloud status's worker component)

Revision ID: 0170
Revises: 0001
Create Date: 2026-11-24 01:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0170"
down_revision = "0001"
branch_labels = ("cloud",)
depends_on = None


def upgrade() -> None:
    op.create_table(
        "worker_heartbeats",
        sa.Column("process", sa.String(length=100), nullable=False),
        sa.Column("last_heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("process", name=op.f("pk_worker_heartbeats")),
    )
    op.create_index("ix_worker_heartbeats_last_heartbeat_at", "worker_heartbeats", ["last_heartbeat_at"])


def downgrade() -> None:
    op.drop_index("ix_worker_heartbeats_last_heartbeat_at", table_name="worker_heartbeats")
    op.drop_table("worker_heartbeats")
