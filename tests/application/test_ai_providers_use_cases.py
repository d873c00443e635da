"""AI providers on the in-memory backend: the built-in provider, keys sealed, agents that name providers, deleting,
and the engines' choices of an agent version (a provider deleted since falls back to the offline engines)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from application.agents import (
    CreateAgent,
    CreateAgentCommand,
    PublishAgent,
    PublishAgentCommand,
    UpdateAgent,
    UpdateAgentCommand,
)
from application.ai_providers import (
    CreateAiProvider,
    CreateAiProviderCommand,
    DeleteAiProvider,
    DeleteAiProviderCommand,
    ListAiProviders,
    ListAiProvidersCommand,
    ResolveAgentEngines,
    ResolveAgentEnginesCommand,
    UpdateAiProvider,
    UpdateAiProviderCommand,
)
from application.ports.engines import EngineChoice
from application.ports.platform import PageRequest
from domain.agents import Llm, Transcriber, Voice
from domain.errors import BlockedAddress, Conflict, Unprocessable
from tests.application.conftest import App


async def _provider(app: App, actor: object, **fields: object) -> int:
    created = await app.run(CreateAiProvider, CreateAiProviderCommand(actor, **{  # type: ignore[arg-type]
        "name": "Ollama", "type": "openai_compatible", "base_url": "https://llm.example.com/v1",
        "api_key": "sk-local", **fields}))
    return int(created.id)


async def test_the_built_in_provider_exists_once_and_keys_are_sealed(app: App) -> None:
    actor = await app.actor()
    first = await app.run(ListAiProviders, ListAiProvidersCommand(actor, PageRequest()))
    again = await app.run(ListAiProviders, ListAiProvidersCommand(actor, PageRequest()))
    assert [p.type for p in first.items] == ["offline"] and first.items == again.items
    provider_id = await _provider(app, actor)
    listed = (await app.run(ListAiProviders, ListAiProvidersCommand(actor, PageRequest()))).items
    created = listed[1]
    assert created.has_api_key and created.api_key_sealed and "sk-local" not in created.api_key_sealed
    with pytest.raises(BlockedAddress):  # loopback URLs only where the settings allow them
        await _provider(app, actor, base_url="http://127.0.0.1:11434/v1")
    offline = await app.run(UpdateAiProvider, UpdateAiProviderCommand(actor, provider_id, {"type": "offline"}))
    assert (offline.type, offline.base_url, offline.has_api_key) == ("offline", None, False)


async def test_agents_name_providers_of_their_organization_and_keep_them_from_deletion(app: App) -> None:
    actor = await app.actor()
    provider_id = await _provider(app, actor)
    with pytest.raises(Unprocessable, match=r"llm\.provider_id"):
        await app.run(CreateAgent, CreateAgentCommand(actor, "A", llm=Llm(provider_id=provider_id + 100)))
    agent = await app.run(CreateAgent, CreateAgentCommand(actor, "A", voice=Voice(provider_id=provider_id)))
    with pytest.raises(Conflict):
        await app.run(DeleteAiProvider, DeleteAiProviderCommand(actor, provider_id))
    await app.run(PublishAgent, PublishAgentCommand(actor, agent.id))
    await app.run(UpdateAgent, UpdateAgentCommand(actor, agent.id, {"voice": {"provider_id": None}}))
    with pytest.raises(Conflict):  # the published version still speaks through it
        await app.run(DeleteAiProvider, DeleteAiProviderCommand(actor, provider_id))
    await app.run(PublishAgent, PublishAgentCommand(actor, agent.id))
    await app.run(DeleteAiProvider, DeleteAiProviderCommand(actor, provider_id))


async def test_an_agent_versions_engines_resolve_with_the_opened_key(app: App) -> None:
    actor = await app.actor()
    provider_id = await _provider(app, actor)
    agent = await app.run(CreateAgent, CreateAgentCommand(
        actor, "A", prompt="Dental clinic", first_message="Hello!", language="en-GB",
        llm=Llm("llama3.1", 0.1, provider_id), transcriber=Transcriber(provider_id, "whisper-small", None)))
    choices = await app.run(ResolveAgentEngines, ResolveAgentEnginesCommand(agent))
    assert choices.llm == EngineChoice("openai_compatible", "https://llm.example.com/v1", "sk-local",
                                       model="llama3.1", temperature=0.1, language="en-GB")
    assert choices.transcriber == EngineChoice("openai_compatible", "https://llm.example.com/v1", "sk-local",
                                               model="whisper-small", language="en-GB",
                                               vocabulary=("Dental clinic", "Hello!"))
    assert choices.voice == EngineChoice("offline", speed=1.0, language="en-GB")
    gone = replace(agent, llm=Llm("llama3.1", 0.1, provider_id + 50))
    assert (await app.run(ResolveAgentEngines, ResolveAgentEnginesCommand(gone))).llm.provider_type == "offline"
