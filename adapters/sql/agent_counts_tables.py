"""The number of live (not deleted) agents per organization, kept by the agent repository in the same
transaction as every create and delete, so an unfiltered agent list reads its total instead of counting
(migration 0100, branch ``agent_counts``)."""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.metadata import BigId, metadata

agent_counts = sa.Table(
    "agent_counts",
    metadata,
    sa.Column("organization_id", BigId, sa.ForeignKey("organizations.id"), primary_key=True),
    sa.Column("live", sa.Integer, nullable=False),
)
