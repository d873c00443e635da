"""The conversation runtime (application/conversation): the agent's side of a live call. This feature provides the
use case that loads a call's conversation configuration (its published agent version), builds the runtime for
whoever runs media sessions, given the engines and the SSRF-safe egress, and runs the telephony simulator's calls
through that same runtime (``SimulatedConversations``: a scripted text caller, application/simulated_call.py)."""

from __future__ import annotations

from dishka import Provider, Scope, provide, provide_all

from adapters.crypto.tool_secrets import DerivedToolSecrets
from adapters.egress import HttpxSafeHttp, SystemResolver
from application.conversation.config import LoadConversationConfig, PublishedConfigs
from application.conversation.knowledge import KnowledgePassages
from application.conversation.session import AgentConversation
from application.conversation.tools import TOOL_USER_AGENT
from application.ports.conversation import ToolSecrets
from application.ports.egress import SafeHttp
from application.ports.engines import EngineFactory, LanguageModels
from application.ports.media import ConversationRuntime
from application.ports.platform import Units
from application.ports.telephony import SimulatedConversations
from application.simulated_call import ScriptedCallConversations
from entrypoints.features import Feature
from entrypoints.settings import Settings


class ConversationProvider(Provider):
    @provide(scope=Scope.APP)
    def tool_secrets(self, settings: Settings) -> ToolSecrets:
        return DerivedToolSecrets(settings.secret_key)

    @provide(scope=Scope.APP)
    def simulated_calls(self, settings: Settings, units: Units, models: LanguageModels,
                        tool_secrets: ToolSecrets) -> SimulatedConversations:
        """The simulator's calls: the agent's conversation with a scripted text caller, its custom tools' requests
        through the egress like a live call's."""
        http = HttpxSafeHttp(SystemResolver(), allow_loopback=settings.allow_loopback_targets,
                             user_agent=TOOL_USER_AGENT)
        return ScriptedCallConversations(units, models, http=http, tool_secrets=tool_secrets)

    cases = provide_all(LoadConversationConfig, scope=Scope.REQUEST)


def conversation_runtime(units: Units, engines: EngineFactory, http: SafeHttp, tool_secrets: ToolSecrets, *,
                         silence_timeout_ms: int | None = None) -> ConversationRuntime:
    """The runtime over the container's units of work (``Units``: the media feature's runtime): each call's
    configuration, its tools' use cases and its knowledge searches run in units of their own.
    ``silence_timeout_ms``: the process's silence timeout (None: the default, ``SILENCE_TIMEOUT_MS``)."""
    return AgentConversation(PublishedConfigs(units), engines, units=units, http=http,
                             passages=KnowledgePassages(units), tool_secrets=tool_secrets,
                             silence_timeout_ms=silence_timeout_ms)


FEATURE = Feature(
    name="conversation",
    providers=(ConversationProvider,),
)
