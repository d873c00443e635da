"""Tables of billing (migration 0190, branch ``billing``; 0300 adds plan changes; 0370 when an account became
past_due; 0372 a sub-organization's billing mode): each organization's
subscription state (with a downgrade waiting for the period's end), its payment methods (gateway references, never
card numbers), its invoices (one period invoice per (organization, period), plus an invoice per upgrade) and the
history of its plan changes. Money is integer cents (BigInteger), never a float."""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.metadata import BigId, Json, UtcDateTime, id_column, metadata, org_column

PERIOD_INVOICE_INDEX = "uq_billing_invoices_period_invoice"
PERIOD_INVOICE = sa.text("kind = 'period'")

billing_accounts = sa.Table(
    "billing_accounts",
    metadata,
    sa.Column("organization_id", BigId, sa.ForeignKey("organizations.id"), primary_key=True),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("cancel_at_period_end", sa.Boolean, nullable=False),
    sa.Column("default_payment_method_id", BigId, nullable=True),
    sa.Column("pending_plan", sa.String(20), nullable=True),
    sa.Column("past_due_since", UtcDateTime, nullable=True),
    sa.Column("billing_mode", sa.String(10), nullable=False, server_default="partner"),
    sa.CheckConstraint("billing_mode in ('partner','direct')", name="billing_mode"),
    sa.CheckConstraint("status in ('active','past_due','canceled')", name="status"),
)

billing_payment_methods = sa.Table(
    "billing_payment_methods",
    metadata,
    id_column(),
    org_column(),
    sa.Column("gateway_id", sa.String(64), nullable=False),
    sa.Column("brand", sa.String(20), nullable=False),
    sa.Column("last4", sa.String(4), nullable=False),
    sa.Column("exp_month", sa.Integer, nullable=False),
    sa.Column("exp_year", sa.Integer, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sqlite_autoincrement=True,
)

billing_invoices = sa.Table(
    "billing_invoices",
    metadata,
    id_column(),
    org_column(),
    sa.Column("number", sa.String(40), nullable=False, unique=True),
    sa.Column("period", sa.String(7), nullable=False),
    sa.Column("period_start", UtcDateTime, nullable=False),
    sa.Column("period_end", UtcDateTime, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("lines", Json, nullable=False),
    sa.Column("subtotal", sa.BigInteger, nullable=False),
    sa.Column("total", sa.BigInteger, nullable=False),
    sa.Column("currency", sa.String(3), nullable=False),
    sa.Column("attempt_count", sa.Integer, nullable=False),
    sa.Column("automatic_failures", sa.Integer, nullable=False),
    sa.Column("next_payment_attempt", UtcDateTime, nullable=True),
    sa.Column("last_payment_error", sa.String(64), nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("paid_at", UtcDateTime, nullable=True),
    sa.Column("kind", sa.String(20), nullable=False, server_default="period"),
    sa.CheckConstraint("status in ('draft','open','paid','void','uncollectible')", name="status"),
    sa.CheckConstraint("subtotal >= 0 and total >= 0", name="amounts"),
    sa.CheckConstraint("kind in ('period','proration')", name="kind"),
    sa.Index("ix_billing_invoices_status_next_payment_attempt", "status", "next_payment_attempt"),
    # one period invoice per (organization, period); upgrade invoices (kind 'proration') are not limited
    sa.Index(PERIOD_INVOICE_INDEX, "organization_id", "period", unique=True,
             sqlite_where=PERIOD_INVOICE, postgresql_where=PERIOD_INVOICE),
    sqlite_autoincrement=True,
)

billing_plan_changes = sa.Table(
    "billing_plan_changes",
    metadata,
    id_column(),
    org_column(),
    sa.Column("previous_plan", sa.String(20), nullable=True),
    sa.Column("plan", sa.String(20), nullable=True),
    sa.Column("effective_at", UtcDateTime, nullable=False),
    sa.Column("charged", sa.Boolean, nullable=False, server_default=sa.true()),
    sqlite_autoincrement=True,
)
