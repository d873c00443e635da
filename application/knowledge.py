"""Knowledge-base use cases: knowledge bases and their agent links, documents (upload and
scrape, ingested synchronously), and full-text search."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from application.context import Actor
from application.ports.accounts import OrganizationRepository
from application.ports.agents import AgentRepository
from application.ports.knowledge import (
    DocumentFilter,
    DocumentRepository,
    ExtractedText,
    ExtractionFailed,
    KnowledgeBaseRepository,
    KnowledgeSearch,
    PageFetcher,
    SearchHit,
    TextExtractor,
)
from application.ports.platform import Clock, Page, PageRequest, UnitOfWork
from domain.agents import Agent
from domain.errors import (
    BlockedAddress,
    DuplicateDocument,
    NotFound,
    PlanLimitReached,
    UpstreamFetchFailed,
    ValidationFailed,
)
from domain.events import DomainEvent, EventType
from domain.identity import persisted
from domain.knowledge import (
    MAX_FILES_PER_UPLOAD,
    MAX_PAGE_BYTES,
    MAX_TEXT_CHARS,
    TEXT_TOO_LONG,
    AgentRef,
    Document,
    KnowledgeBase,
    chunk_text,
    clean_file_name,
    content_hash,
    file_name_for_page,
    normalise_source_url,
    normalise_text,
    search_terms,
)
from domain.patching import MergePatch, apply_patch

PAGE_TYPES = ("text/html", "application/xhtml+xml", "text/plain")
EMBEDDED_DOCUMENTS = 1000
"""At most this many documents are embedded in a knowledge base read with_documents=true."""
ALL_ATTACHED = PageRequest(limit=1000, offset=0)


@dataclass(frozen=True, slots=True)
class KnowledgeBaseView:
    """A knowledge base as the API shows it: with its agents and document count, and its
    documents when asked for."""

    knowledge_base: KnowledgeBase
    agents: list[AgentRef]
    document_count: int
    documents: list[Document] | None = None


async def _agent(agents: AgentRepository, actor: Actor, agent_id: int, *, field: str | None = None) -> Agent:
    """``field``: the body's field that named the agent (a 404 names it), none when the path did."""
    agent = await agents.get(actor.organization_id, agent_id)
    if agent is None:
        raise NotFound("agent", agent_id, field=field)
    return agent


async def _kb(kbs: KnowledgeBaseRepository, actor: Actor, kb_id: int, *, field: str | None = None) -> KnowledgeBase:
    """``field``: the body's field that named the knowledge base (a 404 names it), none when the path did."""
    kb = await kbs.get(actor.organization_id, kb_id)
    if kb is None:
        raise NotFound("knowledge base", kb_id, field=field)
    return kb


async def _views(kbs: KnowledgeBaseRepository, docs: DocumentRepository, organization_id: int,
                 items: Sequence[KnowledgeBase]) -> list[KnowledgeBaseView]:
    ids = [kb.id for kb in items if kb.id is not None]
    if not ids:
        return []
    agents = await kbs.linked_agents(organization_id, ids)
    counts = await docs.counts(organization_id, ids)
    return [KnowledgeBaseView(kb, agents.get(persisted(kb.id), []), counts.get(persisted(kb.id), 0)) for kb in items]


def _kb_event(kb: KnowledgeBase, kind: EventType, **extra: Any) -> DomainEvent:
    return kind(kb.organization_id, {"knowledge_base_id": kb.id, "agent_id": kb.agent_id, **extra})


# -- knowledge bases ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateKnowledgeBaseCommand:
    actor: Actor
    name: str
    agent_id: int
    description: str | None = None


class CreateKnowledgeBase:
    """A knowledge base that belongs to, and is attached to, one agent; limited per plan."""

    def __init__(self, uow: UnitOfWork, kbs: KnowledgeBaseRepository, docs: DocumentRepository,
                 agents: AgentRepository, orgs: OrganizationRepository, clock: Clock) -> None:
        self.uow, self.kbs, self.docs, self.agents, self.orgs, self.clock = uow, kbs, docs, agents, orgs, clock

    async def execute(self, command: CreateKnowledgeBaseCommand) -> KnowledgeBaseView:
        actor = command.actor
        org = await self.orgs.get(actor.organization_id)
        if org is None:
            raise NotFound("organization", actor.organization_id)
        await _agent(self.agents, actor, command.agent_id, field="agent_id")
        limit = org.limit("max_knowledge_bases")
        used = await self.kbs.count_for_update(actor.organization_id)
        if used >= limit:
            raise PlanLimitReached(
                f"max_knowledge_bases: the {org.plan} plan allows {limit} knowledge base{'s' if limit != 1 else ''} "
                f"and this organization has {used}; delete one (GET /knowledge-bases lists them all) or change plan",
                details={"limit_name": "max_knowledge_bases", "limit": limit, "used": used, "plan": org.plan,
                         "max": limit},
            )
        now = self.clock.now()
        kb = await self.kbs.add(KnowledgeBase(None, actor.organization_id, command.agent_id, command.name,
                                              command.description, now, now))
        await self.kbs.link(actor.organization_id, persisted(kb.id), command.agent_id, now)
        self.uow.record(_kb_event(kb, EventType.KNOWLEDGE_BASE_CREATED, name=kb.name))
        return (await _views(self.kbs, self.docs, actor.organization_id, [kb]))[0]


@dataclass(frozen=True, slots=True)
class GetKnowledgeBaseCommand:
    actor: Actor
    knowledge_base_id: int
    with_documents: bool = False


class GetKnowledgeBase:
    def __init__(self, kbs: KnowledgeBaseRepository, docs: DocumentRepository) -> None:
        self.kbs, self.docs = kbs, docs

    async def execute(self, command: GetKnowledgeBaseCommand) -> KnowledgeBaseView:
        actor, kb_id = command.actor, command.knowledge_base_id
        kb = await _kb(self.kbs, actor, kb_id)
        view = (await _views(self.kbs, self.docs, actor.organization_id, [kb]))[0]
        if not command.with_documents:
            return view
        page = await self.docs.list(actor.organization_id, kb_id, DocumentFilter(),
                                    PageRequest(EMBEDDED_DOCUMENTS, 0))
        return replace(view, documents=page.items)


@dataclass(frozen=True, slots=True)
class ListKnowledgeBasesCommand:
    actor: Actor
    agent_id: int | None
    """None: every knowledge base of the organization."""
    page: PageRequest


class ListKnowledgeBases:
    """The knowledge bases attached to an agent (its own included), or, without an agent, every knowledge base
    of the organization (those whose agents were deleted included)."""

    def __init__(self, kbs: KnowledgeBaseRepository, docs: DocumentRepository, agents: AgentRepository) -> None:
        self.kbs, self.docs, self.agents = kbs, docs, agents

    async def execute(self, command: ListKnowledgeBasesCommand) -> Page[KnowledgeBaseView]:
        actor, agent_id, page = command.actor, command.agent_id, command.page
        if agent_id is None:
            found = await self.kbs.list(actor.organization_id, page)
        else:
            await _agent(self.agents, actor, agent_id)
            found = await self.kbs.list_for_agent(actor.organization_id, agent_id, page)
        views = await _views(self.kbs, self.docs, actor.organization_id, found.items)
        return Page(views, found.total, found.limit, found.offset)


@dataclass(frozen=True, slots=True)
class UpdateKnowledgeBaseCommand:
    actor: Actor
    knowledge_base_id: int
    patch: MergePatch
    """Any of name, description."""


class UpdateKnowledgeBase:
    def __init__(self, uow: UnitOfWork, kbs: KnowledgeBaseRepository, docs: DocumentRepository,
                 clock: Clock) -> None:
        self.uow, self.kbs, self.docs, self.clock = uow, kbs, docs, clock

    async def execute(self, command: UpdateKnowledgeBaseCommand) -> KnowledgeBaseView:
        actor = command.actor
        kb = await _kb(self.kbs, actor, command.knowledge_base_id)
        allowed = {k: v for k, v in command.patch.items() if k in ("name", "description")}
        updated = apply_patch(kb, allowed)
        if updated != kb:  # a PATCH that changes nothing leaves updated_at alone and emits no event
            changed = sorted(k for k in allowed if getattr(updated, k) != getattr(kb, k))
            kb = await self.kbs.update(replace(updated, updated_at=self.clock.now()))
            self.uow.record(_kb_event(kb, EventType.KNOWLEDGE_BASE_UPDATED, fields=changed))
        return (await _views(self.kbs, self.docs, actor.organization_id, [kb]))[0]


@dataclass(frozen=True, slots=True)
class DeleteKnowledgeBaseCommand:
    actor: Actor
    knowledge_base_id: int


class DeleteKnowledgeBase:
    def __init__(self, uow: UnitOfWork, kbs: KnowledgeBaseRepository) -> None:
        self.uow, self.kbs = uow, kbs

    async def execute(self, command: DeleteKnowledgeBaseCommand) -> None:
        actor, kb_id = command.actor, command.knowledge_base_id
        kb = await _kb(self.kbs, actor, kb_id)
        await self.kbs.delete(actor.organization_id, kb_id)
        self.uow.record(_kb_event(kb, EventType.KNOWLEDGE_BASE_DELETED))


# -- agent links ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AgentKnowledgeBases:
    agent_id: int
    knowledge_bases: list[KnowledgeBaseView]


@dataclass(frozen=True, slots=True)
class AttachKnowledgeBaseCommand:
    actor: Actor
    agent_id: int
    knowledge_base_id: int


class AttachKnowledgeBase:
    """Attach a knowledge base of the organization to another agent (attaching twice is a no-op)."""

    def __init__(self, uow: UnitOfWork, kbs: KnowledgeBaseRepository, docs: DocumentRepository,
                 agents: AgentRepository, clock: Clock) -> None:
        self.uow, self.kbs, self.docs, self.agents, self.clock = uow, kbs, docs, agents, clock

    async def execute(self, command: AttachKnowledgeBaseCommand) -> AgentKnowledgeBases:
        actor, agent_id, kb_id = command.actor, command.agent_id, command.knowledge_base_id
        await _agent(self.agents, actor, agent_id)
        kb = await _kb(self.kbs, actor, kb_id, field="knowledge_base_id")
        if await self.kbs.link(actor.organization_id, kb_id, agent_id, self.clock.now()):
            self.uow.record(_kb_event(kb, EventType.KNOWLEDGE_BASE_ATTACHED, attached_agent_id=agent_id))
        attached = await self.kbs.list_for_agent(actor.organization_id, agent_id, ALL_ATTACHED)
        return AgentKnowledgeBases(agent_id, await _views(self.kbs, self.docs, actor.organization_id,
                                                          attached.items))


@dataclass(frozen=True, slots=True)
class DetachKnowledgeBaseCommand:
    actor: Actor
    agent_id: int
    knowledge_base_id: int


class DetachKnowledgeBase:
    def __init__(self, uow: UnitOfWork, kbs: KnowledgeBaseRepository, agents: AgentRepository) -> None:
        self.uow, self.kbs, self.agents = uow, kbs, agents

    async def execute(self, command: DetachKnowledgeBaseCommand) -> None:
        actor, agent_id, kb_id = command.actor, command.agent_id, command.knowledge_base_id
        await _agent(self.agents, actor, agent_id)
        kb = await _kb(self.kbs, actor, kb_id)
        if kb.agent_id == agent_id:
            raise ValidationFailed(
                "a knowledge base cannot be detached from the agent that owns it; delete the knowledge base instead",
                details={"knowledge_base_id": kb_id, "agent_id": agent_id},
            )
        if not await self.kbs.unlink(actor.organization_id, kb_id, agent_id):
            raise ValidationFailed("the knowledge base is not attached to this agent",
                                   details={"knowledge_base_id": kb_id, "agent_id": agent_id})
        self.uow.record(_kb_event(kb, EventType.KNOWLEDGE_BASE_DETACHED, detached_agent_id=agent_id))


# -- documents ------------------------------------------------------------------------------


async def _ingest(uow: UnitOfWork, docs: DocumentRepository, clock: Clock, kb: KnowledgeBase, *,
                  file_name: str, extracted: ExtractedText, source: str, source_url: str | None,
                  size_bytes: int) -> Document:
    """Store a document from its extracted text: processing, chunked, then ready."""
    text = normalise_text(extracted.text)
    if not text:
        raise ExtractionFailed("the document contains no text", "empty_file")
    if len(text) > MAX_TEXT_CHARS:
        raise ExtractionFailed(TEXT_TOO_LONG, "text_too_long")
    digest = content_hash(text)
    kb_id = persisted(kb.id)
    same = await docs.find_duplicate(kb.organization_id, kb_id, content_hash=digest)
    if same is not None:
        raise DuplicateDocument("a document with the same content is already in this knowledge base",
                                details={"document_id": same.id})
    now = clock.now()
    document = await docs.add(Document(
        None, kb.organization_id, kb_id, file_name, extracted.file_type, source, source_url, digest,
        "processing", None, size_bytes, 0, now, now,
    ))
    count = await docs.add_chunks(document, chunk_text(text))
    document = await docs.update(document.finish(count, clock.now()))
    uow.record(EventType.DOCUMENT_READY(kb.organization_id, {
        "knowledge_base_id": kb_id, "document_id": document.id, "file_type": document.file_type,
        "source": source, "chunk_count": count,
    }))
    return document


@dataclass(frozen=True, slots=True)
class UploadedFile:
    file_name: str
    data: bytes
    field: str = "file"  # the form field that carried it: "file", or "files[2]" for the third of several


@dataclass(frozen=True, slots=True)
class FileResult:
    file_name: str
    success: bool
    document_id: int | None = None
    error: str | None = None
    error_code: str | None = None
    field: str | None = None  # the form field that carried the file


@dataclass(frozen=True, slots=True)
class UploadOutcome:
    results: list[FileResult]

    @property
    def succeeded(self) -> int:
        return sum(1 for r in self.results if r.success)

    def summary(self) -> dict[str, int]:
        return {"total": len(self.results), "success": self.succeeded, "failed": len(self.results) - self.succeeded}

    def details(self) -> dict[str, Any]:
        return {
            "summary": self.summary(),
            "documents": [
                {"file_name": r.file_name, "field": r.field, "success": r.success, "document_id": r.document_id,
                 "error": r.error, "error_code": r.error_code}
                for r in self.results
            ],
        }


@dataclass(frozen=True, slots=True)
class UploadDocumentsCommand:
    actor: Actor
    knowledge_base_id: int
    files: Sequence[UploadedFile]


class UploadDocuments:
    """Ingest uploaded files one by one: each succeeds or fails on its own; at least one must
    succeed. Extraction runs outside any transaction (nothing is locked meanwhile): the use case
    ends the unit of work's read-only transaction first, so run it in a unit of work of its own."""

    def __init__(self, uow: UnitOfWork, kbs: KnowledgeBaseRepository, docs: DocumentRepository,
                 extractor: TextExtractor, clock: Clock) -> None:
        self.uow, self.kbs, self.docs, self.extractor, self.clock = uow, kbs, docs, extractor, clock

    async def execute(self, command: UploadDocumentsCommand) -> UploadOutcome:
        actor, kb_id, files = command.actor, command.knowledge_base_id, command.files
        if not files:
            raise ValidationFailed(
                "no file was sent: use the multipart field files (several) or file (one)",
                details={"validation_errors": {"files": "at least one file is required"},
                         **UploadOutcome([]).details()},
            )
        if len(files) > MAX_FILES_PER_UPLOAD:
            raise ValidationFailed.field("files", f"at most {MAX_FILES_PER_UPLOAD} files per request")
        await _kb(self.kbs, actor, kb_id)
        # Only read so far: end that transaction so no lock is held while the files are parsed.
        await self.uow.rollback()
        names = [clean_file_name(f.file_name) for f in files]
        extracted: list[ExtractedText | ExtractionFailed] = []
        for name, upload in zip(names, files, strict=True):
            try:
                extracted.append(await self.extractor.extract_file(name, upload.data))
            except ExtractionFailed as exc:
                extracted.append(exc)
        kb = await _kb(self.kbs, actor, kb_id)
        results: list[FileResult] = []
        for name, upload, outcome in zip(names, files, extracted, strict=True):
            if isinstance(outcome, ExtractionFailed):
                results.append(FileResult(name, False, None, outcome.message, outcome.code, upload.field))
                continue
            try:
                document = await _ingest(self.uow, self.docs, self.clock, kb, file_name=name, extracted=outcome,
                                         source="upload", source_url=None, size_bytes=len(upload.data))
            except ExtractionFailed as exc:
                results.append(FileResult(name, False, None, exc.message, exc.code, upload.field))
            except DuplicateDocument as exc:
                results.append(FileResult(name, False, None, exc.message, exc.code, upload.field))
            else:
                results.append(FileResult(name, True, document.id, None, None, upload.field))
        result = UploadOutcome(results)
        if result.succeeded == 0:
            raise ValidationFailed("no file could be ingested", details=result.details())
        return result


@dataclass(frozen=True, slots=True)
class ScrapeDocumentCommand:
    actor: Actor
    knowledge_base_id: int
    url: str


class ScrapeDocument:
    """Fetch one public page through the SSRF-safe fetcher and ingest its main text. The fetch runs
    outside any transaction (see UploadDocuments): run it in a unit of work of its own."""

    def __init__(self, uow: UnitOfWork, kbs: KnowledgeBaseRepository, docs: DocumentRepository,
                 fetcher: PageFetcher, extractor: TextExtractor, clock: Clock) -> None:
        self.uow, self.kbs, self.docs, self.clock = uow, kbs, docs, clock
        self.fetcher, self.extractor = fetcher, extractor

    async def _unseen(self, actor: Actor, kb_id: int, source_url: str) -> None:
        same = await self.docs.find_duplicate(actor.organization_id, kb_id, source_url=source_url)
        if same is not None:
            raise DuplicateDocument("this page is already in the knowledge base", details={"document_id": same.id})

    async def execute(self, command: ScrapeDocumentCommand) -> Document:
        actor, kb_id = command.actor, command.knowledge_base_id
        try:
            source_url = normalise_source_url(command.url)
        except BlockedAddress as exc:
            raise exc.on("url") from None
        await _kb(self.kbs, actor, kb_id)
        await self._unseen(actor, kb_id, source_url)
        # Only read so far: end that transaction so no lock is held during the fetch.
        await self.uow.rollback()
        try:
            page = await self.fetcher.fetch(source_url, max_bytes=MAX_PAGE_BYTES, accept=PAGE_TYPES)
        except BlockedAddress as exc:  # the page's address, or a redirect's, is not public
            raise exc.on("url") from None
        try:
            extracted = await self.extractor.extract_page(page)
        except ExtractionFailed:
            raise UpstreamFetchFailed("the page has no readable text") from None
        kb = await _kb(self.kbs, actor, kb_id)
        await self._unseen(actor, kb_id, source_url)
        try:
            return await _ingest(self.uow, self.docs, self.clock, kb,
                                 file_name=file_name_for_page(source_url, extracted.title), extracted=extracted,
                                 source="scrape", source_url=source_url, size_bytes=len(page.body))
        except ExtractionFailed as exc:
            raise UpstreamFetchFailed(f"the page could not be used: {exc.message}") from None


@dataclass(frozen=True, slots=True)
class ListDocumentsCommand:
    actor: Actor
    knowledge_base_id: int
    filters: DocumentFilter
    page: PageRequest


class ListDocuments:
    def __init__(self, kbs: KnowledgeBaseRepository, docs: DocumentRepository) -> None:
        self.kbs, self.docs = kbs, docs

    async def execute(self, command: ListDocumentsCommand) -> Page[Document]:
        actor, kb_id = command.actor, command.knowledge_base_id
        await _kb(self.kbs, actor, kb_id)
        return await self.docs.list(actor.organization_id, kb_id, command.filters, command.page)


@dataclass(frozen=True, slots=True)
class GetDocumentCommand:
    actor: Actor
    knowledge_base_id: int
    document_id: int


class GetDocument:
    def __init__(self, kbs: KnowledgeBaseRepository, docs: DocumentRepository) -> None:
        self.kbs, self.docs = kbs, docs

    async def execute(self, command: GetDocumentCommand) -> Document:
        actor, kb_id, document_id = command.actor, command.knowledge_base_id, command.document_id
        await _kb(self.kbs, actor, kb_id)
        document = await self.docs.get(actor.organization_id, kb_id, document_id)
        if document is None:
            raise NotFound("document", document_id)
        return document


@dataclass(frozen=True, slots=True)
class DeleteDocumentCommand:
    actor: Actor
    knowledge_base_id: int
    document_id: int


class DeleteDocument:
    def __init__(self, uow: UnitOfWork, kbs: KnowledgeBaseRepository, docs: DocumentRepository) -> None:
        self.uow, self.kbs, self.docs = uow, kbs, docs

    async def execute(self, command: DeleteDocumentCommand) -> None:
        actor, kb_id, document_id = command.actor, command.knowledge_base_id, command.document_id
        await _kb(self.kbs, actor, kb_id)
        document = await self.docs.get(actor.organization_id, kb_id, document_id)
        if document is None:
            raise NotFound("document", document_id)
        await self.docs.delete(actor.organization_id, kb_id, document_id)
        self.uow.record(EventType.DOCUMENT_DELETED(actor.organization_id,
                                                   {"knowledge_base_id": kb_id, "document_id": document_id}))


# -- search ---------------------------------------------------------------------------------


def _terms(query: str) -> list[str]:
    terms = search_terms(query)
    if not terms:
        raise ValidationFailed.field("q", "must contain at least one word")
    return terms


@dataclass(frozen=True, slots=True)
class SearchKnowledgeCommand:
    actor: Actor
    knowledge_base_id: int
    query: str
    limit: int = 10


class SearchKnowledge:
    """Rank a knowledge base's chunks by full-text relevance to ``query``."""

    def __init__(self, kbs: KnowledgeBaseRepository, search: KnowledgeSearch) -> None:
        self.kbs, self.search = kbs, search

    async def execute(self, command: SearchKnowledgeCommand) -> list[SearchHit]:
        actor, knowledge_base_id = command.actor, command.knowledge_base_id
        terms = _terms(command.query)
        await _kb(self.kbs, actor, knowledge_base_id)
        return await self.search.search(actor.organization_id, [knowledge_base_id], terms, command.limit)


@dataclass(frozen=True, slots=True)
class SearchAgentKnowledgeCommand:
    actor: Actor
    agent_id: int
    query: str
    limit: int = 5


class SearchAgentKnowledge:
    """Rank the chunks of every knowledge base attached to an agent (what a voice agent answers
    from during a call). An agent without knowledge bases finds nothing."""

    def __init__(self, kbs: KnowledgeBaseRepository, agents: AgentRepository, search: KnowledgeSearch) -> None:
        self.kbs, self.agents, self.search = kbs, agents, search

    async def execute(self, command: SearchAgentKnowledgeCommand) -> list[SearchHit]:
        actor, agent_id, limit = command.actor, command.agent_id, command.limit
        terms = search_terms(command.query)
        await _agent(self.agents, actor, agent_id)
        if not terms:
            return []
        attached = await self.kbs.list_for_agent(actor.organization_id, agent_id, ALL_ATTACHED)
        ids = [kb.id for kb in attached.items if kb.id is not None]
        if not ids:
            return []
        return await self.search.search(actor.organization_id, ids, terms, limit)
