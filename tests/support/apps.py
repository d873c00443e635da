"""The apps the HTTP tests run, and what makes them cheap to start.

Building a Litestar app costs about 0.2 s of CPU and a container about 15 ms, more than most tests: a run keeps
its apps in pools and lends them. ``AppPool`` lends a test an app built earlier with the same metrics token (the
test's own container, database, clock and overrides are plugged into it); ``AdminPool`` lends the operator's
containers (``Api.tenant`` makes organizations and keys through them, as the CLI would); ``LentClock`` is the
clock of a pooled app, reading the manual clock of the test that borrowed it. ``Api`` is what a test gets: a
client, the app's settings and clock, and factories for tenants; ``start_api`` builds one. The fixtures that
hand these to tests (``api``, ``any_api``, ``make_api``, ``concurrent_api``) are in fixtures.py."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, fields, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from dishka import AsyncContainer, Provider
from litestar import Litestar

from adapters.memory.clock import ManualClock
from adapters.system.clock import SystemClock
from application.accounts import CreateOrganization, CreateOrganizationCommand, IssueApiKey, IssueApiKeyCommand
from application.ports.platform import UnitOfWork
from entrypoints.asgi_app import http_container
from entrypoints.http.app import create_app
from entrypoints.ioc import build_container
from entrypoints.overrides import ClockProvider
from entrypoints.settings import Settings

CHEAP_HASHING: dict[str, Any] = {"argon2_time_cost": 1, "argon2_memory_kib": 8 * 1024, "argon2_parallelism": 1}
"""The tests' password hashing cost: argon2id at the production cost takes about 0.2 s of CPU per hash or
check, and the dashboard's tests sign in about a hundred times a run. tests/contract/test_password_hasher.py
checks the production cost (the settings' defaults)."""


TEST_POOL_SIZE = 8
"""The most database connections a test's app (its container, its operator's, its worker's) keeps: a pool keeps
what a burst opened, a worker of the run holds several apps to its end (the shared and clocked ones, the operator's
containers), the workers share PostgreSQL's 100 connections (three peak at about 52), and at the default of 20 two
workers came within 13 of them. A burst of concurrent requests larger than this waits for a connection, as it
would on a server."""


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

    client: AppClient
    settings: Settings
    clock: ManualClock | LentClock | None
    overrides: tuple[Provider, ...]
    admin: AsyncContainer | None = None  # the operator's side (CLI use cases) on the same database
    release: Callable[[], Awaitable[None]] | None = None  # an app of the run's pool: give it back
    admin_release: Callable[[], Awaitable[None]] | None = None  # the run's pool's operator's container: give it back
    worker_container: AsyncContainer | None = None  # this test's worker (``worker``), closed when the test ends
    container: AsyncContainer | None = None
    """The app's container when the run keeps it across tests (the shared and the clocked apps): such an ``Api``
    has no client of its own; each test gets one from ``AppPool.lent_over``."""

    def worker(self) -> AsyncContainer:
        """The container the worker's passes run in (``parley worker`` builds the same) on the app's database and
        clock: built on the test's first pass and kept for the test's next ones, as the worker keeps its
        container; the fixture that lent the app closes it when the test ends (``close_worker``)."""
        if self.worker_container is None:
            self.worker_container = build_container(self.settings, *self.overrides)
        return self.worker_container

    async def close_worker(self) -> None:
        container, self.worker_container = self.worker_container, None
        if container is not None:
            await container.close()

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
        await self.close_worker()
        if self.release is not None:
            await self.release()
        elif self.container is not None:
            await self.container.close()
        else:
            await self.client.__aexit__(None, None, None)
        await self.close_admin()

    async def close_admin(self) -> None:
        """Give the operator's container back to the run's pool, or close it when it was built for this app (its
        engine's connections with it: left to the garbage collector, they stay open until it runs)."""
        admin, self.admin = self.admin, None
        if self.admin_release is not None:
            release, self.admin_release = self.admin_release, None
            await release()
        elif admin is not None:
            await admin.close()


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


class AppClient(httpx.AsyncClient):
    """A test's client of its app: httpx over ASGITransport, so each request runs the app on the test's own event
    loop (Litestar's AsyncTestClient hands every request to a thread of its own and blocks the test's loop until
    it is answered: 0.7 ms of CPU a request more, and requests gathered on it never overlap). As that client does,
    it calls from ``testclient`` to ``http://testserver.local``, follows redirects and raises what the app raises;
    ``app`` is the app it drives. An answer is read whole before it is returned (a test reads a stream through the
    app itself)."""

    def __init__(self, app: Litestar) -> None:
        super().__init__(transport=httpx.ASGITransport(app=app, client=("testclient", 50000)),
                         base_url="http://testserver.local", headers={"user-agent": "testclient"},
                         follow_redirects=True, timeout=None)
        self.app = app


@dataclass
class _Shell:
    app: Litestar
    client: AppClient | None  # None: an app driven through httpx's ASGITransport by the test itself
    container: _Repointable
    key: tuple[Any, ...]


def _shell_key(settings: Settings, *, client: bool, handlers: tuple[Any, ...] | None) -> tuple[Any, ...]:
    """Apps are interchangeable when they were built with the same metrics token and routes: ``create_app`` reads
    no other setting (the metrics' middleware keeps that one); everything else a request reads, the database,
    limits, clock and features, comes from the borrower's container."""
    return client, settings.metrics_token, handlers


def _settings_key(settings: Settings) -> tuple[Any, ...]:
    """Containers are interchangeable when they were built with the same settings."""
    return tuple((f.name, repr(getattr(settings, f.name))) for f in fields(settings))


class AppPool:
    """The run's Litestar apps: building one (route registration, handler signatures) costs about 0.2 s of
    CPU, a container 20 ms. A test that asks for an app gets its own container (its database, clock,
    overrides and settings; nothing kept in memory is shared) in an app built earlier with the same metrics
    token and not in use, or in a new one; an app goes back to the pool, cookies cleared, when its test ends."""

    def __init__(self) -> None:
        self.free: dict[tuple[Any, ...], list[_Shell]] = {}
        self.shells: list[_Shell] = []

    async def _borrow(self, settings: Settings, container: AsyncContainer, *, client: bool,
                      handlers: tuple[Any, ...] | None = None) -> _Shell:
        key = _shell_key(settings, client=client, handlers=handlers)
        free = self.free.setdefault(key, [])
        if free:
            shell = free.pop()
        else:
            target = _Repointable()
            app = create_app(target, settings, None if handlers is None else list(handlers))  # type: ignore[arg-type]
            shell = _Shell(app, AppClient(app) if client else None, target, key)
            if shell.client is not None:
                await shell.client.__aenter__()
            self.shells.append(shell)
        shell.container.target = container
        shell.app.state["settings"] = settings
        return shell

    def _release(self, shell: _Shell, container: AsyncContainer | None) -> Callable[[], Awaitable[None]]:
        async def release() -> None:
            if container is not None:
                await container.close()
            if shell.client is not None:
                shell.client.cookies.clear()
            shell.container.target = None
            self.free[shell.key].append(shell)

        return release

    async def lend(self, settings: Settings, container: AsyncContainer, *, handlers: tuple[Any, ...] | None = None
                   ) -> tuple[AppClient, Callable[[], Awaitable[None]]]:
        """A test client of an app over ``container``, and what gives both back (the container is closed).
        ``handlers``: the app's routes, when not the API's (``create_app``'s default)."""
        shell = await self._borrow(settings, container, client=True, handlers=handlers)
        assert shell.client is not None
        return shell.client, self._release(shell, container)

    @contextlib.asynccontextmanager
    async def lent_over(self, kept: Api) -> AsyncIterator[Api]:
        """A test's copy of an app the run keeps (``Api.container``): a client of a pooled app over its container.
        Afterwards the test's worker is closed and the app given back; the container is kept. A kept app holding
        an app of its own for the whole run would make the run build one (about 0.4 s of CPU) for each of the
        run's shared and clocked apps."""
        assert kept.container is not None
        shell = await self._borrow(kept.settings, kept.container, client=True)
        assert shell.client is not None
        lent = replace(kept, client=shell.client)
        try:
            yield lent
        finally:
            await lent.close_worker()
            await self._release(shell, None)()

    @contextlib.asynccontextmanager
    async def serving(self, settings: Settings, container: AsyncContainer, *,
                      handlers: tuple[Any, ...] | None = None) -> AsyncIterator[Api]:
        """An app over ``container`` (and ``handlers``, see ``lend``) for a block: afterwards its worker, its
        container and its operator's container are closed and the app given back."""
        client, release = await self.lend(settings, container, handlers=handlers)
        api = Api(client, settings, None, (), release=release)
        try:
            yield api
        finally:
            await api.close()

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
    when it has none), and gives it back when its app closes. At most ``KEPT`` wait to be borrowed again, the most
    recently given back: each holds the database connections it opened, and kept for every database and settings
    a run used they held most of a process's idle PostgreSQL connections (the HTTP tests in one process: 74 of
    the 83 at the peak; 10 of 19 with eight kept)."""

    KEPT = 8

    def __init__(self) -> None:
        self.free: list[tuple[tuple[Any, ...], AsyncContainer, LentClock]] = []  # oldest first

    def borrow(self, settings: Settings, clock: Any) -> tuple[AsyncContainer, Callable[[], Awaitable[None]]]:
        key = _settings_key(settings)
        found = next((i for i in reversed(range(len(self.free))) if self.free[i][0] == key), None)  # newest first
        if found is not None:
            _, container, lender = self.free.pop(found)
        else:
            lender = LentClock()
            container = build_container(settings, ClockProvider(lender))
        lender.target = clock

        async def give_back() -> None:
            lender.target = None
            self.free.append((key, container, lender))
            if len(self.free) > self.KEPT:
                await self.free.pop(0)[1].close()

        return container, give_back

    async def close(self) -> None:
        """The containers still waiting to be borrowed (by the run's end every lent one has been given back; one
        given back beyond ``KEPT`` was closed then)."""
        free, self.free = self.free, []
        for _, container, _ in free:
            await container.close()


async def start_api(pool: AppPool, tmp_root: Path, database_url: str, *,
                     clock: ManualClock | LentClock | None = None, overrides: tuple[Provider, ...] = (),
                     admins: AdminPool | None = None, keep: bool = False, **settings: Any) -> Api:
    """An app on ``database_url``: lent from ``pool`` with its own container, or with ``keep`` a container the run
    keeps across tests and no app (``AppPool.lent_over`` lends one per test)."""
    # the test client always calls from one address: the failed-authentication budget is set per test
    # likewise its budget of failed sign-ins (tests/http/test_sessions_http.py sets its own); an app keeps at most
    # TEST_POOL_SIZE connections
    settings = {"auth_failures_per_minute": 1_000_000, "secret_key": "test-secret-key", "db_pool_size": TEST_POOL_SIZE,
                "environ": {"PARLEY_SESSION_LOGIN_FAILURES_PER_ADDRESS": "1000000"}, **CHEAP_HASHING, **settings}
    base = Settings(database_url=database_url, var_dir=tmp_root / "var", **{"allow_loopback_targets": True, **settings})
    clock_overrides: tuple[Provider, ...] = (ClockProvider(clock),) if clock else ()
    if database_url == "memory://":
        raise ValueError("HTTP tests use SQLite or PostgreSQL (the CLI and the app must share the data)")
    if keep:
        return Api(None, base, clock, clock_overrides, build_container(base, *clock_overrides),  # type: ignore[arg-type]
                   container=http_container(base, *clock_overrides, *overrides))
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


POOLABLE_SETTINGS = frozenset({"rate_limit_per_minute", "rate_limit_per_hour", "org_rate_limit_per_minute",
                               "org_rate_limit_per_hour", "public_base_url"})
"""Settings whose apps a run may share between tests: they only set limits or addresses, and what the app keeps
in memory under them (rate-limit counters) belongs to a key, which each test makes for itself. Settings that key
memory by something tests share (the failed-authentication budget is per client address) are not here."""


async def shared_app(apps: dict[str, Api], pool: AppPool, tmp_root: Path, url: str) -> Api:
    """The run's kept app on ``url`` (its container), made on first use; a test borrows a copy
    (``AppPool.lent_over``)."""
    if url not in apps:
        apps[url] = await start_api(pool, tmp_root, url, keep=True)
    return apps[url]


async def new_organization(container: Any, *, plan: str = "enterprise", org_type: str = "standard") -> int:
    async with container() as request:
        org = await (await request.get(CreateOrganization)).execute(CreateOrganizationCommand("Org", plan, org_type))
        await (await request.get(UnitOfWork)).commit()
    return org.id or 0
