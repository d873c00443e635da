"""What the campaign dialer asks the store (``application/dialer.py``), beyond the campaign and contact
repositories. The worker's scans (``campaign_turns``, ``settled_contacts``, ``next_due``) are the only reads
not filtered by organization; each returns references the dialer then loads through organization-filtered
methods."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from domain.campaigns import Contact


@dataclass(frozen=True, slots=True)
class CampaignRef:
    organization_id: int
    campaign_id: int


@dataclass(frozen=True, slots=True)
class ContactRef:
    organization_id: int
    campaign_id: int
    contact_id: int


@dataclass(frozen=True, slots=True)
class CampaignTurn:
    """A running campaign as a dialer pass sees it before giving it a turn: its explanation of why it waits
    (``status_reason``, ``next_dial_at``), whether its agent is still there and not archived, and its first open
    contact in the order of the due index (``first_due_at`` = that contact's ``next_attempt_at``, with its
    ``reason``; ``has_open`` False when it has none)."""

    ref: CampaignRef
    status_reason: str | None
    next_dial_at: datetime | None
    agent_live: bool
    has_open: bool
    first_due_at: datetime | None
    first_reason: str | None
    completion: str = "when_empty"
    """The campaign's ``completion``: a ``manual`` one waits for contacts when it has no open one."""


class DialerStore(Protocol):
    async def campaign_turns(self, limit: int) -> list[CampaignTurn]:
        """Running campaigns, the one dialled longest ago (or never) first (the round-robin order), each with its
        first open contact: one statement, one probe of the open contacts' due index per campaign (never a scan
        of the contacts)."""
        ...

    async def due_contacts(self, organization_id: int, campaign_id: int, now: datetime, limit: int) -> list[Contact]:
        """The campaign's ``pending`` and ``retry_wait`` contacts whose ``next_attempt_at`` is at or before
        ``now``, earliest first, then by id (every open contact has a due time: a new one is due from when it
        was added; read in the order of the index on the open contacts' campaign, due time and id: never a scan
        of the campaign's contacts)."""
        ...

    async def settled_contacts(self, limit: int) -> list[ContactRef]:
        """``dialing`` contacts whose current call (``last_call_id``) has reached a final status."""
        ...

    async def count_unfinished(self, organization_id: int, campaign_id: int) -> int:
        """Contacts ``pending``, ``dialing`` or ``retry_wait``."""
        ...

    async def earliest_attempt(self, organization_id: int, campaign_id: int) -> tuple[datetime, str | None] | None:
        """The earliest ``next_attempt_at`` of the campaign's ``pending`` and ``retry_wait`` contacts, with that
        contact's ``reason`` (``outside_calling_hours`` when it waits for its window)."""
        ...

    async def next_due(self, after: datetime) -> datetime | None:
        """The earliest ``next_attempt_at`` after ``after`` of an open contact of a running campaign (the
        dialer's job sleeps until then, or until a call ends): one index probe per running campaign, never a
        scan of the contacts."""
        ...

    async def mark_dialled(self, organization_id: int, campaign_id: int, at: datetime) -> None:
        """The campaign dialled at ``at`` (it goes to the back of the round-robin)."""
        ...

    async def finish_attempt(self, organization_id: int, contact_id: int, attempt: int, status: str,
                             ended_at: datetime | None) -> None:
        """The attempt's call ended with ``status``."""
        ...
