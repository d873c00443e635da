"""Shared fixtures: databases (SQLite and a private PostgreSQL database per run), the app,
and factories for organizations and keys."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dishka import Provider, Scope, provide
from litestar import Litestar
from litestar.testing import AsyncTestClient

from adapters.memory.clock import ManualClock
from adapters.sql.schema import upgrade
from application.accounts import CreateOrganization, CreateOrganizationCommand, IssueApiKey, IssueApiKeyCommand
from application.ports.platform import Clock, UnitOfWork
from entrypoints.http.app import create_app
from entrypoints.ioc import build_container, http_container
from entrypoints.settings import Settings

DEFAULT_PG = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
IN_CI = bool(os.environ.get("CI"))


def _pg_admin_url() -> str:
    return os.environ.get("PARLEY_TEST_POSTGRES_URL", DEFAULT_PG)


async def _pg_reachable(url: str) -> str | None:
    import asyncpg

    dsn = url.replace("postgresql+asyncpg://", "postgresql://")
    try:
        conn = await asyncio.wait_for(asyncpg.connect(dsn), timeout=5)
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"
    await conn.close()
    return None


@pytest.fixture(scope="session")
def tmp_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("parley")


@pytest.fixture(scope="session")
async def sqlite_url(tmp_root: Path) -> str:
    url = f"sqlite+aiosqlite:///{tmp_root / 'parley.db'}"
    await asyncio.to_thread(upgrade, url)
    return url


@pytest.fixture(scope="session")
async def postgres_url() -> AsyncIterator[str]:
    """A database of its own for this run, dropped at the end. Required when CI is set."""
    import asyncpg

    admin = _pg_admin_url()
    problem = await _pg_reachable(admin)
    if problem is not None:
        if IN_CI:
            pytest.fail(f"PostgreSQL is required in CI but unreachable at {admin}: {problem}")
        pytest.skip(f"PostgreSQL not reachable at {admin} ({problem}); set PARLEY_TEST_POSTGRES_URL")
    name = f"parley_test_{uuid.uuid4().hex[:12]}"
    dsn = admin.replace("postgresql+asyncpg://", "postgresql://")
    conn = await asyncpg.connect(dsn)
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()
    url = admin.rsplit("/", 1)[0] + f"/{name}"
    await asyncio.to_thread(upgrade, url)
    yield url
    conn = await asyncpg.connect(dsn)
    await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await conn.close()


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str:
    """Every backend: the in-memory adapters, SQLite and PostgreSQL."""
    if request.param == "memory":
        return "memory://"
    return request.getfixturevalue(f"{request.param}_url")


class ClockProvider(Provider):
    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self._clock = clock

    @provide(scope=Scope.APP)
    def clock(self) -> Clock:
        return self._clock


@dataclass
class Tenant:
    organization_id: int
    key: str
    key_id: int

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


@dataclass
class Api:
    """A running app with a client, and factories that act as the operator's CLI would."""

    client: AsyncTestClient[Litestar]
    settings: Settings
    clock: ManualClock | None
    overrides: tuple[Provider, ...]

    async def tenant(self, *, plan: str = "enterprise", org_type: str = "standard", scopes: tuple[str, ...] = ("*",),
                     parent_id: int | None = None, name: str = "Acme", expires_at: Any = None) -> Tenant:
        container = build_container(self.settings, *self.overrides)
        try:
            async with container() as request:
                org = await (await request.get(CreateOrganization)).execute(
                    CreateOrganizationCommand(name, plan, org_type, parent_id))
                issued = await (await request.get(IssueApiKey)).execute(
                    IssueApiKeyCommand(org.id or 0, "test", scopes, expires_at))
                await (await request.get(UnitOfWork)).commit()
        finally:
            await container.close()
        return Tenant(org.id or 0, issued.secret, issued.record.id or 0)

    async def key_for(self, organization_id: int, scopes: tuple[str, ...], expires_at: Any = None) -> Tenant:
        container = build_container(self.settings, *self.overrides)
        try:
            async with container() as request:
                issued = await (await request.get(IssueApiKey)).execute(
                    IssueApiKeyCommand(organization_id, "test", scopes, expires_at))
                await (await request.get(UnitOfWork)).commit()
        finally:
            await container.close()
        return Tenant(organization_id, issued.secret, issued.record.id or 0)


ApiFactory = Callable[..., Awaitable[Api]]


@pytest.fixture
async def make_api(tmp_root: Path) -> AsyncIterator[ApiFactory]:
    """Build an app on a database URL, optionally with a manual clock and extra settings."""
    clients: list[AsyncTestClient[Litestar]] = []

    async def factory(database_url: str, *, clock: ManualClock | None = None, **settings: Any) -> Api:
        base = Settings(database_url=database_url, var_dir=tmp_root / "var", secret_key="test-secret-key",
                        allow_loopback_targets=True, **settings)
        overrides: tuple[Provider, ...] = (ClockProvider(clock),) if clock else ()
        if database_url == "memory://":
            raise ValueError("HTTP tests use SQLite or PostgreSQL (the CLI and the app must share the data)")
        app = create_app(http_container(base, *overrides), base)
        client = AsyncTestClient(app)
        await client.__aenter__()
        clients.append(client)
        return Api(client, base, clock, overrides)

    yield factory
    for client in clients:
        await client.__aexit__(None, None, None)


@pytest.fixture
async def api(make_api: ApiFactory, sqlite_url: str) -> Api:
    """The app on SQLite with the real clock."""
    return await make_api(sqlite_url)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sql_url(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
async def any_api(make_api: ApiFactory, sql_url: str) -> Api:
    """The app on each SQL database."""
    return await make_api(sql_url)


@pytest.fixture
async def container(database_url: str, tmp_root: Path) -> AsyncIterator[Any]:
    """A container on each backend (memory, SQLite, PostgreSQL) for contract tests:
    ``async with container() as r: repo = await r.get(Port)``."""
    settings = Settings(database_url=database_url, var_dir=tmp_root / "var", secret_key="test-secret-key",
                        allow_loopback_targets=True, rate_limit_backend="database")
    built = build_container(settings)
    yield built
    await built.close()


async def new_organization(container: Any, *, plan: str = "enterprise", org_type: str = "standard") -> int:
    async with container() as request:
        org = await (await request.get(CreateOrganization)).execute(CreateOrganizationCommand("Org", plan, org_type))
        await (await request.get(UnitOfWork)).commit()
    return org.id or 0
