"""In-memory campaigns, contacts and attempts."""

from __future__ import annotations

import builtins
import copy
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from adapters.memory.store import InMemoryUnitOfWork
from application.ports.campaigns import CampaignFilter, ContactFilter
from application.ports.platform import Page, PageRequest
from domain.campaigns import OPEN_CONTACT_STATUSES, SCHEDULED_STATUSES, Campaign, CampaignStats, Contact, ContactAttempt
from domain.errors import Conflict
from domain.identity import persisted


class InMemoryCampaignRepository:
    """``campaigns``: id -> Campaign."""

    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def add(self, campaign: Campaign) -> Campaign:
        tables = await self.uow.tables()
        stored = replace(campaign, id=self.uow.store.next_id("campaigns"))
        tables["campaigns"][stored.id] = stored
        return stored

    async def get(self, organization_id: int, campaign_id: int) -> Campaign | None:
        found = (await self.uow.tables())["campaigns"].get(campaign_id)
        return found if found is not None and found.organization_id == organization_id else None

    get_for_update = get

    async def list(self, organization_id: int, filters: CampaignFilter, page: PageRequest) -> Page[Campaign]:
        mine = sorted((c for c in (await self.uow.tables())["campaigns"].values()
                       if c.organization_id == organization_id and filters.status in (None, c.status)),
                      key=lambda c: -(persisted(c.id)))
        return page.slice(mine)

    async def update(self, campaign: Campaign) -> Campaign:
        tables = await self.uow.tables()
        current = tables["campaigns"].get(campaign.id)
        if current is not None and current.organization_id == campaign.organization_id:
            tables["campaigns"][campaign.id] = replace(campaign, created_at=current.created_at)
        return campaign

    async def delete(self, organization_id: int, campaign_id: int) -> None:
        tables = await self.uow.tables()
        if await self.get(organization_id, campaign_id) is None:
            return
        for contact in [c for c in tables["campaign_contacts"].values() if c.campaign_id == campaign_id]:
            _drop_contact(tables, contact)
        del tables["campaigns"][campaign_id]

    async def using_schedule(self, organization_id: int, schedule_id: int) -> builtins.list[int]:
        return sorted(persisted(c.id) for c in (await self.uow.tables())["campaigns"].values()
                      if c.organization_id == organization_id and c.schedule_id == schedule_id
                      and c.status in SCHEDULED_STATUSES)

    async def stats(self, organization_id: int, campaign_id: int) -> CampaignStats:
        contacts = (await self.uow.tables())["campaign_contacts"].values()
        return CampaignStats.of(Counter(c.status for c in contacts
                                        if c.campaign_id == campaign_id and c.organization_id == organization_id))


def _drop_contact(tables: dict[str, dict[Any, Any]], contact: Contact) -> None:
    tables["campaign_contacts"].pop(contact.id, None)
    tables["campaign_phones"].pop((contact.campaign_id, contact.phone), None)
    for key in [k for k in tables["contact_attempts"] if k[0] == contact.id]:
        del tables["contact_attempts"][key]


class InMemoryContactRepository:
    """``campaign_contacts``: id -> Contact; ``campaign_phones``: (campaign, phone) -> id (the unique key);
    ``contact_attempts``: (contact, attempt) -> (organization, ContactAttempt)."""

    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def add_many(self, organization_id: int, campaign_id: int, contacts: Sequence[Contact]) -> int:
        tables = await self.uow.tables()
        added = 0
        for contact in contacts:
            if (campaign_id, contact.phone) in tables["campaign_phones"]:
                continue
            stored = replace(contact, id=self.uow.store.next_id("campaign_contacts"), organization_id=organization_id,
                             campaign_id=campaign_id, custom_data=copy.deepcopy(contact.custom_data))
            tables["campaign_contacts"][stored.id] = stored
            tables["campaign_phones"][(campaign_id, stored.phone)] = stored.id
            added += 1
        return added

    async def get(self, organization_id: int, campaign_id: int, contact_id: int) -> Contact | None:
        found = (await self.uow.tables())["campaign_contacts"].get(contact_id)
        if found is None or found.organization_id != organization_id or found.campaign_id != campaign_id:
            return None
        return found

    async def find_by_phone(self, organization_id: int, campaign_id: int, phone: str) -> Contact | None:
        contact_id = (await self.uow.tables())["campaign_phones"].get((campaign_id, phone))
        return await self.get(organization_id, campaign_id, contact_id) if contact_id is not None else None

    async def list(self, organization_id: int, campaign_id: int, filters: ContactFilter,
                   page: PageRequest) -> Page[Contact]:
        mine = sorted((c for c in (await self.uow.tables())["campaign_contacts"].values()
                       if c.organization_id == organization_id and c.campaign_id == campaign_id
                       and filters.status in (None, c.status)), key=lambda c: persisted(c.id))
        return page.slice(mine)

    async def update(self, contact: Contact) -> Contact:
        tables = await self.uow.tables()
        current = await self.get(contact.organization_id, contact.campaign_id, persisted(contact.id))
        if current is not None:
            tables["campaign_contacts"][contact.id] = replace(contact, phone=current.phone,
                                                              created_at=current.created_at,
                                                              cause_depth=current.cause_depth)
        return contact

    async def delete(self, organization_id: int, campaign_id: int, contact_id: int) -> None:
        found = await self.get(organization_id, campaign_id, contact_id)
        if found is not None:
            _drop_contact(await self.uow.tables(), found)

    async def exists_in(self, organization_id: int, campaign_id: int) -> bool:
        return any(c.organization_id == organization_id and c.campaign_id == campaign_id
                   for c in (await self.uow.tables())["campaign_contacts"].values())

    async def cancel_open(self, organization_id: int, campaign_id: int, reason: str,
                          at: datetime) -> builtins.list[int]:
        tables = await self.uow.tables()
        moved: list[int] = []
        for contact in list(tables["campaign_contacts"].values()):
            if (contact.organization_id == organization_id and contact.campaign_id == campaign_id
                    and contact.status in OPEN_CONTACT_STATUSES):
                tables["campaign_contacts"][contact.id] = replace(contact, status="cancelled", reason=reason,
                                                                  next_attempt_at=None, updated_at=at)
                moved.append(contact.id)
        return moved

    async def count(self, organization_id: int, campaign_id: int) -> int:
        return sum(1 for c in (await self.uow.tables())["campaign_contacts"].values()
                   if c.organization_id == organization_id and c.campaign_id == campaign_id)

    async def replan_waiting(self, organization_id: int, campaign_id: int, reason: str, at: datetime) -> int:
        tables = await self.uow.tables()
        moved = 0
        for contact in list(tables["campaign_contacts"].values()):
            if (contact.organization_id == organization_id and contact.campaign_id == campaign_id
                    and contact.status in OPEN_CONTACT_STATUSES and contact.reason == reason
                    and contact.next_attempt_at is not None and contact.next_attempt_at > at):
                tables["campaign_contacts"][contact.id] = replace(contact, next_attempt_at=at, reason=None,
                                                                  updated_at=at)
                moved += 1
        return moved

    async def add_attempt(self, organization_id: int, attempt: ContactAttempt) -> None:
        attempts = (await self.uow.tables())["contact_attempts"]
        key = (attempt.contact_id, attempt.attempt)
        if key in attempts:
            raise Conflict(f"contact {attempt.contact_id} has an attempt {attempt.attempt} already")
        attempts[key] = (organization_id, attempt)

    async def attempts(self, organization_id: int, contact_id: int) -> builtins.list[ContactAttempt]:
        attempts = (await self.uow.tables())["contact_attempts"]
        return [a for (cid, _), (org, a) in sorted(attempts.items(), key=lambda kv: kv[0])
                if cid == contact_id and org == organization_id]
