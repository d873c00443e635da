"""In-memory usage ledger (one transaction at a time, so each method is atomic as it is)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime

from adapters.memory.store import InMemoryUnitOfWork
from application.ports.usage import ChildUsed
from domain.identity import persisted
from domain.usage import LedgerEntry


class InMemoryUsageLedger:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def append(self, entry: LedgerEntry) -> tuple[int, int] | None:
        tables = await self.uow.tables()
        key = (entry.source_type, entry.source_id, entry.metric)
        if key in tables["usage_ledger"]:
            return None
        tables["usage_ledger"][key] = entry
        counter = tables["usage_counters"].setdefault((entry.organization_id, entry.period, entry.metric), [0, 0])
        before = counter[0]
        counter[0] += entry.quantity
        daily = tables["usage_daily"]
        day = (entry.organization_id, entry.metric, entry.day)
        daily[day] = daily.get(day, 0) + entry.quantity
        return before, counter[0]

    async def reserve(self, organization_id: int, period: str, metric: str, source_type: str, source_id: str,
                      quantity: int, limit: int | None) -> bool:
        tables = await self.uow.tables()
        key = (source_type, source_id, metric)
        if key in tables["usage_reservations"]:
            return True
        counter = tables["usage_counters"].setdefault((organization_id, period, metric), [0, 0])
        if limit is not None and counter[0] + counter[1] + quantity > limit:
            return False
        counter[1] += quantity
        tables["usage_reservations"][key] = (organization_id, period, quantity)
        return True

    async def release(self, source_type: str, source_id: str, metric: str) -> None:
        tables = await self.uow.tables()
        held = tables["usage_reservations"].pop((source_type, source_id, metric), None)
        if held is not None:
            organization_id, period, quantity = held
            counter = tables["usage_counters"][(organization_id, period, metric)]
            counter[1] = max(0, counter[1] - quantity)

    async def mark_threshold(self, organization_id: int, period: str, metric: str, percent: int) -> bool:
        marks = (await self.uow.tables())["usage_thresholds"]
        key = (organization_id, period, metric, percent)
        if key in marks:
            return False
        marks[key] = True
        return True

    async def used(self, organization_id: int, period: str) -> dict[str, int]:
        counters = (await self.uow.tables())["usage_counters"]
        return {metric: c[0] for (org, p, metric), c in counters.items() if org == organization_id and p == period}

    async def used_by_organization(self, period: str, organization_ids: Sequence[int]) -> dict[int, dict[str, int]]:
        wanted = set(organization_ids)
        found: dict[int, dict[str, int]] = {}
        for (org, p, metric), c in (await self.uow.tables())["usage_counters"].items():
            if org in wanted and p == period:
                found.setdefault(org, {})[metric] = c[0]
        return found

    async def daily(self, organization_id: int, metric: str, start: date, end: date) -> dict[date, int]:
        daily = (await self.uow.tables())["usage_daily"]
        return {day: used for (org, m, day), used in daily.items()
                if org == organization_id and m == metric and start <= day < end}

    async def hourly(self, organization_id: int, metric: str, start: datetime, end: datetime) -> dict[datetime, int]:
        hours: dict[datetime, int] = {}
        for entry in (await self.uow.tables())["usage_ledger"].values():
            if entry.organization_id == organization_id and entry.metric == metric and \
                    start <= entry.occurred_at < end:
                hour = entry.occurred_at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
                hours[hour] = hours.get(hour, 0) + entry.quantity
        return hours

    async def breakdown(self, organization_ids: Sequence[int], metric: str, start: datetime, end: datetime,
                        group_by: str) -> dict[tuple[int | None, datetime], int]:
        wanted = set(organization_ids)
        found: dict[tuple[int | None, datetime], int] = {}
        for entry in (await self.uow.tables())["usage_ledger"].values():
            if entry.organization_id in wanted and entry.metric == metric and start <= entry.occurred_at < end:
                group = {"agent": entry.agent_id, "campaign": entry.campaign_id,
                         "organization": entry.organization_id}[group_by]
                key = (group, entry.occurred_at.astimezone(UTC).replace(minute=0, second=0, microsecond=0))
                found[key] = found.get(key, 0) + entry.quantity
        return found

    async def used_between(self, organization_id: int, start: datetime, end: datetime) -> dict[str, int]:
        found: dict[str, int] = {}
        for entry in (await self.uow.tables())["usage_ledger"].values():
            if entry.organization_id == organization_id and start <= entry.occurred_at < end:
                found[entry.metric] = found.get(entry.metric, 0) + entry.quantity
        return found


class InMemoryChildrenUsage:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def of_children(self, partner_id: int, period: str) -> list[ChildUsed]:
        tables = await self.uow.tables()
        children = sorted((org for org, deleted in tables["organizations"].values()
                           if org.parent_id == partner_id and deleted is None), key=lambda org: persisted(org.id))
        used: dict[int, dict[str, int]] = {}
        for (org_id, p, metric), counter in tables["usage_counters"].items():
            if p == period:
                used.setdefault(org_id, {})[metric] = counter[0]
        return [ChildUsed(persisted(org.id), org.name, org.plan, dict(used.get(persisted(org.id), {})))
                for org in children]
