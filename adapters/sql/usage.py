"""SQL usage ledger: insert-if-absent ledger rows, counters bumped in the same transaction only when the row
was new, and quota reservations by a conditional UPDATE (one statement, so concurrent writers serialise on the
counter row: PostgreSQL re-checks the condition on the row it waited for; SQLite writes one at a time)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import sqlalchemy as sa

from adapters.sql.dialect import insert
from adapters.sql.tables import organizations
from adapters.sql.uow import SqlUnitOfWork
from adapters.sql.usage_tables import usage_counters, usage_daily, usage_ledger, usage_reservations, usage_thresholds
from application.ports.usage import ChildUsed
from domain.usage import LedgerEntry


@dataclass(frozen=True, slots=True)
class _Statements:
    """The statements of every call's end (``append``, ``release``), built once per dialect with bound parameters:
    building an upsert and its cache key per call cost more CPU than sending it."""

    ledger: Any
    counter: Any
    day: Any
    release: Any
    unreserve: Any
    appended: Any = None
    """PostgreSQL: ``ledger``, ``counter`` and ``day`` in one statement (below)."""
    released: Any = None
    """PostgreSQL: ``release`` and ``unreserve`` in one statement (below)."""


def _appended() -> Any:
    """PostgreSQL: the ledger row and, only when it is new, both counters, in one round trip. The counters'
    inserts read the new row from the ledger's ``RETURNING`` (none when the row was there already: counted once);
    every data-modifying part of a ``WITH`` runs, and the statement answers the period counter's new value."""
    ledger = insert(usage_ledger, "postgresql").values(
        {c: sa.bindparam(c) for c in ("organization_id", "metric", "quantity", "period", "source_type", "source_id",
                                      "occurred_at", "agent_id", "campaign_id")},
    ).on_conflict_do_nothing(index_elements=["source_type", "source_id", "metric"]).returning(
        usage_ledger.c.organization_id, usage_ledger.c.metric, usage_ledger.c.period, usage_ledger.c.quantity,
    ).cte("ledger")
    counter = insert(usage_counters, "postgresql").from_select(
        ["organization_id", "period", "metric", "used", "reserved"],
        sa.select(ledger.c.organization_id, ledger.c.period, ledger.c.metric, ledger.c.quantity,
                  sa.literal(0, sa.BigInteger)))
    counted = counter.on_conflict_do_update(
        index_elements=["organization_id", "period", "metric"],
        set_={"used": usage_counters.c.used + counter.excluded.used},
    ).returning(usage_counters.c.used).cte("counted")
    day = insert(usage_daily, "postgresql").from_select(
        ["organization_id", "metric", "day", "used"],
        sa.select(ledger.c.organization_id, ledger.c.metric, sa.bindparam("day", type_=sa.Date), ledger.c.quantity))
    daily = day.on_conflict_do_update(index_elements=["organization_id", "metric", "day"],
                                      set_={"used": usage_daily.c.used + day.excluded.used}).cte("daily")
    return sa.select(counted.c.used).add_cte(daily)


def _released() -> Any:
    """PostgreSQL: the reservation deleted and its quantity given back to its counter, in one round trip."""
    released = sa.delete(usage_reservations).where(  # (an UPDATE's parameters may not bear its columns' names)
        usage_reservations.c.source_type == sa.bindparam("of_source_type"),
        usage_reservations.c.source_id == sa.bindparam("of_source_id"),
        usage_reservations.c.metric == sa.bindparam("of_metric"),
    ).returning(usage_reservations.c.organization_id, usage_reservations.c.period, usage_reservations.c.metric,
                usage_reservations.c.quantity).cte("released")
    return sa.update(usage_counters).where(
        usage_counters.c.organization_id == released.c.organization_id,
        usage_counters.c.period == released.c.period, usage_counters.c.metric == released.c.metric,
    ).values(reserved=sa.func.greatest(usage_counters.c.reserved - released.c.quantity, 0))


@functools.cache
def _statements(dialect: str) -> _Statements:
    counter = insert(usage_counters, dialect)
    day = insert(usage_daily, dialect)
    greatest = sa.func.max if dialect == "sqlite" else sa.func.greatest
    postgres = dialect == "postgresql"
    return _Statements(
        ledger=insert(usage_ledger, dialect).on_conflict_do_nothing(
            index_elements=["source_type", "source_id", "metric"]).returning(usage_ledger.c.id),
        counter=counter.on_conflict_do_update(
            index_elements=["organization_id", "period", "metric"],
            set_={"used": usage_counters.c.used + counter.excluded.used}).returning(usage_counters.c.used),
        day=day.on_conflict_do_update(index_elements=["organization_id", "metric", "day"],
                                      set_={"used": usage_daily.c.used + day.excluded.used}),
        release=sa.delete(usage_reservations).where(
            usage_reservations.c.source_type == sa.bindparam("source_type"),
            usage_reservations.c.source_id == sa.bindparam("source_id"),
            usage_reservations.c.metric == sa.bindparam("metric"),
        ).returning(usage_reservations.c.organization_id, usage_reservations.c.period,
                    usage_reservations.c.quantity),
        unreserve=sa.update(usage_counters).where(
            usage_counters.c.organization_id == sa.bindparam("where_org"),
            usage_counters.c.period == sa.bindparam("where_period"),
            usage_counters.c.metric == sa.bindparam("where_metric"),
        ).values(reserved=greatest(usage_counters.c.reserved - sa.bindparam("quantity"), 0)),
        appended=_appended() if postgres else None,
        released=_released() if postgres else None,
    )


class SqlUsageLedger:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def append(self, entry: LedgerEntry) -> tuple[int, int] | None:
        conn = await self.uow.connection()
        statements = _statements(self.uow.dialect)
        row = {
            "organization_id": entry.organization_id, "metric": entry.metric, "quantity": entry.quantity,
            "period": entry.period, "source_type": entry.source_type, "source_id": entry.source_id,
            "occurred_at": entry.occurred_at, "agent_id": entry.agent_id, "campaign_id": entry.campaign_id,
        }
        if statements.appended is not None:
            counted = (await conn.execute(statements.appended, {**row, "day": entry.day})).scalar()
            return None if counted is None else (int(counted) - entry.quantity, int(counted))
        inserted = (await conn.execute(statements.ledger, row)).first()
        if inserted is None:
            return None  # recorded before: counted once
        after = (await conn.execute(statements.counter, {
            "organization_id": entry.organization_id, "period": entry.period, "metric": entry.metric,
            "used": entry.quantity, "reserved": 0})).scalar_one()
        await conn.execute(statements.day, {"organization_id": entry.organization_id, "metric": entry.metric,
                                            "day": entry.day, "used": entry.quantity})
        return int(after) - entry.quantity, int(after)

    async def reserve(self, organization_id: int, period: str, metric: str, source_type: str, source_id: str,
                      quantity: int, limit: int | None) -> bool:
        conn = await self.uow.connection()
        dialect = self.uow.dialect
        held = (await conn.execute(
            insert(usage_reservations, dialect).values(
                source_type=source_type, source_id=source_id, metric=metric, organization_id=organization_id,
                period=period, quantity=quantity,
            ).on_conflict_do_nothing(index_elements=["source_type", "source_id", "metric"])
            .returning(usage_reservations.c.quantity))).first()
        if held is None:
            return True  # this source holds already
        await conn.execute(insert(usage_counters, dialect).values(
            organization_id=organization_id, period=period, metric=metric, used=0, reserved=0,
        ).on_conflict_do_nothing(index_elements=["organization_id", "period", "metric"]))
        where = [usage_counters.c.organization_id == organization_id, usage_counters.c.period == period,
                 usage_counters.c.metric == metric]
        if limit is not None:
            where.append(usage_counters.c.used + usage_counters.c.reserved + quantity <= limit)
        taken = await conn.execute(sa.update(usage_counters).where(*where)
                                   .values(reserved=usage_counters.c.reserved + quantity))
        if taken.rowcount == 1:
            return True
        await conn.execute(sa.delete(usage_reservations).where(
            usage_reservations.c.source_type == source_type, usage_reservations.c.source_id == source_id,
            usage_reservations.c.metric == metric))
        return False

    async def release(self, source_type: str, source_id: str, metric: str) -> None:
        conn = await self.uow.connection()
        statements = _statements(self.uow.dialect)
        if statements.released is not None:
            await conn.execute(statements.released, {"of_source_type": source_type, "of_source_id": source_id,
                                                      "of_metric": metric})
            return
        row = (await conn.execute(statements.release, {"source_type": source_type, "source_id": source_id,
                                                       "metric": metric})).first()
        if row is None:
            return
        await conn.execute(statements.unreserve, {"where_org": row.organization_id, "where_period": row.period,
                                                  "where_metric": metric, "quantity": row.quantity})

    async def mark_threshold(self, organization_id: int, period: str, metric: str, percent: int) -> bool:
        conn = await self.uow.connection()
        marked = (await conn.execute(insert(usage_thresholds, self.uow.dialect).values(
            organization_id=organization_id, period=period, metric=metric, percent=percent,
        ).on_conflict_do_nothing().returning(usage_thresholds.c.percent))).first()
        return marked is not None

    async def used(self, organization_id: int, period: str) -> dict[str, int]:
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(usage_counters.c.metric, usage_counters.c.used).where(
            usage_counters.c.organization_id == organization_id, usage_counters.c.period == period))
        return {metric: int(used) for metric, used in rows}

    async def used_by_organization(self, period: str, organization_ids: Sequence[int]) -> dict[int, dict[str, int]]:
        found: dict[int, dict[str, int]] = {}
        if not organization_ids:
            return found
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(usage_counters.c.organization_id, usage_counters.c.metric,
                                            usage_counters.c.used).where(
            usage_counters.c.period == period, usage_counters.c.organization_id.in_(list(organization_ids))))
        for org_id, metric, used in rows:
            found.setdefault(int(org_id), {})[metric] = int(used)
        return found

    async def daily(self, organization_id: int, metric: str, start: date, end: date) -> dict[date, int]:
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(usage_daily.c.day, usage_daily.c.used).where(
            usage_daily.c.organization_id == organization_id, usage_daily.c.metric == metric,
            usage_daily.c.day >= start, usage_daily.c.day < end))
        return {day: int(used) for day, used in rows}

    async def hourly(self, organization_id: int, metric: str, start: datetime, end: datetime) -> dict[datetime, int]:
        # a range scan of the ledger's (organization, metric, occurred_at) index, bucketed here: one expression
        # for both databases, and the range is at most 31 days
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(usage_ledger.c.occurred_at, usage_ledger.c.quantity).where(
            usage_ledger.c.organization_id == organization_id, usage_ledger.c.metric == metric,
            usage_ledger.c.occurred_at >= start, usage_ledger.c.occurred_at < end))
        hours: dict[datetime, int] = {}
        for at, quantity in rows:
            hour = at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
            hours[hour] = hours.get(hour, 0) + int(quantity)
        return hours

    async def breakdown(self, organization_ids: Sequence[int], metric: str, start: datetime, end: datetime,
                        group_by: str) -> dict[tuple[int | None, datetime], int]:
        found: dict[tuple[int | None, datetime], int] = {}
        if not organization_ids:
            return found
        column = {"agent": usage_ledger.c.agent_id, "campaign": usage_ledger.c.campaign_id,
                  "organization": usage_ledger.c.organization_id}[group_by]
        conn = await self.uow.connection()
        # per organization, a range scan of the (organization, metric, occurred_at) index; bucketed by hour here
        rows = await conn.execute(sa.select(column, usage_ledger.c.occurred_at, usage_ledger.c.quantity).where(
            usage_ledger.c.organization_id.in_(list(organization_ids)), usage_ledger.c.metric == metric,
            usage_ledger.c.occurred_at >= start, usage_ledger.c.occurred_at < end))
        for group, at, quantity in rows:
            key = (None if group is None else int(group), at.astimezone(UTC).replace(minute=0, second=0, microsecond=0))
            found[key] = found.get(key, 0) + int(quantity)
        return found

    async def used_between(self, organization_id: int, start: datetime, end: datetime) -> dict[str, int]:
        conn = await self.uow.connection()
        rows = await conn.execute(
            sa.select(usage_ledger.c.metric, sa.func.sum(usage_ledger.c.quantity)).where(
                usage_ledger.c.organization_id == organization_id, usage_ledger.c.occurred_at >= start,
                usage_ledger.c.occurred_at < end).group_by(usage_ledger.c.metric))
        return {metric: int(total) for metric, total in rows}


_METRICS = ("call_seconds", "calls", "sms_segments")


class SqlChildrenUsage:
    """A partner's children and their period counters in one statement: the children (the organizations' parent
    index) LEFT JOIN their counters of the period (the counters' primary key), one row per child, one column per
    metric."""

    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def of_children(self, partner_id: int, period: str) -> list[ChildUsed]:
        conn = await self.uow.connection()
        counters = usage_counters.c
        columns = [sa.func.sum(sa.case((counters.metric == metric, counters.used))).label(metric)
                   for metric in _METRICS]
        rows = await conn.execute(
            sa.select(organizations.c.id, organizations.c.name, organizations.c.plan, *columns)
            .select_from(organizations.outerjoin(usage_counters, sa.and_(
                counters.organization_id == organizations.c.id, counters.period == period)))
            .where(organizations.c.parent_id == partner_id, organizations.c.deleted_at.is_(None))
            .group_by(organizations.c.id, organizations.c.name, organizations.c.plan)
            .order_by(organizations.c.id))
        return [ChildUsed(int(row.id), row.name, row.plan,
                          {metric: int(value) for metric, value in zip(_METRICS, row[3:], strict=True)
                           if value is not None})
                for row in rows]
