"""trigger_safety: the cause depth of an SMS (sms_messages.cause_depth), the run-rate breaker
(triggers.disabled_reason, trigger_runs.event_at and an index of runs by trigger and event time)

A message sent by a trigger's action gets its receipts later, in the receipts job: their events took depth 0, so a
trigger on sms.sent that sends an SMS looped for ever. The message now keeps the depth of the unit that sent it (as
calls.cause_depth does, migration 0240). A trigger that runs more than 100 times in a minute is disabled with a
reason; a run keeps when its event happened (also the timestamp of a webhook action's envelope), and the runs of a
trigger's last minute are counted through a new index.

Revision ID: 0250
Revises: 0240
Create Date: 2026-11-27 06:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0250"
down_revision = "0240"
branch_labels = None
depends_on = ("0150",)  # sms_messages


def upgrade() -> None:
    # plain ADD COLUMNs on both databases: every existing message was sent at depth 0, and every existing trigger
    # is enabled or was disabled by its owner
    op.add_column("sms_messages", sa.Column("cause_depth", sa.SmallInteger(), nullable=False, server_default="0"))
    op.add_column("triggers", sa.Column("disabled_reason", sa.String(40), nullable=True))
    # runs stored before: null (they are not counted by the breaker; their envelope's timestamp is the run's own)
    op.add_column("trigger_runs", sa.Column("event_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index("ix_trigger_runs_trigger_event_at", "trigger_runs", ["trigger_id", "event_at"])


def downgrade() -> None:
    op.drop_index("ix_trigger_runs_trigger_event_at", table_name="trigger_runs")
    op.drop_column("trigger_runs", "event_at")
    op.drop_column("triggers", "disabled_reason")  # SQLite drops a plain column in place (no rebuild)
    op.drop_column("sms_messages", "cause_depth")
