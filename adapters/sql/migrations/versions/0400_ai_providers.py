"""ai_providers: an organization's AI providers, and an agent's engine settings

``ai_providers`` holds the model servers an organization's agents use (``openai_compatible``: a base URL and a key
sealed by the SecretBox) and each organization's built-in ``offline`` provider (``builtin_key``, one per
organization, created on first use). Agents gain ``transcriber``, ``tools`` (custom http tools),
``analysis_schema`` and ``end_of_turn_silence_ms``; ``llm.provider_id``, ``voice.provider_id`` and ``voice.speed``
live in the existing JSON columns (absent: the built-in offline provider, speed 1). Existing agents take the
defaults: the offline engines, no custom tools, no analysis schema, 500 ms.

Revision ID: 0400
Revises: 0390
Create Date: 2026-11-27 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0400"
down_revision = "0390"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "ai_providers",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("type", sa.String(length=30), nullable=False),
        sa.Column("base_url", sa.String(length=2048), nullable=True),
        sa.Column("api_key_sealed", sa.Text(), nullable=True),
        sa.Column("builtin_key", sa.String(length=20), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("type in ('openai_compatible','offline')", name=op.f("ck_ai_providers_type")),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_ai_providers_organization_id_organizations")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ai_providers")),
        sa.UniqueConstraint("organization_id", "builtin_key", name=op.f("uq_ai_providers_organization_id_builtin_key")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_ai_providers_organization_id"), "ai_providers", ["organization_id"])
    # plain ADD COLUMNs with defaults on both databases: every existing agent takes the defaults
    op.add_column("agents", sa.Column("transcriber", Json, nullable=False, server_default=sa.text("'{}'")))
    op.add_column("agents", sa.Column("tools", Json, nullable=False, server_default=sa.text("'[]'")))
    op.add_column("agents", sa.Column("analysis_schema", Json, nullable=True))
    op.add_column("agents", sa.Column("end_of_turn_silence_ms", sa.Integer(), nullable=False, server_default="500"))


def downgrade() -> None:
    for column in ("end_of_turn_silence_ms", "analysis_schema", "tools", "transcriber"):
        op.drop_column("agents", column)  # SQLite drops a plain column in place (no rebuild)
    op.drop_index(op.f("ix_ai_providers_organization_id"), table_name="ai_providers")
    op.drop_table("ai_providers")
