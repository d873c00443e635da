"""AI providers: an organization's model servers, their keys sealed at rest and never returned; the checks an
agent's engine settings pass; and the resolution of an agent's settings into the engines' choices."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from application.context import Actor
from application.ports.ai_providers import AiProviderRepository
from application.ports.engines import EngineChoice
from application.ports.platform import Clock, Page, PageRequest
from application.ports.secrets import SecretBox
from domain.agents import Agent, check_object_schema, check_tools
from domain.ai_providers import AiProvider, check_base_url
from domain.errors import BlockedAddress, Conflict, NotFound, Unprocessable, ValidationFailed
from domain.patching import MergePatch, apply_patch
from domain.webhooks import check_target

_NOT_SENT = object()


@dataclass(frozen=True, slots=True)
class AiProviderPolicy:
    """Operator settings: loopback base URLs and tool URLs only in development and tests."""

    allow_loopback: bool = False


async def _provider(providers: AiProviderRepository, actor: Actor, provider_id: int) -> AiProvider:
    found = await providers.get(actor.organization_id, provider_id)
    if found is None:
        raise NotFound("AI provider", provider_id)
    return found


@dataclass(frozen=True, slots=True)
class ListAiProvidersCommand:
    actor: Actor
    page: PageRequest


class ListAiProviders:
    """Every organization has the built-in offline provider; it is created on first use."""

    def __init__(self, providers: AiProviderRepository, clock: Clock) -> None:
        self.providers, self.clock = providers, clock

    async def execute(self, command: ListAiProvidersCommand) -> Page[AiProvider]:
        organization_id = command.actor.organization_id
        await self.providers.ensure_builtin(organization_id, self.clock.now())
        return command.page.slice(await self.providers.list(organization_id))


@dataclass(frozen=True, slots=True)
class GetAiProviderCommand:
    actor: Actor
    provider_id: int


class GetAiProvider:
    def __init__(self, providers: AiProviderRepository, clock: Clock) -> None:
        self.providers, self.clock = providers, clock

    async def execute(self, command: GetAiProviderCommand) -> AiProvider:
        await self.providers.ensure_builtin(command.actor.organization_id, self.clock.now())
        return await _provider(self.providers, command.actor, command.provider_id)


@dataclass(frozen=True, slots=True)
class CreateAiProviderCommand:
    actor: Actor
    name: str
    type: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)  # sealed at rest, never returned


class CreateAiProvider:
    def __init__(self, providers: AiProviderRepository, box: SecretBox, clock: Clock,
                 policy: AiProviderPolicy) -> None:
        self.providers, self.box, self.clock, self.policy = providers, box, clock, policy

    async def execute(self, command: CreateAiProviderCommand) -> AiProvider:
        actor = command.actor
        now = self.clock.now()
        await self.providers.ensure_builtin(actor.organization_id, now)
        base_url = (check_base_url(command.base_url, allow_loopback=self.policy.allow_loopback)
                    if command.base_url is not None else None)
        provider = AiProvider(None, actor.organization_id, command.name, command.type, base_url,
                              self.box.seal(command.api_key) if command.api_key else None, False, now, now)
        provider.check()
        return await self.providers.add(provider)


@dataclass(frozen=True, slots=True)
class UpdateAiProviderCommand:
    actor: Actor
    provider_id: int
    patch: MergePatch = field(repr=False)  # may hold the key


class UpdateAiProvider:
    """A merge patch of name, type, base_url and api_key (``api_key: null`` removes the key). The built-in provider
    keeps its type and takes no URL or key."""

    def __init__(self, providers: AiProviderRepository, box: SecretBox, clock: Clock,
                 policy: AiProviderPolicy) -> None:
        self.providers, self.box, self.clock, self.policy = providers, box, clock, policy

    async def execute(self, command: UpdateAiProviderCommand) -> AiProvider:
        actor = command.actor
        await self.providers.ensure_builtin(actor.organization_id, self.clock.now())
        provider = await _provider(self.providers, actor, command.provider_id)
        values = dict(command.patch)
        api_key = values.pop("api_key", _NOT_SENT)
        if provider.builtin and values.get("type", provider.type) != provider.type:
            raise Conflict("The built-in offline provider keeps its type", details={"provider_id": provider.id})
        if values.get("base_url") is not None:
            values["base_url"] = check_base_url(values["base_url"], allow_loopback=self.policy.allow_loopback)
        patched = apply_patch(provider, values)
        if api_key is not _NOT_SENT:
            patched = replace(patched, api_key_sealed=self.box.seal(str(api_key)) if api_key else None)
        if patched.type == "offline" and "type" in values:  # becoming offline drops the URL and key it had
            if "base_url" not in values:
                patched = replace(patched, base_url=None)
            if api_key is _NOT_SENT:
                patched = replace(patched, api_key_sealed=None)
        patched.check()
        if patched == provider:  # a PATCH that changes nothing leaves updated_at alone
            return provider
        return await self.providers.update(replace(patched, updated_at=self.clock.now()))


@dataclass(frozen=True, slots=True)
class DeleteAiProviderCommand:
    actor: Actor
    provider_id: int


class DeleteAiProvider:
    """Not the built-in one, and not one an agent names (its draft or its published version)."""

    def __init__(self, providers: AiProviderRepository) -> None:
        self.providers = providers

    async def execute(self, command: DeleteAiProviderCommand) -> None:
        actor, provider_id = command.actor, command.provider_id
        provider = await _provider(self.providers, actor, provider_id)
        provider.ensure_deletable()
        agents = await self.providers.agents_using(actor.organization_id, provider_id)
        if agents:
            raise Conflict(f"This provider is in use by {len(agents)} agent{'s' if len(agents) > 1 else ''}: "
                           "point them at another provider first",
                           details={"provider_id": provider_id, "agent_ids": agents[:20]})
        await self.providers.delete(actor.organization_id, provider_id)


# ---------------------------------------------------------------------------------------------- agents' settings

class AgentEngineChecks:
    """:class:`application.ports.agents.AgentEngineSettings`: the providers an agent names exist in its
    organization (422 naming the field), its custom tools are well formed and their URLs pass the egress's rules,
    its analysis schema is an object schema."""

    def __init__(self, providers: AiProviderRepository, policy: AiProviderPolicy) -> None:
        self.providers, self.policy = providers, policy

    async def check(self, agent: Agent, changed: frozenset[str] | None = None) -> None:
        def wanted(name: str) -> bool:
            return changed is None or name in changed

        for name, provider_id in (("llm", agent.llm.provider_id), ("voice", agent.voice.provider_id),
                                  ("transcriber", agent.transcriber.provider_id)):
            if provider_id is None or not wanted(name):
                continue
            if await self.providers.get(agent.organization_id, provider_id) is None:
                raise Unprocessable(f"{name}.provider_id: no AI provider {provider_id} in this organization",
                                    details={"field": f"{name}.provider_id"})
        if wanted("tools"):
            check_tools(agent.tools)
            for index, tool in enumerate(agent.tools):
                try:
                    check_target(tool.url, allow_loopback=self.policy.allow_loopback)
                except ValidationFailed as exc:
                    raise ValidationFailed.field(f"tools[{index}].url", exc.message.removeprefix("url: ")) from None
                except BlockedAddress as exc:
                    raise exc.on(f"tools[{index}].url") from None
        if wanted("analysis_schema") and agent.analysis_schema is not None:
            check_object_schema("analysis_schema", agent.analysis_schema)


# ---------------------------------------------------------------------------------------------- engines of a call

@dataclass(frozen=True, slots=True)
class AgentEngineChoices:
    llm: EngineChoice
    voice: EngineChoice
    transcriber: EngineChoice


def _vocabulary(agent: Agent, extra: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(text for text in (agent.prompt, agent.first_message or "", *extra) if text)


@dataclass(frozen=True, slots=True)
class ResolveAgentEnginesCommand:
    agent: Agent
    """The agent as the call's published version configures it."""
    vocabulary: tuple[str, ...] = ()
    """More texts the caller may speak of (the knowledge bases' titles), for the offline recognizer."""


class ResolveAgentEngines:
    """An agent version's engine settings as the engines take them: each names a provider of the organization (or
    none: the built-in offline one), whose type, base URL and opened key are read here. A provider deleted since
    the version was published falls back to the built-in offline engines."""

    def __init__(self, providers: AiProviderRepository, box: SecretBox) -> None:
        self.providers, self.box = providers, box

    async def _choice(self, organization_id: int, provider_id: int | None, *, model: str | None = None,
                      voice_id: str | None = None, speed: float = 1.0, temperature: float | None = None,
                      language: str | None = None, vocabulary: tuple[str, ...] = ()) -> EngineChoice:
        provider = (await self.providers.get(organization_id, provider_id)) if provider_id is not None else None
        if provider is None or provider.type == "offline":
            return EngineChoice("offline", None, None, model, voice_id, speed, temperature, language, vocabulary)
        key = self.box.open(provider.api_key_sealed) if provider.api_key_sealed else None
        return EngineChoice("openai_compatible", provider.base_url, key, model, voice_id, speed, temperature,
                            language, vocabulary)

    async def execute(self, command: ResolveAgentEnginesCommand) -> AgentEngineChoices:
        agent = command.agent
        org = agent.organization_id
        voice_id = agent.voice.voice_id if agent.voice.voice_id != "default" else None
        return AgentEngineChoices(
            llm=await self._choice(org, agent.llm.provider_id, model=agent.llm.model,
                                   temperature=agent.llm.temperature, language=agent.language),
            voice=await self._choice(org, agent.voice.provider_id, voice_id=voice_id, speed=agent.voice.speed,
                                     language=agent.language),
            transcriber=await self._choice(org, agent.transcriber.provider_id, model=agent.transcriber.model,
                                           language=agent.transcriber.language or agent.language,
                                           vocabulary=_vocabulary(agent, command.vocabulary)),
        )
