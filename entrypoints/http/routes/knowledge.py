from __future__ import annotations

import contextlib
from typing import Annotated, Any, Literal

from dishka import FromDishka
from litestar import Request
from litestar.exceptions import HTTPException
from litestar.params import JSONBody, PathParameter, QueryParameter

from application import knowledge as uc
from application.context import Actor
from application.ports.knowledge import DocumentFilter
from application.ports.platform import Page, PageRequest
from domain.knowledge import MAX_FILES_PER_UPLOAD, MAX_UPLOAD_BYTES
from domain.parsing import MAX_ID
from entrypoints.http.envelope import Envelope, ListMeta
from entrypoints.http.multipart import FileField, FileForm
from entrypoints.http.routing import Limit, Offset, endpoint
from entrypoints.http.schemas.knowledge import (
    AgentKnowledgeBasesOut,
    AttachKnowledgeBaseRequest,
    CollectionEnvelope,
    DocumentList,
    DocumentOut,
    KnowledgeBaseCreate,
    KnowledgeBaseList,
    KnowledgeBaseOut,
    KnowledgeBaseUpdate,
    ScrapeRequest,
    SearchResultOut,
    SearchResults,
    UploadResult,
)
from entrypoints.http.validation import require_non_blank, set_fields

TAGS = ["Knowledge bases"]
AGENT_TAGS = ["Agents"]
SCOPE_READ = ("kb:read",)
SCOPE_WRITE = ("kb:write",)

KbId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="Knowledge base id")]
AgentId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="Agent id")]
DocId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="Document id")]
NOT_FOUND = {404: "not_found: unknown knowledge base"}
DOCUMENT_UPLOAD = FileForm("DocumentUpload", (
    FileField("files", "One or more files", many=True),
    FileField("file", "A single file"),
))


def _kb_list(page: Page[uc.KnowledgeBaseView]) -> CollectionEnvelope[KnowledgeBaseList]:
    items = [KnowledgeBaseOut.of(v) for v in page.items]
    return CollectionEnvelope(KnowledgeBaseList(items, len(items)), ListMeta(page.total, page.limit, page.offset))


# -- knowledge bases ------------------------------------------------------------------------


@endpoint("GET", "/knowledge-bases", operation_id="listKnowledgeBases",
          summary="List the organization's knowledge bases, or those attached to an agent", tags=TAGS,
          scopes=SCOPE_READ, errors={404: "not_found: unknown agent"})
async def list_knowledge_bases(
    actor: FromDishka[Actor],
    use_case: FromDishka[uc.ListKnowledgeBases],
    agent_id: Annotated[int | None, QueryParameter(
        ge=1, le=MAX_ID, description="Only those attached to this agent (its own included)")] = None,
    limit: Limit = 25,
    offset: Offset = 0,
) -> CollectionEnvelope[KnowledgeBaseList]:
    return _kb_list(await use_case.execute(uc.ListKnowledgeBasesCommand(actor, agent_id, PageRequest(limit, offset))))


@endpoint("POST", "/knowledge-bases", operation_id="createKnowledgeBase", location="/knowledge-bases/{id}",
          summary="Create a knowledge base that belongs to (and is attached to) an agent", tags=TAGS,
          scopes=SCOPE_WRITE, idempotent=True,
          errors={403: "plan_limit_reached: the plan's max_knowledge_bases is reached",
                  404: "not_found: unknown agent"})
async def create_knowledge_base(data: JSONBody[KnowledgeBaseCreate], actor: FromDishka[Actor],
                                use_case: FromDishka[uc.CreateKnowledgeBase]) -> Envelope[KnowledgeBaseOut]:
    command = uc.CreateKnowledgeBaseCommand(actor, require_non_blank(data.name, "name"), data.agent_id,
                                            data.description)
    return Envelope(KnowledgeBaseOut.of(await use_case.execute(command)))


@endpoint("GET", "/knowledge-bases/{id:int}", operation_id="getKnowledgeBase",
          summary="Get a knowledge base with its agents (and its documents with with_documents=true)", tags=TAGS,
          scopes=SCOPE_READ, errors=NOT_FOUND)
async def get_knowledge_base(
    id: KbId,
    actor: FromDishka[Actor],
    use_case: FromDishka[uc.GetKnowledgeBase],
    with_documents: Annotated[bool, QueryParameter(description="Include the documents (up to 1000)")] = False,
) -> Envelope[KnowledgeBaseOut]:
    return Envelope(KnowledgeBaseOut.of(await use_case.execute(uc.GetKnowledgeBaseCommand(actor, id, with_documents))))


@endpoint("PATCH", "/knowledge-bases/{id:int}", operation_id="updateKnowledgeBase",
          summary="Rename or describe a knowledge base", tags=TAGS, scopes=SCOPE_WRITE, errors=NOT_FOUND)
async def update_knowledge_base(id: KbId, data: JSONBody[KnowledgeBaseUpdate], actor: FromDishka[Actor],
                                use_case: FromDishka[uc.UpdateKnowledgeBase]) -> Envelope[KnowledgeBaseOut]:
    changes = set_fields(data)
    if "name" in changes:
        changes["name"] = require_non_blank(changes["name"], "name")
    return Envelope(KnowledgeBaseOut.of(await use_case.execute(uc.UpdateKnowledgeBaseCommand(actor, id, changes))))


@endpoint("DELETE", "/knowledge-bases/{id:int}", operation_id="deleteKnowledgeBase",
          summary="Delete a knowledge base with its documents", tags=TAGS, scopes=SCOPE_WRITE, errors=NOT_FOUND,
          status_code=204)
async def delete_knowledge_base(id: KbId, actor: FromDishka[Actor],
                                use_case: FromDishka[uc.DeleteKnowledgeBase]) -> None:
    await use_case.execute(uc.DeleteKnowledgeBaseCommand(actor, id))


# -- documents ------------------------------------------------------------------------------


@endpoint("GET", "/knowledge-bases/{id:int}/documents", operation_id="listDocuments",
          summary="List the documents of a knowledge base", tags=TAGS, scopes=SCOPE_READ, errors=NOT_FOUND)
async def list_documents(
    id: KbId,
    actor: FromDishka[Actor],
    use_case: FromDishka[uc.ListDocuments],
    status: Annotated[Literal["processing", "ready", "failed"] | None, QueryParameter()] = None,
    file_type: Annotated[Literal["txt", "md", "csv", "html", "pdf", "docx"] | None, QueryParameter()] = None,
    limit: Limit = 25,
    offset: Offset = 0,
) -> CollectionEnvelope[DocumentList]:
    page = await use_case.execute(uc.ListDocumentsCommand(actor, id, DocumentFilter(status, file_type),
                                                          PageRequest(limit, offset)))
    items = [DocumentOut.of(d) for d in page.items]
    return CollectionEnvelope(DocumentList(items, len(items)), ListMeta(page.total, page.limit, page.offset))


@endpoint("POST", "/knowledge-bases/{id:int}/documents", operation_id="uploadDocuments",
          summary=f"Upload files (multipart: files or file; txt, md, csv, html, pdf, docx; at most "
                  f"{MAX_FILES_PER_UPLOAD} files and 10 MB per request)",
          tags=TAGS, scopes=SCOPE_WRITE, status_code=201, request_max_body_size=MAX_UPLOAD_BYTES,
          form=DOCUMENT_UPLOAD,
          errors={400: "no file sent, a field that is not a file, or every file failed (per-file reasons in "
                       "error.details.documents)",
                  404: "not_found: unknown knowledge base", 413: "payload_too_large: more than 10 MB",
                  415: "unsupported_media_type: send multipart/form-data"})
async def upload_documents(
    id: KbId,
    request: Request[Any, Any, Any],
    actor: FromDishka[Actor],
    use_case: FromDishka[uc.UploadDocuments],
) -> Envelope[UploadResult]:
    media_type = request.content_type[0]
    if media_type not in ("multipart/form-data", ""):  # no Content-Type at all: nothing sent (400 below)
        raise HTTPException(status_code=415, detail="Send the files as multipart/form-data (field `files` or `file`)")
    form = await request.form()
    try:
        sent = DOCUMENT_UPLOAD.files(form)
        named = [*((f"files[{i}]", upload) for i, upload in enumerate(sent.get("files", []))),
                 *(("file", upload) for upload in sent.get("file", []))]
        files = [uc.UploadedFile(upload.filename, await upload.read(), field) for field, upload in named]
    finally:
        with contextlib.suppress(Exception):
            await form.close()
    return Envelope(UploadResult.of(await use_case.execute(uc.UploadDocumentsCommand(actor, id, files))))


@endpoint("GET", "/knowledge-bases/{id:int}/documents/{docId:int}", operation_id="getDocument",
          summary="Get a document", tags=TAGS, scopes=SCOPE_READ, errors={404: "not_found: unknown id"})
async def get_document(id: KbId, docId: DocId, actor: FromDishka[Actor],
                       use_case: FromDishka[uc.GetDocument]) -> Envelope[DocumentOut]:
    return Envelope(DocumentOut.of(await use_case.execute(uc.GetDocumentCommand(actor, id, docId))))


@endpoint("DELETE", "/knowledge-bases/{id:int}/documents/{docId:int}", operation_id="deleteDocument",
          summary="Delete a document", tags=TAGS, scopes=SCOPE_WRITE, errors={404: "not_found: unknown id"},
          status_code=204)
async def delete_document(id: KbId, docId: DocId, actor: FromDishka[Actor],
                          use_case: FromDishka[uc.DeleteDocument]) -> None:
    await use_case.execute(uc.DeleteDocumentCommand(actor, id, docId))


@endpoint("POST", "/knowledge-bases/{id:int}/scrape", operation_id="scrapeDocument",
          location="/knowledge-bases/{path.id}/documents/{id}",
          summary="Fetch a public web page and add its main text as a document", tags=TAGS, scopes=SCOPE_WRITE,
          idempotent=True, status_code=201,
          errors={400: "bad_request (malformed URL, scheme or port) or blocked_address (private, loopback or "
                       "reserved destination)",
                  404: "not_found: unknown knowledge base",
                  409: "duplicate_document: the page (same URL or same text) is already there",
                  502: "upstream_fetch_failed: DNS, timeout, non-2xx, over 5 MB, or not a text page"})
async def scrape_document(id: KbId, data: JSONBody[ScrapeRequest], actor: FromDishka[Actor],
                          use_case: FromDishka[uc.ScrapeDocument]) -> Envelope[DocumentOut]:
    return Envelope(DocumentOut.of(await use_case.execute(uc.ScrapeDocumentCommand(actor, id, data.url))))


@endpoint("GET", "/knowledge-bases/{id:int}/search", operation_id="searchKnowledgeBase",
          summary="Rank the knowledge base's text chunks by full-text relevance to a query", tags=TAGS,
          scopes=SCOPE_READ, errors=NOT_FOUND)
async def search_knowledge_base(
    id: KbId,
    actor: FromDishka[Actor],
    use_case: FromDishka[uc.SearchKnowledge],
    q: Annotated[str, QueryParameter(min_length=1, max_length=500, description="Words to look for")],
    limit: Annotated[int, QueryParameter(ge=1, le=50, description="Results (1-50)")] = 10,
) -> Envelope[SearchResults]:
    hits = await use_case.execute(uc.SearchKnowledgeCommand(actor, id, q, limit))
    results = [SearchResultOut.of(h) for h in hits]
    return Envelope(SearchResults(id, q, results, len(results)))


# -- agent links ----------------------------------------------------------------------------


@endpoint("GET", "/agents/{id:int}/knowledge-bases", operation_id="listAgentKnowledgeBases",
          summary="List the knowledge bases attached to an agent", tags=AGENT_TAGS, scopes=SCOPE_READ,
          errors={404: "not_found: unknown agent"})
async def list_agent_knowledge_bases(id: AgentId, actor: FromDishka[Actor],
                                     use_case: FromDishka[uc.ListKnowledgeBases], limit: Limit = 25,
                                     offset: Offset = 0) -> CollectionEnvelope[KnowledgeBaseList]:
    return _kb_list(await use_case.execute(uc.ListKnowledgeBasesCommand(actor, id, PageRequest(limit, offset))))


@endpoint("POST", "/agents/{id:int}/knowledge-bases", operation_id="attachKnowledgeBase",
          summary="Attach a knowledge base to an agent (attaching twice changes nothing)", tags=AGENT_TAGS,
          scopes=SCOPE_WRITE, status_code=200, errors={404: "not_found: unknown agent or knowledge base"})
async def attach_knowledge_base(id: AgentId, data: JSONBody[AttachKnowledgeBaseRequest], actor: FromDishka[Actor],
                                use_case: FromDishka[uc.AttachKnowledgeBase]) -> Envelope[AgentKnowledgeBasesOut]:
    command = uc.AttachKnowledgeBaseCommand(actor, id, data.knowledge_base_id)
    return Envelope(AgentKnowledgeBasesOut.of(await use_case.execute(command)))


@endpoint("DELETE", "/agents/{id:int}/knowledge-bases/{kbId:int}", operation_id="detachKnowledgeBase",
          summary="Detach a knowledge base from an agent", tags=AGENT_TAGS, scopes=SCOPE_WRITE, status_code=204,
          errors={400: "the knowledge base is not attached to the agent, or the agent owns it",
                  404: "not_found: unknown agent or knowledge base"})
async def detach_knowledge_base(id: AgentId, kbId: KbId, actor: FromDishka[Actor],
                                use_case: FromDishka[uc.DetachKnowledgeBase]) -> None:
    await use_case.execute(uc.DetachKnowledgeBaseCommand(actor, id, kbId))


ROUTES = [
    list_knowledge_bases, create_knowledge_base, get_knowledge_base, update_knowledge_base, delete_knowledge_base,
    list_documents, upload_documents, get_document, delete_document, scrape_document, search_knowledge_base,
    list_agent_knowledge_bases, attach_knowledge_base, detach_knowledge_base,
]
