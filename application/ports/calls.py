"""Ports for calls, call logs and the mid-call booking hook."""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from application.ports.platform import Page, PageRequest
from domain.calls import Call, CallLog
from domain.telephony import StatusCounts


@dataclass(frozen=True, slots=True)
class CallFilter:
    status: str | None = None
    agent_id: int | None = None
    campaign_id: int | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None


@dataclass(frozen=True, slots=True)
class CallLogFilter:
    agent_id: int | None = None
    status: str | None = None
    start: datetime | None = None  # ended_at >= start
    end: datetime | None = None  # ended_at < end


@dataclass(frozen=True, slots=True)
class CallRef:
    organization_id: int
    call_id: str


class CallRepository(Protocol):
    async def add(self, call: Call) -> Call: ...

    async def get(self, organization_id: int, call_id: str) -> Call | None: ...

    async def get_for_update(self, organization_id: int, call_id: str) -> Call | None:
        """Like get, but locks the row until the transaction ends (where the database can)."""
        ...

    async def update(self, call: Call) -> Call: ...

    async def list(self, organization_id: int, filters: CallFilter, page: PageRequest) -> Page[Call]: ...

    async def get_by_key(self, organization_id: int, idempotency_key: str) -> Call | None:
        """The call placed with this key (a campaign attempt's), if any."""
        ...

    async def find_by_telephony_ref(self, organization_id: int, telephony_ref: str) -> Call | None:
        """The call the carrier knows as ``telephony_ref`` (its call id), locked until the transaction ends."""
        ...

    async def count_unfinished_of_campaign(self, organization_id: int, campaign_id: int) -> int:
        """Calls of the campaign not in a final status (queued, ringing, in progress): its slots in use."""
        ...

    async def count_active(self, organization_id: int) -> int:
        """Calls of the organization that hold a line (ringing or in progress)."""
        ...

    async def oldest_queued(self, organization_id: int, limit: int, *, lock: bool = False) -> builtins.list[Call]:
        """The organization's dial queue: higher ``priority`` first, then the earlier ``due_at``, then the older.
        ``lock``: the calls read are locked until the transaction ends (as ``get_for_update`` locks one)."""
        ...

    async def lock_organization(self, organization_id: int) -> None:
        """Serialize dispatchers of one organization until the transaction ends (concurrency limit)."""
        ...

    async def stats(self, organization_id: int, start: datetime, end: datetime) -> StatusCounts:
        """Aggregates over the organization's calls created in [start, end)."""
        ...

    # worker scans: the only reads not filtered by organization; each returns references that the worker
    # then loads through the organization-filtered methods above
    async def organizations_with_queued(self, limit: int, organization_id: int | None = None) -> builtins.list[int]: ...

    async def due(self, now: datetime, limit: int, organization_id: int | None = None) -> builtins.list[CallRef]:
        """Calls holding a line whose telephony adapter asked to be polled at or before ``now``."""
        ...

    async def overdue(self, now: datetime, limit: int, organization_id: int | None = None) -> builtins.list[CallRef]:
        """Unfinished calls whose deadline has passed (the sweeper ends them)."""
        ...

    async def next_due(self) -> datetime | None:
        """The earliest time ``due`` or ``overdue`` will return a call (the worker sleeps until then)."""
        ...


class CallLogRepository(Protocol):
    async def add(self, log: CallLog) -> CallLog: ...

    async def get(self, organization_id: int, call_log_id: int) -> CallLog | None: ...

    async def list(self, organization_id: int, filters: CallLogFilter, page: PageRequest) -> Page[CallLog]: ...

    async def find_recording(self, call_log_id: int) -> tuple[int, str | None] | None:
        """(organization id, recording key) of a call log, unfiltered: a signed recording URL is its own
        credential and names no organization, so the signature check needs the owner first."""
        ...


class CallPlacementReads(Protocol):
    """What placing a call asks of the organization's stores, read ahead at once (on SQL one statement instead
    of five): its plan and dialing policy, its billing account, the provider and caller number a new call takes,
    and whether the destination is on any of its Do-Not-Call lists. Nothing is decided here: the repositories,
    the DNC gate and the quota gate ask as they always do, and each of these questions is answered from what was
    read ahead once, in the same transaction (a backend that reads nothing ahead answers each as it is asked)."""

    async def read_ahead(self, organization_id: int, agent_id: int, destination: str) -> None: ...

