"""Ports for campaigns, their contacts and the schedules a campaign may follow."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from application.ports.platform import Page, PageRequest
from domain.campaigns import Campaign, CampaignStats, Contact, ContactAttempt


@dataclass(frozen=True, slots=True)
class CampaignFilter:
    status: str | None = None


@dataclass(frozen=True, slots=True)
class ContactFilter:
    status: str | None = None


class CampaignRepository(Protocol):
    async def add(self, campaign: Campaign) -> Campaign: ...

    async def get(self, organization_id: int, campaign_id: int) -> Campaign | None: ...

    async def get_for_update(self, organization_id: int, campaign_id: int) -> Campaign | None:
        """Like get, but locks the row until the transaction ends (where the database can)."""
        ...

    async def list(self, organization_id: int, filters: CampaignFilter, page: PageRequest) -> Page[Campaign]:
        """Newest first."""
        ...

    async def update(self, campaign: Campaign) -> Campaign: ...

    async def delete(self, organization_id: int, campaign_id: int) -> None:
        """Removes the campaign with its contacts and their attempts."""
        ...

    async def using_schedule(self, organization_id: int, schedule_id: int) -> builtins.list[int]:
        """Ids of the running or paused campaigns whose schedule_id is ``schedule_id``, smallest first."""
        ...

    async def stats(self, organization_id: int, campaign_id: int) -> CampaignStats:
        """Its contacts counted by status (by the store, without loading them)."""
        ...


class ContactRepository(Protocol):
    async def add_many(self, organization_id: int, campaign_id: int, contacts: Sequence[Contact]) -> int:
        """Adds the contacts whose phone the campaign does not have yet; returns how many were added (the
        others are duplicates). One statement per call: callers pass batches. Each keeps its ``cause_depth``."""
        ...

    async def get(self, organization_id: int, campaign_id: int, contact_id: int) -> Contact | None: ...

    async def find_by_phone(self, organization_id: int, campaign_id: int, phone: str) -> Contact | None:
        """The campaign's contact with ``phone`` (E.164): a campaign has each number once."""
        ...

    async def list(self, organization_id: int, campaign_id: int, filters: ContactFilter,
                   page: PageRequest) -> Page[Contact]:
        """In the order they were added."""
        ...

    async def update(self, contact: Contact) -> Contact:
        """Saves the contact's moves; its phone, ``created_at`` and ``cause_depth`` stay as they were added."""
        ...

    async def delete(self, organization_id: int, campaign_id: int, contact_id: int) -> None: ...

    async def exists_in(self, organization_id: int, campaign_id: int) -> bool:
        """Whether the campaign has any contact."""
        ...

    async def cancel_open(self, organization_id: int, campaign_id: int, reason: str,
                          at: datetime) -> builtins.list[int]:
        """Moves every pending and retry_wait contact of the campaign to cancelled (one statement); returns
        the ids of those that moved."""
        ...

    async def count(self, organization_id: int, campaign_id: int) -> int:
        """How many contacts the campaign holds, whatever their status."""
        ...

    async def replan_waiting(self, organization_id: int, campaign_id: int, reason: str, at: datetime) -> int:
        """Makes every pending and retry_wait contact of the campaign that waits with ``reason`` (its calling
        window) and is due after ``at`` due at ``at`` again, its reason cleared (one statement); returns how many
        moved. Contacts waiting for a retry delay keep their time."""
        ...

    async def add_attempt(self, organization_id: int, attempt: ContactAttempt) -> None:
        """Records an attempt; Conflict when the contact has one with that number already."""
        ...

    async def attempts(self, organization_id: int, contact_id: int) -> builtins.list[ContactAttempt]:
        """The contact's attempts, first first."""
        ...


class ContactEndings(Protocol):
    """Told, in the unit of work that ends them, of campaign contacts that end without an event of their own:
    cancelled with their campaign, deleted while pending, or deleted with their campaign. The leads feature
    fails the leads still queued on them."""

    async def contacts_ended(self, organization_id: int, campaign_id: int, contact_ids: Sequence[int] | None,
                             reason: str, at: datetime) -> None:
        """``contact_ids`` None: every contact of the campaign (deleted with it)."""
        ...


class CampaignSchedules(Protocol):
    """The business-hours schedules a campaign may follow (``schedule_id``): those of its organization."""

    async def exists(self, organization_id: int, schedule_id: int) -> bool: ...
