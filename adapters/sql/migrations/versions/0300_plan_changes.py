"""plan_changes: upgrades invoiced at once, downgrades at the period's end, and the history of plan changes

A period's usage is billed at the overage rate of the plan in force when it was used, so every plan change is kept
(``billing_plan_changes``: the plan before and after, when it took effect, and whether it was charged at once;
NULL stands for no subscription).
A downgrade waits for the period's end in ``billing_accounts.pending_plan``. An upgrade is charged at once on an
invoice of its own (``billing_invoices.kind = 'proration'``), so the one-invoice-per-period rule becomes a unique
index on (organization, period) over period invoices only (SQLite rebuilds the table for it, keeping its
autoincrement; existing invoices are period invoices).

Revision ID: 0300
Revises: 0290
Create Date: 2026-11-27 06:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0300"
down_revision = "0290"
branch_labels = None
depends_on = ("0190",)  # the billing tables

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Stamp = sa.DateTime(timezone=True)
OLD_UNIQUE = "uq_billing_invoices_organization_id_period"
PERIOD_INVOICE_INDEX = "uq_billing_invoices_period_invoice"
PERIOD_INVOICE = sa.text("kind = 'period'")


def upgrade() -> None:
    # a plain ADD COLUMN on both databases (billing_accounts has no autoincrement to keep)
    op.add_column("billing_accounts", sa.Column("pending_plan", sa.String(length=20), nullable=True))
    with op.batch_alter_table("billing_invoices", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.add_column(sa.Column("kind", sa.String(length=20), nullable=False, server_default="period"))
        batch.drop_constraint(OLD_UNIQUE, type_="unique")
        batch.create_check_constraint(op.f("ck_billing_invoices_kind"), "kind in ('period','proration')")
    op.create_index(PERIOD_INVOICE_INDEX, "billing_invoices", ["organization_id", "period"], unique=True,
                    sqlite_where=PERIOD_INVOICE, postgresql_where=PERIOD_INVOICE)
    op.create_table(
        "billing_plan_changes",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("previous_plan", sa.String(length=20), nullable=True),
        sa.Column("plan", sa.String(length=20), nullable=True),
        sa.Column("effective_at", Stamp, nullable=False),
        sa.Column("charged", sa.Boolean(), nullable=False, server_default=sa.true()),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_billing_plan_changes_organization_id_organizations")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_billing_plan_changes")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_billing_plan_changes_organization_id"), "billing_plan_changes", ["organization_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_billing_plan_changes_organization_id"), table_name="billing_plan_changes")
    op.drop_table("billing_plan_changes")
    op.drop_index(PERIOD_INVOICE_INDEX, table_name="billing_invoices")
    op.execute("DELETE FROM billing_invoices WHERE kind <> 'period'")
    with op.batch_alter_table("billing_invoices", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_constraint(op.f("ck_billing_invoices_kind"), type_="check")
        batch.drop_column("kind")
        batch.create_unique_constraint(OLD_UNIQUE, ["organization_id", "period"])
    with op.batch_alter_table("billing_accounts") as batch:
        batch.drop_column("pending_plan")
