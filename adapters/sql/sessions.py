"""Dashboard sessions on SQL (``dashboard_sessions``): shared by every server process."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from adapters.sql.sessions_tables import dashboard_sessions as table
from adapters.sql.uow import SqlUnitOfWork
from domain.sessions import Session


def _session(row: Any) -> Session:
    return Session(row.id_hash, int(row.user_id), int(row.organization_id), row.csrf_token, row.created_at,
                   row.last_seen_at, row.verified_at,
                   None if row.acting_organization_id is None else int(row.acting_organization_id))


class SqlSessionStore:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def add(self, session: Session) -> None:
        conn = await self.uow.connection()
        await conn.execute(table.insert().values(
            id_hash=session.id_hash, user_id=session.user_id, organization_id=session.organization_id,
            csrf_token=session.csrf_token, created_at=session.created_at, last_seen_at=session.last_seen_at,
            verified_at=session.verified_at, acting_organization_id=session.acting_organization_id))

    async def get(self, id_hash: str) -> Session | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(table).where(table.c.id_hash == id_hash))).first()
        return None if row is None else _session(row)

    async def touch(self, id_hash: str, at: datetime) -> None:
        conn = await self.uow.connection()
        await conn.execute(table.update().where(table.c.id_hash == id_hash, table.c.last_seen_at < at)
                           .values(last_seen_at=at))

    async def verified(self, id_hash: str, at: datetime) -> None:
        conn = await self.uow.connection()
        await conn.execute(table.update().where(table.c.id_hash == id_hash).values(verified_at=at))

    async def act_as(self, id_hash: str, organization_id: int | None) -> None:
        conn = await self.uow.connection()
        await conn.execute(table.update().where(table.c.id_hash == id_hash)
                           .values(acting_organization_id=organization_id))

    async def delete(self, id_hash: str) -> None:
        conn = await self.uow.connection()
        await conn.execute(table.delete().where(table.c.id_hash == id_hash))

    async def list_for_user(self, user_id: int) -> list[Session]:
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(table).where(table.c.user_id == user_id)
                                  .order_by(table.c.created_at.desc()))
        return [_session(row) for row in rows]

    async def delete_for_user(self, user_id: int, *, keep: str | None = None) -> int:
        conn = await self.uow.connection()
        where = [table.c.user_id == user_id]
        if keep is not None:
            where.append(table.c.id_hash != keep)
        result = await conn.execute(table.delete().where(*where))
        return int(result.rowcount or 0)

    async def purge(self, idle_before: datetime, created_before: datetime) -> int:
        conn = await self.uow.connection()
        result = await conn.execute(table.delete().where(sa.or_(table.c.last_seen_at < idle_before,
                                                                table.c.created_at < created_before)))
        return int(result.rowcount or 0)
