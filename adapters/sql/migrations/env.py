"""Alembic environment: async engines for SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

from alembic import context
from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

import adapters.sql.tables  # noqa: F401  (registers the foundation tables)
from adapters.sql.engine import create_engine
from adapters.sql.metadata import metadata
from adapters.sql.schema import load_all_tables

load_all_tables()
config = context.config


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _sqlite_foreign_keys_off(engine: AsyncEngine) -> None:
    """Migrations that rebuild a table (batch mode: copy, drop, rename) run with SQLite's foreign keys off, as
    SQLite documents for schema changes (dropping a referenced table would fail or cascade otherwise); a
    migration that rebuilds checks ``PRAGMA foreign_key_check`` itself. After the engine's own settings."""

    @event.listens_for(engine.sync_engine, "connect")
    def _off(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=OFF")
        cursor.close()


async def _run_async() -> None:
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "", pool_size=1)
    if engine.dialect.name == "sqlite":
        _sqlite_foreign_keys_off(engine)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
            await connection.commit()
    finally:
        await engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run `parley migrate`")
asyncio.run(_run_async())
