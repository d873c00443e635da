"""Tables of the media streams (migration 0390): single-use stream tokens, kept as hashes."""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.metadata import UtcDateTime, metadata, org_column

media_stream_tokens = sa.Table(
    "media_stream_tokens",
    metadata,
    sa.Column("token_hash", sa.String(64), primary_key=True),
    org_column(),
    sa.Column("call_id", sa.String(36), nullable=False),
    sa.Column("expires_at", UtcDateTime, nullable=False),
    sa.Column("redeemed_at", UtcDateTime, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Index("ix_media_stream_tokens_expires_at", "expires_at"),
)
