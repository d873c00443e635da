"""The call use cases and the worker pass behave the same on memory, SQLite and PostgreSQL; two workers
racing on one database never exceed the concurrency limit nor emit an event twice."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from adapters.memory.clock import ManualClock
from adapters.memory.store import InMemoryStore
from adapters.sql.tables import outbox_events
from adapters.sql.uow import SqlUnitOfWork
from application.accounts import CreateOrganization, CreateOrganizationCommand
from application.agents import PublishAgent, PublishAgentCommand
from application.call_progress import RunCallProgressCommand
from application.calls import CancelCall, CancelCallCommand, GetCall, GetCallCommand, PlaceCall, PlaceCallCommand
from application.context import Actor
from application.ports.agents import AgentRepository
from application.ports.platform import UnitOfWork
from domain.agents import Agent
from entrypoints.features.calls import progress
from entrypoints.ioc import build_container
from entrypoints.overrides import ClockProvider
from entrypoints.settings import Settings

START = datetime(2026, 3, 2, 9, tzinfo=UTC)


def _container(database_url: str, tmp_root: Path, clock: ManualClock) -> Any:
    settings = Settings(database_url=database_url, var_dir=tmp_root / "var", secret_key="test-secret-key")
    return build_container(settings, ClockProvider(clock))


async def _setup(container: Any, plan: str = "enterprise") -> tuple[int, int]:
    async with container() as r:
        org = await (await r.get(CreateOrganization)).execute(CreateOrganizationCommand("Flow", plan))
        agent = await (await r.get(AgentRepository)).add(Agent(
            None, org.id or 0, "Desk", prompt="Call {{contact_name}}.", transfer_phone="+14155550199",
            created_at=START, updated_at=START))
        # calls run a published version: publishing makes the agent active with version 1
        await (await r.get(PublishAgent)).execute(PublishAgentCommand(Actor.system(org.id or 0), agent.id or 0))
        await (await r.get(UnitOfWork)).commit()
    return org.id or 0, agent.id or 0


async def _place(container: Any, org: int, agent: int, number: str, clock: ManualClock) -> str:
    async with container() as r:
        call = await (await r.get(PlaceCall)).execute(PlaceCallCommand(Actor.system(org), str(agent), number, "Ada"))
        await (await r.get(UnitOfWork)).commit()
    clock.advance(seconds=0.001)
    return call.id


async def _get(container: Any, org: int, call_id: str) -> Any:
    async with container() as r:
        return await (await r.get(GetCall)).execute(GetCallCommand(Actor.system(org), call_id))


async def _events(container: Any, org: int) -> list[tuple[str, str]]:
    async with container() as r:
        uow = await r.get(UnitOfWork)
        if isinstance(uow, SqlUnitOfWork):
            rows = await (await uow.connection()).execute(
                sa.select(outbox_events.c.type, outbox_events.c.data).where(outbox_events.c.organization_id == org)
                .order_by(outbox_events.c.id))
            return [(row.type, row.data["id"]) for row in rows if row.type.startswith("call.")]
        store = await r.get(InMemoryStore)
        return [(e.type, e.data["id"]) for _, e, _ in store.outbox if e.organization_id == org
                and e.type.startswith("call.")]


async def test_calls_flow_on_every_backend(database_url: str, tmp_root: Path) -> None:
    clock = ManualClock(START)
    container = _container(database_url, tmp_root, clock)
    try:
        org, agent = await _setup(container, plan="starter")
        ids = {n: await _place(container, org, agent, n, clock)
               for n in ("+1555010000", "+1555010001", "+1555010005", "+1555010000")}
        cancelled = await _place(container, org, agent, "+14155550100", clock)
        async with container() as r:
            await (await r.get(CancelCall)).execute(CancelCallCommand(Actor.system(org), cancelled))
            await (await r.get(UnitOfWork)).commit()
        report = await progress(container).execute(RunCallProgressCommand(org))
        assert report.dialled == 2  # the starter plan's two lines
        for _ in range(8):
            clock.advance(seconds=30)
            await progress(container).execute(RunCallProgressCommand(org))
        statuses = {n: (await _get(container, org, i)).status for n, i in ids.items()}
        assert statuses == {"+1555010000": "completed", "+1555010001": "busy", "+1555010005": "transferred"}
        events = await _events(container, org)
        assert Counter(kind for kind, _ in events)["call.ended"] == 5
        assert [k for k, i in events if i == cancelled] == ["call.ended"]
        first = await _get(container, org, ids["+1555010001"])
        assert first.call_log_id is not None and first.duration_seconds == 0 and first.end_reason == "busy"
    finally:
        await container.close()


async def test_racing_workers_respect_the_line_limit_and_emit_once(sql_url: str, tmp_root: Path) -> None:
    clock = ManualClock(START)
    containers = [_container(sql_url, tmp_root, clock) for _ in range(2)]
    try:
        org, agent = await _setup(containers[0], plan="starter")
        ids = [await _place(containers[0], org, agent, "+1555010000", clock) for _ in range(6)]
        peak = 0
        for _ in range(12):
            await asyncio.gather(*(progress(c).execute(RunCallProgressCommand(org)) for c in containers))
            active = [(await _get(containers[0], org, i)).status for i in ids]
            peak = max(peak, sum(s in ("ringing", "in_progress") for s in active))
            clock.advance(seconds=1)
        assert peak <= 2
        assert [(await _get(containers[0], org, i)).status for i in ids] == ["completed"] * 6
        events = Counter(await _events(containers[0], org))
        for call_id in ids:
            for kind in ("call.started", "call.answered", "call.ended", "call.completed"):
                assert events[(kind, call_id)] == 1, (kind, call_id)
        # the sweeper never finds a finished call
        clock.advance(hours=30)
        assert (await progress(containers[1]).execute(RunCallProgressCommand(org))).swept == 0
        assert Counter(await _events(containers[0], org)) == events
    finally:
        for container in containers:
            await container.close()
