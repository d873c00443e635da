"""Ports for an organization's AI providers."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from domain.ai_providers import AiProvider


class AiProviderRepository(Protocol):
    async def ensure_builtin(self, organization_id: int, now: datetime) -> AiProvider:
        """The organization's built-in offline provider, created on first use (exactly one, under any
        concurrency)."""
        ...

    async def add(self, provider: AiProvider) -> AiProvider: ...

    async def get(self, organization_id: int, provider_id: int) -> AiProvider | None: ...

    async def list(self, organization_id: int) -> list[AiProvider]:
        """Oldest first (the built-in one, once it exists, first)."""
        ...

    async def update(self, provider: AiProvider) -> AiProvider: ...

    async def delete(self, organization_id: int, provider_id: int) -> None: ...

    async def agents_using(self, organization_id: int, provider_id: int) -> tuple[int, ...]:
        """The live agents whose draft or published version names the provider (llm, voice or transcriber), by id."""
        ...
