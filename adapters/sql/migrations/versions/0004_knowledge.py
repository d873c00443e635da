"""knowledge bases: knowledge bases, agent links, documents, chunks and full-text search

Revision ID: 0004
Revises: 0001
Create Date: 2026-11-22 00:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0001'
branch_labels = ('knowledge',)
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


def upgrade() -> None:
    op.create_table('knowledge_bases',
    sa.Column('id', ID, autoincrement=True, nullable=False),
    sa.Column('organization_id', ID, nullable=False),
    sa.Column('agent_id', ID, nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['agent_id'], ['agents.id'], name=op.f('fk_knowledge_bases_agent_id_agents')),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_knowledge_bases_organization_id_organizations')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_knowledge_bases'))
    )
    op.create_index(op.f('ix_knowledge_bases_agent_id'), 'knowledge_bases', ['agent_id'], unique=False)
    op.create_index(op.f('ix_knowledge_bases_organization_id'), 'knowledge_bases', ['organization_id'], unique=False)

    op.create_table('knowledge_base_agents',
    sa.Column('knowledge_base_id', ID, nullable=False),
    sa.Column('agent_id', ID, nullable=False),
    sa.Column('organization_id', ID, nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['agent_id'], ['agents.id'], name=op.f('fk_knowledge_base_agents_agent_id_agents')),
    sa.ForeignKeyConstraint(['knowledge_base_id'], ['knowledge_bases.id'], name=op.f('fk_knowledge_base_agents_knowledge_base_id_knowledge_bases'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_knowledge_base_agents_organization_id_organizations')),
    sa.PrimaryKeyConstraint('knowledge_base_id', 'agent_id', name=op.f('pk_knowledge_base_agents'))
    )
    op.create_index(op.f('ix_knowledge_base_agents_agent_id'), 'knowledge_base_agents', ['agent_id'], unique=False)
    op.create_index(op.f('ix_knowledge_base_agents_organization_id'), 'knowledge_base_agents', ['organization_id'], unique=False)

    op.create_table('documents',
    sa.Column('id', ID, autoincrement=True, nullable=False),
    sa.Column('organization_id', ID, nullable=False),
    sa.Column('knowledge_base_id', ID, nullable=False),
    sa.Column('file_name', sa.String(length=255), nullable=False),
    sa.Column('file_type', sa.String(length=10), nullable=False),
    sa.Column('source', sa.String(length=10), nullable=False),
    sa.Column('source_url', sa.String(length=2048), nullable=True),
    sa.Column('content_hash', sa.String(length=64), nullable=True),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('size_bytes', sa.BigInteger(), nullable=False),
    sa.Column('chunk_count', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("file_type in ('txt','md','csv','html','pdf','docx')", name=op.f('ck_documents_file_type')),
    sa.CheckConstraint("source in ('upload','scrape')", name=op.f('ck_documents_source')),
    sa.CheckConstraint("status in ('processing','ready','failed')", name=op.f('ck_documents_status')),
    sa.ForeignKeyConstraint(['knowledge_base_id'], ['knowledge_bases.id'], name=op.f('fk_documents_knowledge_base_id_knowledge_bases'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_documents_organization_id_organizations')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_documents')),
    sa.UniqueConstraint('knowledge_base_id', 'content_hash', name=op.f('uq_documents_knowledge_base_id_content_hash')),
    sa.UniqueConstraint('knowledge_base_id', 'source_url', name=op.f('uq_documents_knowledge_base_id_source_url'))
    )
    op.create_index(op.f('ix_documents_organization_id'), 'documents', ['organization_id'], unique=False)

    op.create_table('document_chunks',
    sa.Column('id', ID, autoincrement=True, nullable=False),
    sa.Column('organization_id', ID, nullable=False),
    sa.Column('knowledge_base_id', ID, nullable=False),
    sa.Column('document_id', ID, nullable=False),
    sa.Column('ordinal', sa.Integer(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(['document_id'], ['documents.id'], name=op.f('fk_document_chunks_document_id_documents'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['knowledge_base_id'], ['knowledge_bases.id'], name=op.f('fk_document_chunks_knowledge_base_id_knowledge_bases'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_document_chunks_organization_id_organizations')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_document_chunks')),
    sa.UniqueConstraint('document_id', 'ordinal', name=op.f('uq_document_chunks_document_id_ordinal'))
    )
    op.create_index(op.f('ix_document_chunks_knowledge_base_id'), 'document_chunks', ['knowledge_base_id'], unique=False)
    op.create_index(op.f('ix_document_chunks_organization_id'), 'document_chunks', ['organization_id'], unique=False)

    if op.get_bind().dialect.name == 'sqlite':
        # rowid = document_chunks.id; the repository inserts and deletes rows with the chunks
        op.execute("CREATE VIRTUAL TABLE document_chunks_fts USING fts5(text, tokenize = 'unicode61 remove_diacritics 2')")
    else:
        op.execute("CREATE INDEX ix_document_chunks_fts ON document_chunks USING gin (to_tsvector('simple', text))")


def downgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        op.execute("DROP TABLE IF EXISTS document_chunks_fts")
    else:
        op.execute("DROP INDEX IF EXISTS ix_document_chunks_fts")
    op.drop_index(op.f('ix_document_chunks_organization_id'), table_name='document_chunks')
    op.drop_index(op.f('ix_document_chunks_knowledge_base_id'), table_name='document_chunks')
    op.drop_table('document_chunks')
    op.drop_index(op.f('ix_documents_organization_id'), table_name='documents')
    op.drop_table('documents')
    op.drop_index(op.f('ix_knowledge_base_agents_organization_id'), table_name='knowledge_base_agents')
    op.drop_index(op.f('ix_knowledge_base_agents_agent_id'), table_name='knowledge_base_agents')
    op.drop_table('knowledge_base_agents')
    op.drop_index(op.f('ix_knowledge_bases_organization_id'), table_name='knowledge_bases')
    op.drop_index(op.f('ix_knowledge_bases_agent_id'), table_name='knowledge_bases')
    op.drop_table('knowledge_bases')
