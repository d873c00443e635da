"""SQL Do-Not-Call lists, entries and screening.

Screening is one indexed join per call: on PostgreSQL the numbers travel as one array parameter and are
joined with ``unnest`` against ``ix_dnc_entries_org_phone``; on SQLite they are looked up in chunks.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from adapters.sql.calls_tables import dnc_entries, dnc_lists
from adapters.sql.dialect import insert
from adapters.sql.uow import SqlUnitOfWork
from application.ports.platform import Page, PageRequest
from domain.dnc import DncEntry, DncList
from domain.sms import OPT_OUT_LIST_NAME

SQLITE_CHUNK = 500
# SQLite: one chunk of numbers screened, built once (the numbers an expanding bound parameter)
_SQLITE_SCREEN = sa.select(dnc_entries.c.phone_number, dnc_entries.c.list_id).where(
    dnc_entries.c.organization_id == sa.bindparam("org"),
    dnc_entries.c.phone_number.in_(sa.bindparam("numbers", expanding=True)))
INSERT_CHUNK = 5000

_PG_SCREEN = sa.text(
    "SELECT e.phone_number, e.list_id FROM unnest(CAST(:numbers AS varchar[])) AS n(phone_number) "
    "JOIN dnc_entries e ON e.organization_id = :org AND e.phone_number = n.phone_number"
)
_PG_ADD = sa.text(
    "INSERT INTO dnc_entries (list_id, phone_number, organization_id, reason, created_at) "
    "SELECT CAST(:list_id AS bigint), n.phone_number, CAST(:org AS bigint), n.reason, CAST(:at AS timestamptz) "
    "FROM unnest(CAST(:numbers AS varchar[]), CAST(:reasons AS varchar[])) AS n(phone_number, reason) "
    "ON CONFLICT (list_id, phone_number) DO NOTHING"
)

_entry_count = (
    sa.select(sa.func.count()).select_from(dnc_entries)
    .where(dnc_entries.c.list_id == dnc_lists.c.id).correlate(dnc_lists).scalar_subquery()
)


def _row_to_list(row: Any) -> DncList:
    return DncList(row.id, row.organization_id, row.name, row.description, row.created_at, row.updated_at,
                   int(row.entry_count or 0))


class SqlDncRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def add_list(self, dnc_list: DncList) -> DncList:
        conn = await self.uow.connection()
        new_id = (await conn.execute(dnc_lists.insert().returning(dnc_lists.c.id), {
            "organization_id": dnc_list.organization_id, "name": dnc_list.name,
            "description": dnc_list.description, "created_at": dnc_list.created_at,
            "updated_at": dnc_list.updated_at,
        })).scalar_one()
        return DncList(new_id, dnc_list.organization_id, dnc_list.name, dnc_list.description, dnc_list.created_at,
                       dnc_list.updated_at, 0)

    async def get_list(self, organization_id: int, list_id: int) -> DncList | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(dnc_lists, _entry_count.label("entry_count")).where(
            dnc_lists.c.organization_id == organization_id, dnc_lists.c.id == list_id))).first()
        return _row_to_list(row) if row else None

    async def lists(self, organization_id: int, page: PageRequest) -> Page[DncList]:
        conn = await self.uow.connection()
        where = dnc_lists.c.organization_id == organization_id
        total = (await conn.execute(sa.select(sa.func.count()).select_from(dnc_lists).where(where))).scalar_one()
        rows = await conn.execute(sa.select(dnc_lists, _entry_count.label("entry_count")).where(where)
                                  .order_by(dnc_lists.c.id).limit(page.limit).offset(page.offset))
        return Page([_row_to_list(r) for r in rows], total, page.limit, page.offset)

    async def delete_list(self, organization_id: int, list_id: int) -> None:
        conn = await self.uow.connection()
        await conn.execute(dnc_entries.delete().where(dnc_entries.c.organization_id == organization_id,
                                                      dnc_entries.c.list_id == list_id))
        await conn.execute(dnc_lists.delete().where(dnc_lists.c.organization_id == organization_id,
                                                    dnc_lists.c.id == list_id))

    async def _count(self, conn: Any, list_id: int) -> int:
        return (await conn.execute(sa.select(sa.func.count()).select_from(dnc_entries)
                                   .where(dnc_entries.c.list_id == list_id))).scalar_one()

    async def add_entries(self, organization_id: int, list_id: int, numbers: list[tuple[str, str | None]],
                          at: datetime) -> int:
        if not numbers:
            return 0
        conn = await self.uow.connection()
        if self.uow.dialect == "postgresql":
            added = 0
            for start in range(0, len(numbers), INSERT_CHUNK * 10):
                chunk = numbers[start:start + INSERT_CHUNK * 10]
                result = await conn.execute(_PG_ADD, {
                    "list_id": list_id, "org": organization_id, "at": at,
                    "numbers": [n for n, _ in chunk], "reasons": [r for _, r in chunk],
                })
                added += result.rowcount
            return added
        before = await self._count(conn, list_id)
        statement = insert(dnc_entries, self.uow.dialect).on_conflict_do_nothing(
            index_elements=["list_id", "phone_number"])
        for start in range(0, len(numbers), INSERT_CHUNK):
            await conn.execute(statement, [
                {"list_id": list_id, "phone_number": n, "organization_id": organization_id, "reason": r,
                 "created_at": at}
                for n, r in numbers[start:start + INSERT_CHUNK]
            ])
        return await self._count(conn, list_id) - before

    async def entries(self, organization_id: int, list_id: int, page: PageRequest) -> Page[DncEntry]:
        conn = await self.uow.connection()
        where = sa.and_(dnc_entries.c.organization_id == organization_id, dnc_entries.c.list_id == list_id)
        total = (await conn.execute(sa.select(sa.func.count()).select_from(dnc_entries).where(where))).scalar_one()
        rows = await conn.execute(sa.select(dnc_entries).where(where).order_by(dnc_entries.c.phone_number)
                                  .limit(page.limit).offset(page.offset))
        return Page([DncEntry(r.list_id, r.phone_number, r.reason, r.created_at) for r in rows], total, page.limit,
                    page.offset)

    async def remove_entry(self, organization_id: int, list_id: int, phone_number: str) -> bool:
        conn = await self.uow.connection()
        result = await conn.execute(dnc_entries.delete().where(
            dnc_entries.c.organization_id == organization_id, dnc_entries.c.list_id == list_id,
            dnc_entries.c.phone_number == phone_number))
        return bool(result.rowcount)

    async def touch_list(self, organization_id: int, list_id: int, at: datetime) -> None:
        conn = await self.uow.connection()
        await conn.execute(dnc_lists.update().where(
            dnc_lists.c.organization_id == organization_id, dnc_lists.c.id == list_id).values(updated_at=at))


class SqlDncScreener:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def screen(self, organization_id: int, numbers: list[str]) -> dict[str, list[int]]:
        unique = list(dict.fromkeys(numbers))
        if len(unique) == 1 and self.uow.read_ahead.pop(("dnc_unlisted", organization_id, unique[0]), False):
            return {}  # read ahead of the call (SqlCallPlacementReads): on none of the organization's lists
        if not unique:
            return {}
        conn = await self.uow.connection()
        found: dict[str, list[int]] = {}
        if self.uow.dialect == "postgresql":
            rows = (await conn.execute(_PG_SCREEN, {"org": organization_id, "numbers": unique})).all()
        else:
            rows = []
            for start in range(0, len(unique), SQLITE_CHUNK):
                rows.extend((await conn.execute(_SQLITE_SCREEN, {
                    "org": organization_id, "numbers": unique[start:start + SQLITE_CHUNK]})).all())
        for number, list_id in rows:
            found.setdefault(number, []).append(int(list_id))
        return found

    async def opt_out_list_ids(self, organization_id: int) -> list[int]:
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(dnc_lists.c.id).where(
            dnc_lists.c.organization_id == organization_id, dnc_lists.c.name == OPT_OUT_LIST_NAME)
            .order_by(dnc_lists.c.id))
        return [int(r.id) for r in rows]
