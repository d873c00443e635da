"""SQL repository for leads."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from adapters.sql.dialect import insert
from adapters.sql.leads_tables import leads
from adapters.sql.paging import fetch_page
from adapters.sql.uow import SqlUnitOfWork
from application.ports.leads import LeadFilter
from application.ports.platform import Page, PageRequest
from domain.leads import Lead, LeadStatus

_IDS_PER_STATEMENT = 500
"""Lead ids bound per UPDATE (well below SQLite's and PostgreSQL's parameter limits)."""


def _row_to_lead(row: Any) -> Lead:
    return Lead(
        id=row.id, organization_id=row.organization_id, phone=row.phone, name=row.name, email=row.email,
        agent_id=row.agent_id, campaign_id=row.campaign_id, custom_data=dict(row.custom_data or {}),
        external_id=row.external_id, source=row.source, status=row.status, reason=row.reason, call_id=row.call_id,
        contact_id=row.contact_id, created_at=row.created_at, updated_at=row.updated_at,
    )


class SqlLeadRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def add(self, lead: Lead) -> Lead | None:
        conn = await self.uow.connection()
        values = {
            "organization_id": lead.organization_id, "phone": lead.phone, "name": lead.name, "email": lead.email,
            "agent_id": lead.agent_id, "campaign_id": lead.campaign_id, "custom_data": lead.custom_data,
            "external_id": lead.external_id, "source": lead.source, "status": lead.status, "reason": lead.reason,
            "call_id": lead.call_id, "contact_id": lead.contact_id, "created_at": lead.created_at,
            "updated_at": lead.updated_at,
        }
        # ON CONFLICT (organization_id, external_id) DO NOTHING: a concurrent insert of the same external id waits
        # for the other transaction and then inserts nothing (no error, so the transaction goes on); NULL
        # external ids never conflict
        stmt = insert(leads, self.uow.dialect).values(**values).on_conflict_do_nothing(
            index_elements=["organization_id", "external_id"]).returning(*leads.c)
        row = (await conn.execute(stmt)).first()
        return _row_to_lead(row) if row else None

    async def _one(self, *conditions: Any) -> Lead | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(leads).where(*conditions))).first()
        return _row_to_lead(row) if row else None

    async def get(self, organization_id: int, lead_id: int) -> Lead | None:
        return await self._one(leads.c.organization_id == organization_id, leads.c.id == lead_id)

    async def find_external(self, organization_id: int, external_id: str) -> Lead | None:
        return await self._one(leads.c.organization_id == organization_id, leads.c.external_id == external_id)

    async def list(self, organization_id: int, filters: LeadFilter, page: PageRequest) -> Page[Lead]:
        conn = await self.uow.connection()
        where = [leads.c.organization_id == organization_id]
        if filters.status is not None:
            where.append(leads.c.status == filters.status)
        if filters.source is not None:
            where.append(leads.c.source == filters.source)
        if filters.created_after is not None:
            where.append(leads.c.created_at >= filters.created_after)
        if filters.created_before is not None:
            where.append(leads.c.created_at < filters.created_before)
        newest_first = [leads.c.created_at.desc(), leads.c.id.desc()]
        rows, total = await fetch_page(conn, list(leads.c), sa.and_(*where), newest_first, page)
        return Page([_row_to_lead(r) for r in rows], total, page.limit, page.offset)

    async def update(self, lead: Lead) -> Lead:
        conn = await self.uow.connection()
        await conn.execute(leads.update().where(leads.c.organization_id == lead.organization_id,
                                                leads.c.id == lead.id).values(
            status=lead.status, reason=lead.reason, call_id=lead.call_id, contact_id=lead.contact_id,
            updated_at=lead.updated_at))
        return lead

    async def _queued(self, *conditions: Any) -> builtins.list[Lead]:
        conn = await self.uow.connection()
        rows = (await conn.execute(sa.select(leads).where(leads.c.status == LeadStatus.QUEUED, *conditions)
                                   .order_by(leads.c.id))).all()
        return [_row_to_lead(r) for r in rows]

    async def queued_for_call(self, organization_id: int, call_id: str) -> builtins.list[Lead]:
        return await self._queued(leads.c.organization_id == organization_id, leads.c.call_id == call_id)

    async def queued_for_contact(self, organization_id: int, contact_id: int) -> builtins.list[Lead]:
        return await self._queued(leads.c.organization_id == organization_id, leads.c.contact_id == contact_id)

    async def queued_for_campaign(self, organization_id: int,
                                  campaign_id: int) -> builtins.list[tuple[int, int | None]]:
        conn = await self.uow.connection()
        rows = (await conn.execute(sa.select(leads.c.id, leads.c.contact_id).where(
            leads.c.organization_id == organization_id, leads.c.status == LeadStatus.QUEUED,
            leads.c.campaign_id == campaign_id).order_by(leads.c.id))).all()
        return [(int(r.id), r.contact_id) for r in rows]

    async def fail_queued(self, organization_id: int, lead_ids: Sequence[int], reason: str, at: datetime) -> int:
        conn = await self.uow.connection()
        moved = 0
        for start in range(0, len(lead_ids), _IDS_PER_STATEMENT):
            result = await conn.execute(leads.update().where(
                leads.c.organization_id == organization_id, leads.c.status == LeadStatus.QUEUED,
                leads.c.id.in_(lead_ids[start:start + _IDS_PER_STATEMENT]))
                .values(status="failed", reason=reason, updated_at=at))
            moved += int(result.rowcount or 0)
        return moved
