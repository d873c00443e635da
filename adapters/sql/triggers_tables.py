"""Tables of triggers and their runs (migration 0180, branch ``triggers``)."""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.metadata import BigId, Json, UtcDateTime, id_column, metadata, org_column

RUN_STATUSES = "('not_matched','skipped','running','succeeded','failed')"

triggers = sa.Table(
    "triggers",
    metadata,
    id_column(),
    org_column(),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("event", sa.String(100), nullable=False),
    sa.Column("conditions", Json, nullable=True),
    sa.Column("actions", Json, nullable=False),
    sa.Column("enabled", sa.Boolean, nullable=False),
    # why Parley disabled it (``run_rate``: the breaker, migration 0250); null when enabled or disabled by its owner
    sa.Column("disabled_reason", sa.String(40), nullable=True),
    sa.Column("sealed_secret", sa.Text, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    # the consumer's lookup: an organization's enabled rules on one event, never a scan of all of them
    sa.Index("ix_triggers_org_event_enabled", "organization_id", "event", "enabled"),
    sqlite_autoincrement=True,  # ids are never reused
)

trigger_runs = sa.Table(
    "trigger_runs",
    metadata,
    id_column(),
    org_column(),
    sa.Column("trigger_id", BigId, sa.ForeignKey("triggers.id", ondelete="CASCADE"), nullable=False),
    sa.Column("event", sa.String(100), nullable=False),
    sa.Column("event_id", BigId, nullable=False),
    sa.Column("depth", sa.SmallInteger, nullable=False),
    sa.Column("matched", sa.Boolean, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("condition_trace", Json, nullable=False),
    sa.Column("actions", Json, nullable=False),
    sa.Column("data", Json, nullable=False),
    sa.Column("reason", sa.String(300), nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("finished_at", UtcDateTime, nullable=True),
    # when the event happened (migration 0250; null for runs stored before)
    sa.Column("event_at", UtcDateTime, nullable=True),
    sa.CheckConstraint(f"status in {RUN_STATUSES}", name="status"),
    # exactly one run per (trigger, event), whatever the workers and their crashes
    sa.UniqueConstraint("trigger_id", "event_id"),
    # GET /triggers/{id}/runs: newest first, optionally by status
    sa.Index("ix_trigger_runs_trigger_status_id", "trigger_id", "status", "id"),
    # the run-rate breaker: a trigger's runs of the last minute (migration 0250)
    sa.Index("ix_trigger_runs_trigger_event_at", "trigger_id", "event_at"),
    sqlite_autoincrement=True,
)
