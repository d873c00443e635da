"""Knowledge-base use cases on the in-memory adapters, with fakes for the outside world: slow
work happens outside any transaction, events are recorded, agents search what they are attached to."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from dishka import AsyncContainer, Provider, Scope, provide

from adapters.documents import LocalTextExtractor
from adapters.memory.store import InMemoryStore
from application import knowledge as uc
from application.context import Actor
from application.ports.egress import FetchedPage
from application.ports.knowledge import ExtractedText, PageFetcher, TextExtractor
from application.ports.platform import UnitOfWork
from domain.errors import NotFound, UpstreamFetchFailed, ValidationFailed
from entrypoints.ioc import build_container
from entrypoints.settings import Settings
from tests.support.apps import new_organization


@dataclass
class FakeFetcher:
    """Serves pages from a dict and notes whether the store was locked while it worked."""

    store: InMemoryStore | None = None
    pages: dict[str, bytes] = field(default_factory=dict)
    locked_during_fetch: list[bool] = field(default_factory=list)

    async def fetch(self, url: str, *, max_bytes: int, accept: tuple[str, ...] = ()) -> FetchedPage:
        assert self.store is not None
        self.locked_during_fetch.append(self.store.lock.locked())
        if url not in self.pages:
            raise UpstreamFetchFailed("the page could not be fetched (HTTP 404)")
        return FetchedPage(url, 200, "text/html", "utf-8", self.pages[url])

    async def post(self, url: str, **kwargs: Any) -> Any:
        raise NotImplementedError


@dataclass
class WatchingExtractor:
    store: InMemoryStore | None = None
    locked_during_extraction: list[bool] = field(default_factory=list)
    inner: LocalTextExtractor = field(default_factory=LocalTextExtractor)

    async def extract_file(self, file_name: str, data: bytes) -> ExtractedText:
        assert self.store is not None
        self.locked_during_extraction.append(self.store.lock.locked())
        return await self.inner.extract_file(file_name, data)

    async def extract_page(self, page: FetchedPage) -> ExtractedText:
        return await self.inner.extract_page(page)


class Fakes(Provider):
    def __init__(self, fetcher: FakeFetcher, extractor: WatchingExtractor) -> None:
        super().__init__()
        self.fetcher, self.extractor = fetcher, extractor

    @provide(scope=Scope.APP)
    def page_fetcher(self) -> PageFetcher:
        return self.fetcher

    @provide(scope=Scope.APP)
    def text_extractor(self) -> TextExtractor:
        return self.extractor


@dataclass
class World:
    container: AsyncContainer
    store: InMemoryStore
    fetcher: FakeFetcher
    extractor: WatchingExtractor

    async def run(self, case: type, *args: Any) -> Any:
        async with self.container() as r:
            result = await (await r.get(case)).execute(*args)
            await (await r.get(UnitOfWork)).commit()
            return result

    def events(self) -> list[str]:
        return [event.type for _, event, _ in self.store.outbox]


@pytest.fixture
async def world(tmp_root: Path) -> AsyncIterator[World]:
    fetcher, extractor = FakeFetcher(), WatchingExtractor()
    container = build_container(Settings(database_url="memory://", var_dir=tmp_root / "var", secret_key="k"),
                                Fakes(fetcher, extractor))
    store = await container.get(InMemoryStore)
    fetcher.store = extractor.store = store
    yield World(container, store, fetcher, extractor)
    await container.close()


async def _agent(world: World, org: int, name: str = "Agent") -> int:
    from application.agents import CreateAgent, CreateAgentCommand

    agent = await world.run(CreateAgent, CreateAgentCommand(Actor.system(org), name=name))
    return agent.id


async def test_scraping_fetches_outside_any_transaction_and_records_events(world: World) -> None:
    org = await new_organization(world.container)
    actor = Actor.system(org)
    agent = await _agent(world, org)
    view = await world.run(uc.CreateKnowledgeBase, uc.CreateKnowledgeBaseCommand(actor, "Web", agent))
    kb = view.knowledge_base.id
    world.fetcher.pages["https://shop.example/returns"] = b"<html><body><p>Returns are free.</p></body></html>"

    doc = await world.run(uc.ScrapeDocument, uc.ScrapeDocumentCommand(actor, kb, "HTTPS://Shop.Example/returns#top"))
    assert (doc.status, doc.source_url, doc.file_type) == ("ready", "https://shop.example/returns", "html")
    assert world.fetcher.locked_during_fetch == [False]
    assert world.events() == ["knowledge_base.created", "document.ready"]

    with pytest.raises(UpstreamFetchFailed):
        await world.run(uc.ScrapeDocument, uc.ScrapeDocumentCommand(actor, kb, "https://shop.example/missing"))
    with pytest.raises(ValidationFailed):
        await world.run(uc.ScrapeDocument, uc.ScrapeDocumentCommand(actor, kb, "ftp://shop.example/"))
    with pytest.raises(NotFound):
        await world.run(uc.ScrapeDocument, uc.ScrapeDocumentCommand(actor, 999, "https://shop.example/returns"))


async def test_upload_extracts_outside_any_transaction(world: World) -> None:
    org = await new_organization(world.container)
    actor = Actor.system(org)
    kb = (await world.run(uc.CreateKnowledgeBase, uc.CreateKnowledgeBaseCommand(
        actor, "Files", await _agent(world, org)))).knowledge_base.id
    outcome = await world.run(uc.UploadDocuments, uc.UploadDocumentsCommand(
        actor, kb, [uc.UploadedFile("a.txt", b"Alpha."), uc.UploadedFile("b.txt", b"\x00junk")]))
    assert outcome.summary() == {"total": 2, "success": 1, "failed": 1}
    assert world.extractor.locked_during_extraction == [False, False]
    with pytest.raises(ValidationFailed) as none:
        await world.run(uc.UploadDocuments, uc.UploadDocumentsCommand(actor, kb, []))
    assert none.value.details["summary"] == {"total": 0, "success": 0, "failed": 0}


async def test_an_agent_searches_every_knowledge_base_attached_to_it(world: World) -> None:
    org = await new_organization(world.container)
    actor = Actor.system(org)
    owner, helper, loner = await _agent(world, org, "Owner"), await _agent(world, org, "Helper"), await _agent(
        world, org, "Loner")
    first = (await world.run(uc.CreateKnowledgeBase, uc.CreateKnowledgeBaseCommand(actor, "1", owner))).knowledge_base
    second = (await world.run(uc.CreateKnowledgeBase, uc.CreateKnowledgeBaseCommand(actor, "2", helper))
              ).knowledge_base
    await world.run(uc.UploadDocuments, uc.UploadDocumentsCommand(
        actor, first.id, [uc.UploadedFile("p.txt", b"Parking is free on Sundays.")]))
    await world.run(uc.UploadDocuments, uc.UploadDocumentsCommand(
        actor, second.id, [uc.UploadedFile("q.txt", b"Parking costs two euros.")]))
    attached = await world.run(uc.AttachKnowledgeBase, uc.AttachKnowledgeBaseCommand(actor, helper, first.id))
    assert [v.knowledge_base.id for v in attached.knowledge_bases] == [first.id, second.id]

    async def agent_hits(agent_id: int, query: str) -> list[Any]:
        return await world.run(uc.SearchAgentKnowledge, uc.SearchAgentKnowledgeCommand(actor, agent_id, query, 5))

    async def kb_hits(kb_id: int, query: str) -> list[Any]:
        return await world.run(uc.SearchKnowledge, uc.SearchKnowledgeCommand(actor, kb_id, query, 5))

    hits = await agent_hits(helper, "parking")
    assert {h.knowledge_base_id for h in hits} == {first.id, second.id}
    assert [h.knowledge_base_id for h in await agent_hits(owner, "parking")] == [
        first.id]
    assert await agent_hits(loner, "parking") == []
    assert await agent_hits(helper, "?!") == []
    assert [h.text for h in await kb_hits(second.id, "euros")] == [
        "Parking costs two euros."]
    with pytest.raises(ValidationFailed):
        await kb_hits(second.id, "...")
    await world.run(uc.DetachKnowledgeBase, uc.DetachKnowledgeBaseCommand(actor, helper, first.id))
    assert {h.knowledge_base_id for h in await agent_hits(helper, "parking")} == {
        second.id}
    assert "knowledge_base.attached" in world.events() and "knowledge_base.detached" in world.events()
