"""webhooks: subscriptions, deliveries and the delivery log

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = ("webhooks",)
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Json = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
Stamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "webhook_subscriptions",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("events", Json, nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("secret", sa.Text(), nullable=False),
        sa.Column("previous_secret", sa.Text(), nullable=True),
        sa.Column("previous_secret_expires_at", Stamp, nullable=True),
        sa.Column("failing_since", Stamp, nullable=True),
        sa.Column("disabled_reason", sa.Text(), nullable=True),
        sa.Column("disabled_at", Stamp, nullable=True),
        sa.Column("created_at", Stamp, nullable=False),
        sa.Column("updated_at", Stamp, nullable=False),
        sa.Column("deleted_at", Stamp, nullable=True),
        sa.CheckConstraint("status in ('active','paused','disabled')", name=op.f("ck_webhook_subscriptions_status")),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_webhook_subscriptions_organization_id_organizations")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_subscriptions")),
    )
    with op.batch_alter_table("webhook_subscriptions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_webhook_subscriptions_organization_id"), ["organization_id"],
                              unique=False)
        batch_op.create_index("ix_webhook_subscriptions_org_active", ["organization_id", "status"], unique=False,
                              sqlite_where=sa.text("deleted_at IS NULL"),
                              postgresql_where=sa.text("deleted_at IS NULL"))

    op.create_table(
        "webhook_deliveries",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("subscription_id", BigId, nullable=False),
        sa.Column("event_id", BigId, nullable=True),
        sa.Column("event_type", sa.String(length=100), nullable=False),
        sa.Column("data", Json, nullable=False),
        sa.Column("occurred_at", Stamp, nullable=False),
        sa.Column("webhook_id", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("auto_retry", sa.Boolean(), nullable=False),
        sa.Column("next_attempt_at", Stamp, nullable=True),
        sa.Column("locked_until", Stamp, nullable=True),
        sa.Column("locked_by", sa.String(length=64), nullable=True),
        sa.Column("created_at", Stamp, nullable=False),
        sa.Column("updated_at", Stamp, nullable=False),
        sa.CheckConstraint("status in ('pending','succeeded','failed','cancelled')",
                           name=op.f("ck_webhook_deliveries_status")),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_webhook_deliveries_organization_id_organizations")),
        sa.ForeignKeyConstraint(["subscription_id"], ["webhook_subscriptions.id"],
                                name=op.f("fk_webhook_deliveries_subscription_id_webhook_subscriptions")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
        sa.UniqueConstraint("event_id", "subscription_id",
                            name=op.f("uq_webhook_deliveries_event_id_subscription_id")),
        sa.UniqueConstraint("webhook_id", name=op.f("uq_webhook_deliveries_webhook_id")),
    )
    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_webhook_deliveries_organization_id"), ["organization_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_webhook_deliveries_subscription_id"), ["subscription_id"], unique=False)
        batch_op.create_index("ix_webhook_deliveries_due", ["next_attempt_at", "id"], unique=False,
                              sqlite_where=sa.text("status = 'pending'"),
                              postgresql_where=sa.text("status = 'pending'"))

    op.create_table(
        "webhook_attempts",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("subscription_id", BigId, nullable=False),
        sa.Column("delivery_id", BigId, nullable=False),
        sa.Column("event_type", sa.String(length=100), nullable=False),
        sa.Column("webhook_id", sa.String(length=64), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("response_body", sa.Text(), nullable=True),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", Stamp, nullable=False),
        sa.Column("next_retry_at", Stamp, nullable=True),
        sa.ForeignKeyConstraint(["delivery_id"], ["webhook_deliveries.id"],
                                name=op.f("fk_webhook_attempts_delivery_id_webhook_deliveries")),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_webhook_attempts_organization_id_organizations")),
        sa.ForeignKeyConstraint(["subscription_id"], ["webhook_subscriptions.id"],
                                name=op.f("fk_webhook_attempts_subscription_id_webhook_subscriptions")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_attempts")),
    )
    with op.batch_alter_table("webhook_attempts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_webhook_attempts_organization_id"), ["organization_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_webhook_attempts_delivery_id"), ["delivery_id"], unique=False)
        batch_op.create_index("ix_webhook_attempts_subscription", ["subscription_id", "id"], unique=False)


def downgrade() -> None:
    op.drop_table("webhook_attempts")
    op.drop_table("webhook_deliveries")
    op.drop_table("webhook_subscriptions")
