"""Webhook delivery fixtures: a private database per test, a real loopback receiver, the app on a
manual clock, and a worker container driven one pass at a time."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from dishka import AsyncContainer, Provider

from adapters.memory.clock import ManualClock
from application import webhook_delivery
from application.ports.platform import UnitOfWork
from application.webhook_delivery import DELIVER, DISPATCH_KIND, DeliverDue, DeliverDueCommand, DeliveryPolicy
from application.webhooks import SendDelivery, WebhookPolicy
from domain.events import event
from entrypoints.features.webhooks import WebhookSettings
from entrypoints.ioc import build_container
from entrypoints.overrides import Pinned
from entrypoints.settings import Settings
from entrypoints.units import ScopedUnits
from entrypoints.worker import JobSelection, run_jobs
from tests.support.apps import Api, ApiFactory, Tenant
from tests.support.databases import asyncpg_dsn, named, pg_template_name, run_dir
from tests.support.receiver import Receiver

TEST_WORKER = "test-worker"


async def _deliver_due(container: AsyncContainer, policy: DeliveryPolicy | None) -> DeliverDue:
    return DeliverDue(ScopedUnits(container), await container.get(SendDelivery), policy or DeliveryPolicy())


async def drain(container: AsyncContainer, policy: DeliveryPolicy | None = None) -> int:
    """Dispatch and deliver until nothing is due now, one batch at a time; how many deliveries were handled."""
    deliver = await _deliver_due(container, policy)
    return await webhook_delivery.drain(ScopedUnits(container), deliver, TEST_WORKER)


async def deliver_once(container: AsyncContainer, policy: DeliveryPolicy | None = None) -> int:
    """One batch of the deliveries due now; how many were handled."""
    return await (await _deliver_due(container, policy)).execute(DeliverDueCommand(TEST_WORKER))


async def webhook_work(container: AsyncContainer, settings: Settings, stop: asyncio.Event, **policy: Any) -> None:
    """The webhook work alone (the dispatcher job and the delivery pump), as ``parley worker --jobs
    webhooks.dispatch,webhooks.deliver`` runs it, until ``stop``; ``policy``: PARLEY_WEBHOOK_* values."""
    section = replace(settings.section(WebhookSettings), **policy)
    given = tuple(s for s in settings.sections if type(s) is not WebhookSettings)
    await run_jobs(container, replace(settings, sections=(*given, section)), stop,
                   JobSelection(only=frozenset({DISPATCH_KIND, DELIVER})))


@pytest.fixture(scope="session")
def webhook_template_db(sqlite_url: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's migrated SQLite template (made once per run by ``sqlite_url``)."""
    return run_dir(tmp_path_factory) / "parley-template.db"


@pytest.fixture
def fresh_sqlite_url(webhook_template_db: Path, tmp_path: Path) -> str:
    """A migrated SQLite database of this test's own (a copy of a migrated template)."""
    target = tmp_path / "webhooks.db"
    shutil.copyfile(webhook_template_db, target)
    return f"sqlite+aiosqlite:///{target}"


async def create_private_pg(admin: str) -> str:
    """A migrated PostgreSQL database of its own: a copy of the run's template (``postgres_url`` makes it)."""
    import asyncpg

    name = f"parley_wh_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(asyncpg_dsn(admin))
    await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template_name()}"')
    await conn.close()
    return named(admin, name)


async def drop_private_pg(url: str) -> None:
    import asyncpg

    base, name = url.rsplit("/", 1)
    conn = await asyncpg.connect(asyncpg_dsn(base) + "/postgres")
    await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await conn.close()


@pytest.fixture
async def fresh_pg_url(postgres_url: str) -> AsyncIterator[str]:
    """A migrated PostgreSQL database of this test's own (skipped like postgres_url)."""
    url = await create_private_pg(postgres_url)
    yield url
    await drop_private_pg(url)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = await Receiver().start()
    yield r
    await r.close()


@dataclass
class Harness:
    api: Api
    clock: ManualClock
    jobs: AsyncContainer
    receiver: Receiver

    @property
    def client(self) -> Any:
        return self.api.client

    async def subscribe(self, tenant: Tenant, events: Sequence[str], path: str = "/hook", **extra: Any) -> dict:
        r = await self.client.post("/v2/webhooks", json={"url": self.receiver.url(path), "events": list(events),
                                                         **extra}, headers=tenant.headers)
        assert r.status_code == 201, r.text
        return r.json()["data"]  # type: ignore[no-any-return]

    async def emit(self, organization_id: int, type: str, data: dict[str, Any] | None = None) -> None:
        """What another feature's use case does: record the event; the commit writes it."""
        async with self.jobs() as request:
            uow = await request.get(UnitOfWork)
            uow.record(event(organization_id, type, data or {}))
            await uow.commit()

    async def drain(self, policy: DeliveryPolicy | None = None) -> int:
        return await drain(self.jobs, policy)

    async def logs(self, tenant: Tenant, hook_id: int, query: str = "") -> list[dict]:
        r = await self.client.get(f"/v2/webhooks/{hook_id}/logs?limit=100{query}", headers=tenant.headers)
        assert r.status_code == 200, r.text
        return r.json()["data"]  # type: ignore[no-any-return]

    async def hook(self, tenant: Tenant, hook_id: int) -> dict:
        return (await self.client.get(f"/v2/webhooks/{hook_id}", headers=tenant.headers)).json()["data"]  # type: ignore[no-any-return]


async def make_harness(make_api: ApiFactory, url: str, receiver: Receiver,
                       policy: WebhookPolicy | None = None, *extra: Provider) -> tuple[Harness, AsyncContainer]:
    clock = ManualClock()
    api = await make_api(url, clock=clock)
    overrides: list[Provider] = [*api.overrides, *extra]
    if policy is not None:
        overrides.append(Pinned(WebhookPolicy, policy))
    jobs = build_container(api.settings, *overrides)
    return Harness(api, clock, jobs, receiver), jobs


@pytest.fixture
async def harness(make_api: ApiFactory, fresh_sqlite_url: str, receiver: Receiver) -> AsyncIterator[Harness]:
    built, jobs = await make_harness(make_api, fresh_sqlite_url, receiver,
                                     WebhookPolicy(allow_loopback=True, timeout_seconds=2.0))
    yield built
    await jobs.close()
