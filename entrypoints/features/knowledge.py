"""Knowledge bases: storage, use cases and settings. Adapters: SQL or in-memory storage and search, local text
extraction, and the SSRF-safe page fetcher."""

from __future__ import annotations

from dataclasses import dataclass

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
from entrypoints.features import Feature
from entrypoints.settings import Settings

USER_AGENT = "Parley-Fetcher/2.0"


@dataclass(frozen=True)
class KnowledgeSettings:
    """Limits of the worker processes that read uploaded files and scraped pages."""

    extraction_timeout_seconds: float = 30.0
    """PARLEY_EXTRACTION_TIMEOUT_SECONDS"""
    extraction_memory_mb: int = 1024
    """PARLEY_EXTRACTION_MEMORY_MB"""


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
    def extractor(self, settings: KnowledgeSettings) -> TextExtractor:
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


FEATURE = Feature(
    name="knowledge",
    providers=(KnowledgeIoProvider, KnowledgeUseCaseProvider),
    sql=SqlKnowledgeProvider,
    memory=MemoryKnowledgeProvider,
    settings=KnowledgeSettings,
)
