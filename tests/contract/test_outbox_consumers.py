"""The outbox as a platform service, on memory, SQLite and PostgreSQL (a private database each):
only catalogue events get in, each consumer reads behind its own cursor, housekeeping purges what
every consumer has processed once the retention window has passed, and on PostgreSQL a consumer
never skips an event whose transaction committed after a later id's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import sqlalchemy as sa
from dishka import AsyncContainer

from adapters.memory.clock import ManualClock
from adapters.sql.engine import create_engine
from adapters.sql.uow import SqlUnitOfWork
from application.housekeeping import purge_once
from application.outbox import CONSUMERS, WEBHOOKS
from application.ports.events import OutboxReader
from application.ports.jobs import JobQueue, NewJob
from application.ports.platform import UnitOfWork
from domain.events import DomainEvent, EventType, event
from entrypoints.features import OutboxConsumerJobs
from entrypoints.features.housekeeping import recheck_once
from entrypoints.ioc import build_container
from entrypoints.overrides import ClockProvider
from entrypoints.settings import Settings
from entrypoints.units import ScopedUnits
from tests.support.apps import new_organization

T0 = datetime(2026, 2, 1, 9, tzinfo=UTC)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fresh_url(request: pytest.FixtureRequest) -> str:
    if request.param == "memory":
        return "memory://"
    return str(request.getfixturevalue(f"fresh_{'sqlite' if request.param == 'sqlite' else 'pg'}_url"))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


async def _container(url: str, tmp_path: Path, clock: ManualClock) -> AsyncContainer:
    settings = Settings(database_url=url, var_dir=tmp_path / "var", secret_key="test-secret-key")
    return build_container(settings, ClockProvider(clock))


@pytest.fixture
async def outbox(fresh_url: str, tmp_path: Path, clock: ManualClock) -> AsyncIterator[AsyncContainer]:
    built = await _container(fresh_url, tmp_path, clock)
    yield built
    await built.close()


async def _record(container: AsyncContainer, *events: DomainEvent) -> None:
    async with container() as r:
        uow = await r.get(UnitOfWork)
        for e in events:
            uow.record(e)
        await uow.commit()


async def _read(container: AsyncContainer, consumer: str, limit: int = 100, *, advance: bool = True) -> list[int]:
    """One pass of ``consumer``: the ids it gets, its cursor moved past them (and committed)."""
    async with container() as r:
        reader = await r.get(OutboxReader)
        found = await reader.pending(consumer, limit)
        if found and advance:
            await reader.advance(consumer, found[-1].id, T0)
        await (await r.get(UnitOfWork)).commit()
    return [e.id for e in found]


async def test_only_events_of_the_catalogue_can_be_recorded(outbox: AsyncContainer) -> None:
    org = await new_organization(outbox)
    with pytest.raises(TypeError):
        DomainEvent(org, "lead.created", {})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        DomainEvent("call.ended", org, {})  # type: ignore[arg-type]  # a name is not a member of the catalogue
    with pytest.raises(ValueError):
        EventType("lead.exploded")  # the catalogue is closed
    async with outbox() as r:
        uow = await r.get(UnitOfWork)
        for free_form in (SimpleNamespace(organization_id=org, type="lead.created", data={}), "call.ended",
                          {"organization_id": org, "type": "call.ended", "data": {}}):
            with pytest.raises(TypeError):
                uow.record(free_form)  # type: ignore[arg-type]
        uow.record(EventType.CALL_ENDED(org, {"id": "c-1"}))
        await uow.commit()
    async with outbox() as r:
        found = await (await r.get(OutboxReader)).pending("audit", 100)
    assert [(e.organization_id, e.type, e.data) for e in found] == [(org, "call.ended", {"id": "c-1"})]


async def test_each_consumer_reads_the_whole_outbox_behind_its_own_cursor(outbox: AsyncContainer) -> None:
    org = await new_organization(outbox)
    await _record(outbox, *(event(org, "call.ended", {"id": f"c-{n}"}) for n in range(3)))
    first, rest = await _read(outbox, "webhooks", 2), await _read(outbox, "webhooks")
    assert len(first) == 2 and len(rest) == 1 and first[-1] < rest[0]
    assert await _read(outbox, "webhooks") == []
    assert await _read(outbox, "triggers") == first + rest  # a second consumer is not affected by the first
    await _record(outbox, event(org, "appointment.booked", {"id": 7}))
    (newest,) = await _read(outbox, "webhooks")
    assert await _read(outbox, "triggers") == [newest]
    async with outbox() as r:
        reader = await r.get(OutboxReader)
        await reader.advance("triggers", first[0], T0)  # never backwards
        assert await reader.cursor("triggers") == newest and await reader.cursor("usage") == 0


async def test_housekeeping_purges_what_every_consumer_processed_after_the_retention(
        outbox: AsyncContainer, clock: ManualClock) -> None:
    org = await new_organization(outbox)
    await _record(outbox, event(org, "call.started", {"id": "old-1"}), event(org, "call.ended", {"id": "old-1"}))
    clock.advance(days=6)
    await _record(outbox, event(org, "call.started", {"id": "young"}))
    *old, young = await _read(outbox, "audit", advance=False)

    async def remaining() -> list[int]:
        return await _read(outbox, f"probe-{clock.now().timestamp()}", advance=False)

    clock.advance(days=2)  # the first two are 8 days old, the last one 2
    await purge_once(ScopedUnits(outbox))
    assert await remaining() == [*old, young]  # the webhooks consumer has processed nothing yet
    async with outbox() as r:
        reader = await r.get(OutboxReader)
        await reader.advance(WEBHOOKS, old[0], T0)
        await reader.advance("triggers", young, T0)
        # every consumer named must have passed an event: "usage" has no cursor, so nothing goes
        assert await reader.purge([WEBHOOKS, "triggers", "usage"], clock.now()) == 0
        assert await reader.purge([WEBHOOKS, "triggers"], clock.now()) == 1  # up to the slowest cursor
        await (await r.get(UnitOfWork)).commit()
    assert await remaining() == [old[1], young]
    for consumer in CONSUMERS:  # webhooks, and every other consumer, catch up with everything
        await _read(outbox, consumer)
    await purge_once(ScopedUnits(outbox))
    assert await remaining() == [young]  # processed, but younger than the retention window
    clock.advance(days=6)  # 8 days old now
    await purge_once(ScopedUnits(outbox))
    assert await remaining() == []
    await _record(outbox, event(org, "call.ended", {"id": "after"}))
    assert len(await _read(outbox, WEBHOOKS)) == 1  # ids go on after a purge; nothing is read twice


# -- PostgreSQL: real concurrent transactions -------------------------------------------------------


class _HeldCommit:
    """A connection whose COMMIT waits for ``release``: the transaction has written its outbox rows
    (their ids are drawn) but is not visible yet."""

    def __init__(self, connection: Any) -> None:
        self._connection, self.reached, self.release = connection, asyncio.Event(), asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)

    async def commit(self) -> None:
        self.reached.set()
        await self.release.wait()
        await self._connection.commit()


async def _waiting_for_a_lock(engine: Any) -> bool:
    async with engine.connect() as conn:
        return bool((await conn.execute(sa.text(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND database = "
            "(SELECT oid FROM pg_database WHERE datname = current_database())"))).scalar())


@pytest.mark.postgres
async def test_a_consumer_never_skips_an_event_that_commits_after_a_later_id(
        fresh_pg_url: str, tmp_path: Path, clock: ManualClock) -> None:
    """T1 draws outbox id n and is slow to commit; T2 records an event meanwhile. If T2's id n+1
    became visible first, a consumer would move its cursor past n+1 and never see n. T2 waits
    instead (the outbox write lock), so the consumer sees both, in order, whatever it reads when."""
    container = await _container(fresh_pg_url, tmp_path, clock)
    engine = create_engine(fresh_pg_url, pool_size=4)
    try:
        org = await new_organization(container)
        slow, fast = SqlUnitOfWork(engine, clock), SqlUnitOfWork(engine, clock)
        held = _HeldCommit(await slow.connection())
        slow._connection = held  # type: ignore[assignment]
        slow.record(event(org, "call.started", {"id": "slow"}))
        first = asyncio.create_task(slow.commit())
        await asyncio.wait_for(held.reached.wait(), 10)
        fast.record(event(org, "call.started", {"id": "fast"}))
        second = asyncio.create_task(fast.commit())
        for _ in range(1000):  # the later transaction either waits for the lock or commits (10 s at most)
            if second.done() or await _waiting_for_a_lock(engine):
                break
            await asyncio.sleep(0.01)
        seen = await _read(container, WEBHOOKS)  # a consumer pass while the first one is still open
        held.release.set()
        await asyncio.wait_for(asyncio.gather(first, second), 10)
        seen += await _read(container, WEBHOOKS)
        async with engine.connect() as conn:
            rows = (await conn.execute(sa.text("SELECT id, data FROM outbox_events ORDER BY id"))).all()
        assert [r.data["id"] for r in rows] == ["slow", "fast"]
        assert seen == [r.id for r in rows], "the consumer skipped an event"
        await slow.close()
        await fast.close()
    finally:
        await engine.dispose()
        await container.close()


@pytest.mark.postgres
async def test_one_pass_per_consumer_at_a_time_and_consumers_do_not_wait_for_each_other(
        fresh_pg_url: str, tmp_path: Path, clock: ManualClock) -> None:
    container = await _container(fresh_pg_url, tmp_path, clock)
    try:
        org = await new_organization(container)
        await _record(container, event(org, "call.ended", {"id": "x"}))
        async with container() as holding:
            assert len(await (await holding.get(OutboxReader)).pending(WEBHOOKS, 10)) == 1
            async with asyncio.timeout(10):
                assert await _read(container, WEBHOOKS) == []  # the same consumer: skipped, not blocked
                assert len(await _read(container, "triggers")) == 1  # another consumer: not held up
        assert len(await _read(container, WEBHOOKS)) == 1
    finally:
        await container.close()


async def test_behind_names_the_consumers_with_events_past_their_cursor(outbox: AsyncContainer) -> None:
    async with outbox() as r:
        assert await (await r.get(OutboxReader)).behind(["webhooks", "triggers"]) == []  # an empty outbox
    org = await new_organization(outbox)
    await _record(outbox, event(org, "call.ended", {"id": "c-1"}), event(org, "call.ended", {"id": "c-2"}))
    await _read(outbox, "webhooks")
    await _read(outbox, "triggers", 1)
    async with outbox() as r:
        reader = await r.get(OutboxReader)
        assert await reader.behind(["triggers", "webhooks", "leads"]) == ["triggers", "leads"]  # leads: no cursor
        assert await reader.behind([]) == []
    await _read(outbox, "triggers")
    async with outbox() as r:
        assert await (await r.get(OutboxReader)).behind(["webhooks", "triggers"]) == []


async def test_the_shared_recheck_makes_the_jobs_of_the_consumers_behind_due(
        outbox: AsyncContainer, clock: ManualClock) -> None:
    later = clock.now() + timedelta(minutes=5)
    async with outbox() as r:
        queue = await r.get(JobQueue)
        for kind in ("webhooks.dispatch", "leads.follow", "triggers.evaluate", "attendees.plan"):
            await queue.schedule(NewJob(kind, later))  # idle consumers, due again only after their fallback
        await (await r.get(UnitOfWork)).commit()
    assert await recheck_once(outbox) == []
    org = await new_organization(outbox)  # an organization's events, recorded as if by another process
    for consumer in CONSUMERS:
        await _read(outbox, consumer)
    await _record(outbox, event(org, "call.ended", {"id": "c-1"}))
    await _read(outbox, "webhooks")
    assert await recheck_once(outbox) == ["leads", "triggers", "attendees"]
    async with outbox() as r:
        queue = await r.get(JobQueue)
        now = clock.now()
        assert await queue.due_kinds(["webhooks.dispatch", "leads.follow", "triggers.evaluate", "attendees.plan"],
                                     now) == {"leads.follow", "triggers.evaluate", "attendees.plan"}
    consumers = dict((await outbox.get(OutboxConsumerJobs)).pairs)
    assert consumers == {"webhooks": "webhooks.dispatch", "leads": "leads.follow", "triggers": "triggers.evaluate",
                         "attendees": "attendees.plan"}
    assert set(consumers) == set(CONSUMERS)  # every consumer is looked after
