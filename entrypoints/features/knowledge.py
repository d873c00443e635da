"""Knowledge bases: providers, routes. Adapters: SQL or in-memory storage and search, local text
extraction, and the SSRF-safe page fetcher."""

from __future__ import annotations

from dishka import Provider, Scope, provide, provide_all

from adapters.documents import IsolatedTextExtractor, LocalTextExtractor
from adapters.egress import HttpxSafeHttp, SystemResolver
from adapters.memory.knowledge import (
    InMemoryDocumentRepository,
    InMemoryKnowledgeBaseRepository,
    InMemoryKnowledgeSearch,
)
from adapters.sql.knowledge import SqlDocumentRepository, SqlKnowledgeBaseRepository, SqlKnowledgeSearch
from application import knowledge
from application.ports.egress import Resolver
from application.ports.knowledge import (
    DocumentRepository,
    KnowledgeBaseRepository,
    KnowledgeSearch,
    PageFetcher,
    TextExtractor,
)
from entrypoints.http.routes import knowledge as routes
from entrypoints.settings import Settings

USER_AGENT = "Parley-Fetcher/2.0"


class SqlKnowledgeProvider(Provider):
    scope = Scope.REQUEST

    kbs = provide(SqlKnowledgeBaseRepository, provides=KnowledgeBaseRepository)
    documents = provide(SqlDocumentRepository, provides=DocumentRepository)
    search = provide(SqlKnowledgeSearch, provides=KnowledgeSearch)


class MemoryKnowledgeProvider(Provider):
    scope = Scope.REQUEST

    kbs = provide(InMemoryKnowledgeBaseRepository, provides=KnowledgeBaseRepository)
    documents = provide(InMemoryDocumentRepository, provides=DocumentRepository)
    search = provide(InMemoryKnowledgeSearch, provides=KnowledgeSearch)


class KnowledgeIoProvider(Provider):
    """Long-lived helpers: the text extractor and the page fetcher (loopback targets only when
    PARLEY_ALLOW_LOOPBACK_TARGETS is set)."""

    scope = Scope.APP

    @provide
    def resolver(self) -> Resolver:
        return SystemResolver()

    @provide
    def fetcher(self, resolver: Resolver, settings: Settings) -> PageFetcher:
        return HttpxSafeHttp(resolver, allow_loopback=settings.allow_loopback_targets, user_agent=USER_AGENT)

    @provide
    def extractor(self, settings: Settings) -> TextExtractor:
        return IsolatedTextExtractor(LocalTextExtractor(), timeout_seconds=settings.extraction_timeout_seconds,
                                     memory_mb=settings.extraction_memory_mb)


class KnowledgeUseCaseProvider(Provider):
    scope = Scope.REQUEST

    cases = provide_all(
        knowledge.CreateKnowledgeBase,
        knowledge.GetKnowledgeBase,
        knowledge.ListKnowledgeBases,
        knowledge.UpdateKnowledgeBase,
        knowledge.DeleteKnowledgeBase,
        knowledge.AttachKnowledgeBase,
        knowledge.DetachKnowledgeBase,
        knowledge.UploadDocuments,
        knowledge.ScrapeDocument,
        knowledge.ListDocuments,
        knowledge.GetDocument,
        knowledge.DeleteDocument,
        knowledge.SearchKnowledge,
        knowledge.SearchAgentKnowledge,
    )


def providers(settings: Settings) -> list[Provider]:
    storage = MemoryKnowledgeProvider() if settings.database_url == "memory://" else SqlKnowledgeProvider()
    return [storage, KnowledgeIoProvider(), KnowledgeUseCaseProvider()]


ROUTES = routes.ROUTES
