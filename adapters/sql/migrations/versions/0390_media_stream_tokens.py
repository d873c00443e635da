"""media_stream_tokens: the single-use tokens of the media-stream URLs (``wss://…/v2/media-streams/<token>``)

Only the token's SHA-256 is stored. A token is redeemed once (``redeemed_at``, set by one conditional UPDATE), and
not after ``expires_at``.

Revision ID: 0390
Revises: 0350
Create Date: 2026-11-27 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0390"
down_revision = "0350"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "media_stream_tokens",
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("call_id", sa.String(length=36), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("redeemed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_media_stream_tokens_organization_id_organizations")),
        sa.PrimaryKeyConstraint("token_hash", name=op.f("pk_media_stream_tokens")),
    )
    op.create_index("ix_media_stream_tokens_organization_id", "media_stream_tokens", ["organization_id"])
    op.create_index("ix_media_stream_tokens_expires_at", "media_stream_tokens", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_media_stream_tokens_expires_at", table_name="media_stream_tokens")
    op.drop_index("ix_media_stream_tokens_organization_id", table_name="media_stream_tokens")
    op.drop_table("media_stream_tokens")
