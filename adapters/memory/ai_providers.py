"""In-memory AI providers."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from adapters.memory.store import InMemoryUnitOfWork
from domain.agents import Agent, snapshot_provider_ids
from domain.ai_providers import BUILTIN_NAME, AiProvider


class InMemoryAiProviderRepository:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def _mine(self, organization_id: int) -> list[AiProvider]:
        table = (await self.uow.tables())["ai_providers"]
        return sorted((p for p in table.values() if p.organization_id == organization_id), key=lambda p: p.id)

    async def ensure_builtin(self, organization_id: int, now: datetime) -> AiProvider:
        for provider in await self._mine(organization_id):
            if provider.builtin:
                return provider
        return await self.add(AiProvider(None, organization_id, BUILTIN_NAME, "offline", builtin=True,
                                         created_at=now, updated_at=now))

    async def add(self, provider: AiProvider) -> AiProvider:
        tables = await self.uow.tables()
        stored = replace(provider, id=self.uow.store.next_id("ai_providers"))
        tables["ai_providers"][stored.id] = stored
        return stored

    async def get(self, organization_id: int, provider_id: int) -> AiProvider | None:
        found = (await self.uow.tables())["ai_providers"].get(provider_id)
        return found if found is not None and found.organization_id == organization_id else None

    async def list(self, organization_id: int) -> list[AiProvider]:
        return await self._mine(organization_id)

    async def update(self, provider: AiProvider) -> AiProvider:
        table = (await self.uow.tables())["ai_providers"]
        current = table.get(provider.id)
        if current is not None and current.organization_id == provider.organization_id:
            table[provider.id] = replace(provider, builtin=current.builtin, created_at=current.created_at)
        return provider

    async def delete(self, organization_id: int, provider_id: int) -> None:
        table = (await self.uow.tables())["ai_providers"]
        found = table.get(provider_id)
        if found is not None and found.organization_id == organization_id:
            del table[provider_id]

    async def agents_using(self, organization_id: int, provider_id: int) -> tuple[int, ...]:
        tables = await self.uow.tables()
        using = []
        for agent in sorted(tables["agents"].values(), key=lambda a: a.id):
            if not isinstance(agent, Agent) or agent.organization_id != organization_id:
                continue
            named = agent.provider_ids()
            published = tables["agent_versions"].get((agent.id, agent.current_version))
            if published is not None:
                named |= snapshot_provider_ids(published[1].snapshot)
            if provider_id in named:
                using.append(agent.id or 0)
        return tuple(using)
