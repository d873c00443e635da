"""campaign_completion: whether a running campaign completes by itself (campaigns.completion)

A campaign fed by the widget or by leads must be able to start empty and keep running when its queue drains.
``completion`` says which: ``when_empty`` (what every campaign did so far: it completes once every contact is
final) or ``manual`` (it runs until paused or cancelled).

Revision ID: 0280
Revises: 0270
Create Date: 2026-11-27 06:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0280"
down_revision = "0270"
branch_labels = None
depends_on = ("0130",)  # the campaigns table as the dialer left it


def upgrade() -> None:
    # a plain ADD COLUMN on both databases: every existing campaign keeps completing when its queue drains
    op.add_column("campaigns", sa.Column("completion", sa.String(20), nullable=False, server_default="when_empty"))


def downgrade() -> None:
    op.drop_column("campaigns", "completion")
