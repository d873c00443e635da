"""Tables of calls end to end: calls, call logs, usage records, Do-Not-Call lists and entries, telephony
providers and phone numbers (migration 0005, branch ``calls``)."""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.metadata import BigId, Json, UtcDateTime, id_column, metadata, org_column

_CALL_STATUSES = "('queued','ringing','in_progress','completed','busy','no_answer','failed','voicemail'," \
                 "'cancelled','transferred')"

calls = sa.Table(
    "calls",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    org_column(),
    sa.Column("agent_id", BigId, sa.ForeignKey("agents.id"), nullable=False),
    sa.Column("provider_id", BigId, nullable=True),
    sa.Column("destination_phone", sa.String(20), nullable=False),
    sa.Column("from_phone", sa.String(20), nullable=False),
    sa.Column("contact_name", sa.String(200), nullable=True),
    sa.Column("custom_data", Json, nullable=False),
    sa.Column("prompt", sa.Text, nullable=False),
    sa.Column("first_message", sa.Text, nullable=True),
    sa.Column("max_duration_seconds", sa.Integer, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("end_reason", sa.String(50), nullable=True),
    sa.Column("outcome", sa.String(50), nullable=True),
    sa.Column("duration_seconds", sa.Integer, nullable=True),
    sa.Column("transferred_to", sa.String(20), nullable=True),
    sa.Column("call_log_id", BigId, nullable=True),
    sa.Column("telephony_ref", sa.String(100), nullable=True),
    sa.Column("telephony_state", Json, nullable=False),
    sa.Column("next_check_at", UtcDateTime, nullable=True),
    sa.Column("deadline_at", UtcDateTime, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.Column("started_at", UtcDateTime, nullable=True),
    sa.Column("answered_at", UtcDateTime, nullable=True),
    sa.Column("ended_at", UtcDateTime, nullable=True),
    sa.Column("priority", sa.Integer, nullable=False, server_default=sa.text("100")),  # migration 0013
    sa.Column("due_at", UtcDateTime, nullable=True),
    # campaign calls (migration 0130): their campaign and contact, and the attempt's key
    sa.Column("campaign_id", BigId, nullable=True),
    sa.Column("contact_id", BigId, nullable=True),
    sa.Column("idempotency_key", sa.String(200), nullable=True),
    # the depth of the trigger action that placed the call (migration 0240): every event of the call carries it
    sa.Column("cause_depth", sa.SmallInteger, nullable=False, server_default=sa.text("0")),
    # the agent's published version the call runs (migration 0290; null for calls placed before)
    sa.Column("agent_version", sa.Integer, nullable=True),
    # migration 0380: inbound carrier calls and web calls, and the carrier's words when it refused a call
    sa.Column("direction", sa.String(10), nullable=False, server_default=sa.text("'outbound'")),
    sa.Column("end_message", sa.String(500), nullable=True),
    sa.CheckConstraint(f"status in {_CALL_STATUSES}", name="status"),
    sa.Index("ix_calls_dial_queue", "organization_id", "priority", "due_at",
             sqlite_where=sa.text("status = 'queued'"), postgresql_where=sa.text("status = 'queued'")),
    sa.Index("ix_calls_campaign_status", "campaign_id", "status", sqlite_where=sa.text("campaign_id IS NOT NULL"),
             postgresql_where=sa.text("campaign_id IS NOT NULL")),
    sa.Index("uq_calls_org_idempotency_key", "organization_id", "idempotency_key", unique=True,
             sqlite_where=sa.text("idempotency_key IS NOT NULL"),
             postgresql_where=sa.text("idempotency_key IS NOT NULL")),
    sa.Index("ix_calls_org_created", "organization_id", "created_at"),
    sa.Index("ix_calls_org_status", "organization_id", "status"),
    sa.Index("ix_calls_next_check", "next_check_at", sqlite_where=sa.text("next_check_at IS NOT NULL"),
             postgresql_where=sa.text("next_check_at IS NOT NULL")),
    sa.Index("ix_calls_open_deadline", "deadline_at", sqlite_where=sa.text("ended_at IS NULL"),
             postgresql_where=sa.text("ended_at IS NULL")),
    sa.Index("ix_calls_org_telephony_ref", "organization_id", "telephony_ref",
             sqlite_where=sa.text("telephony_ref IS NOT NULL"), postgresql_where=sa.text("telephony_ref IS NOT NULL")),
)

call_logs = sa.Table(
    "call_logs",
    metadata,
    id_column(),
    org_column(),
    sa.Column("call_id", sa.String(36), nullable=False, unique=True),
    sa.Column("agent_id", BigId, nullable=False),
    sa.Column("direction", sa.String(10), nullable=False),
    sa.Column("from_phone", sa.String(20), nullable=False),
    sa.Column("to_phone", sa.String(20), nullable=False),
    sa.Column("contact_name", sa.String(200), nullable=True),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("end_reason", sa.String(50), nullable=True),
    sa.Column("outcome", sa.String(50), nullable=True),
    sa.Column("duration_seconds", sa.Integer, nullable=False),
    sa.Column("transcript", Json, nullable=False),
    sa.Column("summary", sa.Text, nullable=False),
    sa.Column("recording_key", sa.String(300), nullable=True),
    sa.Column("started_at", UtcDateTime, nullable=True),
    sa.Column("answered_at", UtcDateTime, nullable=True),
    sa.Column("ended_at", UtcDateTime, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("agent_version", sa.Integer, nullable=True),  # the published version the call ran (migration 0290)
    sa.Column("turns", Json, nullable=True),  # per-turn latency of a conversation (migration 0415); null: none
    sa.Column("analysis", Json, nullable=True),  # the after-call analysis (migration 0415)
    sa.Index("ix_call_logs_org_ended", "organization_id", "ended_at"),
    sa.Index("ix_call_logs_org_agent", "organization_id", "agent_id"),
    sqlite_autoincrement=True,  # ids are never reused (migration 0008)
)

dnc_lists = sa.Table(
    "dnc_lists",
    metadata,
    id_column(),
    org_column(),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("description", sa.Text, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    # a list the platform keeps itself ("sms_opt_out": the SMS opt-out list), at most one per organization; NULL
    # for the lists clients make (migration 0230)
    sa.Column("purpose", sa.String(20), nullable=True),
    sa.Index("uq_dnc_lists_organization_id_purpose", "organization_id", "purpose", unique=True),
    sqlite_autoincrement=True,  # ids are never reused (migration 0008)
)

dnc_entries = sa.Table(
    "dnc_entries",
    metadata,
    sa.Column("list_id", BigId, sa.ForeignKey("dnc_lists.id", ondelete="CASCADE"), nullable=False),
    sa.Column("phone_number", sa.String(20), nullable=False),
    sa.Column("organization_id", BigId, nullable=False),
    sa.Column("reason", sa.String(500), nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.PrimaryKeyConstraint("list_id", "phone_number"),
    sa.Index("ix_dnc_entries_org_phone", "organization_id", "phone_number"),
)

telephony_providers = sa.Table(
    "telephony_providers",
    metadata,
    id_column(),
    org_column(),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("type", sa.String(20), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("is_default", sa.Boolean, nullable=False),
    sa.Column("builtin_key", sa.String(20), nullable=True),
    sa.Column("credentials_sealed", sa.Text, nullable=True),
    sa.Column("credential_fields", Json, nullable=False),
    sa.Column("settings", Json, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.CheckConstraint("type in ('twilio','telnyx','vonage','sip','simulator')", name="type"),
    sa.CheckConstraint("status in ('active','disabled')", name="status"),
    sa.UniqueConstraint("organization_id", "builtin_key"),
    sqlite_autoincrement=True,  # ids are never reused (migration 0008)
)

telephony_numbers = sa.Table(
    "telephony_numbers",
    metadata,
    id_column(),
    org_column(),
    sa.Column("phone_number", sa.String(20), nullable=False),
    sa.Column("provider_id", BigId, sa.ForeignKey("telephony_providers.id"), nullable=False),
    sa.Column("label", sa.String(200), nullable=True),
    sa.Column("inbound_agent_id", BigId, nullable=True),
    sa.Column("voice", sa.Boolean, nullable=False),
    sa.Column("sms", sa.Boolean, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    # a number belongs to one organization at a time (numbers are hard-deleted when released; migration 0008)
    sa.UniqueConstraint("phone_number"),
    sqlite_autoincrement=True,  # ids are never reused (migration 0008)
)
