"""Tables of knowledge bases: knowledge bases, their agent links, documents and chunks.

Full-text search needs one more object per database, created by migration 0004: on SQLite the
FTS5 table ``document_chunks_fts`` (rowid = chunk id, kept in sync by the repository), on
PostgreSQL the GIN index ``ix_document_chunks_fts`` on ``to_tsvector('simple', text)``.
"""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.metadata import BigId, UtcDateTime, id_column, metadata, org_column

FTS_TABLE = "document_chunks_fts"

knowledge_bases = sa.Table(
    "knowledge_bases",
    metadata,
    id_column(),
    org_column(),
    sa.Column("agent_id", BigId, sa.ForeignKey("agents.id"), nullable=False, index=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("description", sa.Text, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sqlite_autoincrement=True,  # ids are never reused (migration 0008)
)

knowledge_base_agents = sa.Table(
    "knowledge_base_agents",
    metadata,
    sa.Column("knowledge_base_id", BigId, sa.ForeignKey("knowledge_bases.id", ondelete="CASCADE"), nullable=False),
    sa.Column("agent_id", BigId, sa.ForeignKey("agents.id"), nullable=False, index=True),
    org_column(),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.PrimaryKeyConstraint("knowledge_base_id", "agent_id"),
)

documents = sa.Table(
    "documents",
    metadata,
    id_column(),
    org_column(),
    sa.Column("knowledge_base_id", BigId, sa.ForeignKey("knowledge_bases.id", ondelete="CASCADE"), nullable=False),
    sa.Column("file_name", sa.String(255), nullable=False),
    sa.Column("file_type", sa.String(10), nullable=False),
    sa.Column("source", sa.String(10), nullable=False),
    sa.Column("source_url", sa.String(2048), nullable=True),
    sa.Column("content_hash", sa.String(64), nullable=True),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("size_bytes", sa.BigInteger, nullable=False),
    sa.Column("chunk_count", sa.Integer, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.CheckConstraint("file_type in ('txt','md','csv','html','pdf','docx')", name="file_type"),
    sa.CheckConstraint("source in ('upload','scrape')", name="source"),
    sa.CheckConstraint("status in ('processing','ready','failed')", name="status"),
    sa.UniqueConstraint("knowledge_base_id", "content_hash"),
    sa.UniqueConstraint("knowledge_base_id", "source_url"),
    sqlite_autoincrement=True,  # ids are never reused (migration 0008)
)

document_chunks = sa.Table(
    "document_chunks",
    metadata,
    id_column(),
    org_column(),
    sa.Column("knowledge_base_id", BigId, sa.ForeignKey("knowledge_bases.id", ondelete="CASCADE"), nullable=False,
              index=True),
    sa.Column("document_id", BigId, sa.ForeignKey("documents.id", ondelete="CASCADE"), nullable=False),
    sa.Column("ordinal", sa.Integer, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.UniqueConstraint("document_id", "ordinal"),
    sqlite_autoincrement=True,  # ids are never reused (migration 0008)
)
