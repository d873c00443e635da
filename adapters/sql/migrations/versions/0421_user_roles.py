"""user_roles: dashboard users' roles and the one-time links (invitations, password resets) sent to them

``users.role`` (``owner``, ``admin``, ``member``, ``viewer``): users made before it were made by the operator for
their organization and become owners. ``user_links`` holds invitations (48 hours) and password resets (1 hour):
only the SHA-256 of a link's token, and when it was used (a link opens once).

Revision ID: 0421
Revises: 0420
Create Date: 2026-11-27 09:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0421"
down_revision = "0420"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Stamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column("users", sa.Column("role", sa.String(length=10), nullable=False, server_default="owner"))
    op.create_table(
        "user_links",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("role", sa.String(length=10), nullable=False),
        sa.Column("user_id", BigId, nullable=True),
        sa.Column("created_by", BigId, nullable=True),
        sa.Column("created_at", Stamp, nullable=False),
        sa.Column("expires_at", Stamp, nullable=False),
        sa.Column("used_at", Stamp, nullable=True),
        sa.CheckConstraint("kind IN ('invitation', 'password_reset')", name=op.f("ck_user_links_kind")),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_user_links_organization_id_organizations")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_user_links")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_user_links_token_hash")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_user_links_organization_id"), "user_links", ["organization_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_user_links_organization_id"), table_name="user_links")
    op.drop_table("user_links")
    op.drop_column("users", "role")  # a plain DROP COLUMN on both databases
