"""Ports for knowledge bases: storage, full-text search, text extraction and page fetching."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from application.ports.egress import FetchedPage, SafeHttp
from application.ports.platform import Page, PageRequest
from domain.knowledge import AgentRef, Document, KnowledgeBase


@dataclass(frozen=True, slots=True)
class DocumentFilter:
    status: str | None = None
    file_type: str | None = None


@dataclass(frozen=True, slots=True)
class SearchHit:
    knowledge_base_id: int
    document_id: int
    chunk_id: int
    text: str
    score: float
    """Higher is more relevant. Comparable within one result list, not across backends."""


@dataclass(frozen=True, slots=True)
class ExtractedText:
    file_type: str
    """What the content turned out to be: txt, md, csv, html, pdf or docx."""
    text: str
    title: str | None = None


class ExtractionFailed(Exception):
    """A file or page whose text cannot be used. ``str(exc)`` is safe to show to the client
    (it never contains the content); ``code`` is stable."""

    def __init__(self, message: str, code: str = "unreadable_file") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class KnowledgeBaseRepository(Protocol):
    async def add(self, kb: KnowledgeBase) -> KnowledgeBase: ...

    async def get(self, organization_id: int, kb_id: int) -> KnowledgeBase | None: ...

    async def count_for_update(self, organization_id: int) -> int:
        """How many knowledge bases the organization has, serialized against concurrent creators
        until the transaction ends (PostgreSQL locks the organization row; SQLite write
        transactions are serial already)."""
        ...

    async def list_for_agent(self, organization_id: int, agent_id: int, page: PageRequest) -> Page[KnowledgeBase]:
        """Knowledge bases attached to the agent (its own included), by id."""
        ...

    async def list(self, organization_id: int, page: PageRequest) -> Page[KnowledgeBase]:
        """Every knowledge base of the organization (whatever became of its agents), by id."""
        ...

    async def update(self, kb: KnowledgeBase) -> KnowledgeBase: ...

    async def delete(self, organization_id: int, kb_id: int) -> None:
        """Removes the knowledge base with its agent links, documents and chunks."""
        ...

    async def link(self, organization_id: int, kb_id: int, agent_id: int, at: datetime) -> bool:
        """Attach; False when it was attached already."""
        ...

    async def unlink(self, organization_id: int, kb_id: int, agent_id: int) -> bool:
        """Detach; False when it was not attached."""
        ...

    async def linked_agents(self, organization_id: int, kb_ids: Sequence[int]) -> dict[int, builtins.list[AgentRef]]:
        """The live agents each knowledge base is attached to, by agent id."""
        ...


class DocumentRepository(Protocol):
    async def add(self, document: Document) -> Document:
        """Raises ``DuplicateDocument`` when the knowledge base already holds the same
        ``content_hash`` or ``source_url``."""
        ...

    async def get(self, organization_id: int, kb_id: int, document_id: int) -> Document | None: ...

    async def find_duplicate(self, organization_id: int, kb_id: int, *, content_hash: str | None = None,
                             source_url: str | None = None) -> Document | None: ...

    async def list(self, organization_id: int, kb_id: int, filters: DocumentFilter,
                   page: PageRequest) -> Page[Document]: ...

    async def counts(self, organization_id: int, kb_ids: Sequence[int]) -> dict[int, int]:
        """Documents per knowledge base (absent ids have none)."""
        ...

    async def update(self, document: Document) -> Document: ...

    async def add_chunks(self, document: Document, texts: Sequence[str]) -> int:
        """Stores the document's chunks (ordinal = position) and makes them searchable."""
        ...

    async def delete(self, organization_id: int, kb_id: int, document_id: int) -> None:
        """Removes the document and its chunks."""
        ...


class KnowledgeSearch(Protocol):
    async def search(self, organization_id: int, kb_ids: Sequence[int], terms: Sequence[str],
                     limit: int) -> list[SearchHit]:
        """Chunks of the given knowledge bases containing any of ``terms`` (lower-case words of
        letters and digits, see ``domain.knowledge.search_terms``), most relevant first."""
        ...


class TextExtractor(Protocol):
    async def extract_file(self, file_name: str, data: bytes) -> ExtractedText:
        """Text of an uploaded file, its type judged from the content (the name only tells csv
        and md from txt). Raises ``ExtractionFailed``."""
        ...

    async def extract_page(self, page: FetchedPage) -> ExtractedText:
        """Main text of a fetched HTML or plain-text page. Raises ``ExtractionFailed``."""
        ...


class PageFetcher(SafeHttp, Protocol):
    """The SSRF-safe client knowledge bases scrape with (wired with its own user agent)."""
