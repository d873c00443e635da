"""call_cause_depth: the depth of the trigger action that placed a call (calls.cause_depth)

The triggers' loop guard counts how deep in a chain of trigger actions an event was caused. A call placed by an
action is answered and ends later, in the telephony worker, outside the action's unit of work; its later events
(call.answered, call.ended, ...) took depth 0 and a trigger on call.ended that places a call looped for ever. The
call now keeps the depth of the unit that placed it, and every event of the call carries it.

Revision ID: 0240
Revises: 0180
Create Date: 2026-11-24 14:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0240"
down_revision = "0180"
branch_labels = None
depends_on = ("0005",)  # the calls table


def upgrade() -> None:
    # a plain ADD COLUMN on both databases: every existing call was placed at depth 0
    op.add_column("calls", sa.Column("cause_depth", sa.SmallInteger(), nullable=False, server_default="0"))


def downgrade() -> None:
    op.drop_column("calls", "cause_depth")
