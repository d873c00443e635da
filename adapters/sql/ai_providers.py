"""SQL AI providers."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from adapters.sql.ai_providers_tables import ai_providers
from adapters.sql.dialect import insert
from adapters.sql.tables import agent_versions, agents
from adapters.sql.uow import SqlUnitOfWork
from domain.agents import snapshot_provider_ids
from domain.ai_providers import BUILTIN_NAME, BUILTIN_OFFLINE, AiProvider

ap = ai_providers
_BUILTIN = sa.select(ap).where(ap.c.organization_id == sa.bindparam("org"), ap.c.builtin_key == BUILTIN_OFFLINE)


def _row_to_provider(row: Any) -> AiProvider:
    return AiProvider(id=row.id, organization_id=row.organization_id, name=row.name, type=row.type,
                      base_url=row.base_url, api_key_sealed=row.api_key_sealed, builtin=row.builtin_key is not None,
                      created_at=row.created_at, updated_at=row.updated_at)


def _values(p: AiProvider) -> dict[str, Any]:
    return {"organization_id": p.organization_id, "name": p.name, "type": p.type, "base_url": p.base_url,
            "api_key_sealed": p.api_key_sealed, "builtin_key": BUILTIN_OFFLINE if p.builtin else None,
            "created_at": p.created_at, "updated_at": p.updated_at}


class SqlAiProviderRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def ensure_builtin(self, organization_id: int, now: datetime) -> AiProvider:
        conn = await self.uow.connection()
        row = (await conn.execute(_BUILTIN, {"org": organization_id})).first()
        if row is None:
            builtin = AiProvider(None, organization_id, BUILTIN_NAME, "offline", builtin=True, created_at=now,
                                 updated_at=now)
            await conn.execute(insert(ap, self.uow.dialect).values(**_values(builtin))
                               .on_conflict_do_nothing(index_elements=["organization_id", "builtin_key"]))
            row = (await conn.execute(_BUILTIN, {"org": organization_id})).one()
        return _row_to_provider(row)

    async def add(self, provider: AiProvider) -> AiProvider:
        conn = await self.uow.connection()
        new_id = (await conn.execute(ap.insert().returning(ap.c.id), _values(provider))).scalar_one()
        return replace(provider, id=new_id)

    async def get(self, organization_id: int, provider_id: int) -> AiProvider | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(ap).where(ap.c.organization_id == organization_id,
                                                      ap.c.id == provider_id))).first()
        return _row_to_provider(row) if row else None

    async def list(self, organization_id: int) -> list[AiProvider]:
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(ap).where(ap.c.organization_id == organization_id).order_by(ap.c.id))
        return [_row_to_provider(r) for r in rows]

    async def update(self, provider: AiProvider) -> AiProvider:
        conn = await self.uow.connection()
        values = _values(provider)
        for fixed in ("organization_id", "created_at", "builtin_key"):
            values.pop(fixed)
        await conn.execute(ap.update().where(ap.c.organization_id == provider.organization_id,
                                             ap.c.id == provider.id).values(**values))
        return provider

    async def delete(self, organization_id: int, provider_id: int) -> None:
        conn = await self.uow.connection()
        await conn.execute(ap.delete().where(ap.c.organization_id == organization_id, ap.c.id == provider_id))

    async def agents_using(self, organization_id: int, provider_id: int) -> tuple[int, ...]:
        """Read in Python from the live agents' settings and their published versions' (a provider is deleted
        rarely; an organization has hundreds of agents, not millions)."""
        conn = await self.uow.connection()
        published = sa.outerjoin(agents, agent_versions, sa.and_(
            agent_versions.c.agent_id == agents.c.id, agent_versions.c.version == agents.c.current_version))
        rows = await conn.execute(
            sa.select(agents.c.id, agents.c.llm, agents.c.voice, agents.c.transcriber, agent_versions.c.snapshot)
            .select_from(published)
            .where(agents.c.organization_id == organization_id, agents.c.deleted_at.is_(None)).order_by(agents.c.id))
        using = []
        for row in rows:
            named = snapshot_provider_ids({"llm": row.llm, "voice": row.voice, "transcriber": row.transcriber})
            if provider_id in named or provider_id in snapshot_provider_ids(row.snapshot or {}):
                using.append(row.id)
        return tuple(using)
