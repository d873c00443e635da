"""attendee_notifications: confirmation, reschedule, cancellation and reminder messages to appointment attendees

``calendars.reminder_minutes`` (null: no reminder) and ``calendars.reminder_channel`` (``email`` or ``sms``) are
plain ADD COLUMNs on both databases (a rebuild of ``calendars`` on SQLite would drop its revision triggers).
``attendee_notifications`` holds one row per appointment and kind: what to send, to whom, and its durable
``sent`` mark. The outbox consumer ``attendees`` starts at the newest event, so an upgrade never writes to the
attendees of appointments booked before it.

Revision ID: 0420
Revises: 0415
Create Date: 2026-11-27 09:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0420"
down_revision = "0415"
branch_labels = None
depends_on = ("0003", "0012")  # the scheduling tables, the outbox cursors

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Stamp = sa.DateTime(timezone=True)
CONSUMER = "attendees"


def upgrade() -> None:
    op.add_column("calendars", sa.Column("reminder_minutes", sa.Integer(), nullable=True))
    op.add_column("calendars", sa.Column("reminder_channel", sa.String(length=10), nullable=False,
                                         server_default="email"))
    op.create_table(
        "attendee_notifications",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("appointment_id", BigId, nullable=False),
        sa.Column("thread_id", BigId, nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("channel", sa.String(length=10), nullable=False),
        sa.Column("recipient", sa.String(length=320), nullable=False),
        sa.Column("sequence", sa.Integer(), nullable=False),
        sa.Column("due_at", Stamp, nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("error", sa.String(length=300), nullable=True),
        sa.Column("sent_at", Stamp, nullable=True),
        sa.Column("created_at", Stamp, nullable=False),
        sa.CheckConstraint("kind IN ('confirmation', 'reschedule', 'cancellation', 'reminder')",
                           name=op.f("ck_attendee_notifications_kind")),
        sa.CheckConstraint("channel IN ('email', 'sms')", name=op.f("ck_attendee_notifications_channel")),
        sa.CheckConstraint("status IN ('pending', 'sent', 'failed', 'skipped')",
                           name=op.f("ck_attendee_notifications_status")),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_attendee_notifications_organization_id_organizations")),
        sa.ForeignKeyConstraint(["appointment_id"], ["appointments.id"],
                                name=op.f("fk_attendee_notifications_appointment_id_appointments")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_attendee_notifications")),
        sa.UniqueConstraint("appointment_id", "kind", name=op.f("uq_attendee_notifications_appointment_id_kind")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_attendee_notifications_organization_id"), "attendee_notifications",
                    ["organization_id"])
    op.create_index("ix_attendee_notifications_thread_id", "attendee_notifications", ["thread_id"])
    # the new consumer starts after the newest event: nothing booked before the upgrade is announced
    op.execute(sa.text(
        "INSERT INTO outbox_cursors (consumer, last_id, updated_at) "
        "SELECT :consumer, COALESCE(MAX(id), 0), NULL FROM outbox_events "
        "WHERE NOT EXISTS (SELECT 1 FROM outbox_cursors WHERE consumer = :consumer)"
    ).bindparams(consumer=CONSUMER))


def downgrade() -> None:
    op.execute(sa.text("DELETE FROM outbox_cursors WHERE consumer = :consumer").bindparams(consumer=CONSUMER))
    op.drop_index("ix_attendee_notifications_thread_id", table_name="attendee_notifications")
    op.drop_index(op.f("ix_attendee_notifications_organization_id"), table_name="attendee_notifications")
    op.drop_table("attendee_notifications")
    op.drop_column("calendars", "reminder_channel")  # a plain DROP COLUMN on both databases
    op.drop_column("calendars", "reminder_minutes")
