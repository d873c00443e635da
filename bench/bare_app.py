"""The floor for the benchmark: Litestar + an async SQLAlchemy engine, one GET route that reads
25 rows from a 10,000-row table of its own, and nothing of Parley (no pipeline, no dishka,
no domain objects).

The table has the same columns and the same row contents as Parley's ``agents`` table, so the
two endpoints read and serialize the same amount of data.

    python bench/bare_app.py seed  --database-url URL
    python bench/bare_app.py serve --database-url URL --server uvicorn|granian --workers N --port P

The server is configured as ``parley serve`` configures it (same server, worker count, no access log).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from litestar import Litestar, get
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

ROWS = 10_000
PAGE = 25
URL_ENV = "BENCH_DATABASE_URL"

_meta = sa.MetaData()
Json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
bench_items = sa.Table(
    "bench_items",
    _meta,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
    sa.Column("organization_id", sa.BigInteger, nullable=False),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("description", sa.Text, nullable=True),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("agent_mode", sa.String(20), nullable=False),
    sa.Column("language", sa.String(35), nullable=False),
    sa.Column("voice", Json, nullable=False),
    sa.Column("llm", Json, nullable=False),
    sa.Column("prompt", sa.Text, nullable=False),
    sa.Column("first_message", sa.Text, nullable=True),
    sa.Column("max_call_duration_seconds", sa.Integer, nullable=False),
    sa.Column("voicemail", Json, nullable=False),
    sa.Column("transfer_phone", sa.String(20), nullable=True),
    sa.Column("calendar_id", sa.BigInteger, nullable=True),
    sa.Column("timezone", sa.String(64), nullable=False),
    sa.Column("metadata", Json, nullable=False),
    sa.Column("current_version", sa.Integer, nullable=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
)


def sample_row(n: int, at: datetime) -> dict[str, Any]:
    """One row's contents; bench/run.py seeds Parley's agents with the same values."""
    return {
        "organization_id": 1,
        "name": f"Agent {n:05d}",
        "description": f"Outbound qualification agent number {n} for the spring campaign",
        "status": "active" if n % 3 else "draft",
        "agent_mode": "outbound",
        "language": "en-US",
        "voice": {"provider": "simulator", "voice_id": "default"},
        "llm": {"model": "parley-sim-1", "temperature": 0.7},
        "prompt": ("You are a friendly assistant calling {{contact_name}} about their recent enquiry. "
                   "Confirm their details, answer questions about the offer and book a follow-up "
                   "appointment when they are interested. Be brief and polite."),
        "first_message": "Hello {{contact_name}}, this is Parley calling about your enquiry.",
        "max_call_duration_seconds": 600,
        "voicemail": {"action": "hangup", "message": None},
        "transfer_phone": None,
        "calendar_id": None,
        "timezone": "Europe/Berlin",
        "metadata": {"team": "sales", "region": "emea", "n": n},
        "current_version": 1 if n % 3 else None,
        "created_at": at,
        "updated_at": at,
    }


async def seed(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_meta.drop_all)
            await conn.run_sync(_meta.create_all)
            at = datetime(2026, 1, 1, tzinfo=UTC)
            rows = [sample_row(n, at) for n in range(1, ROWS + 1)]
            for start in range(0, ROWS, 1000):
                await conn.execute(bench_items.insert(), rows[start:start + 1000])
    finally:
        await engine.dispose()


_COLUMNS = [c for c in bench_items.c if c.name != "organization_id"]
_QUERY = sa.select(*_COLUMNS).order_by(bench_items.c.id).limit(PAGE)


def make_app() -> Litestar:
    engine: AsyncEngine = create_async_engine(os.environ[URL_ENV], pool_size=10)

    @get("/rows")
    async def rows() -> list[dict[str, Any]]:
        async with engine.connect() as conn:
            result = await conn.execute(_QUERY)
            return [dict(r) for r in result.mappings()]

    async def dispose(_: Litestar) -> None:
        await engine.dispose()

    return Litestar(route_handlers=[rows], on_shutdown=[dispose], debug=False, logging_config=None,
                    openapi_config=None)


def serve(server: str, workers: int, port: int) -> None:
    here = str(Path(__file__).resolve().parent)
    if server == "granian":
        from granian import Granian
        from granian.constants import Interfaces

        Granian("bare_app:make_app", address="127.0.0.1", port=port, workers=workers, interface=Interfaces.ASGI,
                factory=True, working_dir=Path(here), log_access=False).serve()
    else:
        import uvicorn

        uvicorn.run("bare_app:make_app", factory=True, host="127.0.0.1", port=port, workers=workers,
                    app_dir=here, log_level="warning", access_log=False, lifespan="on")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["seed", "serve"])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--server", choices=["uvicorn", "granian"], default="uvicorn")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--port", type=int, default=8100)
    args = parser.parse_args(argv)
    if args.command == "seed":
        asyncio.run(seed(args.database_url))
        return 0
    os.environ[URL_ENV] = args.database_url
    serve(args.server, args.workers, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
