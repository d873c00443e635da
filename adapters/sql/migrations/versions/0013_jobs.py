"""jobs: the one job queue (claim under a lease, retry with backoff) every background loop runs on; and the
calls' dial queue order (``calls.priority``, ``calls.due_at``: a campaign never starves single calls)

Revision ID: 0013
Revises: 0001
Create Date: 2026-11-23 22:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0013"
down_revision = "0001"
branch_labels = ("jobs",)
depends_on = "0005"  # the calls table

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Json = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
Stamp = sa.DateTime(timezone=True)
ACTIVE = sa.text("failed_at IS NULL")
QUEUED = sa.text("status = 'queued'")


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(length=100), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("payload", Json, nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("due_at", Stamp, nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sa.String(length=100), nullable=True),
        sa.Column("lease_expires_at", Stamp, nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("failed_at", Stamp, nullable=True),
        sa.Column("created_at", Stamp, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        sa.UniqueConstraint("kind", "key", name=op.f("uq_jobs_kind_key")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_jobs_claim", "jobs", ["kind", "priority", "due_at", "id"],
                    sqlite_where=ACTIVE, postgresql_where=ACTIVE)
    op.add_column("calls", sa.Column("priority", sa.Integer(), nullable=False, server_default=sa.text("100")))
    op.add_column("calls", sa.Column("due_at", Stamp, nullable=True))
    op.execute("UPDATE calls SET due_at = created_at")
    op.create_index("ix_calls_dial_queue", "calls", ["organization_id", "priority", "due_at"],
                    sqlite_where=QUEUED, postgresql_where=QUEUED)


def downgrade() -> None:
    op.drop_index("ix_calls_dial_queue", table_name="calls")
    op.drop_column("calls", "due_at")  # SQLite 3.35+ drops a column in place
    op.drop_column("calls", "priority")
    op.drop_index("ix_jobs_claim", table_name="jobs")
    op.drop_table("jobs")
