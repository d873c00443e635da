"""Tables of webhooks: subscriptions, deliveries (the queue) and delivery attempts (the log)."""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.metadata import BigId, Json, UtcDateTime, id_column, metadata, org_column

webhook_subscriptions = sa.Table(
    "webhook_subscriptions",
    metadata,
    id_column(),
    org_column(),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("url", sa.String(2048), nullable=False),
    sa.Column("events", Json, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("secret", sa.Text, nullable=False),
    sa.Column("previous_secret", sa.Text, nullable=True),
    sa.Column("previous_secret_expires_at", UtcDateTime, nullable=True),
    sa.Column("failing_since", UtcDateTime, nullable=True),
    sa.Column("disabled_reason", sa.Text, nullable=True),
    sa.Column("disabled_at", UtcDateTime, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.Column("deleted_at", UtcDateTime, nullable=True),
    sa.CheckConstraint("status in ('active','paused','disabled')", name="status"),
    sa.Index("ix_webhook_subscriptions_org_active", "organization_id", "status",
             sqlite_where=sa.text("deleted_at IS NULL"), postgresql_where=sa.text("deleted_at IS NULL")),
    sqlite_autoincrement=True,  # ids are never reused (migration 0008)
)

webhook_deliveries = sa.Table(
    "webhook_deliveries",
    metadata,
    id_column(),
    org_column(),
    sa.Column("subscription_id", BigId, sa.ForeignKey("webhook_subscriptions.id"), nullable=False, index=True),
    sa.Column("event_id", BigId, nullable=True),
    sa.Column("event_type", sa.String(100), nullable=False),
    sa.Column("data", Json, nullable=False),
    sa.Column("occurred_at", UtcDateTime, nullable=False),
    sa.Column("webhook_id", sa.String(64), nullable=False, unique=True),
    sa.Column("resource", sa.String(160), nullable=True),  # deliveries of one resource go out in event order
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("auto_retry", sa.Boolean, nullable=False),
    sa.Column("next_attempt_at", UtcDateTime, nullable=True),
    sa.Column("locked_until", UtcDateTime, nullable=True),
    sa.Column("locked_by", sa.String(64), nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.CheckConstraint("status in ('pending','succeeded','failed','cancelled')", name="status"),
    sa.UniqueConstraint("event_id", "subscription_id"),
    sa.Index("ix_webhook_deliveries_due", "next_attempt_at", "id",
             sqlite_where=sa.text("status = 'pending'"), postgresql_where=sa.text("status = 'pending'")),
    sa.Index("ix_webhook_deliveries_resource_pending", "subscription_id", "resource", "event_id",
             sqlite_where=sa.text("status = 'pending'"), postgresql_where=sa.text("status = 'pending'")),
    sqlite_autoincrement=True,  # ids are never reused (migration 0008)
)

webhook_attempts = sa.Table(
    "webhook_attempts",
    metadata,
    id_column(),
    org_column(),
    sa.Column("subscription_id", BigId, sa.ForeignKey("webhook_subscriptions.id"), nullable=False),
    sa.Column("delivery_id", BigId, sa.ForeignKey("webhook_deliveries.id"), nullable=False, index=True),
    sa.Column("event_type", sa.String(100), nullable=False),
    sa.Column("webhook_id", sa.String(64), nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("response_status", sa.Integer, nullable=True),
    sa.Column("response_body", sa.Text, nullable=True),
    sa.Column("duration_ms", sa.Integer, nullable=False),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("next_retry_at", UtcDateTime, nullable=True),
    sa.Index("ix_webhook_attempts_subscription", "subscription_id", "id"),
    sqlite_autoincrement=True,  # ids are never reused (migration 0008)
)
