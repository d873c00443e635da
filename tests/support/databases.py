"""The test run's databases: PostgreSQL's administrative address, the run's migrated templates (built once per
run, whichever process asks first) and private PostgreSQL databases copied from them. The fixtures that hand
them to tests (``sqlite_url``, ``postgres_url``, ``private_sql_url``...) are in fixtures.py. The controller of
a pytest-xdist run imports this module too (it drops the template at the end), so the migrations are imported
only where a template is built."""

from __future__ import annotations

import asyncio
import fcntl
import os
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

DEFAULT_PG = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
IN_CI = bool(os.environ.get("CI"))

RUN_DATABASES: set[str] = set()
"""The databases this process's tests share for the whole run (``sqlite_url``, ``postgres_url``); a test's own
database (a copy of the template) is not one of them."""


def pg_admin_url() -> str:
    return os.environ.get("PARLEY_TEST_POSTGRES_URL", DEFAULT_PG)


def asyncpg_dsn(url: str) -> str:
    """A SQLAlchemy URL (``postgresql+asyncpg://...``) as asyncpg's own ``connect`` takes it."""
    return url.replace("postgresql+asyncpg://", "postgresql://")


def named(url: str, database: str) -> str:
    """``url`` on another database of the same server."""
    return url.rsplit("/", 1)[0] + f"/{database}"


async def pg_reachable(url: str) -> str | None:
    import asyncpg

    dsn = asyncpg_dsn(url)
    try:
        conn = await asyncio.wait_for(asyncpg.connect(dsn), timeout=5)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    await conn.close()
    return None


async def require_postgres() -> str:
    """PostgreSQL's administrative address once it answers: without it a test fails in CI (PostgreSQL is required
    there) and is skipped elsewhere, with the reason."""
    admin = pg_admin_url()
    problem = await pg_reachable(admin)
    if problem is not None:
        if IN_CI:
            pytest.fail(f"PostgreSQL is required in CI but unreachable at {admin}: {problem}")
        pytest.skip(f"PostgreSQL not reachable at {admin} ({problem}); set PARLEY_TEST_POSTGRES_URL")
    return admin


def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory every process of this run shares (the parent of the workers' own bases under xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once(run_dir: Path, name: str, build: Callable[[], None]) -> None:
    """Run ``build`` once per run, whichever process asks first; the others wait for it (a lock file)."""
    done = run_dir / f"{name}.done"
    with open(run_dir / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            build()
            done.touch()


def pg_template_name() -> str:
    return f"parley_template_{os.environ['PARLEY_TEST_RUN']}"


def create_pg_template(dsn: str, url: str) -> None:
    """The migrated database of this run, which each worker's database copies (``CREATE DATABASE ... TEMPLATE``
    instead of running every migration per worker); the controller drops it at the end of the run."""
    import asyncpg

    from adapters.sql.schema import upgrade

    async def create() -> None:
        conn = await asyncpg.connect(dsn)
        await conn.execute(f'CREATE DATABASE "{url.rsplit("/", 1)[1]}"')
        await conn.close()

    asyncio.run(create())
    upgrade(url)


@asynccontextmanager
async def private_pg_database(prefix: str) -> AsyncIterator[str]:
    """A PostgreSQL database of its own, a copy of the run's migrated template, dropped afterwards."""
    import asyncpg

    admin = pg_admin_url()
    dsn = asyncpg_dsn(admin)
    name = f"parley_{prefix}_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(dsn)
    await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template_name()}"')
    await conn.close()
    try:
        yield named(admin, name)
    finally:
        conn = await asyncpg.connect(dsn)
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.close()
