"""In-memory knowledge bases, documents, chunks and a term-frequency search."""

from __future__ import annotations

import builtins
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from adapters.memory.store import InMemoryUnitOfWork
from application.ports.knowledge import DocumentFilter, SearchHit
from application.ports.platform import Page, PageRequest
from domain.errors import DuplicateDocument
from domain.identity import persisted
from domain.knowledge import AgentRef, Document, KnowledgeBase, words

KBS, LINKS, DOCS, CHUNKS = "knowledge_bases", "knowledge_base_agents", "documents", "document_chunks"


@dataclass(frozen=True, slots=True)
class _Chunk:
    id: int
    organization_id: int
    knowledge_base_id: int
    document_id: int
    ordinal: int
    text: str


class InMemoryKnowledgeBaseRepository:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def add(self, kb: KnowledgeBase) -> KnowledgeBase:
        tables = await self.uow.tables()
        stored = replace(kb, id=self.uow.store.next_id(KBS))
        tables[KBS][stored.id] = stored
        return stored

    async def get(self, organization_id: int, kb_id: int) -> KnowledgeBase | None:
        tables = await self.uow.tables()
        kb = tables[KBS].get(kb_id)
        return kb if kb is not None and kb.organization_id == organization_id else None

    async def count_for_update(self, organization_id: int) -> int:
        tables = await self.uow.tables()  # the store lock is held until the transaction ends
        return sum(1 for kb in tables[KBS].values() if kb.organization_id == organization_id)

    async def list(self, organization_id: int, page: PageRequest) -> Page[KnowledgeBase]:
        tables = await self.uow.tables()
        return page.slice(sorted((kb for kb in tables[KBS].values() if kb.organization_id == organization_id),
                                 key=lambda kb: kb.id))

    async def list_for_agent(self, organization_id: int, agent_id: int, page: PageRequest) -> Page[KnowledgeBase]:
        tables = await self.uow.tables()
        ids = sorted(kb_id for (kb_id, aid), org in tables[LINKS].items()
                     if aid == agent_id and org[0] == organization_id)
        found = [tables[KBS][i] for i in ids if i in tables[KBS] and tables[KBS][i].organization_id == organization_id]
        return page.slice(found)

    async def update(self, kb: KnowledgeBase) -> KnowledgeBase:
        tables = await self.uow.tables()
        current = tables[KBS].get(kb.id)
        if current is not None and current.organization_id == kb.organization_id:
            tables[KBS][kb.id] = replace(kb, created_at=current.created_at, agent_id=current.agent_id)
        return kb

    async def delete(self, organization_id: int, kb_id: int) -> None:
        tables = await self.uow.tables()
        kb = tables[KBS].get(kb_id)
        if kb is None or kb.organization_id != organization_id:
            return
        for key in [k for k, c in tables[CHUNKS].items() if c.knowledge_base_id == kb_id]:
            del tables[CHUNKS][key]
        for key in [k for k, d in tables[DOCS].items() if d.knowledge_base_id == kb_id]:
            del tables[DOCS][key]
        for key in [k for k in tables[LINKS] if k[0] == kb_id]:
            del tables[LINKS][key]
        del tables[KBS][kb_id]

    async def link(self, organization_id: int, kb_id: int, agent_id: int, at: datetime) -> bool:
        tables = await self.uow.tables()
        if (kb_id, agent_id) in tables[LINKS]:
            return False
        tables[LINKS][(kb_id, agent_id)] = (organization_id, at)
        return True

    async def unlink(self, organization_id: int, kb_id: int, agent_id: int) -> bool:
        tables = await self.uow.tables()
        entry = tables[LINKS].get((kb_id, agent_id))
        if entry is None or entry[0] != organization_id:
            return False
        del tables[LINKS][(kb_id, agent_id)]
        return True

    async def linked_agents(self, organization_id: int, kb_ids: Sequence[int]) -> dict[int, builtins.list[AgentRef]]:
        tables = await self.uow.tables()
        wanted = set(kb_ids)
        found: dict[int, list[AgentRef]] = {}
        for (kb_id, agent_id), (org, _) in sorted(tables[LINKS].items()):
            agent = tables["agents"].get(agent_id)
            if kb_id in wanted and org == organization_id and agent is not None \
                    and agent.organization_id == organization_id:
                found.setdefault(kb_id, []).append(AgentRef(agent_id, agent.name))
        return found


class InMemoryDocumentRepository:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    def _of(self, d: Document, organization_id: int, kb_id: int) -> bool:
        return d.organization_id == organization_id and d.knowledge_base_id == kb_id

    async def add(self, document: Document) -> Document:
        tables = await self.uow.tables()
        for other in tables[DOCS].values():
            if other.knowledge_base_id != document.knowledge_base_id:
                continue
            if (document.content_hash is not None and other.content_hash == document.content_hash) or (
                    document.source_url is not None and other.source_url == document.source_url):
                raise DuplicateDocument("the document is already in this knowledge base")
        stored = replace(document, id=self.uow.store.next_id(DOCS))
        tables[DOCS][stored.id] = stored
        return stored

    async def get(self, organization_id: int, kb_id: int, document_id: int) -> Document | None:
        tables = await self.uow.tables()
        d = tables[DOCS].get(document_id)
        return d if d is not None and self._of(d, organization_id, kb_id) else None

    async def find_duplicate(self, organization_id: int, kb_id: int, *, content_hash: str | None = None,
                             source_url: str | None = None) -> Document | None:
        tables = await self.uow.tables()
        for d in sorted(tables[DOCS].values(), key=lambda d: d.id):
            if self._of(d, organization_id, kb_id) and (
                    (content_hash is not None and d.content_hash == content_hash)
                    or (source_url is not None and d.source_url == source_url)):
                return d
        return None

    async def list(self, organization_id: int, kb_id: int, filters: DocumentFilter,
                   page: PageRequest) -> Page[Document]:
        tables = await self.uow.tables()
        found = [d for d in sorted(tables[DOCS].values(), key=lambda d: d.id)
                 if self._of(d, organization_id, kb_id)
                 and (filters.status is None or d.status == filters.status)
                 and (filters.file_type is None or d.file_type == filters.file_type)]
        return page.slice(found)

    async def counts(self, organization_id: int, kb_ids: Sequence[int]) -> dict[int, int]:
        tables = await self.uow.tables()
        wanted = set(kb_ids)
        return dict(Counter(d.knowledge_base_id for d in tables[DOCS].values()
                            if d.organization_id == organization_id and d.knowledge_base_id in wanted))

    async def update(self, document: Document) -> Document:
        tables = await self.uow.tables()
        current = tables[DOCS].get(document.id)
        if current is not None and self._of(current, document.organization_id, document.knowledge_base_id):
            tables[DOCS][document.id] = replace(document, created_at=current.created_at)
        return document

    async def add_chunks(self, document: Document, texts: Sequence[str]) -> int:
        tables = await self.uow.tables()
        for ordinal, text in enumerate(texts):
            chunk_id = self.uow.store.next_id(CHUNKS)
            tables[CHUNKS][chunk_id] = _Chunk(chunk_id, document.organization_id, document.knowledge_base_id,
                                              persisted(document.id), ordinal, text)
        return len(texts)

    async def delete(self, organization_id: int, kb_id: int, document_id: int) -> None:
        tables = await self.uow.tables()
        d = tables[DOCS].get(document_id)
        if d is None or not self._of(d, organization_id, kb_id):
            return
        for key in [k for k, c in tables[CHUNKS].items() if c.document_id == document_id]:
            del tables[CHUNKS][key]
        del tables[DOCS][document_id]


class InMemoryKnowledgeSearch:
    """Score = how often the query's terms occur in the chunk; ties by chunk id."""

    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def search(self, organization_id: int, kb_ids: Sequence[int], terms: Sequence[str],
                     limit: int) -> list[SearchHit]:
        tables = await self.uow.tables()
        wanted, needles = set(kb_ids), set(terms)
        scored: list[tuple[float, int, _Chunk]] = []
        for chunk in tables[CHUNKS].values():
            if chunk.organization_id != organization_id or chunk.knowledge_base_id not in wanted:
                continue
            score = sum(count for word, count in Counter(words(chunk.text)).items() if word in needles)
            if score:
                scored.append((-float(score), chunk.id, chunk))
        scored.sort(key=lambda entry: (entry[0], entry[1]))
        return [SearchHit(c.knowledge_base_id, c.document_id, c.id, c.text, -negative)
                for negative, _, c in scored[:max(limit, 0)]]
