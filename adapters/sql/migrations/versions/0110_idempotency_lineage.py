"""idempotency records per API-key lineage, with sealed responses

Records were scoped to (organization, key), so every key of an organization could replay another key's
stored response, and responses carrying a secret were kept in plain text. The table is rebuilt keyed by
(organization, lineage, key) with a ``response_sealed`` flag. Existing records are dropped, not carried
over: they may hold secrets in plain text, and nothing says which key stored them (a retry of a request
made before the upgrade runs again).

Revision ID: 0110
Revises: 0001
Create Date: 2026-11-23 22:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0110"
down_revision = "0001"
branch_labels = ("idempotency_lineage",)
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Json = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def _create(*, lineage: bool) -> None:
    scope = ["organization_id", "lineage_id", "key"] if lineage else ["organization_id", "key"]
    extra = [sa.Column("lineage_id", BigId, nullable=False)] if lineage else []
    sealed = [sa.Column("response_sealed", sa.Boolean(), nullable=False, server_default=sa.false())] if lineage else []
    op.create_table(
        "idempotency_keys",
        sa.Column("organization_id", BigId, nullable=False),
        *extra,
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("fingerprint", sa.String(length=600), nullable=False),
        sa.Column("token", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("locked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("response_headers", Json, nullable=True),
        sa.Column("response_body", sa.LargeBinary(), nullable=True),
        *sealed,
        sa.PrimaryKeyConstraint(*scope, name=op.f("pk_idempotency_keys")),
    )
    op.create_index("ix_idempotency_keys_created_at", "idempotency_keys", ["created_at"], unique=False)


def _drop() -> None:
    op.drop_index("ix_idempotency_keys_created_at", table_name="idempotency_keys")
    op.drop_table("idempotency_keys")


def upgrade() -> None:
    _drop()
    _create(lineage=True)


def downgrade() -> None:
    _drop()
    _create(lineage=False)
