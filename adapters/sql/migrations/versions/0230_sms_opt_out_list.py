"""sms_opt_out_list: at most one SMS opt-out list per organization (dnc_lists.purpose, unique per organization)

Two first STOP messages of an organization arriving at once each made an "SMS opt-outs" list. The list the SMS
path keeps is now marked ``purpose = 'sms_opt_out'``, unique per organization (NULL, an ordinary list, is not
unique), so the second insert finds the first one's list. The oldest list named "SMS opt-outs" of each
organization becomes that list; any other keeps its entries as an ordinary list of that name (they still count
for sends, which read every list so named).

Revision ID: 0230
Revises: 0001
Create Date: 2026-11-24 05:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0230"
down_revision = "0001"
branch_labels = ("sms_opt_out_list",)
depends_on = ("0008",)  # after dnc_lists is rebuilt with its autoincrement on SQLite (0008 rebuilds it)

INDEX = "uq_dnc_lists_organization_id_purpose"


def upgrade() -> None:
    # a plain ADD COLUMN on both databases (no table rebuild: dnc_lists keeps its autoincrement)
    op.add_column("dnc_lists", sa.Column("purpose", sa.String(length=20), nullable=True))
    op.execute("UPDATE dnc_lists SET purpose = 'sms_opt_out' WHERE id IN "
               "(SELECT MIN(id) FROM dnc_lists WHERE name = 'SMS opt-outs' GROUP BY organization_id)")
    op.create_index(INDEX, "dnc_lists", ["organization_id", "purpose"], unique=True)


def downgrade() -> None:
    op.drop_index(INDEX, table_name="dnc_lists")
    with op.batch_alter_table("dnc_lists", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("purpose")
