"""SQL repositories for knowledge bases and documents, and full-text search over their chunks
(SQLite FTS5, PostgreSQL tsvector)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from adapters.sql.constraints import constraint_errors
from adapters.sql.dialect import insert
from adapters.sql.knowledge_tables import (
    FTS_TABLE,
    document_chunks,
    documents,
    knowledge_base_agents,
    knowledge_bases,
)
from adapters.sql.paging import fetch_page
from adapters.sql.tables import agents, organizations
from adapters.sql.uow import SqlUnitOfWork
from application.ports.knowledge import DocumentFilter, SearchHit
from application.ports.platform import Page, PageRequest
from domain.knowledge import AgentRef, Document, KnowledgeBase

_KB_COLUMNS = list(knowledge_bases.c)
_DOC_COLUMNS = list(documents.c)

def _kb(row: Any) -> KnowledgeBase:
    return KnowledgeBase(row.id, row.organization_id, row.agent_id, row.name, row.description, row.created_at,
                         row.updated_at)


def _document(row: Any) -> Document:
    return Document(
        id=row.id, organization_id=row.organization_id, knowledge_base_id=row.knowledge_base_id,
        file_name=row.file_name, file_type=row.file_type, source=row.source, source_url=row.source_url,
        content_hash=row.content_hash, status=row.status, error=row.error, size_bytes=row.size_bytes,
        chunk_count=row.chunk_count, created_at=row.created_at, updated_at=row.updated_at,
    )


class SqlKnowledgeBaseRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def add(self, kb: KnowledgeBase) -> KnowledgeBase:
        conn = await self.uow.connection()
        row = (await conn.execute(knowledge_bases.insert().returning(*_KB_COLUMNS), {
            "organization_id": kb.organization_id, "agent_id": kb.agent_id, "name": kb.name,
            "description": kb.description, "created_at": kb.created_at, "updated_at": kb.updated_at,
        })).one()
        return _kb(row)

    async def get(self, organization_id: int, kb_id: int) -> KnowledgeBase | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(*_KB_COLUMNS).where(
            knowledge_bases.c.organization_id == organization_id, knowledge_bases.c.id == kb_id))).first()
        return _kb(row) if row else None

    async def count_for_update(self, organization_id: int) -> int:
        conn = await self.uow.connection()
        if self.uow.dialect == "postgresql":
            # every creator of the organization queues here until the first one's transaction ends
            await conn.execute(sa.select(organizations.c.id).where(organizations.c.id == organization_id)
                               .with_for_update())
        return (await conn.execute(sa.select(sa.func.count()).select_from(knowledge_bases)
                                   .where(knowledge_bases.c.organization_id == organization_id))).scalar_one()

    async def list(self, organization_id: int, page: PageRequest) -> Page[KnowledgeBase]:
        conn = await self.uow.connection()
        rows, total = await fetch_page(conn, _KB_COLUMNS, knowledge_bases.c.organization_id == organization_id,
                                       [knowledge_bases.c.id], page)
        return Page([_kb(r) for r in rows], total, page.limit, page.offset)

    async def list_for_agent(self, organization_id: int, agent_id: int, page: PageRequest) -> Page[KnowledgeBase]:
        conn = await self.uow.connection()
        joined = knowledge_bases.join(knowledge_base_agents,
                                      knowledge_base_agents.c.knowledge_base_id == knowledge_bases.c.id)
        condition = sa.and_(knowledge_bases.c.organization_id == organization_id,
                            knowledge_base_agents.c.organization_id == organization_id,
                            knowledge_base_agents.c.agent_id == agent_id)
        rows, total = await fetch_page(conn, _KB_COLUMNS, condition, [knowledge_bases.c.id], page, source=joined)
        return Page([_kb(r) for r in rows], total, page.limit, page.offset)

    async def update(self, kb: KnowledgeBase) -> KnowledgeBase:
        conn = await self.uow.connection()
        await conn.execute(knowledge_bases.update().where(
            knowledge_bases.c.organization_id == kb.organization_id, knowledge_bases.c.id == kb.id,
        ).values(name=kb.name, description=kb.description, updated_at=kb.updated_at))
        return kb

    async def delete(self, organization_id: int, kb_id: int) -> None:
        conn = await self.uow.connection()
        chunk_ids = sa.select(document_chunks.c.id).where(document_chunks.c.organization_id == organization_id,
                                                          document_chunks.c.knowledge_base_id == kb_id)
        if self.uow.dialect == "sqlite":
            await _delete_fts(conn, chunk_ids)
        await conn.execute(document_chunks.delete().where(document_chunks.c.organization_id == organization_id,
                                                          document_chunks.c.knowledge_base_id == kb_id))
        await conn.execute(documents.delete().where(documents.c.organization_id == organization_id,
                                                    documents.c.knowledge_base_id == kb_id))
        await conn.execute(knowledge_base_agents.delete().where(
            knowledge_base_agents.c.organization_id == organization_id,
            knowledge_base_agents.c.knowledge_base_id == kb_id))
        await conn.execute(knowledge_bases.delete().where(knowledge_bases.c.organization_id == organization_id,
                                                          knowledge_bases.c.id == kb_id))

    async def link(self, organization_id: int, kb_id: int, agent_id: int, at: datetime) -> bool:
        conn = await self.uow.connection()
        stmt = insert(knowledge_base_agents, self.uow.dialect).values(
            knowledge_base_id=kb_id, agent_id=agent_id, organization_id=organization_id, created_at=at,
        ).on_conflict_do_nothing(index_elements=["knowledge_base_id", "agent_id"]).returning(
            knowledge_base_agents.c.agent_id)
        return (await conn.execute(stmt)).first() is not None

    async def unlink(self, organization_id: int, kb_id: int, agent_id: int) -> bool:
        conn = await self.uow.connection()
        result = await conn.execute(knowledge_base_agents.delete().where(
            knowledge_base_agents.c.organization_id == organization_id,
            knowledge_base_agents.c.knowledge_base_id == kb_id, knowledge_base_agents.c.agent_id == agent_id))
        return bool(result.rowcount)

    async def linked_agents(self, organization_id: int, kb_ids: Sequence[int]) -> dict[int, builtins.list[AgentRef]]:
        if not kb_ids:
            return {}
        conn = await self.uow.connection()
        rows = await conn.execute(
            sa.select(knowledge_base_agents.c.knowledge_base_id, agents.c.id, agents.c.name)
            .join(agents, agents.c.id == knowledge_base_agents.c.agent_id)
            .where(knowledge_base_agents.c.organization_id == organization_id,
                   knowledge_base_agents.c.knowledge_base_id.in_(list(kb_ids)),
                   agents.c.organization_id == organization_id, agents.c.deleted_at.is_(None))
            .order_by(knowledge_base_agents.c.knowledge_base_id, agents.c.id))
        found: dict[int, list[AgentRef]] = {}
        for kb_id, agent_id, name in rows:
            found.setdefault(kb_id, []).append(AgentRef(agent_id, name))
        return found


async def _delete_fts(conn: Any, chunk_ids: Any) -> None:
    """SQLite: drop the FTS rows of the chunks about to be deleted (rowid = chunk id)."""
    fts = sa.table(FTS_TABLE, sa.column("rowid"))
    await conn.execute(sa.delete(fts).where(fts.c.rowid.in_(chunk_ids)))


def _document_values(document: Document) -> dict[str, Any]:
    return {
        "organization_id": document.organization_id, "knowledge_base_id": document.knowledge_base_id,
        "file_name": document.file_name, "file_type": document.file_type, "source": document.source,
        "source_url": document.source_url, "content_hash": document.content_hash, "status": document.status,
        "error": document.error, "size_bytes": document.size_bytes, "chunk_count": document.chunk_count,
        "created_at": document.created_at, "updated_at": document.updated_at,
    }


class SqlDocumentRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    def _of(self, organization_id: int, kb_id: int) -> Any:
        return sa.and_(documents.c.organization_id == organization_id, documents.c.knowledge_base_id == kb_id)

    async def add(self, document: Document) -> Document:
        conn = await self.uow.connection()
        # a savepoint, so a duplicate (DuplicateDocument) leaves the rest of the transaction usable (PostgreSQL)
        with constraint_errors():
            async with conn.begin_nested():
                row = (await conn.execute(documents.insert().returning(*_DOC_COLUMNS),
                                          _document_values(document))).one()
        return _document(row)

    async def get(self, organization_id: int, kb_id: int, document_id: int) -> Document | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(*_DOC_COLUMNS).where(self._of(organization_id, kb_id),
                                                                 documents.c.id == document_id))).first()
        return _document(row) if row else None

    async def find_duplicate(self, organization_id: int, kb_id: int, *, content_hash: str | None = None,
                             source_url: str | None = None) -> Document | None:
        alternatives = []
        if content_hash is not None:
            alternatives.append(documents.c.content_hash == content_hash)
        if source_url is not None:
            alternatives.append(documents.c.source_url == source_url)
        if not alternatives:
            return None
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(*_DOC_COLUMNS).where(self._of(organization_id, kb_id),
                                                                 sa.or_(*alternatives))
                                  .order_by(documents.c.id).limit(1))).first()
        return _document(row) if row else None

    async def list(self, organization_id: int, kb_id: int, filters: DocumentFilter,
                   page: PageRequest) -> Page[Document]:
        conn = await self.uow.connection()
        where = [self._of(organization_id, kb_id)]
        if filters.status:
            where.append(documents.c.status == filters.status)
        if filters.file_type:
            where.append(documents.c.file_type == filters.file_type)
        rows, total = await fetch_page(conn, _DOC_COLUMNS, sa.and_(*where), [documents.c.id], page)
        return Page([_document(r) for r in rows], total, page.limit, page.offset)

    async def counts(self, organization_id: int, kb_ids: Sequence[int]) -> dict[int, int]:
        if not kb_ids:
            return {}
        conn = await self.uow.connection()
        rows = await conn.execute(
            sa.select(documents.c.knowledge_base_id, sa.func.count())
            .where(documents.c.organization_id == organization_id, documents.c.knowledge_base_id.in_(list(kb_ids)))
            .group_by(documents.c.knowledge_base_id))
        return {kb_id: count for kb_id, count in rows}

    async def update(self, document: Document) -> Document:
        conn = await self.uow.connection()
        values = _document_values(document)
        for fixed in ("organization_id", "knowledge_base_id", "created_at"):
            values.pop(fixed)
        await conn.execute(documents.update().where(
            self._of(document.organization_id, document.knowledge_base_id), documents.c.id == document.id,
        ).values(**values))
        return document

    async def add_chunks(self, document: Document, texts: Sequence[str]) -> int:
        if not texts:
            return 0
        conn = await self.uow.connection()
        await conn.execute(document_chunks.insert(), [
            {"organization_id": document.organization_id, "knowledge_base_id": document.knowledge_base_id,
             "document_id": document.id, "ordinal": ordinal, "text": text}
            for ordinal, text in enumerate(texts)
        ])
        if self.uow.dialect == "sqlite":
            await conn.execute(sa.text(
                f"INSERT INTO {FTS_TABLE}(rowid, text) SELECT id, text FROM document_chunks "
                "WHERE document_id = :document_id ORDER BY id"
            ), {"document_id": document.id})
        return len(texts)

    async def delete(self, organization_id: int, kb_id: int, document_id: int) -> None:
        conn = await self.uow.connection()
        mine = sa.and_(document_chunks.c.organization_id == organization_id,
                       document_chunks.c.knowledge_base_id == kb_id, document_chunks.c.document_id == document_id)
        if self.uow.dialect == "sqlite":
            await _delete_fts(conn, sa.select(document_chunks.c.id).where(mine))
        await conn.execute(document_chunks.delete().where(mine))
        await conn.execute(documents.delete().where(self._of(organization_id, kb_id), documents.c.id == document_id))


_SQLITE_SEARCH = f"""
SELECT c.id, c.document_id, c.knowledge_base_id, c.text, -bm25({FTS_TABLE}) AS score
FROM {FTS_TABLE} JOIN document_chunks AS c ON c.id = {FTS_TABLE}.rowid
WHERE {FTS_TABLE} MATCH :match AND c.organization_id = :organization_id AND c.knowledge_base_id IN :kb_ids
ORDER BY bm25({FTS_TABLE}), c.id
LIMIT :limit
"""

# The expression must read exactly as the index's: to_tsvector('simple', text).
_POSTGRES_SEARCH = """
SELECT c.id, c.document_id, c.knowledge_base_id, c.text,
       ts_rank(to_tsvector('simple', c.text), q.query) AS score
FROM document_chunks AS c, to_tsquery('simple', :match) AS q(query)
WHERE to_tsvector('simple', c.text) @@ q.query
  AND c.organization_id = :organization_id AND c.knowledge_base_id IN :kb_ids
ORDER BY score DESC, c.id
LIMIT :limit
"""


class SqlKnowledgeSearch:
    """Full-text relevance: FTS5 bm25 on SQLite, ts_rank over the GIN-indexed tsvector on
    PostgreSQL. Any of the terms matches (OR); chunks with more and rarer matches rank higher."""

    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def search(self, organization_id: int, kb_ids: Sequence[int], terms: Sequence[str],
                     limit: int) -> list[SearchHit]:
        # terms are letters and digits only (domain.knowledge.search_terms): safe to quote as is
        terms = [t for t in terms if t.isalnum()]
        if not kb_ids or not terms or limit < 1:
            return []
        if self.uow.dialect == "sqlite":
            sql, match = _SQLITE_SEARCH, " OR ".join(f'"{t}"' for t in terms)
        else:
            sql, match = _POSTGRES_SEARCH, " | ".join(f"'{t}'" for t in terms)
        statement = sa.text(sql).bindparams(sa.bindparam("kb_ids", expanding=True))
        conn = await self.uow.connection()
        rows = await conn.execute(statement, {"match": match, "organization_id": organization_id,
                                              "kb_ids": list(kb_ids), "limit": limit})
        return [SearchHit(r.knowledge_base_id, r.document_id, r.id, r.text, float(r.score)) for r in rows]
