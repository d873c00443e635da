"""sms: outbound and inbound SMS messages with their carrier receipts

Revision ID: 0150
Revises: 0001
Create Date: 2026-11-24 01:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0150"
down_revision = "0001"
branch_labels = ("sms",)
depends_on = ("0005",)  # calls: the phone numbers messages go from, the DNC lists that screen them

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Json = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
Stamp = sa.DateTime(timezone=True)

SMS_STATUSES = "('queued','sent','delivered','undelivered','failed','received')"
INDEXES = (
    ("ix_sms_messages_org_created_at", ["organization_id", "created_at"]),
    ("ix_sms_messages_org_to_created_at", ["organization_id", "to_phone", "created_at"]),
    ("ix_sms_messages_org_status_created_at", ["organization_id", "status", "created_at"]),
    ("ix_sms_messages_next_check_at", ["next_check_at"]),
)


def upgrade() -> None:
    op.create_table(
        "sms_messages",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("direction", sa.String(length=10), nullable=False),
        sa.Column("from_phone", sa.String(length=20), nullable=False),
        sa.Column("to_phone", sa.String(length=20), nullable=False),
        sa.Column("from_phone_number_id", BigId, nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("encoding", sa.String(length=10), nullable=False),
        sa.Column("segments", sa.Integer(), nullable=False),
        sa.Column("error_code", sa.String(length=20), nullable=True),
        sa.Column("status_events", Json, nullable=False),
        sa.Column("carrier_id", sa.String(length=64), nullable=True),
        sa.Column("carrier_state", Json, nullable=False),
        sa.Column("next_check_at", Stamp, nullable=True),
        sa.Column("created_at", Stamp, nullable=False),
        sa.Column("updated_at", Stamp, nullable=False),
        sa.Column("sent_at", Stamp, nullable=True),
        sa.Column("delivered_at", Stamp, nullable=True),
        sa.CheckConstraint(f"status in {SMS_STATUSES}", name=op.f("ck_sms_messages_status")),
        sa.CheckConstraint("direction in ('outbound','inbound')", name=op.f("ck_sms_messages_direction")),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_sms_messages_organization_id_organizations")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sms_messages")),
        sa.UniqueConstraint("carrier_id", name=op.f("uq_sms_messages_carrier_id")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_sms_messages_organization_id"), "sms_messages", ["organization_id"])
    for name, columns in INDEXES:
        op.create_index(name, "sms_messages", columns)


def downgrade() -> None:
    for name, _ in reversed(INDEXES):
        op.drop_index(name, table_name="sms_messages")
    op.drop_index(op.f("ix_sms_messages_organization_id"), table_name="sms_messages")
    op.drop_table("sms_messages")
