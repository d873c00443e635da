"""Application tests: use cases driven through a container on the in-memory backend (no HTTP, no
database), with a manual clock. Each use case runs in its own unit of work, committed, as the HTTP
pipeline or a worker job runs it; a use case that raises is rolled back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from adapters.memory.clock import ManualClock
from adapters.memory.store import InMemoryStore
from application.accounts import CreateOrganization, CreateOrganizationCommand
from application.context import Actor
from application.ports.platform import UnitOfWork
from domain.scopes import ScopeSet
from entrypoints.ioc import build_container
from entrypoints.overrides import ClockProvider
from entrypoints.settings import Settings
from tests.support.apps import CHEAP_HASHING

NOW = datetime(2026, 3, 2, 12, tzinfo=UTC)


@dataclass
class App:
    """The use cases of one in-memory Parley, and the clock they read."""

    container: Any
    clock: ManualClock

    async def run(self, case: type, *args: Any, **kwargs: Any) -> Any:
        async with self.container() as r:
            result = await (await r.get(case)).execute(*args, **kwargs)
            await (await r.get(UnitOfWork)).commit()
        return result

    async def organization(self, *, plan: str = "enterprise", org_type: str = "standard",
                           parent_id: int | None = None, name: str = "Acme") -> int:
        org = await self.run(CreateOrganization, CreateOrganizationCommand(name, plan, org_type, parent_id))
        return int(org.id)

    async def actor(self, *, plan: str = "enterprise", org_type: str = "standard",
                    scopes: tuple[str, ...] = ("*",)) -> Actor:
        """A fresh organization and an actor acting in it with ``scopes`` (as an API key would)."""
        org = await self.organization(plan=plan, org_type=org_type)
        return Actor(org, org, None, ScopeSet.of(list(scopes)))

    async def events(self, organization_id: int) -> list[tuple[str, dict[str, Any]]]:
        """(type, data) of every event committed to the outbox for the organization, in order."""
        store = await self.container.get(InMemoryStore)
        return [(e.type, e.data) for _, e, _ in store.outbox if e.organization_id == organization_id]


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[App]:
    clock = ManualClock(NOW)
    settings = Settings(database_url="memory://", var_dir=tmp_path / "var", secret_key="test-secret-key",
                        allow_loopback_targets=False, public_base_url="https://api.example.test", **CHEAP_HASHING)
    built = build_container(settings, ClockProvider(clock))
    yield App(built, clock)
    await built.close()
