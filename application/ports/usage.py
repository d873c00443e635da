"""Port for usage accounting: features record what is billable; the usage feature reports it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Protocol

from domain.usage import LedgerEntry

CALL_SECONDS = "call_seconds"


class UsageRecorder(Protocol):
    async def record(self, organization_id: int, kind: str, quantity: float, at: datetime, reference: str, *,
                     agent_id: int | None = None, campaign_id: int | None = None) -> None:
        """Record ``quantity`` of ``kind`` (e.g. ``call_seconds``) once per (organization, kind, reference):
        recording the same reference again changes nothing. ``agent_id`` and ``campaign_id``: the dimensions of
        the usage (a call's agent and campaign), for the breakdowns."""
        ...

    async def total(self, organization_id: int, kind: str, start: datetime, end: datetime) -> float:
        """The sum of ``kind`` recorded at instants in [start, end)."""
        ...


CALLS = "calls"
SMS_SEGMENTS = "sms_segments"


class UsageLedger(Protocol):
    """The append-only usage ledger and its per-period and per-day counters (the usage feature's storage).

    Every write runs in the caller's unit of work, so it commits or rolls back with what it measures."""

    async def append(self, entry: LedgerEntry) -> tuple[int, int] | None:
        """Insert the entry unless its (source_type, source_id, metric) is already in the ledger; when inserted,
        add its quantity to the period counter and the day counter in the same transaction and return the
        period's ``used`` (before, after). A duplicate changes nothing and returns None."""
        ...

    async def reserve(self, organization_id: int, period: str, metric: str, source_type: str, source_id: str,
                      quantity: int, limit: int | None) -> bool:
        """Hold ``quantity`` of the period's counter for a source not yet measured, atomically: with a ``limit``,
        only while ``used + reserved + quantity <= limit`` (a conditional UPDATE; False otherwise, nothing held).
        Holding for a source that already holds is True and changes nothing."""
        ...

    async def release(self, source_type: str, source_id: str, metric: str) -> None:
        """Give back what the source holds (once; nothing when it holds nothing)."""
        ...

    async def mark_threshold(self, organization_id: int, period: str, metric: str, percent: int) -> bool:
        """True the first time the (organization, period, metric, percent) is marked, False afterwards."""
        ...

    async def used(self, organization_id: int, period: str) -> dict[str, int]:
        """The period counters' ``used`` by metric (metrics without usage are absent)."""
        ...

    async def used_by_organization(self, period: str, organization_ids: Sequence[int]) -> dict[int, dict[str, int]]:
        """``used`` for many organizations at once (the period close): organization → metric → used."""
        ...

    async def daily(self, organization_id: int, metric: str, start: date, end: date) -> dict[date, int]:
        """The day counters of the metric for days in [start, end)."""
        ...

    async def hourly(self, organization_id: int, metric: str, start: datetime, end: datetime) -> dict[datetime, int]:
        """The ledger's quantities of ``metric`` by UTC hour (the hour's start) for entries in [start, end)."""
        ...

    async def breakdown(self, organization_ids: Sequence[int], metric: str, start: datetime, end: datetime,
                        group_by: str) -> dict[tuple[int | None, datetime], int]:
        """The ledger's quantities of ``metric`` for entries of these organizations in [start, end), by
        (group, UTC hour): the group is the entry's ``agent_id``, ``campaign_id`` or ``organization_id``
        (``group_by`` agent, campaign or organization); None when the entry has none."""
        ...

    async def used_between(self, organization_id: int, start: datetime, end: datetime) -> dict[str, int]:
        """The ledger's quantities by metric for entries that occurred at instants in [start, end) (billing a
        period whose plan changed: the usage of each plan's interval)."""
        ...


@dataclass(frozen=True, slots=True)
class ChildUsed:
    """A partner's sub-organization and its period counters' ``used`` by metric (metrics without usage absent)."""

    organization_id: int
    name: str
    plan: str
    used: dict[str, int]


class ChildrenUsage(Protocol):
    """A partner's sub-organizations with their usage of a period, read together (``GET /usage?rollup=children``,
    the dashboard's clients): one read, however many children."""

    async def of_children(self, partner_id: int, period: str) -> list[ChildUsed]:
        """The partner's live sub-organizations (deleted ones left out), by id, each with its counters of
        ``period`` (an empty ``used`` when it has none)."""
        ...


class QuotaGate(Protocol):
    """The one gate of every dial and send (``PlaceCall``, ``SendSms``): the organization's billing standing, then
    its plan's quota. Work that leads to calls without placing one yet (a campaign start, a lead, a widget
    contact) asks the standing alone (``ensure_standing``)."""

    async def admit(self, organization_id: int, metric: str, reference: str, quantity: int, at: datetime) -> None:
        """``ensure_standing``, then hold ``quantity`` of ``metric`` for the source ``reference`` (``call:<id>``,
        ``sms:<id>``) in the period of ``at``, or raise QuotaExceeded (403) when the organization's plan has no room
        left and no overage."""
        ...

    async def ensure_standing(self, organization_id: int, at: datetime) -> None:
        """Raise ServiceOnHold (402 payment_required) when the organization's subscription holds new work: past_due
        for more than 7 days, or canceled when its period ended (``domain.billing.service_hold``)."""
        ...
