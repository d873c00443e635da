"""Engines feature: an organization's AI providers, the checks an agent's engine settings pass, and the
conversation's engines (``EngineFactory``: ``openai_compatible`` through the egress, ``offline`` built in)."""

from __future__ import annotations

import logging
import time

from dishka import AnyOf, Provider, Scope, provide, provide_all

from adapters.egress import HttpxSafeHttp, SystemResolver
from adapters.engines import offline
from adapters.engines.factory import EngineBuilder
from adapters.memory.ai_providers import InMemoryAiProviderRepository
from adapters.sql.ai_providers import SqlAiProviderRepository
from application import ai_providers as uc
from application.ports.agents import AgentEngineSettings
from application.ports.ai_providers import AiProviderRepository
from application.ports.engines import EngineFactory, LanguageModels
from entrypoints.features import Feature
from entrypoints.settings import Settings

USER_AGENT = "Parley-Engines/2.0"
log = logging.getLogger("parley.engines")


async def warm_offline_engines() -> None:
    """What `parley serve` runs once as it starts, in the background (the server answers meanwhile): the offline
    engines loaded (``adapters.engines.offline.warm_up``) so that no call waits for them. A failure is logged; the
    first call that needs the engine reports it."""
    started = time.perf_counter()
    try:
        await offline.warm_up()
    except Exception as exc:  # a missing optional engine: the conversation that needs it says so
        log.warning("the offline engines could not be loaded: %s", exc)
        return
    log.info("offline engines loaded in %d ms", round((time.perf_counter() - started) * 1000))


class EnginesPlatformProvider(Provider):
    scope = Scope.APP

    @provide
    def policy(self, settings: Settings) -> uc.AiProviderPolicy:
        return uc.AiProviderPolicy(allow_loopback=settings.allow_loopback_targets)

    @provide(provides=AnyOf[EngineFactory, LanguageModels])
    def engines(self, settings: Settings) -> EngineBuilder:
        """Every request to a model server goes through the egress: its base URL is checked at each use. The
        language model alone (``LanguageModels``) is what the telephony simulator's calls use."""
        http = HttpxSafeHttp(SystemResolver(), allow_loopback=settings.allow_loopback_targets, user_agent=USER_AGENT)
        return EngineBuilder(http)


class SqlEnginesProvider(Provider):
    scope = Scope.REQUEST

    providers = provide(SqlAiProviderRepository, provides=AiProviderRepository)


class MemoryEnginesProvider(Provider):
    scope = Scope.REQUEST

    providers = provide(InMemoryAiProviderRepository, provides=AiProviderRepository)


class EnginesUseCaseProvider(Provider):
    scope = Scope.REQUEST

    checks = provide(uc.AgentEngineChecks, provides=AgentEngineSettings)
    cases = provide_all(
        uc.ListAiProviders,
        uc.GetAiProvider,
        uc.CreateAiProvider,
        uc.UpdateAiProvider,
        uc.DeleteAiProvider,
        uc.ResolveAgentEngines,
    )


FEATURE = Feature(
    name="engines",
    providers=(EnginesPlatformProvider, EnginesUseCaseProvider),
    sql=SqlEnginesProvider,
    memory=MemoryEnginesProvider,
)
