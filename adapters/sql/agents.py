"""SQL repository for agents and their versions."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from application.ports.agents import AgentFilter
from application.ports.platform import Page, PageRequest
from domain.agents import Agent, AgentVersion, Llm, Voice, Voicemail

from adapters.sql.tables import agent_versions, agents
from adapters.sql.uow import SqlUnitOfWork

_COLUMNS = [c for c in agents.c if c.name != "deleted_at"]


def _row_to_agent(row: Any) -> Agent:
    return Agent(
        id=row.id, organization_id=row.organization_id, name=row.name, description=row.description,
        status=row.status, agent_mode=row.agent_mode, language=row.language,
        voice=Voice(**row.voice), llm=Llm(**row.llm), prompt=row.prompt, first_message=row.first_message,
        max_call_duration_seconds=row.max_call_duration_seconds, voicemail=Voicemail(**row.voicemail),
        transfer_phone=row.transfer_phone, calendar_id=row.calendar_id, timezone=row.timezone,
        metadata=dict(row.metadata), current_version=row.current_version, created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _agent_values(agent: Agent) -> dict[str, Any]:
    return {
        "organization_id": agent.organization_id, "name": agent.name, "description": agent.description,
        "status": agent.status, "agent_mode": agent.agent_mode, "language": agent.language,
        "voice": {"provider": agent.voice.provider, "voice_id": agent.voice.voice_id},
        "llm": {"model": agent.llm.model, "temperature": agent.llm.temperature},
        "prompt": agent.prompt, "first_message": agent.first_message,
        "max_call_duration_seconds": agent.max_call_duration_seconds,
        "voicemail": {"action": agent.voicemail.action, "message": agent.voicemail.message},
        "transfer_phone": agent.transfer_phone, "calendar_id": agent.calendar_id, "timezone": agent.timezone,
        "metadata": agent.metadata, "current_version": agent.current_version,
        "created_at": agent.created_at, "updated_at": agent.updated_at,
    }


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class SqlAgentRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    def _live(self, organization_id: int) -> Any:
        return sa.and_(agents.c.organization_id == organization_id, agents.c.deleted_at.is_(None))

    async def add(self, agent: Agent) -> Agent:
        conn = await self.uow.connection()
        row = (await conn.execute(agents.insert().returning(*_COLUMNS), _agent_values(agent))).one()
        return _row_to_agent(row)

    async def _get(self, organization_id: int, agent_id: int, lock: bool) -> Agent | None:
        conn = await self.uow.connection()
        query = sa.select(*_COLUMNS).where(self._live(organization_id), agents.c.id == agent_id)
        if lock:
            query = query.with_for_update()
        row = (await conn.execute(query)).first()
        return _row_to_agent(row) if row else None

    async def get(self, organization_id: int, agent_id: int) -> Agent | None:
        return await self._get(organization_id, agent_id, lock=False)

    async def get_for_update(self, organization_id: int, agent_id: int) -> Agent | None:
        return await self._get(organization_id, agent_id, lock=True)

    async def list(self, organization_id: int, filters: AgentFilter, page: PageRequest) -> Page[Agent]:
        conn = await self.uow.connection()
        where = [self._live(organization_id)]
        if filters.status:
            where.append(agents.c.status == filters.status)
        if filters.agent_mode:
            where.append(agents.c.agent_mode == filters.agent_mode)
        if filters.search:
            pattern = f"%{_escape_like(filters.search.lower())}%"
            where.append(sa.or_(sa.func.lower(agents.c.name).like(pattern, escape="\\"),
                                sa.func.lower(sa.func.coalesce(agents.c.description, "")).like(pattern, escape="\\")))
        condition = sa.and_(*where)
        # one round trip: the page with the total as a window column; a page past the end needs a count
        rows = (await conn.execute(
            sa.select(*_COLUMNS, sa.func.count().over().label("_total")).where(condition)
            .order_by(agents.c.id).limit(page.limit).offset(page.offset)
        )).all()
        if rows:
            total = rows[0]._total
        else:
            total = (await conn.execute(sa.select(sa.func.count()).select_from(agents).where(condition))).scalar_one()
        return Page([_row_to_agent(r) for r in rows], total, page.limit, page.offset)

    async def update(self, agent: Agent) -> Agent:
        conn = await self.uow.connection()
        values = _agent_values(agent)
        values.pop("created_at")
        values.pop("organization_id")
        await conn.execute(agents.update().where(self._live(agent.organization_id), agents.c.id == agent.id)
                           .values(**values))
        return agent

    async def delete(self, organization_id: int, agent_id: int) -> None:
        conn = await self.uow.connection()
        await conn.execute(agents.update().where(self._live(organization_id), agents.c.id == agent_id)
                           .values(deleted_at=sa.func.now()))

    async def add_version(self, organization_id: int, version: AgentVersion) -> None:
        conn = await self.uow.connection()
        await conn.execute(agent_versions.insert(), {
            "organization_id": organization_id, "agent_id": version.agent_id, "version": version.version,
            "snapshot": version.snapshot, "created_at": version.created_at, "created_by": version.created_by,
        })

    async def list_versions(self, organization_id: int, agent_id: int) -> list[AgentVersion]:
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(agent_versions).where(
            agent_versions.c.organization_id == organization_id, agent_versions.c.agent_id == agent_id,
        ).order_by(agent_versions.c.version))
        return [AgentVersion(r.agent_id, r.version, dict(r.snapshot), r.created_at, r.created_by) for r in rows]

    async def get_version(self, organization_id: int, agent_id: int, version: int) -> AgentVersion | None:
        conn = await self.uow.connection()
        r = (await conn.execute(sa.select(agent_versions).where(
            agent_versions.c.organization_id == organization_id, agent_versions.c.agent_id == agent_id,
            agent_versions.c.version == version))).first()
        return AgentVersion(r.agent_id, r.version, dict(r.snapshot), r.created_at, r.created_by) if r else None
