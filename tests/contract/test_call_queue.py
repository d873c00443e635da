"""The dial queue of an organization is fair on every backend: a single call (``POST /calls``) goes before a
backlog of bulk calls queued earlier at a lower priority; among equal priorities the earlier due time first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from application.ports.agents import AgentRepository
from application.ports.calls import CallRepository
from application.ports.platform import UnitOfWork
from domain.agents import Agent
from domain.calls import SINGLE_CALL_PRIORITY, Call
from tests.support.apps import new_organization

T0 = datetime(2026, 5, 4, 9, tzinfo=UTC)
BULK = SINGLE_CALL_PRIORITY - 50  # what a campaign dialer would queue at


def _call(org: int, agent: int, name: str, priority: int, due: datetime, created: datetime) -> Call:
    return Call(id=f"{name}-{org}", organization_id=org, agent_id=agent, destination_phone="+14155550100",
                from_phone="+14155550199", priority=priority, due_at=due, created_at=created, updated_at=created)


async def test_a_single_call_is_dialled_before_a_campaign_backlog(container: Any) -> None:
    org = await new_organization(container)
    async with container() as r:
        agent = await (await r.get(AgentRepository)).add(Agent(None, org, "Desk", status="active", created_at=T0,
                                                               updated_at=T0))
        calls = await r.get(CallRepository)
        for n in range(20):  # a campaign queued long ago
            at = T0 - timedelta(hours=1) + timedelta(seconds=n)
            await calls.add(_call(org, agent.id or 0, f"bulk{n:02}", BULK, at, at))
        await calls.add(_call(org, agent.id or 0, "single-late", SINGLE_CALL_PRIORITY, T0 + timedelta(seconds=5), T0))
        await calls.add(_call(org, agent.id or 0, "single-early", SINGLE_CALL_PRIORITY, T0,
                              T0 + timedelta(seconds=1)))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        queue = await (await r.get(CallRepository)).oldest_queued(org, 4)
    assert [c.id.rsplit("-", 1)[0] for c in queue] == ["single-early", "single-late", "bulk00", "bulk01"]
    assert queue[0].priority == SINGLE_CALL_PRIORITY and queue[0].due_at == T0


async def test_placing_a_call_wakes_the_job_runners_once_committed(container: Any) -> None:
    from application.agents import PublishAgent, PublishAgentCommand
    from application.calls import PlaceCall, PlaceCallCommand
    from application.context import Actor
    from entrypoints.runtime import JOB_WAKE_UPS

    org = await new_organization(container)
    async with container() as r:
        agent = await (await r.get(AgentRepository)).add(Agent(None, org, "Desk", prompt="Hi.", created_at=T0,
                                                               updated_at=T0))
        await (await r.get(PublishAgent)).execute(PublishAgentCommand(Actor.system(org), agent.id or 0))
        await (await r.get(UnitOfWork)).commit()
    wake = JOB_WAKE_UPS.subscribe()
    try:
        async with container() as r:
            await (await r.get(PlaceCall)).execute(PlaceCallCommand(Actor.system(org), str(agent.id), "+14155550123"))
            assert not wake.is_set()  # not before the commit
            await (await r.get(UnitOfWork)).rollback()
        assert not wake.is_set()  # nor after a rollback
        async with container() as r:
            call = await (await r.get(PlaceCall)).execute(PlaceCallCommand(Actor.system(org), str(agent.id),
                                                                           "+14155550123"))
            await (await r.get(UnitOfWork)).commit()
        assert wake.is_set()
        assert call.priority == SINGLE_CALL_PRIORITY and call.due_at == call.created_at
    finally:
        JOB_WAKE_UPS.unsubscribe(wake)
