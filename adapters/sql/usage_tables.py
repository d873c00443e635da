"""Tables of usage metering (migration 0160, branch ``usage``): the append-only ledger, per-period counters
(used and reserved), per-day counters and the thresholds already announced."""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.metadata import BigId, UtcDateTime, id_column, metadata, org_column

METRICS = "('call_seconds','calls','sms_segments')"

usage_ledger = sa.Table(
    "usage_ledger",
    metadata,
    id_column(),
    org_column(),
    sa.Column("metric", sa.String(20), nullable=False),
    sa.Column("quantity", sa.BigInteger, nullable=False),
    sa.Column("period", sa.String(7), nullable=False),
    sa.Column("source_type", sa.String(20), nullable=False),
    sa.Column("source_id", sa.String(64), nullable=False),
    sa.Column("occurred_at", UtcDateTime, nullable=False),
    # migration 0450: the dimensions of a call's usage (the breakdowns by agent and campaign); no foreign key, so
    # the ledger (append-only) never blocks deleting an agent or a campaign
    sa.Column("agent_id", sa.BigInteger, nullable=True),
    sa.Column("campaign_id", sa.BigInteger, nullable=True),
    sa.UniqueConstraint("source_type", "source_id", "metric"),
    sa.CheckConstraint(f"metric in {METRICS}", name="metric"),
    sa.CheckConstraint("quantity >= 0", name="quantity"),
    sa.Index("ix_usage_ledger_org_metric_occurred_at", "organization_id", "metric", "occurred_at"),
    sqlite_autoincrement=True,
)

usage_counters = sa.Table(
    "usage_counters",
    metadata,
    sa.Column("organization_id", BigId, sa.ForeignKey("organizations.id"), primary_key=True),
    sa.Column("period", sa.String(7), primary_key=True),
    sa.Column("metric", sa.String(20), primary_key=True),
    sa.Column("used", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("reserved", sa.BigInteger, nullable=False, server_default="0"),
)

usage_daily = sa.Table(
    "usage_daily",
    metadata,
    sa.Column("organization_id", BigId, sa.ForeignKey("organizations.id"), primary_key=True),
    sa.Column("metric", sa.String(20), primary_key=True),
    sa.Column("day", sa.Date, primary_key=True),
    sa.Column("used", sa.BigInteger, nullable=False, server_default="0"),
)

usage_reservations = sa.Table(
    "usage_reservations",
    metadata,
    sa.Column("source_type", sa.String(20), primary_key=True),
    sa.Column("source_id", sa.String(64), primary_key=True),
    sa.Column("metric", sa.String(20), primary_key=True),
    sa.Column("organization_id", BigId, sa.ForeignKey("organizations.id"), nullable=False),
    sa.Column("period", sa.String(7), nullable=False),
    sa.Column("quantity", sa.BigInteger, nullable=False),
)

usage_thresholds = sa.Table(
    "usage_thresholds",
    metadata,
    sa.Column("organization_id", BigId, sa.ForeignKey("organizations.id"), primary_key=True),
    sa.Column("period", sa.String(7), primary_key=True),
    sa.Column("metric", sa.String(20), primary_key=True),
    sa.Column("percent", sa.Integer, primary_key=True),
)
