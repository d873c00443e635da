"""Agent use cases."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from application.context import Actor
from application.ports.agents import AgentCalendars, AgentFilter, AgentRepository
from application.ports.platform import Clock, Page, PageRequest, UnitOfWork
from domain.agents import Agent, AgentVersion, duplicate_name
from domain.errors import NotFound
from domain.patching import apply_patch


async def _load(agents: AgentRepository, actor: Actor, agent_id: int, *, lock: bool = False) -> Agent:
    getter = agents.get_for_update if lock else agents.get
    agent = await getter(actor.organization_id, agent_id)
    if agent is None:
        raise NotFound("agent", agent_id)
    return agent


class NoCalendars:
    """AgentCalendars when no scheduling is installed: there is no calendar to point at."""

    async def exists(self, organization_id: int, calendar_id: int) -> bool:
        return False


async def _check_calendar(calendars: AgentCalendars, organization_id: int, fields: dict[str, Any]) -> None:
    """An agent may only point at a live calendar of its own organization (404 naming calendar_id)."""
    calendar_id = fields.get("calendar_id")
    if calendar_id is not None and not await calendars.exists(organization_id, calendar_id):
        raise NotFound("calendar", calendar_id, field="calendar_id")


@dataclass(frozen=True, slots=True)
class CreateAgentCommand:
    actor: Actor
    fields: dict[str, Any]


class CreateAgent:
    def __init__(self, uow: UnitOfWork, agents: AgentRepository, clock: Clock, calendars: AgentCalendars) -> None:
        self.uow, self.agents, self.clock, self.calendars = uow, agents, clock, calendars

    async def execute(self, command: CreateAgentCommand) -> Agent:
        await _check_calendar(self.calendars, command.actor.organization_id, command.fields)
        now = self.clock.now()
        agent = Agent(
            id=None,
            organization_id=command.actor.organization_id,
            created_at=now,
            updated_at=now,
            **command.fields,
        )
        return await self.agents.add(agent)


class GetAgent:
    def __init__(self, agents: AgentRepository) -> None:
        self.agents = agents

    async def execute(self, actor: Actor, agent_id: int) -> Agent:
        return await _load(self.agents, actor, agent_id)


class ListAgents:
    def __init__(self, agents: AgentRepository) -> None:
        self.agents = agents

    async def execute(self, actor: Actor, filters: AgentFilter, page: PageRequest) -> Page[Agent]:
        return await self.agents.list(actor.organization_id, filters, page)


@dataclass(frozen=True, slots=True)
class UpdateAgentCommand:
    actor: Actor
    agent_id: int
    changes: dict[str, Any]
    """A merge patch (``domain.patching``): nested objects (voice, llm, voicemail, metadata) as dicts of the
    members sent; ``status`` is a requested move."""


class UpdateAgent:
    def __init__(self, uow: UnitOfWork, agents: AgentRepository, clock: Clock, calendars: AgentCalendars) -> None:
        self.uow, self.agents, self.clock, self.calendars = uow, agents, clock, calendars

    async def execute(self, command: UpdateAgentCommand) -> Agent:
        current = await _load(self.agents, command.actor, command.agent_id, lock=True)
        await _check_calendar(self.calendars, command.actor.organization_id, command.changes)
        changes = dict(command.changes)
        target_status = changes.pop("status", None)
        agent = current.move_to(target_status) if target_status is not None else current
        agent = apply_patch(agent, changes)
        if agent == current:  # a PATCH that changes nothing leaves updated_at alone
            return current
        return await self.agents.update(replace(agent, updated_at=self.clock.now()))


class DeleteAgent:
    def __init__(self, uow: UnitOfWork, agents: AgentRepository, clock: Clock) -> None:
        self.uow, self.agents, self.clock = uow, agents, clock

    async def execute(self, actor: Actor, agent_id: int) -> None:
        await _load(self.agents, actor, agent_id, lock=True)
        await self.agents.delete(actor.organization_id, agent_id, self.clock.now())


@dataclass(frozen=True, slots=True)
class Publication:
    agent: Agent
    version: AgentVersion


class PublishAgent:
    """Snapshot the agent as its next version and make it active (archived agents cannot)."""

    def __init__(self, uow: UnitOfWork, agents: AgentRepository, clock: Clock) -> None:
        self.uow, self.agents, self.clock = uow, agents, clock

    async def execute(self, actor: Actor, agent_id: int) -> Publication:
        agent = await _load(self.agents, actor, agent_id, lock=True)
        now = self.clock.now()
        published = agent.publish()
        number = (agent.current_version or 0) + 1
        version = AgentVersion(agent.id or agent_id, number, agent.snapshot(), now, actor.key_id)
        await self.agents.add_version(actor.organization_id, version)
        updated = await self.agents.update(replace(published, current_version=number, updated_at=now))
        return Publication(updated, version)


class DuplicateAgent:
    def __init__(self, uow: UnitOfWork, agents: AgentRepository, clock: Clock) -> None:
        self.uow, self.agents, self.clock = uow, agents, clock

    async def execute(self, actor: Actor, agent_id: int, name: str | None) -> Agent:
        original = await _load(self.agents, actor, agent_id)
        now = self.clock.now()
        copy = replace(
            original,
            id=None,
            name=duplicate_name(original.name, name),
            status="draft",
            current_version=None,
            metadata=dict(original.metadata),
            created_at=now,
            updated_at=now,
        )
        return await self.agents.add(copy)


class ListAgentVersions:
    def __init__(self, agents: AgentRepository) -> None:
        self.agents = agents

    async def execute(self, actor: Actor, agent_id: int, page: PageRequest) -> Page[AgentVersion]:
        await _load(self.agents, actor, agent_id)
        return await self.agents.list_versions(actor.organization_id, agent_id, page)


class GetAgentVersion:
    def __init__(self, agents: AgentRepository) -> None:
        self.agents = agents

    async def execute(self, actor: Actor, agent_id: int, version: int) -> AgentVersion:
        await _load(self.agents, actor, agent_id)
        found = await self.agents.get_version(actor.organization_id, agent_id, version)
        if found is None:
            raise NotFound("agent version", version)
        return found
