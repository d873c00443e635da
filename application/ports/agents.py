"""Ports for agents and their published versions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from application.ports.platform import Page, PageRequest
from domain.agents import Agent, AgentVersion


@dataclass(frozen=True, slots=True)
class AgentFilter:
    status: str | None = None
    agent_mode: str | None = None
    search: str | None = None


class AgentRepository(Protocol):
    async def add(self, agent: Agent) -> Agent: ...

    async def get(self, organization_id: int, agent_id: int) -> Agent | None: ...

    async def get_for_update(self, organization_id: int, agent_id: int) -> Agent | None:
        """Like get, but locks the row until the transaction ends (where the database can)."""
        ...

    async def list(self, organization_id: int, filters: AgentFilter, page: PageRequest) -> Page[Agent]: ...

    async def update(self, agent: Agent) -> Agent: ...

    async def delete(self, organization_id: int, agent_id: int, at: datetime) -> None:
        """Soft delete at ``at``: the agent leaves the API, past calls keep their reference."""
        ...

    async def add_version(self, organization_id: int, version: AgentVersion) -> None: ...

    async def list_versions(self, organization_id: int, agent_id: int, page: PageRequest) -> Page[AgentVersion]:
        """Oldest first."""
        ...

    async def get_version(self, organization_id: int, agent_id: int, version: int) -> AgentVersion | None: ...


class AgentCalendars(Protocol):
    """The calendars an agent may point at (``calendar_id``): the live calendars of its organization."""

    async def exists(self, organization_id: int, calendar_id: int) -> bool: ...


class AgentEngineSettings(Protocol):
    """The checks an agent's engine, tool and analysis settings pass beyond their shape (the AI providers feature
    implements it)."""

    async def check(self, agent: Agent, changed: frozenset[str] | None = None) -> None:
        """Raises for a provider id not in the agent's organization (422 naming ``llm.provider_id``,
        ``voice.provider_id`` or ``transcriber.provider_id``), a malformed custom tool or a tool URL the egress
        would refuse (400 naming it), an analysis schema that is not an object schema. ``changed``: only the
        settings named (None: all)."""
        ...
