"""In-memory agents and versions."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import datetime

from adapters.memory.store import InMemoryUnitOfWork
from application.ports.agents import AgentFilter
from application.ports.platform import Page, PageRequest
from domain.agents import Agent, AgentVersion


class InMemoryAgentRepository:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def add(self, agent: Agent) -> Agent:
        tables = await self.uow.tables()
        stored = replace(agent, id=self.uow.store.next_id("agents"), metadata=copy.deepcopy(agent.metadata))
        tables["agents"][stored.id] = stored
        return stored

    async def get(self, organization_id: int, agent_id: int) -> Agent | None:
        tables = await self.uow.tables()
        agent = tables["agents"].get(agent_id)
        return agent if agent is not None and agent.organization_id == organization_id else None

    get_for_update = get

    async def list(self, organization_id: int, filters: AgentFilter, page: PageRequest) -> Page[Agent]:
        tables = await self.uow.tables()
        needle = (filters.search or "").lower()
        found = [
            a for a in sorted(tables["agents"].values(), key=lambda a: a.id)
            if a.organization_id == organization_id
            and (filters.status is None or a.status == filters.status)
            and (filters.agent_mode is None or a.agent_mode == filters.agent_mode)
            and (not needle or needle in a.name.lower() or needle in (a.description or "").lower())
        ]
        return page.slice(found)

    async def update(self, agent: Agent) -> Agent:
        tables = await self.uow.tables()
        current = tables["agents"].get(agent.id)
        if current is not None and current.organization_id == agent.organization_id:
            tables["agents"][agent.id] = replace(agent, created_at=current.created_at)
        return agent

    async def delete(self, organization_id: int, agent_id: int, at: datetime) -> None:
        tables = await self.uow.tables()
        agent = tables["agents"].get(agent_id)
        if agent is not None and agent.organization_id == organization_id:
            del tables["agents"][agent_id]

    async def add_version(self, organization_id: int, version: AgentVersion) -> None:
        tables = await self.uow.tables()
        if (version.agent_id, version.version) in tables["agent_versions"]:
            raise ValueError("duplicate version")
        tables["agent_versions"][(version.agent_id, version.version)] = (organization_id, version)

    async def list_versions(self, organization_id: int, agent_id: int, page: PageRequest) -> Page[AgentVersion]:
        tables = await self.uow.tables()
        mine = [v for (aid, _), (org, v) in sorted(tables["agent_versions"].items())
                if aid == agent_id and org == organization_id]
        return page.slice(mine)

    async def get_version(self, organization_id: int, agent_id: int, version: int) -> AgentVersion | None:
        tables = await self.uow.tables()
        entry = tables["agent_versions"].get((agent_id, version))
        return entry[1] if entry and entry[0] == organization_id else None

    async def get_with_current_version(self, organization_id: int, agent_id: int
                                       ) -> tuple[Agent, AgentVersion | None] | None:
        agent = await self.get(organization_id, agent_id)
        if agent is None:
            return None
        version = agent.current_version
        return agent, None if version is None else await self.get_version(organization_id, agent_id, version)
