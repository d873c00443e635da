"""Knowledge bases: the list with a form that creates one for an agent, a knowledge base's page with its documents
and their status, uploading files (the API's upload: a result per file), adding a web page by its URL (the API's
SSRF-safe scrape) and a search box that shows the passages found, all through the knowledge use cases of the
API."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from dishka import FromDishka
from litestar import Request
from litestar.datastructures import UploadFile
from litestar.response import Response, Template

from application import agents
from application import knowledge as uc
from application.context import Actor
from application.ports.agents import AgentFilter
from application.ports.knowledge import DocumentFilter
from application.ports.platform import PageRequest
from domain.errors import DomainError, NotFound, ValidationFailed
from domain.knowledge import MAX_FILES_PER_UPLOAD, MAX_UPLOAD_BYTES
from entrypoints.http.dashboard.pages import page
from entrypoints.http.dashboard.pages.params import PathId, page_number, pages_of
from entrypoints.http.dashboard.view import View, convert, field_errors
from entrypoints.http.envelope import status_for
from entrypoints.http.schemas.knowledge import KnowledgeBaseCreate, ScrapeRequest
from entrypoints.http.validation import require_non_blank

LIST_SIZE = 100
AGENTS = 200
DOCUMENTS = 25
SEARCH_RESULTS = 10
READ = ("kb:read",)
WRITE = ("kb:write",)


async def _listing(view: View, listing: uc.ListKnowledgeBases, agent_list: agents.ListAgents) -> dict[str, Any]:
    found = await view.run(listing, lambda actor: uc.ListKnowledgeBasesCommand(actor, None, PageRequest(LIST_SIZE)))
    everyone = await view.run(agent_list, lambda actor: agents.ListAgentsCommand(actor, AgentFilter(),
                                                                                PageRequest(AGENTS)))
    return {"bases": found.items, "total": found.total,
            "agents": [(str(a.id), a.name) for a in everyone.items]}


@page("GET", "/knowledge-bases", section="knowledge_bases", scopes=READ)
async def knowledge_bases(request: Request[Any, Any, Any], listing: FromDishka[uc.ListKnowledgeBases],
                          agent_list: FromDishka[agents.ListAgents]) -> Template:
    view = View.of(request)
    return view.page("knowledge_bases.html", **await _listing(view, listing, agent_list))


@page("POST", "/knowledge-bases",
      operation="createKnowledgeBase", section="knowledge_bases", scopes=WRITE)
async def create_knowledge_base(request: Request[Any, Any, Any], use_case: FromDishka[uc.CreateKnowledgeBase],
                                listing: FromDishka[uc.ListKnowledgeBases],
                                agent_list: FromDishka[agents.ListAgents]) -> Response[Any] | Template:
    view = View.of(request)

    def command(actor: Actor, form: Mapping[str, str]) -> uc.CreateKnowledgeBaseCommand:
        body = {k: form.get(k, "") for k in ("name", "agent_id", "description")
                if form.get(k, "").strip() or k == "name"}
        data = convert(body, KnowledgeBaseCreate)
        return uc.CreateKnowledgeBaseCommand(actor, require_non_blank(data.name, "name"), data.agent_id,
                                             data.description)

    return await view.submit(use_case, command, template="knowledge_bases.html",
                             context=lambda: _listing(view, listing, agent_list),
                             done=lambda kb: view.redirect(f"/knowledge-bases/{kb.knowledge_base.id}",
                                                           f"Knowledge base {kb.knowledge_base.name} created"))


async def _detail(view: View, getting: uc.GetKnowledgeBase, documents: uc.ListDocuments, kb_id: int,
                  number: int = 1) -> dict[str, Any]:
    found = await view.run(getting, lambda actor: uc.GetKnowledgeBaseCommand(actor, kb_id, False))
    docs = await view.run(documents, lambda actor: uc.ListDocumentsCommand(
        actor, kb_id, DocumentFilter(), PageRequest(DOCUMENTS, (number - 1) * DOCUMENTS)))
    return {"kb": found, "documents": docs.items, "total": docs.total, "page": number,
            "pages": pages_of(docs.total, DOCUMENTS), "max_files": MAX_FILES_PER_UPLOAD}


@page("GET", "/knowledge-bases/{kb_id:int}", section="knowledge_bases", scopes=READ)
async def knowledge_base(request: Request[Any, Any, Any], kb_id: PathId, getting: FromDishka[uc.GetKnowledgeBase],
                         documents: FromDishka[uc.ListDocuments], search: FromDishka[uc.SearchKnowledge]
                         ) -> Template:
    """The knowledge base with its documents; ``?q=`` searches it and shows the passages found."""
    view = View.of(request)
    detail = await _detail(view, getting, documents, kb_id, page_number(request))
    query = request.query_params.get("q", "").strip()
    if not query:
        return view.page("knowledge_base.html", **detail)
    if len(query) > 500:
        return view.page("knowledge_base.html", status=400, query=query[:500], errors={"q": "at most 500 characters"},
                         **detail)
    hits = await view.run(search, lambda actor: uc.SearchKnowledgeCommand(actor, kb_id, query, SEARCH_RESULTS))
    names = {d.id: d.file_name for d in detail["documents"]}
    return view.page("knowledge_base.html", query=query, hits=hits, names=names, **detail)


@page("POST", "/knowledge-bases/{kb_id:int}/documents",
      operation="uploadDocuments", section="knowledge_bases", scopes=WRITE,
      upload=MAX_UPLOAD_BYTES)
async def upload_documents(request: Request[Any, Any, Any], kb_id: PathId, use_case: FromDishka[uc.UploadDocuments],
                           getting: FromDishka[uc.GetKnowledgeBase], documents: FromDishka[uc.ListDocuments]
                           ) -> Template:
    """The API's upload (``UploadDocuments``): a result per file; when none could be ingested, nothing changes."""
    view = View.of(request)
    await _detail(view, getting, documents, kb_id)  # a knowledge base of another organization: the 404 page
    form = await request.form()
    uploads = [v for v in form.getall("files", []) if isinstance(v, UploadFile) and v.filename]
    try:
        files = [uc.UploadedFile(upload.filename, await upload.read(), f"files[{i}]")
                 for i, upload in enumerate(uploads)]
    finally:
        for upload in uploads:
            with contextlib.suppress(Exception):
                await upload.close()
    if not files:
        return view.page("knowledge_base.html", status=400, errors={"files": "choose at least one file"},
                         error="Choose at least one file to upload.",
                         **await _detail(view, getting, documents, kb_id))
    try:
        outcome = await view.run(use_case, lambda actor: uc.UploadDocumentsCommand(actor, kb_id, files))
    except ValidationFailed as exc:
        results = (exc.details or {}).get("documents") or []
        return view.page("knowledge_base.html", status=400, error=exc.message, errors=field_errors(exc),
                         results=results, **await _detail(view, getting, documents, kb_id))
    results = [{"file_name": r.file_name, "success": r.success, "error": r.error} for r in outcome.results]
    return view.page("knowledge_base.html", status=201, results=results,
                     notice=f"{outcome.succeeded} of {len(outcome.results)} files added",
                     **await _detail(view, getting, documents, kb_id))


@page("POST", "/knowledge-bases/{kb_id:int}/scrape",
      operation="scrapeDocument", section="knowledge_bases", scopes=WRITE)
async def scrape(request: Request[Any, Any, Any], kb_id: PathId, use_case: FromDishka[uc.ScrapeDocument],
                 getting: FromDishka[uc.GetKnowledgeBase], documents: FromDishka[uc.ListDocuments]
                 ) -> Response[Any] | Template:
    """The API's scrape: the page's main text becomes a document; a refused or failed fetch is shown beside the
    URL (an upstream failure too: the page answers 502 with the reason)."""
    view = View.of(request)
    form = await view.form()
    try:
        data = convert({"url": form.get("url", "").strip()}, ScrapeRequest)
        document = await view.run(use_case, lambda actor: uc.ScrapeDocumentCommand(actor, kb_id, data.url))
    except DomainError as exc:
        if isinstance(exc, NotFound):
            raise
        return view.page("knowledge_base.html", status=status_for(exc), error=exc.message, form=form,
                         errors={"url": exc.message}, **await _detail(view, getting, documents, kb_id))
    return view.redirect(f"/knowledge-bases/{kb_id}", f"{document.file_name} added")


HANDLERS = [knowledge_bases, create_knowledge_base, knowledge_base, upload_documents, scrape]
