"""Agent use cases."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from application.context import Actor
from application.ports.agents import AgentCalendars, AgentEngineSettings, AgentFilter, AgentRepository
from application.ports.platform import Clock, Page, PageRequest
from domain.agents import (
    DEFAULT_END_OF_TURN_SILENCE_MS,
    Agent,
    AgentVersion,
    HttpTool,
    Llm,
    Transcriber,
    Voice,
    Voicemail,
    check_placeholders,
    duplicate_name,
)
from domain.errors import NotFound
from domain.identity import persisted
from domain.metadata import check_metadata
from domain.patching import MergePatch, apply_patch


async def _load(agents: AgentRepository, actor: Actor, agent_id: int, *, lock: bool = False) -> Agent:
    getter = agents.get_for_update if lock else agents.get
    agent = await getter(actor.organization_id, agent_id)
    if agent is None:
        raise NotFound("agent", agent_id)
    return agent


async def published_snapshot(agents: AgentRepository, agent: Agent) -> dict[str, Any] | None:
    """The configuration of the agent's latest published version (None when it was never published)."""
    if agent.current_version is None:
        return None
    version = await agents.get_version(agent.organization_id, persisted(agent.id), agent.current_version)
    return version.snapshot if version is not None else None


async def as_published(agents: AgentRepository, agent: Agent, version: int | None) -> Agent | None:
    """The agent as its published ``version`` configures it: what a call runs, never the live draft. None when
    that version does not exist (an agent never published has none)."""
    if version is None:
        return None
    found = await agents.get_version(agent.organization_id, persisted(agent.id), version)
    return agent.with_snapshot(found.snapshot) if found is not None else None


async def _with_draft_state(agents: AgentRepository, agent: Agent) -> Agent:
    """The agent with ``has_unpublished_changes`` told truly: its draft against its latest published version."""
    return replace(agent, has_unpublished_changes=agent.differs_from(await published_snapshot(agents, agent)))


async def _check_calendar(calendars: AgentCalendars, organization_id: int, calendar_id: int | None) -> None:
    """An agent may only point at a live calendar of its own organization (404 naming calendar_id)."""
    if calendar_id is not None and not await calendars.exists(organization_id, calendar_id):
        raise NotFound("calendar", calendar_id, field="calendar_id")


@dataclass(frozen=True, slots=True)
class CreateAgentCommand:
    """A new agent's fields, validated at the edge; what is not sent takes the agent's defaults."""

    actor: Actor
    name: str
    description: str | None = None
    agent_mode: str = "outbound"
    language: str = "en-US"
    voice: Voice = field(default_factory=Voice)
    llm: Llm = field(default_factory=Llm)
    prompt: str = ""
    first_message: str | None = None
    max_call_duration_seconds: int = 600
    voicemail: Voicemail = field(default_factory=Voicemail)
    transfer_phone: str | None = None
    calendar_id: int | None = None
    timezone: str = "UTC"
    metadata: Mapping[str, Any] = field(default_factory=dict)  # the client's own JSON object, stored as sent
    transcriber: Transcriber = field(default_factory=Transcriber)
    tools: tuple[HttpTool, ...] = ()
    analysis_schema: dict[str, Any] | None = None
    end_of_turn_silence_ms: int = DEFAULT_END_OF_TURN_SILENCE_MS


class CreateAgent:
    def __init__(self, agents: AgentRepository, clock: Clock, calendars: AgentCalendars,
                 engines: AgentEngineSettings) -> None:
        self.agents, self.clock, self.calendars, self.engines = agents, clock, calendars, engines

    async def execute(self, command: CreateAgentCommand) -> Agent:
        await _check_calendar(self.calendars, command.actor.organization_id, command.calendar_id)
        now = self.clock.now()
        agent = Agent(
            id=None,
            organization_id=command.actor.organization_id,
            name=command.name,
            description=command.description,
            agent_mode=command.agent_mode,
            language=command.language,
            voice=command.voice,
            llm=command.llm,
            prompt=command.prompt,
            first_message=command.first_message,
            max_call_duration_seconds=command.max_call_duration_seconds,
            voicemail=command.voicemail,
            transfer_phone=command.transfer_phone,
            calendar_id=command.calendar_id,
            timezone=command.timezone,
            metadata=dict(command.metadata),
            transcriber=command.transcriber,
            tools=command.tools,
            analysis_schema=command.analysis_schema,
            end_of_turn_silence_ms=command.end_of_turn_silence_ms,
            created_at=now,
            updated_at=now,
        )
        check_metadata("metadata", agent.metadata)
        check_placeholders(agent)
        await self.engines.check(agent)
        return await self.agents.add(agent)


@dataclass(frozen=True, slots=True)
class GetAgentCommand:
    actor: Actor
    agent_id: int


class GetAgent:
    def __init__(self, agents: AgentRepository) -> None:
        self.agents = agents

    async def execute(self, command: GetAgentCommand) -> Agent:
        return await _load(self.agents, command.actor, command.agent_id)


class GetPublishedAgent:
    """The agent as a call runs it now: its latest published version (None when it was never published)."""

    def __init__(self, agents: AgentRepository) -> None:
        self.agents = agents

    async def execute(self, command: GetAgentCommand) -> Agent | None:
        live = await _load(self.agents, command.actor, command.agent_id)
        return await as_published(self.agents, live, live.current_version)


@dataclass(frozen=True, slots=True)
class ListAgentsCommand:
    actor: Actor
    filters: AgentFilter
    page: PageRequest


class ListAgents:
    def __init__(self, agents: AgentRepository) -> None:
        self.agents = agents

    async def execute(self, command: ListAgentsCommand) -> Page[Agent]:
        return await self.agents.list(command.actor.organization_id, command.filters, command.page)


@dataclass(frozen=True, slots=True)
class UpdateAgentCommand:
    actor: Actor
    agent_id: int
    patch: MergePatch
    """Nested objects (voice, llm, voicemail, metadata) as the members sent; ``status`` is a requested move."""


class UpdateAgent:
    def __init__(self, agents: AgentRepository, clock: Clock, calendars: AgentCalendars,
                 engines: AgentEngineSettings) -> None:
        self.agents, self.clock, self.calendars, self.engines = agents, clock, calendars, engines

    async def execute(self, command: UpdateAgentCommand) -> Agent:
        current = await _load(self.agents, command.actor, command.agent_id, lock=True)
        await _check_calendar(self.calendars, command.actor.organization_id, command.patch.get("calendar_id"))
        changes = dict(command.patch)
        target_status = changes.pop("status", None)
        agent = current.move_to(target_status) if target_status is not None else current
        checked = frozenset(changes)
        # tools and the analysis schema are replaced whole (a JSON Schema is not merged into the one before)
        replaced = {name: changes.pop(name) for name in ("tools", "analysis_schema") if name in changes}
        agent = apply_patch(agent, changes)
        if replaced:
            agent = replace(agent, **replaced)
        check_metadata("metadata", agent.metadata)
        check_placeholders(agent, checked)
        await self.engines.check(agent, checked)
        if agent == current:  # a PATCH that changes nothing leaves updated_at alone
            return current
        if agent.snapshot() != current.snapshot():  # the draft changed; calls keep running the published version
            agent = await _with_draft_state(self.agents, agent)
        return await self.agents.update(replace(agent, updated_at=self.clock.now()))


@dataclass(frozen=True, slots=True)
class DeleteAgentCommand:
    actor: Actor
    agent_id: int


class DeleteAgent:
    def __init__(self, agents: AgentRepository, clock: Clock) -> None:
        self.agents, self.clock = agents, clock

    async def execute(self, command: DeleteAgentCommand) -> None:
        actor, agent_id = command.actor, command.agent_id
        await _load(self.agents, actor, agent_id, lock=True)
        await self.agents.delete(actor.organization_id, agent_id, self.clock.now())


@dataclass(frozen=True, slots=True)
class Publication:
    agent: Agent
    version: AgentVersion


@dataclass(frozen=True, slots=True)
class PublishAgentCommand:
    actor: Actor
    agent_id: int


class PublishAgent:
    """Snapshot the agent as its next version and make it active (archived agents cannot). A draft whose calendar
    has been deleted since it was chosen is not published (404 naming calendar_id)."""

    def __init__(self, agents: AgentRepository, clock: Clock, calendars: AgentCalendars) -> None:
        self.agents, self.clock, self.calendars = agents, clock, calendars

    async def execute(self, command: PublishAgentCommand) -> Publication:
        actor, agent_id = command.actor, command.agent_id
        agent = await _load(self.agents, actor, agent_id, lock=True)
        await _check_calendar(self.calendars, actor.organization_id, agent.calendar_id)
        now = self.clock.now()
        published = agent.publish()
        number = (agent.current_version or 0) + 1
        version = AgentVersion(agent.id or agent_id, number, agent.snapshot(), now, actor.key_id)
        await self.agents.add_version(actor.organization_id, version)
        updated = await self.agents.update(replace(published, current_version=number, has_unpublished_changes=False,
                                                   updated_at=now))
        return Publication(updated, version)


@dataclass(frozen=True, slots=True)
class RestoreAgentVersionCommand:
    actor: Actor
    agent_id: int
    version: int


class RestoreAgentVersion:
    """Make a published version's configuration the agent's draft. Calls keep running the latest published
    version until the draft is published (as a new version)."""

    def __init__(self, agents: AgentRepository, clock: Clock, calendars: AgentCalendars,
                 engines: AgentEngineSettings) -> None:
        self.agents, self.clock, self.calendars, self.engines = agents, clock, calendars, engines

    async def execute(self, command: RestoreAgentVersionCommand) -> Agent:
        actor, agent_id = command.actor, command.agent_id
        current = await _load(self.agents, actor, agent_id, lock=True)
        found = await self.agents.get_version(actor.organization_id, agent_id, command.version)
        if found is None:
            raise NotFound("agent version", command.version)
        restored = current.with_snapshot(found.snapshot)
        await _check_calendar(self.calendars, actor.organization_id, restored.calendar_id)  # deleted since?
        await self.engines.check(restored, frozenset({"llm", "voice", "transcriber"}))  # providers deleted since
        restored = await _with_draft_state(self.agents, restored)
        if restored == current:
            return current
        return await self.agents.update(replace(restored, updated_at=self.clock.now()))


@dataclass(frozen=True, slots=True)
class DuplicateAgentCommand:
    actor: Actor
    agent_id: int
    name: str | None = None  # None: the original's name with " (Copy)"


class DuplicateAgent:
    def __init__(self, agents: AgentRepository, clock: Clock) -> None:
        self.agents, self.clock = agents, clock

    async def execute(self, command: DuplicateAgentCommand) -> Agent:
        original = await _load(self.agents, command.actor, command.agent_id)
        now = self.clock.now()
        copy = replace(
            original,
            id=None,
            name=duplicate_name(original.name, command.name),
            status="draft",
            current_version=None,
            has_unpublished_changes=True,
            metadata=dict(original.metadata),
            created_at=now,
            updated_at=now,
        )
        return await self.agents.add(copy)


@dataclass(frozen=True, slots=True)
class ListAgentVersionsCommand:
    actor: Actor
    agent_id: int
    page: PageRequest


class ListAgentVersions:
    def __init__(self, agents: AgentRepository) -> None:
        self.agents = agents

    async def execute(self, command: ListAgentVersionsCommand) -> Page[AgentVersion]:
        actor, agent_id = command.actor, command.agent_id
        await _load(self.agents, actor, agent_id)
        return await self.agents.list_versions(actor.organization_id, agent_id, command.page)


@dataclass(frozen=True, slots=True)
class GetAgentVersionCommand:
    actor: Actor
    agent_id: int
    version: int


class GetAgentVersion:
    def __init__(self, agents: AgentRepository) -> None:
        self.agents = agents

    async def execute(self, command: GetAgentVersionCommand) -> AgentVersion:
        actor, agent_id = command.actor, command.agent_id
        await _load(self.agents, actor, agent_id)
        found = await self.agents.get_version(actor.organization_id, agent_id, command.version)
        if found is None:
            raise NotFound("agent version", command.version)
        return found
