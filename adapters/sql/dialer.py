"""SQL queries of the campaign dialer (``application/ports/dialer.py``)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from adapters.sql.calls_tables import calls
from adapters.sql.campaigns import _row_to_contact
from adapters.sql.campaigns_tables import campaign_contacts, campaigns, contact_attempts
from adapters.sql.metadata import UtcDateTime
from adapters.sql.tables import agents
from adapters.sql.uow import SqlUnitOfWork
from application.ports.dialer import CampaignRef, CampaignTurn, ContactRef
from domain.agents import AgentStatus
from domain.calls import FINAL_STATUSES
from domain.campaigns import CampaignContactStatus, CampaignStatus, Contact

OPEN = ("pending", "retry_wait")
UNFINISHED = ("pending", "dialing", "retry_wait")
_c = campaign_contacts.c
# built once with bound parameters (asked once per dialling step): its open contacts due by now, in the order of
# ix_campaign_contacts_open_due (campaign, due time, id)
_DUE = (sa.select(campaign_contacts)
        .where(_c.campaign_id == sa.bindparam("campaign_id"), _c.organization_id == sa.bindparam("organization_id"),
               _c.status.in_(OPEN), _c.next_attempt_at <= sa.bindparam("now", type_=UtcDateTime()))
        .order_by(_c.next_attempt_at, _c.id).limit(sa.bindparam("limit")))
# the running campaigns in round-robin order (never dialled first, then dialled longest ago), each joined to its
# first open contact: a correlated probe of ix_campaign_contacts_open_due (LIMIT 1, in index order) whose id picks
# the row by primary key; SQLite has no LATERAL, this form is the same plan on both databases
_first = (sa.select(_c.id).where(_c.campaign_id == campaigns.c.id, _c.organization_id == campaigns.c.organization_id,
                                  _c.status.in_(OPEN))
          .order_by(_c.next_attempt_at, _c.id).limit(1).correlate(campaigns).scalar_subquery())
_head = campaign_contacts.alias("head")
_TURNS = (sa.select(campaigns.c.organization_id, campaigns.c.id, campaigns.c.status_reason, campaigns.c.next_dial_at,
                    campaigns.c.completion,
                    sa.and_(agents.c.id.is_not(None), agents.c.deleted_at.is_(None),
                            agents.c.status != AgentStatus.ARCHIVED).label("agent_live"),
                    _head.c.id.label("head_id"), _head.c.next_attempt_at, _head.c.reason)
          .select_from(campaigns
                       .outerjoin(agents, sa.and_(agents.c.id == campaigns.c.agent_id,
                                                  agents.c.organization_id == campaigns.c.organization_id))
                       .outerjoin(_head, _head.c.id == _first))
          .where(campaigns.c.status == CampaignStatus.RUNNING)
          .order_by(sa.case((campaigns.c.last_dialled_at.is_(None), 0), else_=1), campaigns.c.last_dialled_at,
                    campaigns.c.id)
          .limit(sa.bindparam("limit")))


class SqlDialerStore:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def campaign_turns(self, limit: int) -> list[CampaignTurn]:
        conn = await self.uow.connection()
        rows = await conn.execute(_TURNS, {"limit": limit})
        return [CampaignTurn(CampaignRef(int(r.organization_id), int(r.id)), r.status_reason, r.next_dial_at,
                             bool(r.agent_live), r.head_id is not None, r.next_attempt_at, r.reason, r.completion)
                for r in rows]

    async def due_contacts(self, organization_id: int, campaign_id: int, now: datetime, limit: int) -> list[Contact]:
        conn = await self.uow.connection()
        rows = await conn.execute(_DUE, {"campaign_id": campaign_id, "organization_id": organization_id, "now": now,
                                         "limit": limit})
        return [_row_to_contact(r) for r in rows]

    async def settled_contacts(self, limit: int) -> list[ContactRef]:
        conn = await self.uow.connection()
        c = campaign_contacts.c
        rows = await conn.execute(sa.select(c.organization_id, c.campaign_id, c.id)
                                  .select_from(campaign_contacts.join(calls, calls.c.id == c.last_call_id))
                                  .where(c.status == CampaignContactStatus.DIALING, calls.c.status.in_(FINAL_STATUSES))
                                  .order_by(c.updated_at, c.id).limit(limit))
        return [ContactRef(int(r[0]), int(r[1]), int(r[2])) for r in rows]

    async def count_unfinished(self, organization_id: int, campaign_id: int) -> int:
        conn = await self.uow.connection()
        c = campaign_contacts.c
        return (await conn.execute(sa.select(sa.func.count()).select_from(campaign_contacts).where(
            c.campaign_id == campaign_id, c.organization_id == organization_id, c.status.in_(UNFINISHED),
        ))).scalar_one()

    async def earliest_attempt(self, organization_id: int, campaign_id: int) -> tuple[datetime, str | None] | None:
        conn = await self.uow.connection()
        c = campaign_contacts.c
        row = (await conn.execute(sa.select(c.next_attempt_at, c.reason).where(
            c.campaign_id == campaign_id, c.organization_id == organization_id, c.status.in_(OPEN),
            c.next_attempt_at.is_not(None)).order_by(c.next_attempt_at, c.id).limit(1))).first()
        return (row[0], row[1]) if row else None

    async def next_due(self, after: datetime) -> datetime | None:
        # per running campaign, the first entry after ``after`` of the open-contacts index (one index probe each;
        # a min() over a join of all contacts would read every one)
        conn = await self.uow.connection()
        c = campaign_contacts.c
        first = (sa.select(c.next_attempt_at).where(
            c.campaign_id == campaigns.c.id, c.status.in_(OPEN), c.next_attempt_at > after)
            .order_by(c.next_attempt_at).limit(1).correlate(campaigns).scalar_subquery())
        return (await conn.execute(sa.select(sa.type_coerce(sa.func.min(first), UtcDateTime()))
                                   .where(campaigns.c.status == CampaignStatus.RUNNING))).scalar()

    async def mark_dialled(self, organization_id: int, campaign_id: int, at: datetime) -> None:
        conn = await self.uow.connection()
        await conn.execute(campaigns.update().where(campaigns.c.id == campaign_id,
                                                    campaigns.c.organization_id == organization_id)
                           .values(last_dialled_at=at))

    async def finish_attempt(self, organization_id: int, contact_id: int, attempt: int, status: str,
                             ended_at: datetime | None) -> None:
        conn = await self.uow.connection()
        await conn.execute(contact_attempts.update().where(
            contact_attempts.c.organization_id == organization_id, contact_attempts.c.contact_id == contact_id,
            contact_attempts.c.attempt == attempt).values(status=status, ended_at=ended_at))
