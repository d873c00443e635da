"""Tables of SMS messages (migration 0150, branch ``sms``)."""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.metadata import BigId, Json, UtcDateTime, id_column, metadata, org_column

SMS_STATUSES = "('queued','sent','delivered','undelivered','failed','received')"

sms_messages = sa.Table(
    "sms_messages",
    metadata,
    id_column(),
    org_column(),
    sa.Column("direction", sa.String(10), nullable=False),
    sa.Column("from_phone", sa.String(20), nullable=False),
    sa.Column("to_phone", sa.String(20), nullable=False),
    # the organization's number it was sent from or received on; numbers may be released while messages stay
    sa.Column("from_phone_number_id", BigId, nullable=True),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("encoding", sa.String(10), nullable=False),
    sa.Column("segments", sa.Integer, nullable=False),
    sa.Column("error_code", sa.String(50), nullable=True),  # migration 0480 (was 20)
    sa.Column("status_events", Json, nullable=False),
    sa.Column("carrier_id", sa.String(64), nullable=True),
    sa.Column("carrier_state", Json, nullable=False),
    sa.Column("next_check_at", UtcDateTime, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.Column("sent_at", UtcDateTime, nullable=True),
    sa.Column("delivered_at", UtcDateTime, nullable=True),
    # the depth of the trigger action that sent it (migration 0250): its receipts' events, later, keep it
    sa.Column("cause_depth", sa.SmallInteger, nullable=False, server_default=sa.text("0")),
    sa.CheckConstraint(f"status in {SMS_STATUSES}", name="status"),
    sa.CheckConstraint("direction in ('outbound','inbound')", name="direction"),
    sa.UniqueConstraint("carrier_id"),
    # GET /sms: newest first, optionally by status, direction or recipient
    sa.Index("ix_sms_messages_org_created_at", "organization_id", "created_at"),
    sa.Index("ix_sms_messages_org_to_created_at", "organization_id", "to_phone", "created_at"),
    sa.Index("ix_sms_messages_org_status_created_at", "organization_id", "status", "created_at"),
    # the receipts job: messages whose carrier has news
    sa.Index("ix_sms_messages_next_check_at", "next_check_at"),
    sqlite_autoincrement=True,  # ids are never reused
)
