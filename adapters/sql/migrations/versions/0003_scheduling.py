"""scheduling: calendars, availability rules, blackouts, appointments

Revision ID: 0003
Revises: 0001
Create Date: 2026-11-22 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0001"
branch_labels = ("scheduling",)
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Stamp = sa.DateTime(timezone=True)
HOLDING = "status IN ('pending', 'confirmed')"


def upgrade() -> None:
    op.create_table(
        "calendars",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("slot_duration_minutes", sa.Integer(), nullable=False),
        sa.Column("buffer_minutes", sa.Integer(), nullable=False),
        sa.Column("min_notice_minutes", sa.Integer(), nullable=False),
        sa.Column("horizon_days", sa.Integer(), nullable=False),
        sa.Column("agent_id", BigId, nullable=True),
        sa.Column("feed_token_hash", sa.String(length=64), nullable=True),
        sa.Column("created_at", Stamp, nullable=False),
        sa.Column("updated_at", Stamp, nullable=False),
        sa.Column("deleted_at", Stamp, nullable=True),
        sa.CheckConstraint("slot_duration_minutes BETWEEN 5 AND 480", name=op.f("ck_calendars_slot_duration")),
        sa.CheckConstraint("buffer_minutes BETWEEN 0 AND 240", name=op.f("ck_calendars_buffer")),
        sa.CheckConstraint("min_notice_minutes BETWEEN 0 AND 43200", name=op.f("ck_calendars_min_notice")),
        sa.CheckConstraint("horizon_days BETWEEN 1 AND 365", name=op.f("ck_calendars_horizon")),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_calendars_organization_id_organizations")),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], name=op.f("fk_calendars_agent_id_agents")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_calendars")),
        sa.UniqueConstraint("feed_token_hash", name=op.f("uq_calendars_feed_token_hash")),
    )
    op.create_index(op.f("ix_calendars_organization_id"), "calendars", ["organization_id"], unique=False)

    op.create_table(
        "availability_rules",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("calendar_id", BigId, nullable=False),
        sa.Column("weekday", sa.SmallInteger(), nullable=False),
        sa.Column("start_minute", sa.SmallInteger(), nullable=False),
        sa.Column("end_minute", sa.SmallInteger(), nullable=False),
        sa.CheckConstraint("weekday BETWEEN 0 AND 6", name=op.f("ck_availability_rules_weekday")),
        sa.CheckConstraint("start_minute >= 0 AND end_minute <= 1439 AND start_minute < end_minute",
                           name=op.f("ck_availability_rules_window")),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_availability_rules_organization_id_organizations")),
        sa.ForeignKeyConstraint(["calendar_id"], ["calendars.id"],
                                name=op.f("fk_availability_rules_calendar_id_calendars")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_availability_rules")),
    )
    op.create_index(op.f("ix_availability_rules_organization_id"), "availability_rules", ["organization_id"],
                    unique=False)
    op.create_index(op.f("ix_availability_rules_calendar_id"), "availability_rules", ["calendar_id"], unique=False)

    op.create_table(
        "blackouts",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("calendar_id", BigId, nullable=False),
        sa.Column("start_at", Stamp, nullable=False),
        sa.Column("end_at", Stamp, nullable=False),
        sa.Column("reason", sa.String(length=500), nullable=True),
        sa.CheckConstraint("end_at > start_at", name=op.f("ck_blackouts_window")),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_blackouts_organization_id_organizations")),
        sa.ForeignKeyConstraint(["calendar_id"], ["calendars.id"], name=op.f("fk_blackouts_calendar_id_calendars")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_blackouts")),
    )
    op.create_index(op.f("ix_blackouts_organization_id"), "blackouts", ["organization_id"], unique=False)
    op.create_index("ix_blackouts_calendar_id_start_at", "blackouts", ["calendar_id", "start_at"], unique=False)

    op.create_table(
        "appointments",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("calendar_id", BigId, nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("slot_start", Stamp, nullable=False),
        sa.Column("slot_end", Stamp, nullable=False),
        sa.Column("attendee_name", sa.String(length=200), nullable=True),
        sa.Column("attendee_email", sa.String(length=320), nullable=True),
        sa.Column("attendee_phone", sa.String(length=32), nullable=True),
        sa.Column("notes", sa.Text(), nullable=True),
        sa.Column("cancel_reason", sa.String(length=20), nullable=True),
        sa.Column("rescheduled_from", BigId, nullable=True),
        sa.Column("sequence", sa.Integer(), nullable=False),
        sa.Column("call_id", sa.String(length=64), nullable=True),
        sa.Column("created_at", Stamp, nullable=False),
        sa.Column("updated_at", Stamp, nullable=False),
        sa.CheckConstraint("status in ('pending','confirmed','cancelled','completed','no_show')",
                           name=op.f("ck_appointments_status")),
        sa.CheckConstraint("cancel_reason is null or cancel_reason in ('declined','cancelled','rescheduled')",
                           name=op.f("ck_appointments_cancel_reason")),
        sa.CheckConstraint("slot_end > slot_start", name=op.f("ck_appointments_slot")),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_appointments_organization_id_organizations")),
        sa.ForeignKeyConstraint(["calendar_id"], ["calendars.id"], name=op.f("fk_appointments_calendar_id_calendars")),
        sa.ForeignKeyConstraint(["rescheduled_from"], ["appointments.id"],
                                name=op.f("fk_appointments_rescheduled_from_appointments")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_appointments")),
    )
    op.create_index(op.f("ix_appointments_organization_id"), "appointments", ["organization_id"], unique=False)
    # no double booking: one active (pending or confirmed) appointment per calendar and start instant
    op.create_index("uq_appointments_calendar_id_slot_start", "appointments", ["calendar_id", "slot_start"],
                    unique=True, sqlite_where=sa.text(HOLDING), postgresql_where=sa.text(HOLDING))
    op.create_index("ix_appointments_calendar_id_slot_end", "appointments", ["calendar_id", "slot_end"], unique=False)
    op.create_index("ix_appointments_organization_id_slot_start", "appointments", ["organization_id", "slot_start"],
                    unique=False)


def downgrade() -> None:
    op.drop_table("appointments")
    op.drop_table("blackouts")
    op.drop_table("availability_rules")
    op.drop_table("calendars")
