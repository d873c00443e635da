"""calls end to end: calls, call logs, usage records, Do-Not-Call lists, telephony providers and numbers

Revision ID: 0005
Revises: 0001
Create Date: 2026-11-22 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005"
down_revision = "0001"
branch_labels = ("calls",)
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Json = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
Stamp = sa.DateTime(timezone=True)

CALL_STATUSES = ("('queued','ringing','in_progress','completed','busy','no_answer','failed','voicemail',"
                 "'cancelled','transferred')")


def _org_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                   name=op.f(f"fk_{table}_organization_id_organizations"))


def upgrade() -> None:
    op.create_table(
        "calls",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("agent_id", BigId, nullable=False),
        sa.Column("provider_id", BigId, nullable=True),
        sa.Column("destination_phone", sa.String(length=20), nullable=False),
        sa.Column("from_phone", sa.String(length=20), nullable=False),
        sa.Column("contact_name", sa.String(length=200), nullable=True),
        sa.Column("custom_data", Json, nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("first_message", sa.Text(), nullable=True),
        sa.Column("max_duration_seconds", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("end_reason", sa.String(length=50), nullable=True),
        sa.Column("outcome", sa.String(length=50), nullable=True),
        sa.Column("duration_seconds", sa.Integer(), nullable=True),
        sa.Column("transferred_to", sa.String(length=20), nullable=True),
        sa.Column("call_log_id", BigId, nullable=True),
        sa.Column("telephony_ref", sa.String(length=100), nullable=True),
        sa.Column("telephony_state", Json, nullable=False),
        sa.Column("next_check_at", Stamp, nullable=True),
        sa.Column("deadline_at", Stamp, nullable=True),
        sa.Column("created_at", Stamp, nullable=False),
        sa.Column("updated_at", Stamp, nullable=False),
        sa.Column("started_at", Stamp, nullable=True),
        sa.Column("answered_at", Stamp, nullable=True),
        sa.Column("ended_at", Stamp, nullable=True),
        sa.CheckConstraint(f"status in {CALL_STATUSES}", name=op.f("ck_calls_status")),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], name=op.f("fk_calls_agent_id_agents")),
        _org_fk("calls"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_calls")),
    )
    op.create_index(op.f("ix_calls_organization_id"), "calls", ["organization_id"], unique=False)
    op.create_index("ix_calls_org_created", "calls", ["organization_id", "created_at"], unique=False)
    op.create_index("ix_calls_org_status", "calls", ["organization_id", "status"], unique=False)
    op.create_index("ix_calls_next_check", "calls", ["next_check_at"], unique=False,
                    sqlite_where=sa.text("next_check_at IS NOT NULL"),
                    postgresql_where=sa.text("next_check_at IS NOT NULL"))
    op.create_index("ix_calls_open_deadline", "calls", ["deadline_at"], unique=False,
                    sqlite_where=sa.text("ended_at IS NULL"), postgresql_where=sa.text("ended_at IS NULL"))

    op.create_table(
        "call_logs",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("call_id", sa.String(length=36), nullable=False),
        sa.Column("agent_id", BigId, nullable=False),
        sa.Column("direction", sa.String(length=10), nullable=False),
        sa.Column("from_phone", sa.String(length=20), nullable=False),
        sa.Column("to_phone", sa.String(length=20), nullable=False),
        sa.Column("contact_name", sa.String(length=200), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("end_reason", sa.String(length=50), nullable=True),
        sa.Column("outcome", sa.String(length=50), nullable=True),
        sa.Column("duration_seconds", sa.Integer(), nullable=False),
        sa.Column("transcript", Json, nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("recording_key", sa.String(length=300), nullable=True),
        sa.Column("started_at", Stamp, nullable=True),
        sa.Column("answered_at", Stamp, nullable=True),
        sa.Column("ended_at", Stamp, nullable=True),
        sa.Column("created_at", Stamp, nullable=False),
        _org_fk("call_logs"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_call_logs")),
        sa.UniqueConstraint("call_id", name=op.f("uq_call_logs_call_id")),
    )
    op.create_index(op.f("ix_call_logs_organization_id"), "call_logs", ["organization_id"], unique=False)
    op.create_index("ix_call_logs_org_ended", "call_logs", ["organization_id", "ended_at"], unique=False)
    op.create_index("ix_call_logs_org_agent", "call_logs", ["organization_id", "agent_id"], unique=False)

    op.create_table(
        "usage_records",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("kind", sa.String(length=50), nullable=False),
        sa.Column("quantity", sa.Float(), nullable=False),
        sa.Column("at", Stamp, nullable=False),
        sa.Column("reference", sa.String(length=200), nullable=False),
        _org_fk("usage_records"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_usage_records")),
        sa.UniqueConstraint("organization_id", "kind", "reference",
                            name=op.f("uq_usage_records_organization_id_kind_reference")),
    )
    op.create_index(op.f("ix_usage_records_organization_id"), "usage_records", ["organization_id"], unique=False)
    op.create_index("ix_usage_records_org_at", "usage_records", ["organization_id", "at"], unique=False)

    op.create_table(
        "dnc_lists",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("created_at", Stamp, nullable=False),
        sa.Column("updated_at", Stamp, nullable=False),
        _org_fk("dnc_lists"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dnc_lists")),
    )
    op.create_index(op.f("ix_dnc_lists_organization_id"), "dnc_lists", ["organization_id"], unique=False)

    op.create_table(
        "dnc_entries",
        sa.Column("list_id", BigId, nullable=False),
        sa.Column("phone_number", sa.String(length=20), nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("reason", sa.String(length=500), nullable=True),
        sa.Column("created_at", Stamp, nullable=False),
        sa.ForeignKeyConstraint(["list_id"], ["dnc_lists.id"], name=op.f("fk_dnc_entries_list_id_dnc_lists"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("list_id", "phone_number", name=op.f("pk_dnc_entries")),
    )
    op.create_index("ix_dnc_entries_org_phone", "dnc_entries", ["organization_id", "phone_number"], unique=False)

    op.create_table(
        "telephony_providers",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("type", sa.String(length=20), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("is_default", sa.Boolean(), nullable=False),
        sa.Column("builtin_key", sa.String(length=20), nullable=True),
        sa.Column("credentials_sealed", sa.Text(), nullable=True),
        sa.Column("credential_fields", Json, nullable=False),
        sa.Column("settings", Json, nullable=False),
        sa.Column("created_at", Stamp, nullable=False),
        sa.Column("updated_at", Stamp, nullable=False),
        sa.CheckConstraint("type in ('twilio','telnyx','vonage','sip','simulator')",
                           name=op.f("ck_telephony_providers_type")),
        sa.CheckConstraint("status in ('active','disabled')", name=op.f("ck_telephony_providers_status")),
        _org_fk("telephony_providers"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_telephony_providers")),
        sa.UniqueConstraint("organization_id", "builtin_key",
                            name=op.f("uq_telephony_providers_organization_id_builtin_key")),
    )
    op.create_index(op.f("ix_telephony_providers_organization_id"), "telephony_providers", ["organization_id"],
                    unique=False)

    op.create_table(
        "telephony_numbers",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("organization_id", BigId, nullable=False),
        sa.Column("phone_number", sa.String(length=20), nullable=False),
        sa.Column("provider_id", BigId, nullable=False),
        sa.Column("label", sa.String(length=200), nullable=True),
        sa.Column("inbound_agent_id", BigId, nullable=True),
        sa.Column("voice", sa.Boolean(), nullable=False),
        sa.Column("sms", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("created_at", Stamp, nullable=False),
        sa.Column("updated_at", Stamp, nullable=False),
        _org_fk("telephony_numbers"),
        sa.ForeignKeyConstraint(["provider_id"], ["telephony_providers.id"],
                                name=op.f("fk_telephony_numbers_provider_id_telephony_providers")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_telephony_numbers")),
        sa.UniqueConstraint("organization_id", "phone_number",
                            name=op.f("uq_telephony_numbers_organization_id_phone_number")),
    )
    op.create_index(op.f("ix_telephony_numbers_organization_id"), "telephony_numbers", ["organization_id"],
                    unique=False)


def downgrade() -> None:
    op.drop_table("telephony_numbers")
    op.drop_table("telephony_providers")
    op.drop_table("dnc_entries")
    op.drop_table("dnc_lists")
    op.drop_table("usage_records")
    op.drop_table("call_logs")
    op.drop_table("calls")
