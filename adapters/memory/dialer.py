"""In-memory queries of the campaign dialer."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from adapters.memory.store import InMemoryUnitOfWork
from application.ports.dialer import CampaignRef, CampaignTurn, ContactRef
from domain.agents import AgentStatus
from domain.campaigns import CampaignContactStatus, CampaignStatus, Contact
from domain.identity import persisted

OPEN = ("pending", "retry_wait")
UNFINISHED = ("pending", "dialing", "retry_wait")


class InMemoryDialerStore:
    """``campaign_dialled``: campaign id -> when it last dialled."""

    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def _contacts(self, organization_id: int, campaign_id: int) -> list[Contact]:
        return [c for c in (await self.uow.tables())["campaign_contacts"].values()
                if c.organization_id == organization_id and c.campaign_id == campaign_id]

    async def campaign_turns(self, limit: int) -> list[CampaignTurn]:
        tables = await self.uow.tables()
        dialled = tables["campaign_dialled"]
        running = [c for c in tables["campaigns"].values() if c.status == CampaignStatus.RUNNING]
        running.sort(key=lambda c: (c.id in dialled, dialled.get(c.id) or c.created_at, c.id))
        turns = []
        for c in running[:limit]:
            agent = tables["agents"].get(c.agent_id)
            live = (agent is not None and agent.organization_id == c.organization_id
                    and agent.status != AgentStatus.ARCHIVED)
            open_ = [k for k in await self._contacts(c.organization_id, c.id) if k.status in OPEN]
            head = min(open_, key=lambda k: (k.next_attempt_at is None, k.next_attempt_at, k.id), default=None)
            turns.append(CampaignTurn(CampaignRef(c.organization_id, c.id), c.status_reason, c.next_dial_at, live,
                                      head is not None, head.next_attempt_at if head else None,
                                      head.reason if head else None, c.completion))
        return turns

    async def due_contacts(self, organization_id: int, campaign_id: int, now: datetime, limit: int) -> list[Contact]:
        due = [c for c in await self._contacts(organization_id, campaign_id)
               if c.status in OPEN and c.next_attempt_at is not None and c.next_attempt_at <= now]
        due.sort(key=lambda c: (c.next_attempt_at, c.id))
        return [replace(c) for c in due[:limit]]

    async def settled_contacts(self, limit: int) -> list[ContactRef]:
        tables = await self.uow.tables()
        found = [c for c in tables["campaign_contacts"].values()
                 if c.status == CampaignContactStatus.DIALING and c.last_call_id in tables["calls"]
                 and tables["calls"][c.last_call_id].is_final]
        found.sort(key=lambda c: (c.updated_at, c.id))
        return [ContactRef(c.organization_id, c.campaign_id, c.id) for c in found[:limit]]

    async def count_unfinished(self, organization_id: int, campaign_id: int) -> int:
        return sum(1 for c in await self._contacts(organization_id, campaign_id) if c.status in UNFINISHED)

    async def earliest_attempt(self, organization_id: int, campaign_id: int) -> tuple[datetime, str | None] | None:
        waiting = [(c.next_attempt_at, c) for c in await self._contacts(organization_id, campaign_id)
                   if c.status in OPEN and c.next_attempt_at is not None]
        if not waiting:
            return None
        at, first = min(waiting, key=lambda pair: (pair[0], persisted(pair[1].id)))
        return at, first.reason

    async def next_due(self, after: datetime) -> datetime | None:
        tables = await self.uow.tables()
        running = {c.id for c in tables["campaigns"].values() if c.status == CampaignStatus.RUNNING}
        times = [c.next_attempt_at for c in tables["campaign_contacts"].values()
                 if c.campaign_id in running and c.status in OPEN and c.next_attempt_at is not None
                 and c.next_attempt_at > after]
        return min(times, default=None)

    async def mark_dialled(self, organization_id: int, campaign_id: int, at: datetime) -> None:
        (await self.uow.tables())["campaign_dialled"][campaign_id] = at

    async def finish_attempt(self, organization_id: int, contact_id: int, attempt: int, status: str,
                             ended_at: datetime | None) -> None:
        attempts = (await self.uow.tables())["contact_attempts"]
        found = attempts.get((contact_id, attempt))
        if found is not None and found[0] == organization_id:
            attempts[(contact_id, attempt)] = (organization_id, replace(found[1], status=status, ended_at=ended_at))
