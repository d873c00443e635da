"""SQL repositories for calls, call logs and usage records."""

from __future__ import annotations

import builtins
import zlib
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from adapters.sql.calls_tables import call_logs, calls
from adapters.sql.metadata import UtcDateTime
from adapters.sql.paging import fetch_page
from adapters.sql.uow import SqlUnitOfWork
from application.ports.calls import CallFilter, CallLogFilter, CallRef
from application.ports.platform import Page, PageRequest
from domain.calls import ACTIVE_STATUSES, FINAL_STATUSES, STATUSES, Call, CallLog, CallStatus
from domain.telephony import StatusCounts

# a campaign's calls not yet final (the dialer's cap, counted under the campaign's lock at every step): named
# statuses, so ix_calls_campaign_status (campaign_id, status) reads only those entries, never the campaign's
# finished calls (a NOT IN reads every call the campaign ever made); built once with bound parameters
_UNFINISHED_OF_CAMPAIGN = (sa.select(sa.func.count()).select_from(calls).where(
    calls.c.campaign_id == sa.bindparam("campaign_id"), calls.c.organization_id == sa.bindparam("organization_id"),
    calls.c.status.in_([s for s in STATUSES if s not in FINAL_STATUSES])))

# the statements of a carrier's status callback (a call read under lock, then written), built once with bound
# parameters: building a statement and its cache key per request cost more CPU than sending it
_GET = sa.select(calls).where(calls.c.organization_id == sa.bindparam("org"), calls.c.id == sa.bindparam("call_id"))
_GET_FOR_UPDATE = _GET.with_for_update()
_BY_TELEPHONY_REF = (sa.select(calls).where(calls.c.organization_id == sa.bindparam("org"),
                                            calls.c.telephony_ref == sa.bindparam("ref"))
                     .order_by(calls.c.created_at.desc()).limit(1).with_for_update())
_UPDATE = calls.update().where(calls.c.organization_id == sa.bindparam("where_org"),
                               calls.c.id == sa.bindparam("where_id"))
"""Sets the columns named by the parameters (every column a call has but its id, organization and creation)."""
_INSERT_LOG = call_logs.insert().returning(call_logs.c.id)
# the dial queue's reads, built once with bound parameters (every dial of the calls' pass runs both)
_ACTIVE = sa.select(sa.func.count()).select_from(calls).where(calls.c.organization_id == sa.bindparam("org"),
                                                                calls.c.status.in_(ACTIVE_STATUSES))
_QUEUED = sa.select(calls).where(calls.c.organization_id == sa.bindparam("org"),
                                 calls.c.status == CallStatus.QUEUED).order_by(
    calls.c.priority.desc(), calls.c.due_at, calls.c.created_at, calls.c.id).limit(sa.bindparam("limit"))
_QUEUED_FOR_UPDATE = _QUEUED.with_for_update()


def _row_to_call(row: Any) -> Call:
    return Call(
        id=row.id, organization_id=row.organization_id, agent_id=row.agent_id,
        destination_phone=row.destination_phone, from_phone=row.from_phone, status=row.status,
        contact_name=row.contact_name, custom_data=dict(row.custom_data or {}), prompt=row.prompt,
        first_message=row.first_message, max_duration_seconds=row.max_duration_seconds,
        provider_id=row.provider_id, end_reason=row.end_reason, outcome=row.outcome,
        duration_seconds=row.duration_seconds, transferred_to=row.transferred_to, call_log_id=row.call_log_id,
        telephony_ref=row.telephony_ref, telephony_state=dict(row.telephony_state or {}),
        next_check_at=row.next_check_at, deadline_at=row.deadline_at, created_at=row.created_at,
        updated_at=row.updated_at, started_at=row.started_at, answered_at=row.answered_at, ended_at=row.ended_at,
        priority=row.priority, due_at=row.due_at, campaign_id=row.campaign_id, contact_id=row.contact_id,
        idempotency_key=row.idempotency_key, cause_depth=row.cause_depth, agent_version=row.agent_version,
        direction=row.direction, end_message=row.end_message,
    )


def _call_values(call: Call) -> dict[str, Any]:
    return {
        "id": call.id, "organization_id": call.organization_id, "agent_id": call.agent_id,
        "provider_id": call.provider_id, "destination_phone": call.destination_phone,
        "from_phone": call.from_phone, "contact_name": call.contact_name, "custom_data": call.custom_data,
        "prompt": call.prompt, "first_message": call.first_message,
        "max_duration_seconds": call.max_duration_seconds, "status": call.status, "end_reason": call.end_reason,
        "outcome": call.outcome, "duration_seconds": call.duration_seconds, "transferred_to": call.transferred_to,
        "call_log_id": call.call_log_id, "telephony_ref": call.telephony_ref,
        "telephony_state": call.telephony_state, "next_check_at": call.next_check_at,
        "deadline_at": call.deadline_at, "created_at": call.created_at, "updated_at": call.updated_at,
        "started_at": call.started_at, "answered_at": call.answered_at, "ended_at": call.ended_at,
        "priority": call.priority, "due_at": call.due_at or call.created_at,
        "campaign_id": call.campaign_id, "contact_id": call.contact_id, "idempotency_key": call.idempotency_key,
        "cause_depth": call.cause_depth, "agent_version": call.agent_version,
        "direction": call.direction, "end_message": call.end_message,
    }


class SqlCallRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def add(self, call: Call) -> Call:
        conn = await self.uow.connection()
        await conn.execute(calls.insert(), _call_values(call))
        return call

    async def _get(self, organization_id: int, call_id: str, lock: bool) -> Call | None:
        conn = await self.uow.connection()
        row = (await conn.execute(_GET_FOR_UPDATE if lock else _GET,
                                  {"org": organization_id, "call_id": call_id})).first()
        return _row_to_call(row) if row else None

    async def get(self, organization_id: int, call_id: str) -> Call | None:
        return await self._get(organization_id, call_id, False)

    async def get_for_update(self, organization_id: int, call_id: str) -> Call | None:
        return await self._get(organization_id, call_id, True)

    async def find_by_telephony_ref(self, organization_id: int, telephony_ref: str) -> Call | None:
        conn = await self.uow.connection()
        row = (await conn.execute(_BY_TELEPHONY_REF, {"org": organization_id, "ref": telephony_ref})).first()
        return _row_to_call(row) if row else None

    async def update(self, call: Call) -> Call:
        conn = await self.uow.connection()
        values = _call_values(call)
        for fixed in ("id", "organization_id", "created_at"):
            values.pop(fixed)
        await conn.execute(_UPDATE, {"where_org": call.organization_id, "where_id": call.id, **values})
        return call

    async def list(self, organization_id: int, filters: CallFilter, page: PageRequest) -> Page[Call]:
        conn = await self.uow.connection()
        where = [calls.c.organization_id == organization_id]
        if filters.status:
            where.append(calls.c.status == filters.status)
        if filters.agent_id is not None:
            where.append(calls.c.agent_id == filters.agent_id)
        if filters.campaign_id is not None:
            where.append(calls.c.campaign_id == filters.campaign_id)
        if filters.created_after is not None:
            where.append(calls.c.created_at >= filters.created_after)
        if filters.created_before is not None:
            where.append(calls.c.created_at < filters.created_before)
        newest_first = [calls.c.created_at.desc(), calls.c.id.desc()]
        rows, total = await fetch_page(conn, list(calls.c), sa.and_(*where), newest_first, page)
        return Page([_row_to_call(r) for r in rows], total, page.limit, page.offset)

    async def get_by_key(self, organization_id: int, idempotency_key: str) -> Call | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(calls).where(calls.c.organization_id == organization_id,
                                                         calls.c.idempotency_key == idempotency_key))).first()
        return _row_to_call(row) if row else None

    async def count_unfinished_of_campaign(self, organization_id: int, campaign_id: int) -> int:
        conn = await self.uow.connection()
        return (await conn.execute(_UNFINISHED_OF_CAMPAIGN, {"campaign_id": campaign_id,
                                                             "organization_id": organization_id})).scalar_one()

    async def count_active(self, organization_id: int) -> int:
        conn = await self.uow.connection()
        return (await conn.execute(_ACTIVE, {"org": organization_id})).scalar_one()

    async def oldest_queued(self, organization_id: int, limit: int, *, lock: bool = False) -> builtins.list[Call]:
        conn = await self.uow.connection()
        rows = await conn.execute(_QUEUED_FOR_UPDATE if lock else _QUEUED, {"org": organization_id, "limit": limit})
        return [_row_to_call(r) for r in rows]

    async def lock_organization(self, organization_id: int) -> None:
        """PostgreSQL: a transaction-scoped advisory lock per organization. SQLite: write transactions are
        already serialized (BEGIN IMMEDIATE)."""
        if self.uow.dialect != "postgresql":
            return
        conn = await self.uow.connection()
        key = zlib.crc32(f"parley:calls:{organization_id}".encode())
        await conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})

    async def stats(self, organization_id: int, start: datetime, end: datetime) -> StatusCounts:
        conn = await self.uow.connection()
        where = sa.and_(calls.c.organization_id == organization_id, calls.c.created_at >= start,
                        calls.c.created_at < end)
        answered = calls.c.answered_at.is_not(None)
        duration = sa.func.coalesce(calls.c.duration_seconds, 0)
        rows = (await conn.execute(
            sa.select(
                calls.c.status,
                sa.func.count(),
                sa.func.count(calls.c.started_at),
                sa.func.sum(sa.case((answered, 1), else_=0)),
                sa.func.sum(sa.case((answered, duration), else_=0)),
                sa.func.sum(duration),
            ).where(where).group_by(calls.c.status)
        )).all()
        by_status = {r[0]: int(r[1]) for r in rows}
        return StatusCounts(by_status, sum(int(r[2] or 0) for r in rows), sum(int(r[3] or 0) for r in rows),
                            sum(int(r[4] or 0) for r in rows), sum(int(r[5] or 0) for r in rows))

    async def organizations_with_queued(self, limit: int, organization_id: int | None = None) -> builtins.list[int]:
        conn = await self.uow.connection()
        query = sa.select(calls.c.organization_id).where(calls.c.status == CallStatus.QUEUED)
        if organization_id is not None:
            query = query.where(calls.c.organization_id == organization_id)
        rows = await conn.execute(query.group_by(calls.c.organization_id)
                                  .order_by(sa.func.min(calls.c.created_at)).limit(limit))
        return [int(r[0]) for r in rows]

    async def due(self, now: datetime, limit: int, organization_id: int | None = None) -> builtins.list[CallRef]:
        conn = await self.uow.connection()
        query = sa.select(calls.c.organization_id, calls.c.id).where(
            calls.c.next_check_at.is_not(None), calls.c.next_check_at <= now, calls.c.status.in_(ACTIVE_STATUSES))
        if organization_id is not None:
            query = query.where(calls.c.organization_id == organization_id)
        rows = await conn.execute(query.order_by(calls.c.next_check_at).limit(limit))
        return [CallRef(int(r[0]), r[1]) for r in rows]

    async def overdue(self, now: datetime, limit: int, organization_id: int | None = None) -> builtins.list[CallRef]:
        conn = await self.uow.connection()
        query = sa.select(calls.c.organization_id, calls.c.id).where(
            calls.c.ended_at.is_(None), calls.c.deadline_at < now, calls.c.status.not_in(FINAL_STATUSES))
        if organization_id is not None:
            query = query.where(calls.c.organization_id == organization_id)
        rows = await conn.execute(query.order_by(calls.c.deadline_at).limit(limit))
        return [CallRef(int(r[0]), r[1]) for r in rows]

    async def next_due(self) -> datetime | None:
        conn = await self.uow.connection()
        check = (await conn.execute(sa.select(sa.type_coerce(sa.func.min(calls.c.next_check_at), UtcDateTime()))
                                    .where(calls.c.status.in_(ACTIVE_STATUSES)))).scalar()
        deadline = (await conn.execute(sa.select(sa.type_coerce(sa.func.min(calls.c.deadline_at), UtcDateTime()))
                                       .where(calls.c.ended_at.is_(None), calls.c.status.not_in(FINAL_STATUSES)))
                    ).scalar()
        if deadline is not None:
            deadline += timedelta(microseconds=1)  # overdue: strictly after the deadline
        return min((t for t in (check, deadline) if t is not None), default=None)


def _row_to_log(row: Any) -> CallLog:
    return CallLog(
        id=row.id, organization_id=row.organization_id, call_id=row.call_id, agent_id=row.agent_id,
        direction=row.direction, from_phone=row.from_phone, to_phone=row.to_phone, status=row.status,
        end_reason=row.end_reason, outcome=row.outcome, duration_seconds=row.duration_seconds,
        transcript=list(row.transcript or []), summary=row.summary, contact_name=row.contact_name,
        recording_key=row.recording_key, started_at=row.started_at, answered_at=row.answered_at,
        ended_at=row.ended_at, created_at=row.created_at, agent_version=row.agent_version,
        turns=list(row.turns or []), analysis=row.analysis,
    )


class SqlCallLogRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def add(self, log: CallLog) -> CallLog:
        conn = await self.uow.connection()
        new_id = (await conn.execute(_INSERT_LOG, {
            "organization_id": log.organization_id, "call_id": log.call_id, "agent_id": log.agent_id,
            "direction": log.direction, "from_phone": log.from_phone, "to_phone": log.to_phone,
            "contact_name": log.contact_name, "status": log.status, "end_reason": log.end_reason,
            "outcome": log.outcome, "duration_seconds": log.duration_seconds, "transcript": log.transcript,
            "summary": log.summary, "recording_key": log.recording_key, "started_at": log.started_at,
            "answered_at": log.answered_at, "ended_at": log.ended_at, "created_at": log.created_at,
            "agent_version": log.agent_version, "turns": log.turns or None, "analysis": log.analysis,
        })).scalar_one()
        return replace(log, id=new_id)

    async def get(self, organization_id: int, call_log_id: int) -> CallLog | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(call_logs).where(
            call_logs.c.organization_id == organization_id, call_logs.c.id == call_log_id))).first()
        return _row_to_log(row) if row else None

    async def list(self, organization_id: int, filters: CallLogFilter, page: PageRequest) -> Page[CallLog]:
        conn = await self.uow.connection()
        where = [call_logs.c.organization_id == organization_id]
        if filters.agent_id is not None:
            where.append(call_logs.c.agent_id == filters.agent_id)
        if filters.status:
            where.append(call_logs.c.status == filters.status)
        if filters.start is not None:
            where.append(call_logs.c.ended_at >= filters.start)
        if filters.end is not None:
            where.append(call_logs.c.ended_at < filters.end)
        rows, total = await fetch_page(conn, list(call_logs.c), sa.and_(*where), [call_logs.c.id.desc()], page)
        return Page([_row_to_log(r) for r in rows], total, page.limit, page.offset)

    async def find_recording(self, call_log_id: int) -> tuple[int, str | None] | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(call_logs.c.organization_id, call_logs.c.recording_key)
                                  .where(call_logs.c.id == call_log_id))).first()
        return (int(row[0]), row[1]) if row else None
