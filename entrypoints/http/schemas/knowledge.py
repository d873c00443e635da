from __future__ import annotations

from datetime import datetime
from typing import Annotated, Generic, Literal, TypeVar

from msgspec import UNSET, Meta, Struct, UnsetType

from application.knowledge import AgentKnowledgeBases, FileResult, KnowledgeBaseView, UploadOutcome
from application.ports.knowledge import SearchHit
from domain.identity import persisted
from domain.knowledge import Document
from domain.parsing import MAX_ID
from entrypoints.http.envelope import ListMeta
from entrypoints.http.schemas import OneLine

T = TypeVar("T")

Name = Annotated[OneLine, Meta(min_length=1, max_length=200)]
Description = Annotated[str, Meta(max_length=2000)]
Id = Annotated[int, Meta(ge=1, le=MAX_ID)]
FileType = Literal["txt", "md", "csv", "html", "pdf", "docx"]
DocumentStatus = Literal["processing", "ready", "failed"]


# A "type: ignore[arg-type]" below marks a field whose domain type is wider than the documented one: a status
# the domain keeps as a str where the schema lists its values, or a field that is None only before the row is stored.

class KnowledgeBaseCreate(Struct, forbid_unknown_fields=True):
    name: Name
    agent_id: Annotated[Id, Meta(description="The agent the knowledge base belongs to (and is attached to)")]
    description: Description | None = None


class KnowledgeBaseUpdate(Struct, forbid_unknown_fields=True):
    name: Name | UnsetType = UNSET
    description: Description | UnsetType | None = UNSET


class AttachKnowledgeBaseRequest(Struct, forbid_unknown_fields=True):
    knowledge_base_id: Id


class ScrapeRequest(Struct, forbid_unknown_fields=True):
    url: Annotated[str, Meta(min_length=1, max_length=2048, description="A public http(s) page")]


class AgentRefOut(Struct):
    id: int
    name: str


class DocumentOut(Struct):
    id: int
    knowledge_base_id: int
    file_name: str
    file_type: FileType
    source: Literal["upload", "scrape"]
    source_url: str | None
    status: DocumentStatus
    error: str | None
    size_bytes: int
    chunk_count: int
    content_hash: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, d: Document) -> DocumentOut:
        return cls(
            id=persisted(d.id), knowledge_base_id=d.knowledge_base_id, file_name=d.file_name,
            file_type=d.file_type,  # type: ignore[arg-type]  # the domain's type is wider
            source=d.source,  # type: ignore[arg-type]  # the domain's type is wider
            source_url=d.source_url,
            status=d.status,  # type: ignore[arg-type]  # the domain's type is wider
            error=d.error, size_bytes=d.size_bytes, chunk_count=d.chunk_count, content_hash=d.content_hash,
            created_at=d.created_at,  # type: ignore[arg-type]  # the domain's type is wider
            updated_at=d.updated_at,  # type: ignore[arg-type]  # the domain's type is wider
        )


class KnowledgeBaseOut(Struct):
    id: int
    name: str
    description: str | None
    agent_id: int
    agents: list[AgentRefOut]
    document_count: int
    created_at: datetime
    updated_at: datetime
    documents: list[DocumentOut] | UnsetType = UNSET

    @classmethod
    def of(cls, view: KnowledgeBaseView) -> KnowledgeBaseOut:
        kb = view.knowledge_base
        return cls(
            id=persisted(kb.id), name=kb.name, description=kb.description, agent_id=kb.agent_id,
            agents=[AgentRefOut(a.id, a.name) for a in view.agents], document_count=view.document_count,
            created_at=kb.created_at,  # type: ignore[arg-type]  # the domain's type is wider
            updated_at=kb.updated_at,  # type: ignore[arg-type]  # the domain's type is wider
            documents=UNSET if view.documents is None else [DocumentOut.of(d) for d in view.documents],
        )


class KnowledgeBaseList(Struct):
    knowledge_bases: list[KnowledgeBaseOut]
    count: int
    """Items in this page (meta.total counts all of them)."""


class DocumentList(Struct):
    documents: list[DocumentOut]
    count: int


class CollectionEnvelope(Struct, Generic[T]):
    """A list wrapped in an object (``{items[], count}``) with the usual list meta."""

    data: T
    meta: ListMeta
    success: bool = True


class AgentKnowledgeBasesOut(Struct):
    agent_id: int
    knowledge_bases: list[KnowledgeBaseOut]

    @classmethod
    def of(cls, result: AgentKnowledgeBases) -> AgentKnowledgeBasesOut:
        return cls(result.agent_id, [KnowledgeBaseOut.of(v) for v in result.knowledge_bases])


class FileResultOut(Struct):
    file_name: str
    field: Annotated[str | None, Meta(description="The form field that carried the file: file, or files[i]")]
    success: bool
    document_id: int | None
    error: str | None
    error_code: str | None

    @classmethod
    def of(cls, r: FileResult) -> FileResultOut:
        return cls(r.file_name, r.field, r.success, r.document_id, r.error, r.error_code)


class UploadSummary(Struct):
    total: int
    success: int
    failed: int


class UploadResult(Struct):
    summary: UploadSummary
    documents: list[FileResultOut]

    @classmethod
    def of(cls, outcome: UploadOutcome) -> UploadResult:
        return cls(UploadSummary(**outcome.summary()), [FileResultOut.of(r) for r in outcome.results])


class SearchResultOut(Struct):
    document_id: int
    chunk_id: int
    text: str
    score: float

    @classmethod
    def of(cls, hit: SearchHit) -> SearchResultOut:
        return cls(hit.document_id, hit.chunk_id, hit.text, hit.score)


class SearchResults(Struct):
    knowledge_base_id: int
    query: str
    results: list[SearchResultOut]
    count: int
