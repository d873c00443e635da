"""The knowledge-base ports behave the same on memory, SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from application.ports.agents import AgentRepository
from application.ports.knowledge import DocumentFilter, DocumentRepository, KnowledgeBaseRepository, KnowledgeSearch
from application.ports.platform import PageRequest, UnitOfWork
from domain.agents import Agent
from domain.errors import DuplicateDocument
from domain.knowledge import Document, KnowledgeBase, search_terms
from tests.support.apps import new_organization

NOW = datetime(2026, 2, 2, 12, tzinfo=UTC)


async def _agent(r: Any, org: int, name: str = "Agent") -> int:
    agent = await (await r.get(AgentRepository)).add(Agent(None, org, name, created_at=NOW, updated_at=NOW))
    return agent.id


async def _kb(r: Any, org: int, agent_id: int, name: str = "KB") -> KnowledgeBase:
    kbs = await r.get(KnowledgeBaseRepository)
    kb = await kbs.add(KnowledgeBase(None, org, agent_id, name, "about", NOW, NOW))
    await kbs.link(org, kb.id, agent_id, NOW)
    return kb


def _doc(org: int, kb_id: int, digest: str, *, url: str | None = None, file_type: str = "txt") -> Document:
    return Document(None, org, kb_id, f"{digest}.txt", file_type, "scrape" if url else "upload", url, digest,
                    "processing", None, 10, 0, NOW, NOW)


async def _commit(r: Any) -> None:
    await (await r.get(UnitOfWork)).commit()


async def test_knowledge_bases_are_scoped_linked_and_counted(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    async with container() as r:
        owner, helper = await _agent(r, org, "Owner"), await _agent(r, org, "Helper")
        stranger = await _agent(r, other)
        kb = await _kb(r, org, owner, "Alpha")
        second = await _kb(r, org, owner, "Beta")
        await _kb(r, other, stranger, "Theirs")
        await _commit(r)
    async with container() as r:
        kbs = await r.get(KnowledgeBaseRepository)
        got = await kbs.get(org, kb.id)
        assert got is not None and (got.name, got.description, got.agent_id, got.created_at) == (
            "Alpha", "about", owner, NOW)
        assert await kbs.get(other, kb.id) is None
        assert await kbs.count_for_update(org) == 2 and await kbs.count_for_update(other) == 1
        assert await kbs.link(org, kb.id, helper, NOW) is True
        assert await kbs.link(org, kb.id, helper, NOW) is False
        page = await kbs.list_for_agent(org, owner, PageRequest(1, 0))
        assert [k.name for k in page.items] == ["Alpha"] and page.total == 2
        assert (await kbs.list_for_agent(org, owner, PageRequest(10, 5))).total == 2
        assert [k.id for k in (await kbs.list_for_agent(org, helper, PageRequest(10, 0))).items] == [kb.id]
        assert (await kbs.list_for_agent(other, helper, PageRequest(10, 0))).total == 0
        linked = await kbs.linked_agents(org, [kb.id, second.id])
        assert [(a.id, a.name) for a in linked[kb.id]] == [(owner, "Owner"), (helper, "Helper")]
        assert [a.id for a in linked[second.id]] == [owner]
        assert await kbs.linked_agents(other, [kb.id]) == {}
        await kbs.update(replace(got, name="Renamed", description=None))
        await _commit(r)
    async with container() as r:
        kbs = await r.get(KnowledgeBaseRepository)
        got = await kbs.get(org, kb.id)
        assert got is not None and (got.name, got.description) == ("Renamed", None)
        assert await kbs.unlink(other, kb.id, helper) is False
        assert await kbs.unlink(org, kb.id, helper) is True
        assert await kbs.unlink(org, kb.id, helper) is False
        await (await r.get(AgentRepository)).delete(org, owner, NOW)
        assert await kbs.linked_agents(org, [kb.id]) == {}  # deleted agents are not shown
        await _commit(r)


async def test_documents_are_unique_per_content_and_url_and_filterable(container: Any) -> None:
    org = await new_organization(container)
    async with container() as r:
        agent = await _agent(r, org)
        kb, other_kb = await _kb(r, org, agent), await _kb(r, org, agent, "Other")
        docs = await r.get(DocumentRepository)
        first = await docs.add(_doc(org, kb.id, "h1"))
        scraped = await docs.add(_doc(org, kb.id, "h2", url="https://example.com/", file_type="html"))
        with pytest.raises(DuplicateDocument):
            await docs.add(_doc(org, kb.id, "h1"))
        with pytest.raises(DuplicateDocument):
            await docs.add(_doc(org, kb.id, "h3", url="https://example.com/"))
        # the transaction is still usable after a refused duplicate
        await docs.add(_doc(org, other_kb.id, "h1"))
        await docs.update(first.finish(4, NOW))
        await _commit(r)
    async with container() as r:
        docs = await r.get(DocumentRepository)
        got = await docs.get(org, kb.id, first.id)
        assert got is not None and (got.status, got.chunk_count, got.content_hash) == ("ready", 4, "h1")
        assert await docs.get(org, other_kb.id, first.id) is None
        assert (await docs.find_duplicate(org, kb.id, content_hash="h2")).id == scraped.id
        assert (await docs.find_duplicate(org, kb.id, source_url="https://example.com/")).id == scraped.id
        assert await docs.find_duplicate(org, kb.id, content_hash="nope", source_url="https://x.test/") is None
        ready = await docs.list(org, kb.id, DocumentFilter(status="ready"), PageRequest(10, 0))
        assert [d.id for d in ready.items] == [first.id]
        html = await docs.list(org, kb.id, DocumentFilter(file_type="html"), PageRequest(10, 0))
        assert [d.id for d in html.items] == [scraped.id]
        everything = await docs.list(org, kb.id, DocumentFilter(), PageRequest(1, 1))
        assert everything.total == 2 and [d.id for d in everything.items] == [scraped.id]
        assert await docs.counts(org, [kb.id, other_kb.id, 999]) == {kb.id: 2, other_kb.id: 1}
        await _commit(r)


async def test_search_ranks_chunks_and_follows_deletes(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    async with container() as r:
        agent, stranger = await _agent(r, org), await _agent(r, other)
        kb, kb2, theirs = await _kb(r, org, agent), await _kb(r, org, agent, "Two"), await _kb(r, other, stranger)
        docs = await r.get(DocumentRepository)
        refunds = await docs.add(_doc(org, kb.id, "r"))
        await docs.add_chunks(refunds, [
            "Refunds are paid within five days. Refunds need a receipt.",
            "Shipping takes two days.",
            "A refund for damaged goods is immediate.",
        ])
        elsewhere = await docs.add(_doc(org, kb2.id, "e"))
        await docs.add_chunks(elsewhere, ["Refunds in the second knowledge base."])
        foreign = await docs.add(_doc(other, theirs.id, "f"))
        await docs.add_chunks(foreign, ["Refunds refunds refunds refunds of another organization."])
        await _commit(r)
    async with container() as r:
        search = await r.get(KnowledgeSearch)
        hits = await search.search(org, [kb.id], search_terms("refunds receipt"), 10)
        assert [h.text for h in hits][:1] == ["Refunds are paid within five days. Refunds need a receipt."]
        assert {h.knowledge_base_id for h in hits} == {kb.id} and all(h.document_id == refunds.id for h in hits)
        assert all(h.score > 0 for h in hits)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert "Shipping takes two days." not in [h.text for h in hits]
        both = await search.search(org, [kb.id, kb2.id], ["refunds"], 10)
        assert {h.knowledge_base_id for h in both} == {kb.id, kb2.id}
        assert len(await search.search(org, [kb.id, kb2.id], ["refunds"], 1)) == 1
        assert await search.search(org, [theirs.id], ["refunds"], 10) == []
        assert await search.search(org, [kb.id], ["nothing"], 10) == []
        assert await search.search(org, [], ["refunds"], 10) == []
        shipping = await search.search(org, [kb.id], ["shipping", "zzz"], 10)
        assert [h.text for h in shipping] == ["Shipping takes two days."]
        chunk_ids = [h.chunk_id for h in await search.search(org, [kb.id], ["refunds", "refund", "shipping"], 10)]
        assert len(set(chunk_ids)) == 3
        await (await r.get(DocumentRepository)).delete(org, kb.id, refunds.id)
        await _commit(r)
    async with container() as r:
        search = await r.get(KnowledgeSearch)
        assert await search.search(org, [kb.id], ["refunds", "shipping"], 10) == []
        assert len(await search.search(org, [kb2.id], ["refunds"], 10)) == 1
        await (await r.get(KnowledgeBaseRepository)).delete(org, kb2.id)
        await _commit(r)
    async with container() as r:
        assert await (await r.get(KnowledgeSearch)).search(org, [kb2.id], ["refunds"], 10) == []
        assert await (await r.get(KnowledgeBaseRepository)).get(org, kb2.id) is None
        assert len(await (await r.get(KnowledgeSearch)).search(other, [theirs.id], ["refunds"], 10)) == 1


async def test_deleting_a_knowledge_base_removes_its_documents_and_links(container: Any) -> None:
    org = await new_organization(container)
    async with container() as r:
        agent = await _agent(r, org)
        kb = await _kb(r, org, agent)
        doc = await (await r.get(DocumentRepository)).add(_doc(org, kb.id, "x"))
        await (await r.get(DocumentRepository)).add_chunks(doc, ["alpha beta"])
        await (await r.get(KnowledgeBaseRepository)).delete(org, kb.id)
        await _commit(r)
    async with container() as r:
        assert await (await r.get(DocumentRepository)).get(org, kb.id, doc.id) is None
        assert (await (await r.get(KnowledgeBaseRepository)).list_for_agent(org, agent, PageRequest())).total == 0
        assert await (await r.get(DocumentRepository)).counts(org, [kb.id]) == {}


async def test_the_organization_list_keeps_knowledge_bases_of_deleted_agents(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    async with container() as r:
        owner, stranger = await _agent(r, org, "Owner"), await _agent(r, other)
        first, second = await _kb(r, org, owner, "Alpha"), await _kb(r, org, owner, "Beta")
        await _kb(r, other, stranger, "Theirs")
        await (await r.get(AgentRepository)).delete(org, owner, NOW)
        await _commit(r)
    async with container() as r:
        kbs = await r.get(KnowledgeBaseRepository)
        everything = await kbs.list(org, PageRequest(10, 0))
        assert [k.id for k in everything.items] == [first.id, second.id] and everything.total == 2
        page = await kbs.list(org, PageRequest(1, 1))
        assert [k.id for k in page.items] == [second.id] and page.total == 2
        assert (await kbs.list(other, PageRequest(10, 0))).total == 1
