"""Dashboard sessions in memory (the in-memory backend: one process)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from adapters.memory.store import InMemoryUnitOfWork
from domain.sessions import Session


class InMemorySessionStore:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def add(self, session: Session) -> None:
        (await self.uow.tables())["dashboard_sessions"][session.id_hash] = session

    async def get(self, id_hash: str) -> Session | None:
        return (await self.uow.tables())["dashboard_sessions"].get(id_hash)

    async def touch(self, id_hash: str, at: datetime) -> None:
        rows = (await self.uow.tables())["dashboard_sessions"]
        if id_hash in rows and rows[id_hash].last_seen_at < at:
            rows[id_hash] = replace(rows[id_hash], last_seen_at=at)

    async def verified(self, id_hash: str, at: datetime) -> None:
        rows = (await self.uow.tables())["dashboard_sessions"]
        if id_hash in rows:
            rows[id_hash] = replace(rows[id_hash], verified_at=at)

    async def act_as(self, id_hash: str, organization_id: int | None) -> None:
        rows = (await self.uow.tables())["dashboard_sessions"]
        if id_hash in rows:
            rows[id_hash] = replace(rows[id_hash], acting_organization_id=organization_id)

    async def delete(self, id_hash: str) -> None:
        (await self.uow.tables())["dashboard_sessions"].pop(id_hash, None)

    async def list_for_user(self, user_id: int) -> list[Session]:
        rows = (await self.uow.tables())["dashboard_sessions"]
        return sorted((s for s in rows.values() if s.user_id == user_id), key=lambda s: s.created_at, reverse=True)

    async def delete_for_user(self, user_id: int, *, keep: str | None = None) -> int:
        rows = (await self.uow.tables())["dashboard_sessions"]
        ended = [k for k, s in rows.items() if s.user_id == user_id and k != keep]
        for key in ended:
            del rows[key]
        return len(ended)

    async def purge(self, idle_before: datetime, created_before: datetime) -> int:
        rows = (await self.uow.tables())["dashboard_sessions"]
        stale = [k for k, s in rows.items() if s.last_seen_at < idle_before or s.created_at < created_before]
        for key in stale:
            del rows[key]
        return len(stale)
