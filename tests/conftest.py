"""Shared fixtures: databases (SQLite and a private PostgreSQL database per run), the app,
and factories for organizations and keys."""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, fields, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from dishka import AsyncContainer, Provider
from litestar import Litestar
from litestar.testing import AsyncTestClient

import tests.properties  # noqa: F401  (registers the hypothesis profiles before the plugin loads one)
from adapters.memory.clock import ManualClock
from adapters.sql.schema import upgrade
from adapters.system.clock import SystemClock
from application.accounts import CreateOrganization, CreateOrganizationCommand, IssueApiKey, IssueApiKeyCommand
from application.ports.platform import UnitOfWork
from entrypoints.asgi_app import http_container
from entrypoints.http.app import create_app
from entrypoints.ioc import build_container
from entrypoints.overrides import ClockProvider
from entrypoints.settings import Settings

pytest_plugins = ("tests.support.webhooks",)  # the webhook delivery fixtures (a receiver, a harness), for every layer

DEFAULT_PG = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
IN_CI = bool(os.environ.get("CI"))


CHEAP_HASHING: dict[str, Any] = {"argon2_time_cost": 1, "argon2_memory_kib": 8 * 1024, "argon2_parallelism": 1}
"""The tests' password hashing cost: argon2id at the production cost takes about 0.2 s of CPU per hash or
check, and the dashboard's tests sign in about a hundred times a run. tests/contract/test_password_hasher.py
checks the production cost (the settings' defaults)."""


def _pg_admin_url() -> str:
    return os.environ.get("PARLEY_TEST_POSTGRES_URL", DEFAULT_PG)


async def _pg_reachable(url: str) -> str | None:
    import asyncpg

    dsn = url.replace("postgresql+asyncpg://", "postgresql://")
    try:
        conn = await asyncio.wait_for(asyncpg.connect(dsn), timeout=5)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    await conn.close()
    return None


@pytest.fixture(scope="session")
def tmp_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This run's directory (the SQLite database, var/): pytest-xdist gives each worker a base of its own."""
    return tmp_path_factory.mktemp("parley")


def pytest_configure(config: pytest.Config) -> None:
    """One id for this run, shared by the pytest-xdist workers (they inherit the controller's environment):
    it names the migrated templates the workers clone."""
    os.environ.setdefault("PARLEY_TEST_RUN", uuid.uuid4().hex[:12])


_ONE_PROCESS_MARKS = ("slow", "serial")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--http-on-sqlite-only", action="store_true",
        help="the fast loop: HTTP-level tests (an app fixture) parametrized over both SQL databases run on SQLite "
             "only (the PostgreSQL adapters keep their contract suites; tests written for PostgreSQL alone still run)")


_APP_FIXTURES = frozenset({"api", "any_api", "make_api", "concurrent_api", "api_with", "open_api", "closed_api",
                           "test_api"})
"""Fixtures that run the whole app over HTTP (the shared ones here and a few modules' own): a test using one of
them is an HTTP-level test."""
_DATABASE_PARAMETERS = ("sql_url", "database_url", "module_db", "fresh_url")
"""The parameters that choose the database of a test (the shared fixtures' and a few modules' own)."""


def _postgres_variant_of_an_http_test(item: pytest.Item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return (not _APP_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))
            and "postgres" in (params.get(name) for name in _DATABASE_PARAMETERS))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The one-process pass of ``make test`` collects only the files that spell ``pytest.mark.slow`` or
    ``pytest.mark.serial`` (the Makefile greps for them, which saves collecting the whole suite twice): a test
    that gets either mark any other way would be run by neither pass, so it is refused here. With
    ``--http-on-sqlite-only`` (``make test-fast``) the PostgreSQL variants of the HTTP tests are deselected."""
    for item in items:
        for mark in _ONE_PROCESS_MARKS:
            if item.get_closest_marker(mark) and f"mark.{mark}" not in Path(item.path).read_text(encoding="utf-8"):
                raise pytest.UsageError(f"{item.nodeid} is marked {mark} without `pytest.mark.{mark}` in its file")
    if config.getoption("--http-on-sqlite-only"):
        deselected = [item for item in items if _postgres_variant_of_an_http_test(item)]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = [item for item in items if not _postgres_variant_of_an_http_test(item)]


def _run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory every process of this run shares (the parent of the workers' own bases under xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _once(run_dir: Path, name: str, build: Callable[[], None]) -> None:
    """Run ``build`` once per run, whichever process asks first; the others wait for it (a lock file)."""
    done = run_dir / f"{name}.done"
    with open(run_dir / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            build()
            done.touch()


@pytest.fixture(scope="session")
async def sqlite_url(tmp_root: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """This run's SQLite database: migrated once per run, copied for each xdist worker."""
    run_dir = _run_dir(tmp_path_factory)
    template = run_dir / "parley-template.db"
    await asyncio.to_thread(_once, run_dir, "sqlite-template", lambda: upgrade(f"sqlite+aiosqlite:///{template}"))
    target = tmp_root / "parley.db"
    shutil.copyfile(template, target)
    return f"sqlite+aiosqlite:///{target}"


def _pg_template_name() -> str:
    return f"parley_template_{os.environ['PARLEY_TEST_RUN']}"


def _create_pg_template(dsn: str, url: str) -> None:
    """The migrated database of this run, which each worker's database copies (``CREATE DATABASE ... TEMPLATE``
    instead of running every migration per worker); the controller drops it at the end of the run."""
    import asyncpg

    async def create() -> None:
        conn = await asyncpg.connect(dsn)
        await conn.execute(f'CREATE DATABASE "{url.rsplit("/", 1)[1]}"')
        await conn.close()

    asyncio.run(create())
    upgrade(url)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") or not os.environ.get("PARLEY_TEST_RUN"):
        return
    import asyncpg

    async def drop() -> None:
        try:
            conn = await asyncio.wait_for(asyncpg.connect(_pg_admin_url().replace("postgresql+asyncpg://",
                                                                                  "postgresql://")), timeout=5)
        except Exception:
            return  # PostgreSQL was never reachable: no template either
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{_pg_template_name()}" WITH (FORCE)')
        finally:
            await conn.close()

    asyncio.run(drop())


@pytest.fixture(scope="session")
async def postgres_url(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """A database of its own for this run (for this worker under pytest-xdist), dropped at the end: a copy of
    the run's migrated template. Required when CI is set."""
    import asyncpg

    admin = _pg_admin_url()
    problem = await _pg_reachable(admin)
    if problem is not None:
        if IN_CI:
            pytest.fail(f"PostgreSQL is required in CI but unreachable at {admin}: {problem}")
        pytest.skip(f"PostgreSQL not reachable at {admin} ({problem}); set PARLEY_TEST_POSTGRES_URL")
    # one database per run and, under pytest-xdist, per worker (gw0, gw1, ...): workers never share rows
    name = f"parley_test_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}_{uuid.uuid4().hex[:12]}"
    dsn = admin.replace("postgresql+asyncpg://", "postgresql://")
    template = _pg_template_name()
    await asyncio.to_thread(_once, _run_dir(tmp_path_factory), "postgres-template",
                            lambda: _create_pg_template(dsn, admin.rsplit("/", 1)[0] + f"/{template}"))
    conn = await asyncpg.connect(dsn)
    await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    await conn.close()
    url = admin.rsplit("/", 1)[0] + f"/{name}"
    yield url
    conn = await asyncpg.connect(dsn)
    await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await conn.close()


@asynccontextmanager
async def _private_pg_database(prefix: str) -> AsyncIterator[str]:
    """A PostgreSQL database of its own, a copy of the run's migrated template, dropped afterwards."""
    import asyncpg

    admin = _pg_admin_url()
    dsn = admin.replace("postgresql+asyncpg://", "postgresql://")
    name = f"parley_{prefix}_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(dsn)
    await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{_pg_template_name()}"')
    await conn.close()
    try:
        yield admin.rsplit("/", 1)[0] + f"/{name}"
    finally:
        conn = await asyncpg.connect(dsn)
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.close()


@pytest.fixture
async def private_pg_url(postgres_url: str) -> AsyncIterator[str]:
    """A migrated PostgreSQL database of this test's own (skipped like postgres_url; required in CI)."""
    async with _private_pg_database("own") as url:
        yield url


@pytest.fixture
async def private_sql_url(sql_url: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
                          ) -> AsyncIterator[str]:
    """A migrated database of this test's own on each SQL database (a copy of the run's template), for tests
    whose work reaches every organization in the database (a period close, the outbox's backlog)."""
    if sql_url.startswith("sqlite"):
        target = tmp_path / "own.db"
        shutil.copyfile(_run_dir(tmp_path_factory) / "parley-template.db", target)
        yield f"sqlite+aiosqlite:///{target}"
        return
    async with _private_pg_database("own") as url:
        yield url


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str:
    """Every backend: the in-memory adapters, SQLite and PostgreSQL."""
    if request.param == "memory":
        return "memory://"
    return request.getfixturevalue(f"{request.param}_url")


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
    clock: ManualClock | LentClock | None
    overrides: tuple[Provider, ...]
    admin: AsyncContainer | None = None  # the operator's side (CLI use cases) on the same database
    release: Callable[[], Awaitable[None]] | None = None  # an app of the run's pool: give it back
    admin_release: Callable[[], None] | None = None  # an operator's container of the run's pool: give it back

    def _admin(self) -> AsyncContainer:
        if self.admin is None:
            self.admin = build_container(self.settings, *self.overrides)
        return self.admin

    async def tenant(self, *, plan: str = "enterprise", org_type: str = "standard", scopes: tuple[str, ...] = ("*",),
                     parent_id: int | None = None, name: str = "Acme", expires_at: Any = None) -> Tenant:
        async with self._admin()() as request:
            org = await (await request.get(CreateOrganization)).execute(
                CreateOrganizationCommand(name, plan, org_type, parent_id))
            issued = await (await request.get(IssueApiKey)).execute(
                IssueApiKeyCommand(org.id or 0, "test", scopes, expires_at))
            await (await request.get(UnitOfWork)).commit()
        return Tenant(org.id or 0, issued.secret, issued.record.id or 0)

    async def key_for(self, organization_id: int, scopes: tuple[str, ...], expires_at: Any = None) -> Tenant:
        async with self._admin()() as request:
            issued = await (await request.get(IssueApiKey)).execute(
                IssueApiKeyCommand(organization_id, "test", scopes, expires_at))
            await (await request.get(UnitOfWork)).commit()
        return Tenant(organization_id, issued.secret, issued.record.id or 0)

    async def close(self) -> None:
        if self.release is not None:
            await self.release()
        else:
            await self.client.__aexit__(None, None, None)
        if self.admin_release is not None:
            self.admin_release()
        elif self.admin is not None:
            await self.admin.close()


ApiFactory = Callable[..., Awaitable[Api]]


class _Repointable:
    """The container a pooled app resolves through: the container of the test that borrowed the app (every
    use the app makes of its container, a request's scope, the metrics' snapshot, goes through here)."""

    def __init__(self) -> None:
        self.target: AsyncContainer | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.target(*args, **kwargs)  # type: ignore[misc]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)

    async def close(self) -> None:
        """The app's shutdown: each borrower closes its own container."""


@dataclass
class _Shell:
    app: Litestar
    client: AsyncTestClient[Litestar] | None  # None: an app driven through httpx's ASGITransport
    container: _Repointable
    key: tuple[Any, ...]


def _shell_key(settings: Settings, *, client: bool) -> tuple[Any, ...]:
    """Apps are interchangeable when they were built with the same settings, the database aside (the
    container, built per borrower, holds the engine)."""
    return client, *((f.name, repr(getattr(settings, f.name))) for f in fields(settings) if f.name != "database_url")


class AppPool:
    """The run's Litestar apps: building one (route registration, handler signatures) costs about 0.2 s of
    CPU, a container 20 ms. A test that asks for an app gets its own container (its database, clock,
    overrides and settings; nothing kept in memory is shared) in an app built earlier with the same settings
    and not in use, or in a new one; an app goes back to the pool, cookies cleared, when its test ends."""

    def __init__(self) -> None:
        self.free: dict[tuple[Any, ...], list[_Shell]] = {}
        self.shells: list[_Shell] = []

    async def _borrow(self, settings: Settings, container: AsyncContainer, *, client: bool) -> _Shell:
        key = _shell_key(settings, client=client)
        free = self.free.setdefault(key, [])
        if free:
            shell = free.pop()
        else:
            target = _Repointable()
            app = create_app(target, settings)  # type: ignore[arg-type]
            shell = _Shell(app, AsyncTestClient(app) if client else None, target, key)
            if shell.client is not None:
                await shell.client.__aenter__()
            self.shells.append(shell)
        shell.container.target = container
        shell.app.state["settings"] = settings
        return shell

    def _release(self, shell: _Shell, container: AsyncContainer) -> Callable[[], Awaitable[None]]:
        async def release() -> None:
            await container.close()
            if shell.client is not None:
                shell.client.cookies.clear()
            shell.container.target = None
            self.free[shell.key].append(shell)

        return release

    async def lend(self, settings: Settings, container: AsyncContainer
                   ) -> tuple[AsyncTestClient[Litestar], Callable[[], Awaitable[None]]]:
        """A test client of an app over ``container``, and what gives both back (the container is closed)."""
        shell = await self._borrow(settings, container, client=True)
        assert shell.client is not None
        return shell.client, self._release(shell, container)

    async def lend_app(self, settings: Settings, container: AsyncContainer
                       ) -> tuple[Litestar, Callable[[], Awaitable[None]]]:
        """An app over ``container`` for httpx's ASGITransport (requests interleave on the test's event loop),
        and what gives both back (the container is closed)."""
        shell = await self._borrow(settings, container, client=False)
        return shell.app, self._release(shell, container)

    async def close(self) -> None:
        for shell in self.shells:
            if shell.client is not None:
                await shell.client.__aexit__(None, None, None)


class AdminPool:
    """The operator's containers (``build_container``) of the apps tests build for themselves: a container costs
    about 15 ms of CPU, and nearly every test makes its tenants through one. A test borrows one built earlier on
    the same database with the same settings and not in use, whose clock reads the test's (the system clock
    when it has none), and gives it back when its app closes."""

    def __init__(self) -> None:
        self.free: dict[tuple[Any, ...], list[tuple[AsyncContainer, LentClock]]] = {}
        self.built: list[AsyncContainer] = []

    def borrow(self, settings: Settings, clock: Any) -> tuple[AsyncContainer, Callable[[], None]]:
        key = (settings.database_url, *_shell_key(settings, client=False))
        free = self.free.setdefault(key, [])
        if free:
            container, lender = free.pop()
        else:
            lender = LentClock()
            container = build_container(settings, ClockProvider(lender))
            self.built.append(container)
        lender.target = clock

        def give_back() -> None:
            lender.target = None
            free.append((container, lender))

        return container, give_back

    async def close(self) -> None:
        for container in self.built:
            await container.close()


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


async def _start_api(pool: AppPool, tmp_root: Path, database_url: str, *,
                     clock: ManualClock | LentClock | None = None, overrides: tuple[Provider, ...] = (),
                     admins: AdminPool | None = None, **settings: Any) -> Api:
    # the test client always calls from one address: the failed-authentication budget is set per test
    # likewise its budget of failed sign-ins (tests/http/test_sessions_http.py sets its own)
    settings = {"auth_failures_per_minute": 1_000_000, "secret_key": "test-secret-key",
                "environ": {"PARLEY_SESSION_LOGIN_FAILURES_PER_ADDRESS": "1000000"}, **CHEAP_HASHING, **settings}
    base = Settings(database_url=database_url, var_dir=tmp_root / "var", allow_loopback_targets=True, **settings)
    clock_overrides: tuple[Provider, ...] = (ClockProvider(clock),) if clock else ()
    if database_url == "memory://":
        raise ValueError("HTTP tests use SQLite or PostgreSQL (the CLI and the app must share the data)")
    client, release = await pool.lend(base, http_container(base, *clock_overrides, *overrides))
    if admins is None:
        return Api(client, base, clock, clock_overrides, build_container(base, *clock_overrides), release)
    admin, give_back = admins.borrow(base, clock)
    return Api(client, base, clock, clock_overrides, admin, release, give_back)


class LentClock:
    """The clock of a run's clocked apps: it reads the manual clock of the test that borrowed the app, and the
    system clock between tests."""

    def __init__(self) -> None:
        self.target: ManualClock | None = None

    def now(self) -> datetime:
        return self.target.now() if self.target is not None else SystemClock().now()


_POOLABLE_SETTINGS = frozenset({"rate_limit_per_minute", "rate_limit_per_hour", "public_base_url"})
"""Settings whose apps a run may share between tests: they only set limits or addresses, and what the app keeps
in memory under them (rate-limit counters) belongs to a key, which each test makes for itself. Settings that key
memory by something tests share (the failed-authentication budget is per client address) are not here."""


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
    no providers and only poolable settings, one of the run's clocked apps is lent to the test (its clock reads
    the test's); a second such app in the same test is built afresh, so tests of several processes get several."""
    started: list[Api] = []
    lent: list[LentClock] = []

    async def factory(database_url: str, *, clock: ManualClock | None = None,
                      overrides: tuple[Provider, ...] = (), **settings: Any) -> Api:
        if clock is not None and not overrides and set(settings) <= _POOLABLE_SETTINGS:
            key = (database_url, *sorted(settings.items()))
            if key not in clocked_apps:
                lender = LentClock()
                clocked_apps[key] = (await _start_api(app_pool, tmp_root, database_url, clock=lender, **settings),
                                     lender)
            shared, lender = clocked_apps[key]
            if lender.target is None:
                lender.target = clock
                lent.append(lender)
                return replace(shared, clock=clock)
        api = await _start_api(app_pool, tmp_root, database_url, clock=clock, overrides=overrides,
                               admins=admin_pool, **settings)
        started.append(api)
        return api

    yield factory
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


async def _shared(apps: dict[str, Api], pool: AppPool, tmp_root: Path, url: str) -> Api:
    if url not in apps:
        apps[url] = await _start_api(pool, tmp_root, url)
    return apps[url]


@pytest.fixture
async def api(shared_apps: dict[str, Api], app_pool: AppPool, tmp_root: Path, sqlite_url: str) -> Api:
    """The app on SQLite with the real clock (shared by the tests of a run)."""
    return await _shared(shared_apps, app_pool, tmp_root, sqlite_url)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sql_url(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
async def any_api(shared_apps: dict[str, Api], app_pool: AppPool, tmp_root: Path, sql_url: str) -> Api:
    """The app on each SQL database (shared by the tests of a run)."""
    return await _shared(shared_apps, app_pool, tmp_root, sql_url)


@pytest.fixture
async def container(database_url: str, tmp_root: Path, sql_containers: dict[str, AsyncContainer]
                    ) -> AsyncIterator[Any]:
    """A container on each backend (memory, SQLite, PostgreSQL) for contract tests:
    ``async with container() as r: repo = await r.get(Port)``."""
    settings = Settings(database_url=database_url, var_dir=tmp_root / "var", secret_key="test-secret-key",
                        allow_loopback_targets=True, rate_limit_backend="database", **CHEAP_HASHING)
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


async def new_organization(container: Any, *, plan: str = "enterprise", org_type: str = "standard") -> int:
    async with container() as request:
        org = await (await request.get(CreateOrganization)).execute(CreateOrganizationCommand("Org", plan, org_type))
        await (await request.get(UnitOfWork)).commit()
    return org.id or 0


@pytest.fixture
async def concurrent_api(sql_url: str, tmp_root: Path, app_pool: AppPool) -> AsyncIterator[Api]:
    """The app on each SQL database behind httpx's ASGITransport: requests gathered on it really
    interleave on the test's event loop (Litestar's test client runs them one after another)."""
    settings = Settings(database_url=sql_url, var_dir=tmp_root / "var", secret_key="test-secret-key",
                        allow_loopback_targets=True)
    app, release = await app_pool.lend_app(settings, http_container(settings))
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://parley.test") as client:
            api = Api(client, settings, None, ())  # type: ignore[arg-type]
            yield api
            if api.admin is not None:
                await api.admin.close()
    finally:
        await release()
