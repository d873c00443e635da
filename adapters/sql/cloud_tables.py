"""Tables of the cloud status (migration 0170, branch ``cloud``): one heartbeat row per worker process."""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.metadata import UtcDateTime, metadata

worker_heartbeats = sa.Table(
    "worker_heartbeats",
    metadata,
    sa.Column("process", sa.String(100), primary_key=True),
    sa.Column("last_heartbeat_at", UtcDateTime, nullable=False),
    sa.Index("ix_worker_heartbeats_last_heartbeat_at", "last_heartbeat_at"),
)
