"""usage: the append-only usage ledger, per-period and per-day counters, quota reservations, thresholds

Revision ID: 0160
Revises: 0001
Create Date: 2026-11-24 01:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0160"
down_revision = "0001"
branch_labels = ("usage",)
depends_on = ("0005",)  # calls: the calls and (with sms) the messages it measures

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Stamp = sa.DateTime(timezone=True)
METRICS = "('call_seconds','calls','sms_segments')"


def _org_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                   name=op.f(f"fk_{table}_organization_id_organizations"))


def upgrade() -> None:
    op.create_table(
        "usage_ledger",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("metric", sa.String(length=20), nullable=False),
        sa.Column("quantity", sa.BigInteger(), nullable=False),
        sa.Column("period", sa.String(length=7), nullable=False),
        sa.Column("source_type", sa.String(length=20), nullable=False),
        sa.Column("source_id", sa.String(length=64), nullable=False),
        sa.Column("occurred_at", Stamp, nullable=False),
        sa.CheckConstraint(f"metric in {METRICS}", name=op.f("ck_usage_ledger_metric")),
        sa.CheckConstraint("quantity >= 0", name=op.f("ck_usage_ledger_quantity")),
        _org_fk("usage_ledger"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_usage_ledger")),
        sa.UniqueConstraint("source_type", "source_id", "metric",
                            name=op.f("uq_usage_ledger_source_type_source_id_metric")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_usage_ledger_organization_id"), "usage_ledger", ["organization_id"])
    op.create_index("ix_usage_ledger_org_metric_occurred_at", "usage_ledger",
                    ["organization_id", "metric", "occurred_at"])
    op.create_table(
        "usage_counters",
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("period", sa.String(length=7), nullable=False),
        sa.Column("metric", sa.String(length=20), nullable=False),
        sa.Column("used", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("reserved", sa.BigInteger(), server_default="0", nullable=False),
        _org_fk("usage_counters"),
        sa.PrimaryKeyConstraint("organization_id", "period", "metric", name=op.f("pk_usage_counters")),
    )
    op.create_table(
        "usage_daily",
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("metric", sa.String(length=20), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("used", sa.BigInteger(), server_default="0", nullable=False),
        _org_fk("usage_daily"),
        sa.PrimaryKeyConstraint("organization_id", "metric", "day", name=op.f("pk_usage_daily")),
    )
    op.create_table(
        "usage_reservations",
        sa.Column("source_type", sa.String(length=20), nullable=False),
        sa.Column("source_id", sa.String(length=64), nullable=False),
        sa.Column("metric", sa.String(length=20), nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("period", sa.String(length=7), nullable=False),
        sa.Column("quantity", sa.BigInteger(), nullable=False),
        _org_fk("usage_reservations"),
        sa.PrimaryKeyConstraint("source_type", "source_id", "metric", name=op.f("pk_usage_reservations")),
    )
    op.create_table(
        "usage_thresholds",
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("period", sa.String(length=7), nullable=False),
        sa.Column("metric", sa.String(length=20), nullable=False),
        sa.Column("percent", sa.Integer(), nullable=False),
        _org_fk("usage_thresholds"),
        sa.PrimaryKeyConstraint("organization_id", "period", "metric", "percent", name=op.f("pk_usage_thresholds")),
    )


def downgrade() -> None:
    for table in ("usage_thresholds", "usage_reservations", "usage_daily", "usage_counters"):
        op.drop_table(table)
    op.drop_index("ix_usage_ledger_org_metric_occurred_at", table_name="usage_ledger")
    op.drop_index(op.f("ix_usage_ledger_organization_id"), table_name="usage_ledger")
    op.drop_table("usage_ledger")
