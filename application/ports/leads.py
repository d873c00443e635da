"""Ports for leads."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from application.ports.platform import Page, PageRequest
from domain.leads import Lead


@dataclass(frozen=True, slots=True)
class LeadFilter:
    status: str | None = None
    source: str | None = None
    created_after: datetime | None = None
    """At or after."""
    created_before: datetime | None = None
    """Strictly before."""


class LeadRepository(Protocol):
    async def add(self, lead: Lead) -> Lead | None:
        """Stores a new lead; None (nothing stored) when the organization has a lead with its ``external_id``
        already, whatever the concurrency: the store's unique key decides, and a concurrent insert of the same
        external id waits for the other transaction."""
        ...

    async def get(self, organization_id: int, lead_id: int) -> Lead | None: ...

    async def find_external(self, organization_id: int, external_id: str) -> Lead | None:
        """The lead the organization received with ``external_id``."""
        ...

    async def list(self, organization_id: int, filters: LeadFilter, page: PageRequest) -> Page[Lead]:
        """Newest first."""
        ...

    async def update(self, lead: Lead) -> Lead:
        """Writes the lead's status, reason, call, contact and updated_at (the rest never changes)."""
        ...

    async def queued_for_call(self, organization_id: int, call_id: str) -> builtins.list[Lead]:
        """The queued leads whose call is ``call_id``."""
        ...

    async def queued_for_contact(self, organization_id: int, contact_id: int) -> builtins.list[Lead]:
        """The queued leads that became campaign contact ``contact_id`` (several leads may share a contact)."""
        ...

    async def queued_for_campaign(self, organization_id: int,
                                  campaign_id: int) -> builtins.list[tuple[int, int | None]]:
        """(lead id, contact id) of the campaign's queued leads, in id order."""
        ...

    async def fail_queued(self, organization_id: int, lead_ids: Sequence[int], reason: str, at: datetime) -> int:
        """Moves those of the leads still queued to failed with ``reason``; returns how many moved."""
        ...
