"""The conversation runtime (application/conversation): the agent's side of a live call. This feature provides the
use case that loads a call's conversation configuration (its published agent version) and builds the runtime for
whoever runs media sessions, given the engines and the SSRF-safe egress."""

from __future__ import annotations

from dishka import AsyncContainer, Provider, Scope, provide_all

from application.conversation.config import LoadConversationConfig, PublishedConfigs
from application.conversation.knowledge import KnowledgePassages
from application.conversation.session import AgentConversation
from application.ports.egress import SafeHttp
from application.ports.engines import EngineFactory
from application.ports.media import ConversationRuntime
from entrypoints.features import Feature
from entrypoints.units import ScopedUnits


class ConversationUseCaseProvider(Provider):
    scope = Scope.REQUEST

    cases = provide_all(LoadConversationConfig)


def conversation_runtime(container: AsyncContainer, engines: EngineFactory, http: SafeHttp) -> ConversationRuntime:
    """The runtime over this container's units of work: each call's configuration, its tools' use cases and its
    knowledge searches run in units of their own."""
    units = ScopedUnits(container)
    return AgentConversation(PublishedConfigs(units), engines, units=units, http=http,
                             passages=KnowledgePassages(units))


FEATURE = Feature(
    name="conversation",
    providers=(ConversationUseCaseProvider,),
)
