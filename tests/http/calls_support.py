"""Helpers for the calls tests: an app with extra provider overrides, the worker pass, the outbox."""

from __future__ import annotations

import itertools
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from dishka import AsyncContainer, Provider

from adapters.memory.clock import ManualClock
from adapters.sql.tables import outbox_events
from adapters.sql.uow import SqlUnitOfWork
from application.call_progress import PassReport, RunCallProgressCommand
from entrypoints.asgi_app import http_container
from entrypoints.features.calls import progress
from entrypoints.ioc import build_container
from entrypoints.overrides import ClockProvider
from entrypoints.settings import Settings
from tests.support.apps import Api, AppPool, Tenant

CALL_EVENTS = ("call.started", "call.answered", "call.ended", "call.completed", "call.failed", "call.transferred")
ApiWith = Callable[..., Awaitable[Api]]


async def apps_with_providers(tmp_root: Path, pool: AppPool) -> AsyncIterator[ApiWith]:
    """Like make_api, with extra dishka providers (the last one wins) for the app, the CLI and the worker."""
    started: list[Api] = []

    async def factory(database_url: str, *providers: Provider, clock: ManualClock | None = None,
                      **settings: Any) -> Api:
        base = Settings(database_url=database_url, var_dir=tmp_root / "var", secret_key="test-secret-key",
                        allow_loopback_targets=True, **settings)
        overrides: tuple[Provider, ...] = ((ClockProvider(clock),) if clock else ()) + providers
        client, release = await pool.lend(base, http_container(base, *overrides))
        started.append(api := Api(client, base, clock, overrides, release=release))
        return api

    yield factory
    for api in started:
        await api.close()


_WORKERS: dict[int, tuple[Api, AsyncContainer]] = {}


async def close_workers() -> None:
    """Close the worker containers ``drive`` keeps per app (after each test)."""
    while _WORKERS:
        _, (_, container) = _WORKERS.popitem()
        await container.close()


async def drive(api: Api, organization_id: int | None = None) -> PassReport:
    """One pass of the telephony worker on the app's database (and clock), as `parley worker` runs it."""
    entry = _WORKERS.get(id(api))
    if entry is None:
        entry = _WORKERS[id(api)] = (api, build_container(api.settings, *api.overrides))
    return await progress(entry[1]).execute(RunCallProgressCommand(organization_id))


async def finish_calls(api: Api, organization_id: int, *, rounds: int = 6, step_seconds: float = 60) -> None:
    """Move the manual clock and run the worker until nothing moves any more."""
    assert api.clock is not None
    for _ in range(rounds):
        await drive(api, organization_id)
        api.clock.advance(seconds=step_seconds)
    await drive(api, organization_id)


async def outbox(api: Api, organization_id: int, prefix: str = "call.") -> list[tuple[str, dict[str, Any]]]:
    container = api.worker()
    async with container() as r:
        conn = await (await r.get(SqlUnitOfWork)).connection()
        rows = await conn.execute(sa.select(outbox_events.c.type, outbox_events.c.data).where(
            outbox_events.c.organization_id == organization_id, outbox_events.c.type.like(f"{prefix}%"),
        ).order_by(outbox_events.c.id))
        return [(row.type, dict(row.data)) for row in rows]


def events_of(events: list[tuple[str, dict[str, Any]]], call_id: str) -> list[str]:
    return [kind for kind, data in events if data.get("id") == call_id]


async def active_agent(api: Api, tenant: Tenant, **fields: Any) -> dict[str, Any]:
    body = {"name": "Front desk", "prompt": "You are calling {{contact_name}} about their enquiry. Be brief.",
            "first_message": "Hello {{contact_name}}, this is Parley.", **fields}
    created = await api.client.post("/v2/agents", json=body, headers=tenant.headers)
    assert created.status_code == 201, created.text
    agent = created.json()["data"]
    published = await api.client.post(f"/v2/agents/{agent['id']}/publish", headers=tenant.headers)
    assert published.status_code == 200
    return agent


async def place(api: Api, tenant: Tenant, agent: dict[str, Any], number: str, **extra: Any) -> Any:
    body = {"bot_id": str(agent["id"]), "destination_phone": number, "contact_name": "Ada", **extra}
    response = await api.client.post("/v2/calls", json=body, headers=tenant.headers)
    if api.clock is not None:
        api.clock.advance(seconds=0.001)  # calls placed one after the other are queued in that order
    return response


_PHONES = itertools.count(random.SystemRandom().randrange(2_000_000, 9_000_000))


def unique_phone() -> str:
    """A valid E.164 number no other test of the run claims: a number belongs to one organization in the
    whole database, and the tests of a run share their databases."""
    return f"+1415{next(_PHONES)}"
