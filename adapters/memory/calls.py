"""In-memory calls, call logs and usage records."""

from __future__ import annotations

import builtins
import copy
from dataclasses import replace
from datetime import datetime, timedelta

from adapters.memory.store import InMemoryUnitOfWork
from application.ports.calls import CallFilter, CallLogFilter, CallRef
from application.ports.platform import Page, PageRequest
from domain.calls import ACTIVE_STATUSES, Call, CallLog, CallStatus
from domain.telephony import StatusCounts


class InMemoryCallRepository:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def _calls(self) -> dict[str, Call]:
        return (await self.uow.tables())["calls"]

    async def add(self, call: Call) -> Call:
        table = await self._calls()
        if call.id in table:
            raise ValueError("duplicate call id")
        if call.idempotency_key is not None and await self.get_by_key(call.organization_id, call.idempotency_key):
            raise ValueError("duplicate call key")
        table[call.id] = copy.deepcopy(call)
        return call

    async def get(self, organization_id: int, call_id: str) -> Call | None:
        call = (await self._calls()).get(call_id)
        return copy.deepcopy(call) if call is not None and call.organization_id == organization_id else None

    get_for_update = get

    async def find_by_telephony_ref(self, organization_id: int, telephony_ref: str) -> Call | None:
        found = next((c for c in (await self._calls()).values()
                      if c.organization_id == organization_id and c.telephony_ref == telephony_ref), None)
        return copy.deepcopy(found) if found is not None else None

    async def update(self, call: Call) -> Call:
        table = await self._calls()
        current = table.get(call.id)
        if current is not None and current.organization_id == call.organization_id:
            table[call.id] = replace(copy.deepcopy(call), created_at=current.created_at)
        return call

    async def list(self, organization_id: int, filters: CallFilter, page: PageRequest) -> Page[Call]:
        found = [
            c for c in (await self._calls()).values()
            if c.organization_id == organization_id
            and (filters.status is None or c.status == filters.status)
            and (filters.agent_id is None or c.agent_id == filters.agent_id)
            and (filters.campaign_id is None or c.campaign_id == filters.campaign_id)
            and (filters.created_after is None or (c.created_at is not None and c.created_at >= filters.created_after))
            and (filters.created_before is None or (c.created_at is not None and c.created_at < filters.created_before))
        ]
        found.sort(key=lambda c: (c.created_at, c.id), reverse=True)
        return page.slice(copy.deepcopy(found))

    async def get_by_key(self, organization_id: int, idempotency_key: str) -> Call | None:
        for c in (await self._calls()).values():
            if c.organization_id == organization_id and c.idempotency_key == idempotency_key:
                return copy.deepcopy(c)
        return None

    async def count_unfinished_of_campaign(self, organization_id: int, campaign_id: int) -> int:
        return sum(1 for c in (await self._calls()).values()
                   if c.organization_id == organization_id and c.campaign_id == campaign_id and not c.is_final)

    async def count_active(self, organization_id: int) -> int:
        return sum(1 for c in (await self._calls()).values()
                   if c.organization_id == organization_id and c.status in ACTIVE_STATUSES)

    async def oldest_queued(self, organization_id: int, limit: int, *, lock: bool = False) -> builtins.list[Call]:
        queued = sorted((c for c in (await self._calls()).values()
                         if c.organization_id == organization_id and c.status == CallStatus.QUEUED),
                        key=lambda c: (-c.priority, c.due_at or c.created_at, c.created_at, c.id))
        return copy.deepcopy(queued[:limit])

    async def lock_organization(self, organization_id: int) -> None:
        await self.uow.tables()  # the store's lock is held for the whole transaction

    async def stats(self, organization_id: int, start: datetime, end: datetime) -> StatusCounts:
        by_status: dict[str, int] = {}
        dialled = answered = answered_seconds = total_seconds = 0
        for c in (await self._calls()).values():
            if c.organization_id != organization_id or c.created_at is None or not (start <= c.created_at < end):
                continue
            by_status[c.status] = by_status.get(c.status, 0) + 1
            dialled += c.started_at is not None
            seconds = c.duration_seconds or 0
            total_seconds += seconds
            if c.answered_at is not None:
                answered += 1
                answered_seconds += seconds
        return StatusCounts(by_status, dialled, answered, answered_seconds, total_seconds)

    async def organizations_with_queued(self, limit: int, organization_id: int | None = None) -> builtins.list[int]:
        first: dict[int, datetime] = {}
        for c in (await self._calls()).values():
            if c.status == CallStatus.QUEUED and (organization_id is None or c.organization_id == organization_id):
                at = c.created_at or datetime.min
                first[c.organization_id] = min(first.get(c.organization_id, at), at)
        return [org for org, _ in sorted(first.items(), key=lambda e: e[1])][:limit]

    async def due(self, now: datetime, limit: int, organization_id: int | None = None) -> builtins.list[CallRef]:
        found = sorted(
            ((c.next_check_at, c) for c in (await self._calls()).values()
             if c.status in ACTIVE_STATUSES and c.next_check_at is not None and c.next_check_at <= now
             and (organization_id is None or c.organization_id == organization_id)),
            key=lambda pair: pair[0])
        return [CallRef(c.organization_id, c.id) for _, c in found[:limit]]

    async def overdue(self, now: datetime, limit: int, organization_id: int | None = None) -> builtins.list[CallRef]:
        found = sorted(
            ((c.deadline_at, c) for c in (await self._calls()).values()
             if not c.is_final and c.deadline_at is not None and c.deadline_at < now
             and (organization_id is None or c.organization_id == organization_id)),
            key=lambda pair: pair[0])
        return [CallRef(c.organization_id, c.id) for _, c in found[:limit]]

    async def next_due(self) -> datetime | None:
        times = []
        for c in (await self._calls()).values():
            if c.status in ACTIVE_STATUSES and c.next_check_at is not None:
                times.append(c.next_check_at)
            if not c.is_final and c.deadline_at is not None:
                times.append(c.deadline_at + timedelta(microseconds=1))  # overdue: strictly after the deadline
        return min(times, default=None)


class InMemoryCallLogRepository:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def add(self, log: CallLog) -> CallLog:
        tables = await self.uow.tables()
        if any(existing.call_id == log.call_id for existing in tables["call_logs"].values()):
            raise ValueError("duplicate call log")
        stored = replace(copy.deepcopy(log), id=self.uow.store.next_id("call_logs"))
        tables["call_logs"][stored.id] = stored
        return copy.deepcopy(stored)

    async def get(self, organization_id: int, call_log_id: int) -> CallLog | None:
        log = (await self.uow.tables())["call_logs"].get(call_log_id)
        return copy.deepcopy(log) if log is not None and log.organization_id == organization_id else None

    async def list(self, organization_id: int, filters: CallLogFilter, page: PageRequest) -> Page[CallLog]:
        found = [
            log for log in (await self.uow.tables())["call_logs"].values()
            if log.organization_id == organization_id
            and (filters.agent_id is None or log.agent_id == filters.agent_id)
            and (filters.status is None or log.status == filters.status)
            and (filters.start is None or (log.ended_at is not None and log.ended_at >= filters.start))
            and (filters.end is None or (log.ended_at is not None and log.ended_at < filters.end))
        ]
        found.sort(key=lambda log: log.id, reverse=True)
        return page.slice(copy.deepcopy(found))

    async def find_recording(self, call_log_id: int) -> tuple[int, str | None] | None:
        log = (await self.uow.tables())["call_logs"].get(call_log_id)
        return (log.organization_id, log.recording_key) if log is not None else None


class NoReadAhead:
    """``CallPlacementReads`` in memory: every question is answered as it is asked, so nothing is read ahead."""

    async def read_ahead(self, organization_id: int, agent_id: int, destination: str) -> None:
        return None
