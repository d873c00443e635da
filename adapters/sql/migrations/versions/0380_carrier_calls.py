"""carrier_calls: inbound calls, the carrier's words on a refused call, calls found by the carrier's call id

* ``calls.direction``: ``outbound`` (every call until now) or ``inbound`` (a caller rang a carrier number).
* ``calls.end_message``: why the carrier refused or failed the call, in its own words (``end_reason:
  carrier_error``).
* ``ix_calls_org_telephony_ref``: a carrier's status callback for an inbound call names the call by the carrier's
  id only.

Revision ID: 0380
Revises: 0350
Create Date: 2026-11-27 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0380"
down_revision = "0350"
branch_labels = None
depends_on = ("0005",)  # the calls table


def upgrade() -> None:
    with op.batch_alter_table("calls") as batch:
        batch.add_column(sa.Column("direction", sa.String(10), nullable=False, server_default=sa.text("'outbound'")))
        batch.add_column(sa.Column("end_message", sa.String(500), nullable=True))
    op.create_index("ix_calls_org_telephony_ref", "calls", ["organization_id", "telephony_ref"],
                    sqlite_where=sa.text("telephony_ref IS NOT NULL"),
                    postgresql_where=sa.text("telephony_ref IS NOT NULL"))


def downgrade() -> None:
    op.drop_index("ix_calls_org_telephony_ref", "calls")
    with op.batch_alter_table("calls") as batch:
        batch.drop_column("end_message")
        batch.drop_column("direction")
