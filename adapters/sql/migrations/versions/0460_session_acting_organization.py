"""session_acting_organization: the client (a partner's sub-organization) a dashboard session works in

``dashboard_sessions.acting_organization_id`` (null: the user's own organization). No foreign key: the session
checks on every request that the organization is still a live child of the user's partner organization, and
otherwise works in the user's own. A plain ADD COLUMN on both databases.

Revision ID: 0460
Revises: 0450
Create Date: 2026-11-28 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0460"
down_revision = "0450"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("dashboard_sessions", sa.Column("acting_organization_id", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    op.drop_column("dashboard_sessions", "acting_organization_id")
