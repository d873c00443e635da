"""SQL repositories for campaigns, their contacts and the contacts' attempts."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from adapters.sql.campaigns_tables import campaign_contacts, campaigns, contact_attempts
from adapters.sql.dialect import insert
from adapters.sql.paging import fetch_page
from adapters.sql.uow import SqlUnitOfWork
from application.ports.campaigns import CampaignFilter, ContactFilter
from application.ports.platform import Page, PageRequest
from domain.campaigns import (
    OPEN_CONTACT_STATUSES,
    SCHEDULED_STATUSES,
    CallingHours,
    Campaign,
    CampaignStats,
    Contact,
    ContactAttempt,
    RetryPolicy,
    RetryRule,
)
from domain.errors import Conflict
from domain.identity import persisted


def _retry(value: dict[str, Any]) -> RetryPolicy:
    return RetryPolicy(**{outcome: RetryRule(int(rule["max_attempts"]), int(rule["delay_minutes"]))
                          for outcome, rule in value.items()})


def _row_to_campaign(row: Any) -> Campaign:
    return Campaign(
        id=row.id, organization_id=row.organization_id, name=row.name, agent_id=row.agent_id,
        schedule_id=row.schedule_id, timezone=row.timezone, timezone_mode=row.timezone_mode,
        calling_hours=CallingHours(**row.calling_hours), max_concurrent_calls=row.max_concurrent_calls,
        retry=_retry(row.retry), from_phone_number_id=row.from_phone_number_id, completion=row.completion,
        status=row.status,
        status_reason=row.status_reason, created_at=row.created_at, updated_at=row.updated_at,
        started_at=row.started_at, ended_at=row.ended_at, next_dial_at=row.next_dial_at,
        allowed_countries=tuple(row.allowed_countries) if row.allowed_countries is not None else None,
        widget_max_contacts_per_hour=row.widget_max_contacts_per_hour,
    )


def _campaign_values(c: Campaign) -> dict[str, Any]:
    return {
        "organization_id": c.organization_id, "name": c.name, "agent_id": c.agent_id, "schedule_id": c.schedule_id,
        "timezone": c.timezone, "timezone_mode": c.timezone_mode,
        "calling_hours": {"start": c.calling_hours.start, "end": c.calling_hours.end},
        "max_concurrent_calls": c.max_concurrent_calls, "retry": c.retry.view(),
        "from_phone_number_id": c.from_phone_number_id, "completion": c.completion, "status": c.status,
        "status_reason": c.status_reason,
        "created_at": c.created_at, "updated_at": c.updated_at, "started_at": c.started_at, "ended_at": c.ended_at,
        "next_dial_at": c.next_dial_at,
        "allowed_countries": list(c.allowed_countries) if c.allowed_countries is not None else None,
        "widget_max_contacts_per_hour": c.widget_max_contacts_per_hour,
    }

# the reads of every dialer step, built once with bound parameters (building a select and its cache key costs
# more CPU than its round trip's share of SQLAlchemy)
_CAMPAIGN = sa.select(campaigns).where(campaigns.c.organization_id == sa.bindparam("org"),
                                       campaigns.c.id == sa.bindparam("campaign_id"))
_CAMPAIGN_FOR_UPDATE = _CAMPAIGN.with_for_update()
_CONTACT = sa.select(campaign_contacts).where(
    campaign_contacts.c.organization_id == sa.bindparam("org"),
    campaign_contacts.c.campaign_id == sa.bindparam("campaign_id"), campaign_contacts.c.id == sa.bindparam("id"))

# a contact's update, built once: its SET clause is the columns the parameters name (as ``_UPDATE_CALL``)
_UPDATE_CONTACT = campaign_contacts.update().where(
    campaign_contacts.c.organization_id == sa.bindparam("where_organization_id"),
    campaign_contacts.c.campaign_id == sa.bindparam("where_campaign_id"),
    campaign_contacts.c.id == sa.bindparam("where_id"))


def _row_to_contact(row: Any) -> Contact:
    return Contact(
        id=row.id, organization_id=row.organization_id, campaign_id=row.campaign_id, phone=row.phone,
        name=row.name, timezone=row.timezone, custom_data=dict(row.custom_data or {}), status=row.status,
        attempts=row.attempts, next_attempt_at=row.next_attempt_at, last_call_id=row.last_call_id,
        reason=row.reason, created_at=row.created_at, updated_at=row.updated_at, cause_depth=row.cause_depth,
    )


def _contact_values(c: Contact) -> dict[str, Any]:
    return {
        "organization_id": c.organization_id, "campaign_id": c.campaign_id, "phone": c.phone, "name": c.name,
        "timezone": c.timezone, "custom_data": c.custom_data, "status": c.status, "attempts": c.attempts,
        "next_attempt_at": c.next_attempt_at, "last_call_id": c.last_call_id, "reason": c.reason,
        "created_at": c.created_at, "updated_at": c.updated_at, "cause_depth": c.cause_depth,
    }


class SqlCampaignRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    @staticmethod
    def _mine(organization_id: int, campaign_id: int) -> Any:
        return sa.and_(campaigns.c.organization_id == organization_id, campaigns.c.id == campaign_id)

    async def add(self, campaign: Campaign) -> Campaign:
        conn = await self.uow.connection()
        row = (await conn.execute(campaigns.insert().returning(*campaigns.c), _campaign_values(campaign))).one()
        return _row_to_campaign(row)

    async def _get(self, organization_id: int, campaign_id: int, lock: bool) -> Campaign | None:
        conn = await self.uow.connection()
        row = (await conn.execute(_CAMPAIGN_FOR_UPDATE if lock else _CAMPAIGN,
                                  {"org": organization_id, "campaign_id": campaign_id})).first()
        return _row_to_campaign(row) if row else None

    async def get(self, organization_id: int, campaign_id: int) -> Campaign | None:
        return await self._get(organization_id, campaign_id, False)

    async def get_for_update(self, organization_id: int, campaign_id: int) -> Campaign | None:
        return await self._get(organization_id, campaign_id, True)

    async def list(self, organization_id: int, filters: CampaignFilter, page: PageRequest) -> Page[Campaign]:
        conn = await self.uow.connection()
        condition = campaigns.c.organization_id == organization_id
        if filters.status:
            condition = sa.and_(condition, campaigns.c.status == filters.status)
        rows, total = await fetch_page(conn, list(campaigns.c), condition, [campaigns.c.id.desc()], page)
        return Page([_row_to_campaign(r) for r in rows], total, page.limit, page.offset)

    async def update(self, campaign: Campaign) -> Campaign:
        conn = await self.uow.connection()
        values = _campaign_values(campaign)
        for fixed in ("organization_id", "created_at"):
            values.pop(fixed)
        await conn.execute(campaigns.update().where(self._mine(campaign.organization_id, persisted(campaign.id)))
                           .values(**values))
        return campaign

    async def delete(self, organization_id: int, campaign_id: int) -> None:
        conn = await self.uow.connection()
        # without relying on the foreign keys' cascade (SQLite enforces it only with PRAGMA foreign_keys)
        contact_ids = sa.select(campaign_contacts.c.id).where(campaign_contacts.c.campaign_id == campaign_id,
                                                              campaign_contacts.c.organization_id == organization_id)
        await conn.execute(contact_attempts.delete().where(contact_attempts.c.contact_id.in_(contact_ids)))
        await conn.execute(campaign_contacts.delete().where(campaign_contacts.c.campaign_id == campaign_id,
                                                            campaign_contacts.c.organization_id == organization_id))
        await conn.execute(campaigns.delete().where(self._mine(organization_id, campaign_id)))

    async def using_schedule(self, organization_id: int, schedule_id: int) -> builtins.list[int]:
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(campaigns.c.id).where(
            campaigns.c.organization_id == organization_id, campaigns.c.schedule_id == schedule_id,
            campaigns.c.status.in_(SCHEDULED_STATUSES)).order_by(campaigns.c.id))
        return [row.id for row in rows]

    async def stats(self, organization_id: int, campaign_id: int) -> CampaignStats:
        conn = await self.uow.connection()
        rows = (await conn.execute(
            sa.select(campaign_contacts.c.status, sa.func.count())
            .where(campaign_contacts.c.campaign_id == campaign_id,
                   campaign_contacts.c.organization_id == organization_id)
            .group_by(campaign_contacts.c.status))).all()
        return CampaignStats.of({status: count for status, count in rows})


class SqlContactRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    @staticmethod
    def _mine(organization_id: int, campaign_id: int) -> Any:
        return sa.and_(campaign_contacts.c.organization_id == organization_id,
                       campaign_contacts.c.campaign_id == campaign_id)

    async def add_many(self, organization_id: int, campaign_id: int, contacts: Sequence[Contact]) -> int:
        if not contacts:
            return 0
        conn = await self.uow.connection()
        rows = [{**_contact_values(c), "organization_id": organization_id, "campaign_id": campaign_id}
                for c in contacts]
        # ON CONFLICT (campaign_id, phone) DO NOTHING: a number the campaign has is a duplicate, under any
        # concurrency; RETURNING names the rows really inserted
        stmt = insert(campaign_contacts, self.uow.dialect).on_conflict_do_nothing(
            index_elements=["campaign_id", "phone"]).returning(campaign_contacts.c.id)
        return len((await conn.execute(stmt, rows)).all())

    async def get(self, organization_id: int, campaign_id: int, contact_id: int) -> Contact | None:
        conn = await self.uow.connection()
        row = (await conn.execute(_CONTACT, {"org": organization_id, "campaign_id": campaign_id,
                                             "id": contact_id})).first()
        return _row_to_contact(row) if row else None

    async def find_by_phone(self, organization_id: int, campaign_id: int, phone: str) -> Contact | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(campaign_contacts).where(
            self._mine(organization_id, campaign_id), campaign_contacts.c.phone == phone))).first()
        return _row_to_contact(row) if row else None

    async def list(self, organization_id: int, campaign_id: int, filters: ContactFilter,
                   page: PageRequest) -> Page[Contact]:
        conn = await self.uow.connection()
        condition = self._mine(organization_id, campaign_id)
        if filters.status:
            condition = sa.and_(condition, campaign_contacts.c.status == filters.status)
        rows, total = await fetch_page(conn, list(campaign_contacts.c), condition, [campaign_contacts.c.id], page)
        return Page([_row_to_contact(r) for r in rows], total, page.limit, page.offset)

    async def update(self, contact: Contact) -> Contact:
        conn = await self.uow.connection()
        values = _contact_values(contact)
        for fixed in ("organization_id", "campaign_id", "phone", "created_at", "cause_depth"):
            values.pop(fixed)
        await conn.execute(_UPDATE_CONTACT, {**values, "where_organization_id": contact.organization_id,
                                             "where_campaign_id": contact.campaign_id, "where_id": contact.id})
        return contact

    async def delete(self, organization_id: int, campaign_id: int, contact_id: int) -> None:
        conn = await self.uow.connection()
        mine = sa.select(campaign_contacts.c.id).where(self._mine(organization_id, campaign_id),
                                                       campaign_contacts.c.id == contact_id)
        await conn.execute(contact_attempts.delete().where(contact_attempts.c.contact_id.in_(mine)))
        await conn.execute(campaign_contacts.delete().where(self._mine(organization_id, campaign_id),
                                                            campaign_contacts.c.id == contact_id))

    async def exists_in(self, organization_id: int, campaign_id: int) -> bool:
        conn = await self.uow.connection()
        found = await conn.execute(sa.select(sa.literal(1)).where(self._mine(organization_id, campaign_id)).limit(1))
        return found.first() is not None

    async def cancel_open(self, organization_id: int, campaign_id: int, reason: str,
                          at: datetime) -> builtins.list[int]:
        conn = await self.uow.connection()
        result = await conn.execute(campaign_contacts.update().where(
            self._mine(organization_id, campaign_id), campaign_contacts.c.status.in_(OPEN_CONTACT_STATUSES))
            .values(status="cancelled", reason=reason, next_attempt_at=None, updated_at=at)
            .returning(campaign_contacts.c.id))
        return [int(row[0]) for row in result]

    async def count(self, organization_id: int, campaign_id: int) -> int:
        conn = await self.uow.connection()
        found = await conn.execute(sa.select(sa.func.count()).select_from(campaign_contacts)
                                   .where(self._mine(organization_id, campaign_id)))
        return int(found.scalar_one())

    async def replan_waiting(self, organization_id: int, campaign_id: int, reason: str, at: datetime) -> int:
        conn = await self.uow.connection()
        result = await conn.execute(campaign_contacts.update().where(
            self._mine(organization_id, campaign_id), campaign_contacts.c.status.in_(OPEN_CONTACT_STATUSES),
            campaign_contacts.c.reason == reason, campaign_contacts.c.next_attempt_at > at)
            .values(next_attempt_at=at, reason=None, updated_at=at))
        return int(result.rowcount or 0)

    async def add_attempt(self, organization_id: int, attempt: ContactAttempt) -> None:
        conn = await self.uow.connection()
        stmt = insert(contact_attempts, self.uow.dialect).values(
            organization_id=organization_id, contact_id=attempt.contact_id, attempt=attempt.attempt,
            call_id=attempt.call_id, status=attempt.status, started_at=attempt.started_at,
            ended_at=attempt.ended_at).on_conflict_do_nothing(index_elements=["contact_id", "attempt"])
        if not (await conn.execute(stmt)).rowcount:
            raise Conflict(f"contact {attempt.contact_id} has an attempt {attempt.attempt} already")

    async def attempts(self, organization_id: int, contact_id: int) -> builtins.list[ContactAttempt]:
        conn = await self.uow.connection()
        rows = (await conn.execute(sa.select(contact_attempts).where(
            contact_attempts.c.organization_id == organization_id, contact_attempts.c.contact_id == contact_id)
            .order_by(contact_attempts.c.attempt))).all()
        return [ContactAttempt(r.contact_id, r.attempt, r.call_id, r.status, r.started_at, r.ended_at) for r in rows]
