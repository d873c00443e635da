"""mfa_and_sudo: TOTP two-factor sign-in per user, required by an organization setting, and when a session last
proved its user (the password or a code), for the actions that ask again

``users.totp_secret`` (sealed with the service's secret key, null: no two-factor sign-in) and
``users.mfa_enabled_at``; ``organizations.mfa_required``; ``dashboard_sessions.verified_at`` (null: at sign-in).
Plain ADD COLUMNs on both databases.

Revision ID: 0422
Revises: 0421
Create Date: 2026-11-27 09:55:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0422"
down_revision = "0421"
branch_labels = None
depends_on = ("0210",)  # the sessions table it alters

Stamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column("users", sa.Column("totp_secret", sa.String(length=500), nullable=True))
    op.add_column("users", sa.Column("mfa_enabled_at", Stamp, nullable=True))
    op.add_column("organizations", sa.Column("mfa_required", sa.Boolean(), nullable=False,
                                             server_default=sa.false()))
    op.add_column("dashboard_sessions", sa.Column("verified_at", Stamp, nullable=True))


def downgrade() -> None:
    op.drop_column("dashboard_sessions", "verified_at")  # plain DROP COLUMNs on both databases
    op.drop_column("organizations", "mfa_required")
    op.drop_column("users", "mfa_enabled_at")
    op.drop_column("users", "totp_secret")
