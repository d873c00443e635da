"""billing: subscription state, payment methods (gateway references) and invoices (one per organization and period)

Revision ID: 0190
Revises: 0001
Create Date: 2026-11-24 02:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0190"
down_revision = "0001"
branch_labels = ("billing",)
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
Stamp = sa.DateTime(timezone=True)


def _org_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                   name=op.f(f"fk_{table}_organization_id_organizations"))


def upgrade() -> None:
    op.create_table(
        "billing_accounts",
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("cancel_at_period_end", sa.Boolean(), nullable=False),
        sa.Column("default_payment_method_id", BigId, nullable=True),
        sa.CheckConstraint("status in ('active','past_due','canceled')", name=op.f("ck_billing_accounts_status")),
        _org_fk("billing_accounts"),
        sa.PrimaryKeyConstraint("organization_id", name=op.f("pk_billing_accounts")),
    )
    op.create_table(
        "billing_payment_methods",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("gateway_id", sa.String(length=64), nullable=False),
        sa.Column("brand", sa.String(length=20), nullable=False),
        sa.Column("last4", sa.String(length=4), nullable=False),
        sa.Column("exp_month", sa.Integer(), nullable=False),
        sa.Column("exp_year", sa.Integer(), nullable=False),
        sa.Column("created_at", Stamp, nullable=False),
        _org_fk("billing_payment_methods"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_billing_payment_methods")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_billing_payment_methods_organization_id"), "billing_payment_methods",
                    ["organization_id"])
    op.create_table(
        "billing_invoices",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("number", sa.String(length=40), nullable=False),
        sa.Column("period", sa.String(length=7), nullable=False),
        sa.Column("period_start", Stamp, nullable=False),
        sa.Column("period_end", Stamp, nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("lines", Json, nullable=False),
        sa.Column("subtotal", sa.BigInteger(), nullable=False),
        sa.Column("total", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("attempt_count", sa.Integer(), nullable=False),
        sa.Column("automatic_failures", sa.Integer(), nullable=False),
        sa.Column("next_payment_attempt", Stamp, nullable=True),
        sa.Column("last_payment_error", sa.String(length=64), nullable=True),
        sa.Column("created_at", Stamp, nullable=False),
        sa.Column("paid_at", Stamp, nullable=True),
        sa.CheckConstraint("status in ('draft','open','paid','void','uncollectible')",
                           name=op.f("ck_billing_invoices_status")),
        sa.CheckConstraint("subtotal >= 0 and total >= 0", name=op.f("ck_billing_invoices_amounts")),
        _org_fk("billing_invoices"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_billing_invoices")),
        sa.UniqueConstraint("number", name=op.f("uq_billing_invoices_number")),
        sa.UniqueConstraint("organization_id", "period", name=op.f("uq_billing_invoices_organization_id_period")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_billing_invoices_organization_id"), "billing_invoices", ["organization_id"])
    op.create_index("ix_billing_invoices_status_next_payment_attempt", "billing_invoices",
                    ["status", "next_payment_attempt"])


def downgrade() -> None:
    op.drop_index("ix_billing_invoices_status_next_payment_attempt", table_name="billing_invoices")
    op.drop_index(op.f("ix_billing_invoices_organization_id"), table_name="billing_invoices")
    op.drop_table("billing_invoices")
    op.drop_index(op.f("ix_billing_payment_methods_organization_id"), table_name="billing_payment_methods")
    op.drop_table("billing_payment_methods")
    op.drop_table("billing_accounts")
