"""In-memory leads."""

from __future__ import annotations

import builtins
import copy
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from adapters.memory.store import InMemoryUnitOfWork
from application.ports.leads import LeadFilter
from application.ports.platform import Page, PageRequest
from domain.identity import persisted
from domain.leads import Lead, LeadStatus


class InMemoryLeadRepository:
    """``leads``: id -> Lead; ``lead_external_ids``: (organization, external id) -> id (the unique key)."""

    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def add(self, lead: Lead) -> Lead | None:
        tables = await self.uow.tables()
        key = (lead.organization_id, lead.external_id)
        if lead.external_id is not None and key in tables["lead_external_ids"]:
            return None
        stored = replace(lead, id=self.uow.store.next_id("leads"), custom_data=copy.deepcopy(lead.custom_data))
        tables["leads"][stored.id] = stored
        if lead.external_id is not None:
            tables["lead_external_ids"][key] = stored.id
        return stored

    async def get(self, organization_id: int, lead_id: int) -> Lead | None:
        found = (await self.uow.tables())["leads"].get(lead_id)
        return found if found is not None and found.organization_id == organization_id else None

    async def find_external(self, organization_id: int, external_id: str) -> Lead | None:
        lead_id = (await self.uow.tables())["lead_external_ids"].get((organization_id, external_id))
        return await self.get(organization_id, lead_id) if lead_id is not None else None

    async def list(self, organization_id: int, filters: LeadFilter, page: PageRequest) -> Page[Lead]:
        mine = [
            x for x in (await self.uow.tables())["leads"].values()
            if x.organization_id == organization_id and filters.status in (None, x.status)
            and filters.source in (None, x.source)
            and (filters.created_after is None or x.created_at >= filters.created_after)
            and (filters.created_before is None or x.created_at < filters.created_before)
        ]
        mine.sort(key=lambda x: (x.created_at, persisted(x.id)), reverse=True)
        return page.slice(mine)

    async def update(self, lead: Lead) -> Lead:
        tables = await self.uow.tables()
        current = await self.get(lead.organization_id, persisted(lead.id))
        if current is not None:
            tables["leads"][current.id] = replace(current, status=lead.status, reason=lead.reason,
                                                  call_id=lead.call_id, contact_id=lead.contact_id,
                                                  updated_at=lead.updated_at)
        return lead

    async def queued_for_call(self, organization_id: int, call_id: str) -> builtins.list[Lead]:
        return sorted((x for x in (await self.uow.tables())["leads"].values()
                       if x.organization_id == organization_id and x.status == LeadStatus.QUEUED
                       and x.call_id == call_id),
                      key=lambda x: persisted(x.id))

    async def queued_for_contact(self, organization_id: int, contact_id: int) -> builtins.list[Lead]:
        return sorted((x for x in (await self.uow.tables())["leads"].values()
                       if x.organization_id == organization_id and x.status == LeadStatus.QUEUED
                       and x.contact_id == contact_id), key=lambda x: persisted(x.id))

    async def queued_for_campaign(self, organization_id: int,
                                  campaign_id: int) -> builtins.list[tuple[int, int | None]]:
        return sorted((persisted(x.id), x.contact_id) for x in (await self.uow.tables())["leads"].values()
                      if x.organization_id == organization_id and x.status == LeadStatus.QUEUED
                      and x.campaign_id == campaign_id)

    async def fail_queued(self, organization_id: int, lead_ids: Sequence[int], reason: str, at: datetime) -> int:
        tables = await self.uow.tables()
        moved = 0
        for lead_id in lead_ids:
            current = tables["leads"].get(lead_id)
            if (current is not None and current.organization_id == organization_id
                    and current.status == LeadStatus.QUEUED):
                tables["leads"][lead_id] = current.move("fail", at, reason=reason)
                moved += 1
        return moved
