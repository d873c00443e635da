"""The run's fixtures: databases (the run's SQLite database, a PostgreSQL database of its own per run and worker,
private copies), the apps over HTTP (``api``, ``any_api``, ``make_api``, ``concurrent_api``) and containers for
the contract suites. A plugin that tests/conftest.py loads in every process that runs tests (the controller of a
pytest-xdist run only hands out files, so it never imports the application); what builds these lives beside it
(apps.py: the app pools; databases.py: templates and private databases; webhooks.py: the webhook delivery
fixtures, loaded with this plugin)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from dishka import AsyncContainer, Provider

from adapters.memory.clock import ManualClock
from adapters.sql.schema import upgrade
from entrypoints.asgi_app import http_container
from entrypoints.ioc import build_container
from entrypoints.settings import Settings
from tests.support.apps import (
    CHEAP_HASHING,
    POOLABLE_SETTINGS,
    TEST_POOL_SIZE,
    AdminPool,
    Api,
    ApiFactory,
    AppPool,
    LentClock,
    shared_app,
    start_api,
)
from tests.support.databases import (
    RUN_DATABASES,
    asyncpg_dsn,
    create_pg_template,
    named,
    once,
    pg_template_name,
    private_pg_database,
    require_postgres,
    run_dir,
)

pytest_plugins = ("tests.support.webhooks",)  # the webhook delivery fixtures (a receiver, a harness), for every layer


@pytest.fixture(scope="session")
def tmp_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This run's directory (the SQLite database, var/): pytest-xdist gives each worker a base of its own."""
    return tmp_path_factory.mktemp("parley")


@pytest.fixture(scope="session")
async def sqlite_url(tmp_root: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """This run's SQLite database: migrated once per run, copied for each xdist worker."""
    directory = run_dir(tmp_path_factory)
    template = directory / "parley-template.db"
    await asyncio.to_thread(once, directory, "sqlite-template", lambda: upgrade(f"sqlite+aiosqlite:///{template}"))
    target = tmp_root / "parley.db"
    shutil.copyfile(template, target)
    RUN_DATABASES.add(url := f"sqlite+aiosqlite:///{target}")
    return url


@pytest.fixture(scope="session")
async def postgres_url(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """A database of its own for this run (for this worker under pytest-xdist), dropped at the end: a copy of
    the run's migrated template. Required when CI is set."""
    import asyncpg

    admin = await require_postgres()
    # one database per run and, under pytest-xdist, per worker (gw0, gw1, ...): workers never share rows
    name = f"parley_test_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}_{uuid.uuid4().hex[:12]}"
    dsn = asyncpg_dsn(admin)
    template = pg_template_name()
    await asyncio.to_thread(once, run_dir(tmp_path_factory), "postgres-template",
                            lambda: create_pg_template(dsn, named(admin, template)))
    conn = await asyncpg.connect(dsn)
    await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    await conn.close()
    url = named(admin, name)
    RUN_DATABASES.add(url)
    yield url
    conn = await asyncpg.connect(dsn)
    await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await conn.close()


@pytest.fixture
async def private_pg_url(postgres_url: str) -> AsyncIterator[str]:
    """A migrated PostgreSQL database of this test's own (skipped like postgres_url; required in CI)."""
    async with private_pg_database("own") as url:
        yield url


@pytest.fixture
async def private_sql_url(sql_url: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
                          ) -> AsyncIterator[str]:
    """A migrated database of this test's own on each SQL database (a copy of the run's template), for tests
    whose work reaches every organization in the database (a period close, the outbox's backlog)."""
    if sql_url.startswith("sqlite"):
        target = tmp_path / "own.db"
        shutil.copyfile(run_dir(tmp_path_factory) / "parley-template.db", target)
        yield f"sqlite+aiosqlite:///{target}"
        return
    async with private_pg_database("own") as url:
        yield url


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str:
    """Every backend: the in-memory adapters, SQLite and PostgreSQL."""
    if request.param == "memory":
        return "memory://"
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture(scope="session")
async def app_pool() -> AsyncIterator[AppPool]:
    pool = AppPool()
    yield pool
    await pool.close()


@pytest.fixture(scope="session")
async def admin_pool() -> AsyncIterator[AdminPool]:
    pool = AdminPool()
    yield pool
    await pool.close()


@pytest.fixture(scope="session")
async def clocked_apps(tmp_root: Path, app_pool: AppPool
                      ) -> AsyncIterator[dict[tuple[Any, ...], tuple[Api, LentClock]]]:
    """The run's apps whose clock a test lends them, one per database and poolable settings
    (``make_api(url, clock=..., **limits)`` with no providers): building an app costs far more than most tests,
    and the tests that only need their own clock and limits are isolated by their own tenants like those on the
    shared apps."""
    apps: dict[tuple[Any, ...], tuple[Api, LentClock]] = {}
    yield apps
    for api, _ in apps.values():
        await api.close()


@pytest.fixture
async def make_api(tmp_root: Path, clocked_apps: dict[tuple[Any, ...], tuple[Api, LentClock]],
                   app_pool: AppPool, admin_pool: AdminPool) -> AsyncIterator[ApiFactory]:
    """Build an app on a database URL, optionally with a manual clock, extra dishka providers
    (``overrides``, for this app's container only: the last provider wins) and extra settings. With a clock,
    no providers, only poolable settings and one of the run's shared databases, one of the run's clocked apps is
    lent to the test (its clock reads the test's); a second such app in the same test is built afresh, so tests
    of several processes get several. On a database of the test's own the app is lent from the pool and given
    back when the test ends (kept as a clocked app, it would hold its Litestar app for the rest of the run)."""
    started: list[Api] = []
    lent: list[LentClock] = []
    lent_apis = contextlib.AsyncExitStack()

    async def factory(database_url: str, *, clock: ManualClock | None = None,
                      overrides: tuple[Provider, ...] = (), **settings: Any) -> Api:
        if clock is not None and not overrides and set(settings) <= POOLABLE_SETTINGS \
                and database_url in RUN_DATABASES:
            key = (database_url, *sorted(settings.items()))
            if key not in clocked_apps:
                lender = LentClock()
                clocked_apps[key] = (await start_api(app_pool, tmp_root, database_url, clock=lender, keep=True,
                                                     **settings), lender)
            shared, lender = clocked_apps[key]
            if lender.target is None:
                lender.target = clock
                lent.append(lender)
                return await lent_apis.enter_async_context(app_pool.lent_over(replace(shared, clock=clock)))
        api = await start_api(app_pool, tmp_root, database_url, clock=clock, overrides=overrides,
                               admins=admin_pool, **settings)
        started.append(api)
        return api

    yield factory
    await lent_apis.aclose()
    for lender in lent:
        lender.target = None
    for api in started:
        await api.close()


@pytest.fixture(scope="session")
async def shared_apps(tmp_root: Path, app_pool: AppPool) -> AsyncIterator[dict[str, Api]]:
    """One default app per database for the whole run: tests are isolated by their own tenants."""
    apps: dict[str, Api] = {}
    yield apps
    for api in apps.values():
        await api.close()


@pytest.fixture
async def api(shared_apps: dict[str, Api], app_pool: AppPool, tmp_root: Path, sqlite_url: str
              ) -> AsyncIterator[Api]:
    """The app on SQLite with the real clock (its container shared by the tests of a run; the test's worker is its
    own)."""
    async with app_pool.lent_over(await shared_app(shared_apps, app_pool, tmp_root, sqlite_url)) as lent:
        yield lent


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sql_url(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
async def any_api(shared_apps: dict[str, Api], app_pool: AppPool, tmp_root: Path, sql_url: str
                  ) -> AsyncIterator[Api]:
    """The app on each SQL database (its container shared by the tests of a run; the test's worker is its own)."""
    async with app_pool.lent_over(await shared_app(shared_apps, app_pool, tmp_root, sql_url)) as lent:
        yield lent


@pytest.fixture
async def container(database_url: str, tmp_root: Path, sql_containers: dict[str, AsyncContainer]
                    ) -> AsyncIterator[Any]:
    """A container on each backend (memory, SQLite, PostgreSQL) for contract tests:
    ``async with container() as r: repo = await r.get(Port)``."""
    settings = Settings(database_url=database_url, var_dir=tmp_root / "var", secret_key="test-secret-key",
                        allow_loopback_targets=True, rate_limit_backend="database", db_pool_size=TEST_POOL_SIZE,
                        **CHEAP_HASHING)
    if database_url == "memory://":  # the memory backend's data lives in its container: a fresh one per test
        built = build_container(settings)
        yield built
        await built.close()
    else:  # a database the run's tests share already: one container for it (about 15 ms of CPU saved a test)
        if database_url not in sql_containers:
            sql_containers[database_url] = build_container(settings)
        yield sql_containers[database_url]


@pytest.fixture(scope="session")
async def sql_containers() -> AsyncIterator[dict[str, AsyncContainer]]:
    """The contract tests' containers on the run's SQL databases, one each."""
    built: dict[str, AsyncContainer] = {}
    yield built
    for container in built.values():
        await container.close()


@pytest.fixture
async def concurrent_api(sql_url: str, tmp_root: Path, app_pool: AppPool) -> AsyncIterator[Api]:
    """The app on each SQL database behind httpx's ASGITransport, on a container of its own with the default
    limits: requests gathered on it interleave on the test's event loop, as on a server."""
    settings = Settings(database_url=sql_url, var_dir=tmp_root / "var", secret_key="test-secret-key",
                        allow_loopback_targets=True, db_pool_size=TEST_POOL_SIZE)
    app, release = await app_pool.lend_app(settings, http_container(settings))
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://parley.test") as client:
            api = Api(client, settings, None, ())  # type: ignore[arg-type]
            yield api
            await api.close_worker()
            await api.close_admin()
    finally:
        await release()
