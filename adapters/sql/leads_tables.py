"""Tables of leads (migration 0140, branch ``leads``)."""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.metadata import BigId, Json, UtcDateTime, id_column, metadata, org_column

LEAD_STATUSES = "('queued','called','blocked_dnc','failed')"

leads = sa.Table(
    "leads",
    metadata,
    id_column(),
    org_column(),
    sa.Column("phone", sa.String(20), nullable=False),
    sa.Column("name", sa.String(200), nullable=True),
    sa.Column("email", sa.String(320), nullable=True),
    # agents and campaigns may be deleted while their leads stay (the CRM's record): no foreign keys
    sa.Column("agent_id", BigId, nullable=True),
    sa.Column("campaign_id", BigId, nullable=True),
    sa.Column("custom_data", Json, nullable=False),
    sa.Column("external_id", sa.String(255), nullable=True),
    sa.Column("source", sa.String(100), nullable=True),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("reason", sa.String(100), nullable=True),
    sa.Column("call_id", sa.String(36), nullable=True),
    sa.Column("contact_id", BigId, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.CheckConstraint(f"status in {LEAD_STATUSES}", name="status"),
    sa.CheckConstraint("(agent_id is null) <> (campaign_id is null)", name="one_target"),
    # one lead per external id in an organization, under any concurrency (NULLs are never equal: leads without
    # one are not de-duplicated)
    sa.UniqueConstraint("organization_id", "external_id"),
    # GET /leads: newest first, optionally by status or source
    sa.Index("ix_leads_org_created_at", "organization_id", "created_at"),
    sa.Index("ix_leads_org_status_created_at", "organization_id", "status", "created_at"),
    sa.Index("ix_leads_org_source_created_at", "organization_id", "source", "created_at"),
    # the outcome consumer: the lead of a call, the leads of a campaign contact
    sa.Index("ix_leads_call_id", "call_id"),
    sa.Index("ix_leads_contact_id", "contact_id"),
    sqlite_autoincrement=True,  # ids are never reused
)
