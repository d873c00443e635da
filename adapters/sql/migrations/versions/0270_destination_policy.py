"""destination_policy: the organization's dialing policy, a campaign's narrower countries and its widget cap

Every path that dials or texts checks one destination policy: ``organizations.dialing_policy`` (JSON, NULL for the
default: the United States and Canada, premium-rate numbers blocked), narrowed per campaign by
``campaigns.allowed_countries`` (JSON list, NULL for the organization's). ``campaigns.widget_max_contacts_per_hour``
caps what the embeddable widget may add to a campaign.

Revision ID: 0270
Revises: 0250
Create Date: 2026-11-27 06:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

revision = "0270"
down_revision = "0250"
branch_labels = None
depends_on = ("0015",)  # the campaigns table


def upgrade() -> None:
    # plain ADD COLUMNs on both databases: what exists keeps the defaults
    op.add_column("organizations", sa.Column("dialing_policy", JSON, nullable=True))
    op.add_column("campaigns", sa.Column("allowed_countries", JSON, nullable=True))
    op.add_column("campaigns", sa.Column("widget_max_contacts_per_hour", sa.Integer(), nullable=False,
                                         server_default="60"))


def downgrade() -> None:
    op.drop_column("campaigns", "widget_max_contacts_per_hour")
    op.drop_column("campaigns", "allowed_countries")
    op.drop_column("organizations", "dialing_policy")
