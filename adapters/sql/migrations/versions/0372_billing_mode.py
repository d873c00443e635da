"""billing_mode: how a partner's sub-organization is billed, on the partner's invoice (``partner``, the default)
or on its own (``direct``)

``billing_accounts.billing_mode`` ('partner' or 'direct', a check constraint). Existing accounts take 'partner',
the default, as organizations without a stored account do; it only matters for sub-organizations.

Revision ID: 0372
Revises: 0370
Create Date: 2026-11-27 09:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0372"
down_revision = "0370"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("billing_accounts") as batch:
        batch.add_column(sa.Column("billing_mode", sa.String(length=10), nullable=False, server_default="partner"))
        batch.create_check_constraint(op.f("ck_billing_accounts_billing_mode"),
                                      "billing_mode in ('partner','direct')")


def downgrade() -> None:
    with op.batch_alter_table("billing_accounts") as batch:
        batch.drop_constraint(op.f("ck_billing_accounts_billing_mode"), type_="check")
        batch.drop_column("billing_mode")
