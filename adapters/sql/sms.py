"""SQL repository for SMS messages."""

from __future__ import annotations

import builtins
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from adapters.sql.calls_tables import dnc_lists
from adapters.sql.dialect import insert
from adapters.sql.paging import fetch_page
from adapters.sql.sms_tables import sms_messages
from adapters.sql.uow import SqlUnitOfWork
from application.ports.platform import Page, PageRequest
from application.ports.sms import MessageRef, SmsFilter
from domain.sms import OPT_OUT_PURPOSE, SmsMessage, StatusEvent

t = sms_messages


def _events_out(events: tuple[StatusEvent, ...]) -> list[dict[str, Any]]:
    return [{"status": e.status, "at": e.at.isoformat(), "applied": e.applied, "error_code": e.error_code}
            for e in events]


def _events_in(rows: Any) -> tuple[StatusEvent, ...]:
    return tuple(StatusEvent(e["status"], datetime.fromisoformat(e["at"]), bool(e.get("applied", True)),
                             e.get("error_code")) for e in rows or [])


def _row_to_message(row: Any) -> SmsMessage:
    return SmsMessage(
        id=row.id, organization_id=row.organization_id, direction=row.direction, from_phone=row.from_phone,
        to_phone=row.to_phone, body=row.body, status=row.status, encoding=row.encoding, segments=row.segments,
        created_at=row.created_at, updated_at=row.updated_at, from_phone_number_id=row.from_phone_number_id,
        error_code=row.error_code, sent_at=row.sent_at, delivered_at=row.delivered_at,
        status_events=_events_in(row.status_events), carrier_id=row.carrier_id,
        carrier_state=dict(row.carrier_state or {}), next_check_at=row.next_check_at, cause_depth=row.cause_depth,
    )


def _changing(message: SmsMessage) -> dict[str, Any]:
    return {
        "status": message.status, "error_code": message.error_code, "sent_at": message.sent_at,
        "delivered_at": message.delivered_at, "status_events": _events_out(message.status_events),
        "carrier_id": message.carrier_id, "carrier_state": message.carrier_state,
        "next_check_at": message.next_check_at, "updated_at": message.updated_at,
    }


class SqlSmsRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def add(self, message: SmsMessage) -> SmsMessage:
        conn = await self.uow.connection()
        row = (await conn.execute(t.insert().returning(*t.c), {
            "organization_id": message.organization_id, "direction": message.direction,
            "from_phone": message.from_phone, "to_phone": message.to_phone,
            "from_phone_number_id": message.from_phone_number_id, "body": message.body,
            "encoding": message.encoding, "segments": message.segments, "created_at": message.created_at,
            "cause_depth": message.cause_depth,
            **_changing(message),
        })).one()
        return _row_to_message(row)

    async def _one(self, *conditions: Any, for_update: bool = False) -> SmsMessage | None:
        conn = await self.uow.connection()
        query = sa.select(t).where(*conditions)
        if for_update and self.uow.dialect == "postgresql":
            query = query.with_for_update()
        row = (await conn.execute(query)).first()
        return _row_to_message(row) if row else None

    async def get(self, organization_id: int, message_id: int, *, for_update: bool = False) -> SmsMessage | None:
        return await self._one(t.c.organization_id == organization_id, t.c.id == message_id, for_update=for_update)

    async def find_by_carrier_id(self, carrier_id: str) -> SmsMessage | None:
        return await self._one(t.c.carrier_id == carrier_id, for_update=True)

    async def list(self, organization_id: int, filters: SmsFilter, page: PageRequest) -> Page[SmsMessage]:
        conn = await self.uow.connection()
        where = [t.c.organization_id == organization_id]
        if filters.to is not None:
            where.append(t.c.to_phone == filters.to)
        if filters.status is not None:
            where.append(t.c.status == filters.status)
        if filters.direction is not None:
            where.append(t.c.direction == filters.direction)
        if filters.created_after is not None:
            where.append(t.c.created_at >= filters.created_after)
        if filters.created_before is not None:
            where.append(t.c.created_at < filters.created_before)
        rows, total = await fetch_page(conn, list(t.c), sa.and_(*where), [t.c.created_at.desc(), t.c.id.desc()],
                                       page)
        return Page([_row_to_message(r) for r in rows], total, page.limit, page.offset)

    async def update(self, message: SmsMessage) -> SmsMessage:
        conn = await self.uow.connection()
        await conn.execute(t.update().where(t.c.organization_id == message.organization_id, t.c.id == message.id)
                           .values(**_changing(message)))
        return message

    async def due(self, now: datetime, limit: int) -> builtins.list[MessageRef]:
        conn = await self.uow.connection()
        rows = (await conn.execute(sa.select(t.c.organization_id, t.c.id).where(t.c.next_check_at <= now)
                                   .order_by(t.c.next_check_at, t.c.id).limit(limit))).all()
        return [MessageRef(r.organization_id, r.id) for r in rows]

    async def next_due(self) -> datetime | None:
        conn = await self.uow.connection()
        return (await conn.execute(sa.select(sa.func.min(t.c.next_check_at)))).scalar_one_or_none()

    async def last_texted_by(self, sender: str, recipient: str) -> int | None:
        conn = await self.uow.connection()
        # only the simulator's shared sender is looked up (a reply to it): a scan of the simulator's messages
        return (await conn.execute(
            sa.select(t.c.organization_id).where(t.c.to_phone == recipient, t.c.from_phone == sender,
                                                 t.c.direction == "outbound")
            .order_by(t.c.created_at.desc(), t.c.id.desc()).limit(1))).scalar_one_or_none()

    async def opt_out_list_ids(self, organization_id: int, name: str) -> builtins.list[int]:
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(dnc_lists.c.id).where(
            dnc_lists.c.organization_id == organization_id, dnc_lists.c.name == name).order_by(dnc_lists.c.id))
        return [int(r.id) for r in rows]

    async def ensure_opt_out_list(self, organization_id: int, name: str, description: str, at: datetime) -> int:
        conn = await self.uow.connection()
        await conn.execute(insert(dnc_lists, self.uow.dialect).values(
            organization_id=organization_id, name=name, description=description, created_at=at, updated_at=at,
            purpose=OPT_OUT_PURPOSE).on_conflict_do_nothing(index_elements=["organization_id", "purpose"]))
        return int((await conn.execute(sa.select(dnc_lists.c.id).where(
            dnc_lists.c.organization_id == organization_id, dnc_lists.c.purpose == OPT_OUT_PURPOSE))).scalar_one())
