"""Tables of in-house scheduling: calendars, availability rules, blackouts, appointments.

The partial unique index ``uq_appointments_calendar_id_slot_start`` over active (pending, confirmed)
appointments is what makes a double booking of one slot impossible under any concurrency; the SQL
adapter turns its violation into ``SlotUnavailable``.
"""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.metadata import BigId, UtcDateTime, id_column, metadata, org_column

# the condition of the partial unique index; queries repeat it literally so that SQLite uses the index
HOLDING_CONDITION = "status IN ('pending', 'confirmed')"
# appointments with an outcome stay busy time for availability (never freed); a partial index finds them
OUTCOME_CONDITION = "status IN ('completed', 'no_show')"
OUTCOME_INDEX = "ix_appointments_calendar_id_outcome_slot_end"
ACTIVE_SLOT_INDEX = "uq_appointments_calendar_id_slot_start"

calendars = sa.Table(
    "calendars",
    metadata,
    id_column(),
    org_column(),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("timezone", sa.String(64), nullable=False),
    sa.Column("slot_duration_minutes", sa.Integer, nullable=False),
    sa.Column("buffer_minutes", sa.Integer, nullable=False),
    sa.Column("min_notice_minutes", sa.Integer, nullable=False),
    sa.Column("horizon_days", sa.Integer, nullable=False),
    sa.Column("agent_id", BigId, sa.ForeignKey("agents.id"), nullable=True),
    sa.Column("feed_token_hash", sa.String(64), nullable=True, unique=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.Column("deleted_at", UtcDateTime, nullable=True),
    # a never reused token, set by triggers whenever an appointment, rule or blackout of the calendar
    # changes (migration 0006): the key under which a process may cache the calendar's schedule
    sa.Column("revision", sa.BigInteger, nullable=False, server_default=sa.text("0")),
    # booking caps (migration 0290): pending and confirmed future appointments per attendee, bookings per local day
    sa.Column("max_upcoming_per_attendee", sa.Integer, nullable=True, server_default=sa.text("3")),
    sa.Column("max_bookings_per_day", sa.Integer, nullable=True),
    # attendee reminders (migration 0420): minutes before a confirmed appointment, and email or sms
    sa.Column("reminder_minutes", sa.Integer, nullable=True),
    sa.Column("reminder_channel", sa.String(10), nullable=False, server_default="email"),
    sa.CheckConstraint("slot_duration_minutes BETWEEN 5 AND 480", name="slot_duration"),
    sa.CheckConstraint("buffer_minutes BETWEEN 0 AND 240", name="buffer"),
    sa.CheckConstraint("min_notice_minutes BETWEEN 0 AND 43200", name="min_notice"),
    sa.CheckConstraint("horizon_days BETWEEN 1 AND 365", name="horizon"),
    sqlite_autoincrement=True,  # ids are never reused (migration 0008)
)

availability_rules = sa.Table(
    "availability_rules",
    metadata,
    id_column(),
    org_column(),
    sa.Column("calendar_id", BigId, sa.ForeignKey("calendars.id"), nullable=False, index=True),
    sa.Column("weekday", sa.SmallInteger, nullable=False),
    sa.Column("start_minute", sa.SmallInteger, nullable=False),
    sa.Column("end_minute", sa.SmallInteger, nullable=False),
    sa.CheckConstraint("weekday BETWEEN 0 AND 6", name="weekday"),
    # end_minute 1440 is "24:00", the end of the local day (migration 0290)
    sa.CheckConstraint("start_minute >= 0 AND end_minute <= 1440 AND start_minute < end_minute", name="window"),
    sqlite_autoincrement=True,  # ids are never reused (migration 0008)
)

blackouts = sa.Table(
    "blackouts",
    metadata,
    id_column(),
    org_column(),
    sa.Column("calendar_id", BigId, sa.ForeignKey("calendars.id"), nullable=False),
    sa.Column("start_at", UtcDateTime, nullable=False),
    sa.Column("end_at", UtcDateTime, nullable=False),
    sa.Column("reason", sa.String(500), nullable=True),
    sa.CheckConstraint("end_at > start_at", name="window"),
    sa.Index("ix_blackouts_calendar_id_start_at", "calendar_id", "start_at"),
    sqlite_autoincrement=True,  # ids are never reused (migration 0008)
)

appointments = sa.Table(
    "appointments",
    metadata,
    id_column(),
    org_column(),
    sa.Column("calendar_id", BigId, sa.ForeignKey("calendars.id"), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("slot_start", UtcDateTime, nullable=False),
    sa.Column("slot_end", UtcDateTime, nullable=False),
    sa.Column("attendee_name", sa.String(200), nullable=True),
    sa.Column("attendee_email", sa.String(320), nullable=True),
    sa.Column("attendee_phone", sa.String(32), nullable=True),
    sa.Column("notes", sa.Text, nullable=True),
    sa.Column("cancel_reason", sa.String(20), nullable=True),
    sa.Column("rescheduled_from", BigId, sa.ForeignKey("appointments.id"), nullable=True),
    sa.Column("sequence", sa.Integer, nullable=False),
    sa.Column("call_id", sa.String(64), nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.CheckConstraint("status in ('pending','confirmed','cancelled','completed','no_show')", name="status"),
    sa.CheckConstraint("cancel_reason is null or cancel_reason in ('declined','cancelled','rescheduled')",
                       name="cancel_reason"),
    sa.CheckConstraint("slot_end > slot_start", name="slot"),
    sa.Index(ACTIVE_SLOT_INDEX, "calendar_id", "slot_start", unique=True,
             sqlite_where=sa.text(HOLDING_CONDITION), postgresql_where=sa.text(HOLDING_CONDITION)),
    sa.Index("ix_appointments_calendar_id_slot_end", "calendar_id", "slot_end"),
    sa.Index(OUTCOME_INDEX, "calendar_id", "slot_end", sqlite_where=sa.text(OUTCOME_CONDITION),
             postgresql_where=sa.text(OUTCOME_CONDITION)),  # migration 0008
    sa.Index("ix_appointments_organization_id_slot_start", "organization_id", "slot_start"),
    sqlite_autoincrement=True,  # ids are never reused (migration 0008)
)


attendee_notifications = sa.Table(
    "attendee_notifications",
    metadata,
    id_column(),
    org_column(),
    # what an attendee is told (migration 0420): one row per appointment and kind, the durable "sent" mark
    sa.Column("appointment_id", BigId, sa.ForeignKey("appointments.id"), nullable=False),
    sa.Column("thread_id", BigId, nullable=False),  # the first appointment of a reschedule chain: the ICS UID
    sa.Column("kind", sa.String(20), nullable=False),
    sa.Column("channel", sa.String(10), nullable=False),
    sa.Column("recipient", sa.String(320), nullable=False),
    sa.Column("sequence", sa.Integer, nullable=False),
    sa.Column("due_at", UtcDateTime, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column("error", sa.String(300), nullable=True),
    sa.Column("sent_at", UtcDateTime, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.UniqueConstraint("appointment_id", "kind"),
    sa.CheckConstraint("kind IN ('confirmation', 'reschedule', 'cancellation', 'reminder')", name="kind"),
    sa.CheckConstraint("channel IN ('email', 'sms')", name="channel"),
    sa.CheckConstraint("status IN ('pending', 'sent', 'failed', 'skipped')", name="status"),
    sa.Index("ix_attendee_notifications_thread_id", "thread_id"),
    sqlite_autoincrement=True,
)
