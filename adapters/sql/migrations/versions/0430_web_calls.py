"""web_calls: calls a browser holds with an agent (``POST /v2/calls/web``)

* ``calls.direction``: ``outbound`` (every call until now) or ``web``. Another branch adds the same column (for
  inbound carrier calls); the column is added here only when it is not there yet, so either order of the two
  migrations leaves one column.

Revision ID: 0430
Revises: 0415
Create Date: 2026-11-27 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0430"
down_revision = "0415"
branch_labels = None
depends_on = ("0005",)  # the calls table


def _has_direction() -> bool:
    return any(column["name"] == "direction" for column in sa.inspect(op.get_bind()).get_columns("calls"))


def upgrade() -> None:
    if not _has_direction():
        with op.batch_alter_table("calls") as batch:
            batch.add_column(sa.Column("direction", sa.String(10), nullable=False,
                                       server_default=sa.text("'outbound'")))


def downgrade() -> None:
    # the column stays: the carriers' migration may own it, and every row reads as it did before with it
    pass
