"""Tables of campaigns: campaigns, their contacts and the contacts' attempts (migration 0015, branch
``campaigns``)."""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.metadata import BigId, Json, UtcDateTime, id_column, metadata, org_column

CAMPAIGN_STATUSES = "('draft','running','paused','completed','cancelled','failed')"
CONTACT_STATUSES = "('pending','dialing','retry_wait','completed','failed','skipped_dnc','cancelled')"
OPEN_CONTACTS = "status IN ('pending', 'retry_wait')"

campaigns = sa.Table(
    "campaigns",
    metadata,
    id_column(),
    org_column(),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("agent_id", BigId, sa.ForeignKey("agents.id"), nullable=False),
    # business-hours schedules are their own feature: no foreign key; the use cases check it (CampaignSchedules)
    sa.Column("schedule_id", BigId, nullable=True),
    sa.Column("timezone", sa.String(64), nullable=False),
    sa.Column("timezone_mode", sa.String(20), nullable=False),
    sa.Column("calling_hours", Json, nullable=False),
    sa.Column("max_concurrent_calls", sa.Integer, nullable=False),
    sa.Column("retry", Json, nullable=False),
    # phone numbers are hard-deleted when released: no foreign key
    sa.Column("from_phone_number_id", BigId, nullable=True),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("status_reason", sa.String(100), nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.Column("started_at", UtcDateTime, nullable=True),
    sa.Column("ended_at", UtcDateTime, nullable=True),
    # the dialer (migration 0130): round-robin order, and when it dials next (status_reason's detail)
    sa.Column("last_dialled_at", UtcDateTime, nullable=True),
    sa.Column("next_dial_at", UtcDateTime, nullable=True),
    # when_empty | manual (migration 0280): whether a running campaign completes by itself once every contact is final
    sa.Column("completion", sa.String(20), nullable=False, server_default="when_empty"),
    # the destination policy and the widget's intake cap (migration 0270); NULL: the organization's countries
    sa.Column("allowed_countries", Json, nullable=True),
    sa.Column("widget_max_contacts_per_hour", sa.Integer, nullable=False, server_default="60"),
    sa.CheckConstraint(f"status in {CAMPAIGN_STATUSES}", name="status"),
    sa.CheckConstraint("timezone_mode in ('recipient','campaign')", name="timezone_mode"),
    sa.CheckConstraint("max_concurrent_calls between 1 and 50", name="max_concurrent_calls"),
    sa.Index("ix_campaigns_org_status", "organization_id", "status"),
    sa.Index("ix_campaigns_status_last_dialled", "status", "last_dialled_at"),
    sqlite_autoincrement=True,  # ids are never reused
)

campaign_contacts = sa.Table(
    "campaign_contacts",
    metadata,
    id_column(),
    sa.Column("organization_id", BigId, nullable=False),
    sa.Column("campaign_id", BigId, sa.ForeignKey("campaigns.id", ondelete="CASCADE"), nullable=False),
    sa.Column("phone", sa.String(20), nullable=False),
    sa.Column("name", sa.String(200), nullable=True),
    sa.Column("timezone", sa.String(64), nullable=True),
    sa.Column("custom_data", Json, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("next_attempt_at", UtcDateTime, nullable=True),
    sa.Column("last_call_id", sa.String(36), nullable=True),
    sa.Column("reason", sa.String(100), nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    # the depth of the trigger action that added the contact (migration 0330): its calls and events keep it
    sa.Column("cause_depth", sa.SmallInteger, nullable=False, server_default=sa.text("0")),
    sa.CheckConstraint(f"status in {CONTACT_STATUSES}", name="status"),
    # a number is in a campaign once: imports count the others as duplicates
    sa.UniqueConstraint("campaign_id", "phone"),
    sa.Index("ix_campaign_contacts_campaign_status", "campaign_id", "status"),
    # what the dialer asks: the contacts whose next attempt is due
    sa.Index("ix_campaign_contacts_status_next_attempt_at", "status", "next_attempt_at"),
    # the dialer's question per campaign (migration 0131): its open contacts (every one has a due time) in due
    # order, so "due now", "the earliest" and "the next after" are each a walk of one index range
    sa.Index("ix_campaign_contacts_open_due", "campaign_id", "next_attempt_at", "id",
             sqlite_where=sa.text(OPEN_CONTACTS), postgresql_where=sa.text(OPEN_CONTACTS)),
    sqlite_autoincrement=True,  # ids are never reused
)

contact_attempts = sa.Table(
    "contact_attempts",
    metadata,
    id_column(),
    sa.Column("organization_id", BigId, nullable=False),
    sa.Column("contact_id", BigId, sa.ForeignKey("campaign_contacts.id", ondelete="CASCADE"), nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("call_id", sa.String(36), nullable=True),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("started_at", UtcDateTime, nullable=True),
    sa.Column("ended_at", UtcDateTime, nullable=True),
    # one row per attempt number: a crashed dialer never records (or dials) one attempt twice
    sa.UniqueConstraint("contact_id", "attempt"),
    sqlite_autoincrement=True,
)
