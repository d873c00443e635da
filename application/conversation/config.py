"""What one conversation runs: the call's agent as its published version configures it, with the prompt, the
first message and the voicemail message filled from the call's contact and custom_data.

``conversation_config`` is the one mapping from (call, agent version, knowledge bases) to a
:class:`ConversationConfig`; ``LoadConversationConfig`` reads those in a unit of work. Tests build a
:class:`ConversationConfig` directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from application.agents import as_published
from application.ai_providers import AgentEngineChoices, ResolveAgentEngines, ResolveAgentEnginesCommand
from application.ports.agents import AgentRepository
from application.ports.ai_providers import AiProviderRepository
from application.ports.calls import CallRepository
from application.ports.engines import EngineChoice
from application.ports.knowledge import KnowledgeBaseRepository
from application.ports.platform import PageRequest, Units
from application.ports.secrets import SecretBox
from domain.agents import Agent, render
from domain.calls import Call, render_values
from domain.errors import NotFound

END_OF_TURN_SILENCE_MS = 500
"""the caller's turn ends after this much silence after speech."""
SILENCE_TIMEOUT_MS = 30_000
"""this long without caller speech (and the agent silent) ends the call."""
KNOWLEDGE_TOP_K = 3
MAX_TOOL_ROUNDS = 4
"""Tool calls the model may chain in one turn before it must answer in words."""

CHECK_AVAILABILITY = "check_availability"
BOOK_APPOINTMENT = "book_appointment"
TRANSFER_CALL = "transfer_call"
END_CALL = "end_call"
SEND_SMS = "send_sms"
BUILT_IN_TOOLS = (CHECK_AVAILABILITY, BOOK_APPOINTMENT, TRANSFER_CALL, END_CALL, SEND_SMS)
OFFLINE = EngineChoice(provider_type="offline")


@dataclass(frozen=True, slots=True)
class HttpTool:
    """A custom tool: the model's arguments (checked against ``parameters``, a JSON Schema object) are POSTed as JSON
    to ``url`` through the SSRF-safe egress, signed like a webhook with ``secret``."""

    name: str
    description: str
    parameters: dict[str, Any]
    url: str
    timeout_ms: int = 5000
    secret: str | None = None
    """The tool's own signing secret; None: the organization's tool secret (``ToolSecrets``)."""


@dataclass(frozen=True, slots=True)
class ConversationConfig:
    call_id: str
    organization_id: int
    agent_id: int
    agent_name: str
    prompt: str
    """The system prompt, placeholders filled."""
    first_message: str | None = None
    """What the agent says first (filled); None: the agent waits for the caller."""
    agent_version: int | None = None
    language: str = "en-US"
    timezone: str = "UTC"
    """The agent's zone: the model is told the date and time in it."""
    llm: EngineChoice = OFFLINE
    voice: EngineChoice = OFFLINE
    transcriber: EngineChoice = OFFLINE
    built_in_tools: tuple[str, ...] = (END_CALL,)
    """The built-in tools the model is offered (a subset of ``BUILT_IN_TOOLS``)."""
    http_tools: tuple[HttpTool, ...] = ()
    knowledge_base_ids: tuple[int, ...] = ()
    knowledge_top_k: int = KNOWLEDGE_TOP_K
    calendar_id: int | None = None
    transfer_phone: str | None = None
    voicemail_action: str = "hangup"
    voicemail_message: str | None = None
    max_call_duration_seconds: int = 600
    end_of_turn_silence_ms: int = END_OF_TURN_SILENCE_MS
    silence_timeout_ms: int = SILENCE_TIMEOUT_MS
    max_tool_rounds: int = MAX_TOOL_ROUNDS
    analysis_schema: dict[str, Any] | None = None
    contact_name: str | None = None
    contact_phone: str | None = None
    """The caller's (or the called) number: the default ``to`` of send_sms and the attendee of a booking."""
    cause_depth: int = 0
    """How deep in a chain of trigger actions the call was placed: what the call books or sends is as deep."""
    custom_data: dict[str, Any] = field(default_factory=dict)


def default_tools(agent: Agent) -> tuple[str, ...]:
    """The built-in tools an agent gets without naming any: booking on its calendar, a transfer to its transfer
    number, and ending the call."""
    tools = []
    if agent.calendar_id is not None:
        tools += [CHECK_AVAILABILITY, BOOK_APPOINTMENT]
    if agent.transfer_phone:
        tools.append(TRANSFER_CALL)
    tools.append(END_CALL)
    return tuple(tools)


def offline_engines(agent: Agent) -> AgentEngineChoices:
    """The built-in offline engines with the agent's options (what an agent without AI providers runs)."""
    voice_id = agent.voice.voice_id if agent.voice.voice_id != "default" else None
    return AgentEngineChoices(
        llm=EngineChoice(provider_type="offline", model=agent.llm.model, temperature=agent.llm.temperature,
                         language=agent.language),
        voice=EngineChoice(provider_type="offline", voice_id=voice_id, speed=agent.voice.speed,
                           language=agent.language),
        transcriber=EngineChoice(provider_type="offline", model=agent.transcriber.model,
                                 language=agent.transcriber.language or agent.language,
                                 vocabulary=tuple(t for t in (agent.prompt, agent.first_message or "") if t)),
    )


def conversation_config(call: Call, agent: Agent, knowledge_base_ids: Sequence[int],
                        engines: AgentEngineChoices | None = None) -> ConversationConfig:
    """The one mapping from a call, the agent version it runs, the agent's knowledge bases and its engine settings
    resolved against the organization's AI providers (``engines``; None: the offline engines) to what the
    conversation runs: the built-in tools its calendar and transfer number allow, its custom http tools, its
    analysis schema and its end-of-turn silence."""
    values = render_values(call.contact_name, call.destination_phone, call.custom_data)
    message = agent.voicemail.message
    chosen = engines or offline_engines(agent)
    return ConversationConfig(
        call_id=call.id, organization_id=call.organization_id, agent_id=call.agent_id,
        agent_version=call.agent_version, agent_name=agent.name, prompt=render(agent.prompt, values)[0],
        first_message=render(agent.first_message, values)[0] if agent.first_message else None,
        language=agent.language, timezone=agent.timezone,
        llm=chosen.llm, voice=chosen.voice, transcriber=chosen.transcriber,
        built_in_tools=default_tools(agent), knowledge_base_ids=tuple(knowledge_base_ids),
        http_tools=tuple(HttpTool(t.name, t.description, dict(t.parameters), t.url, t.timeout_ms)
                         for t in agent.tools if t.type == "http"),
        analysis_schema=agent.analysis_schema, end_of_turn_silence_ms=agent.end_of_turn_silence_ms,
        calendar_id=agent.calendar_id, transfer_phone=agent.transfer_phone,
        voicemail_action=agent.voicemail.action,
        voicemail_message=render(message, values)[0] if message else None,
        max_call_duration_seconds=min(call.max_duration_seconds, agent.max_call_duration_seconds),
        contact_name=call.contact_name, contact_phone=call.destination_phone or None,
        cause_depth=call.cause_depth, custom_data=dict(call.custom_data),
    )


@dataclass(frozen=True, slots=True)
class LoadConversationConfigCommand:
    organization_id: int
    call_id: str


class LoadConversationConfig:
    """The configuration a call's conversation runs: the agent's version the call was placed with (the published
    one, never the draft), the knowledge bases attached to the agent, and the engines its settings name
    (``ResolveAgentEngines``: the AI providers' types, URLs and opened keys). NotFound when the call, its agent or
    that version is gone."""

    def __init__(self, calls: CallRepository, agents: AgentRepository, kbs: KnowledgeBaseRepository,
                 providers: AiProviderRepository, box: SecretBox) -> None:
        self.calls, self.agents, self.kbs = calls, agents, kbs
        self.engines = ResolveAgentEngines(providers, box)

    async def execute(self, command: LoadConversationConfigCommand) -> ConversationConfig:
        org = command.organization_id
        call = await self.calls.get(org, command.call_id)
        if call is None:
            raise NotFound("call", command.call_id)
        live = await self.agents.get(org, call.agent_id)
        if live is None:
            raise NotFound("agent", call.agent_id)
        agent = live if call.agent_version is None else await as_published(self.agents, live, call.agent_version)
        if agent is None:
            raise NotFound("agent version", call.agent_version or 0)
        attached = await self.kbs.list_for_agent(org, call.agent_id, PageRequest(limit=1000, offset=0))
        names = tuple(kb.name for kb in attached.items if kb.name)
        engines = await self.engines.execute(ResolveAgentEnginesCommand(agent, names))
        return conversation_config(call, agent, [kb.id for kb in attached.items if kb.id is not None], engines)


class ConversationConfigs(Protocol):
    """Where the runtime gets a call's configuration (tests hand it one directly)."""

    async def for_call(self, organization_id: int, call_id: str) -> ConversationConfig: ...


class PublishedConfigs:
    """:class:`LoadConversationConfig` in a unit of work of its own."""

    def __init__(self, units: Units) -> None:
        self.units = units

    async def for_call(self, organization_id: int, call_id: str) -> ConversationConfig:
        return await self.units.execute(LoadConversationConfig,
                                        LoadConversationConfigCommand(organization_id, call_id))
