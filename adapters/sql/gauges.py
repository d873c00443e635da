"""BacklogGauges on SQL: the outbox backlog behind the slowest consumer, the dialer's in-flight and due contacts."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from adapters.sql.campaigns_tables import campaign_contacts, campaigns
from adapters.sql.metadata import UtcDateTime
from adapters.sql.tables import outbox_cursors, outbox_events
from adapters.sql.uow import SqlUnitOfWork
from application.ports.gauges import WorkBacklog
from domain.campaigns import OPEN_CONTACT_STATUSES, CampaignContactStatus, CampaignStatus


class SqlBacklogGauges:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def read(self, now: datetime) -> WorkBacklog | None:
        conn = await self.uow.connection()
        slowest = sa.select(sa.func.coalesce(sa.func.min(outbox_cursors.c.last_id), 0)).scalar_subquery()
        backlog = (await conn.execute(sa.select(sa.func.count(), sa.type_coerce(sa.func.min(outbox_events.c.created_at),
                                                                                    UtcDateTime()))
                                      .where(outbox_events.c.id > slowest))).one()
        dialing = campaign_contacts.c.status == CampaignContactStatus.DIALING
        in_flight = (await conn.execute(sa.select(sa.func.count()).select_from(campaign_contacts)
                                        .where(dialing))).scalar_one()
        due = (await conn.execute(
            sa.select(sa.func.count()).select_from(campaign_contacts.join(
                campaigns, campaigns.c.id == campaign_contacts.c.campaign_id))
            .where(campaigns.c.status == CampaignStatus.RUNNING,
                   campaign_contacts.c.status.in_(OPEN_CONTACT_STATUSES),
                   sa.or_(campaign_contacts.c.next_attempt_at.is_(None), campaign_contacts.c.next_attempt_at <= now))
        )).scalar_one()
        return WorkBacklog(int(backlog[0]), backlog[1], int(in_flight), int(due))
