"""Agent use cases: the status machine through PATCH and publish, versions as frozen snapshots,
duplicates, merge patches, tenancy, and calendar references."""

from __future__ import annotations

import pytest

from application.agents import (
    CreateAgent,
    CreateAgentCommand,
    DeleteAgent,
    DeleteAgentCommand,
    DuplicateAgent,
    DuplicateAgentCommand,
    GetAgent,
    GetAgentCommand,
    GetAgentVersion,
    GetAgentVersionCommand,
    ListAgents,
    ListAgentsCommand,
    ListAgentVersions,
    ListAgentVersionsCommand,
    PublishAgent,
    PublishAgentCommand,
    UpdateAgent,
    UpdateAgentCommand,
)
from application.context import Actor
from application.ports.agents import AgentFilter
from application.ports.platform import PageRequest
from domain.agents import Agent
from domain.errors import InvalidTransition, NotFound
from tests.application.conftest import App

PAGE = PageRequest(limit=50, offset=0)


async def create(app: App, actor: Actor, **fields: object) -> Agent:
    return await app.run(CreateAgent, CreateAgentCommand(actor, **{"name": "Ava", "prompt": "Hello", **fields}))


async def patch(app: App, actor: Actor, agent: Agent, **changes: object) -> Agent:
    return await app.run(UpdateAgent, UpdateAgentCommand(actor, agent.id or 0, changes))


async def test_a_new_agent_is_a_draft_of_its_organization(app: App) -> None:
    actor = await app.actor()
    agent = await create(app, actor, metadata={"team": "sales"})
    assert (agent.status, agent.organization_id, agent.current_version) == ("draft", actor.organization_id, None)
    assert agent.created_at == agent.updated_at == app.clock.now()
    assert await app.run(GetAgent, GetAgentCommand(actor, agent.id)) == agent


async def test_status_moves_follow_the_machine(app: App) -> None:
    actor = await app.actor()
    agent = await create(app, actor)
    with pytest.raises(InvalidTransition):
        await patch(app, actor, agent, status="paused")  # a draft is published first
    with pytest.raises(InvalidTransition):
        await patch(app, actor, agent, status="active")
    active = (await app.run(PublishAgent, PublishAgentCommand(actor, agent.id))).agent
    paused = await patch(app, actor, active, status="paused")
    assert (active.status, paused.status) == ("active", "paused")
    assert (await patch(app, actor, paused, status="active")).status == "active"
    archived = await patch(app, actor, paused, status="archived")
    assert archived.status == "archived"
    for target in ("active", "paused", "draft"):
        with pytest.raises(InvalidTransition):
            await patch(app, actor, archived, status=target)
    with pytest.raises(InvalidTransition):
        await app.run(PublishAgent, PublishAgentCommand(actor, agent.id))  # archived agents cannot be published
    assert (await app.run(GetAgent, GetAgentCommand(actor, agent.id))).status == "archived"  # the refused moves left it


async def test_a_refused_move_changes_nothing_else_in_the_patch(app: App) -> None:
    actor = await app.actor()
    agent = await create(app, actor)
    with pytest.raises(InvalidTransition):
        await patch(app, actor, agent, status="paused", name="Renamed")
    assert (await app.run(GetAgent, GetAgentCommand(actor, agent.id))).name == "Ava"


async def test_patch_merges_nested_objects_and_touches_updated_at_only_on_change(app: App) -> None:
    actor = await app.actor()
    agent = await create(app, actor, metadata={"team": "sales", "tier": "gold"})
    app.clock.advance(minutes=1)
    same = await patch(app, actor, agent, name="Ava")
    assert same.updated_at == agent.updated_at
    changed = await patch(app, actor, agent, metadata={"tier": None, "region": "eu"}, voice={"voice_id": "v2"})
    assert changed.metadata == {"team": "sales", "region": "eu"}
    assert (changed.voice.voice_id, changed.voice.provider) == ("v2", agent.voice.provider)
    assert changed.updated_at == app.clock.now()


async def test_publishing_freezes_numbered_snapshots(app: App) -> None:
    actor = await app.actor()
    agent = await create(app, actor)
    first = await app.run(PublishAgent, PublishAgentCommand(actor, agent.id))
    assert (first.version.version, first.agent.current_version) == (1, 1)
    await patch(app, actor, first.agent, prompt="Changed")
    second = await app.run(PublishAgent, PublishAgentCommand(actor, agent.id))
    assert second.version.version == 2
    v1 = await app.run(GetAgentVersion, GetAgentVersionCommand(actor, agent.id, 1))
    v2 = await app.run(GetAgentVersion, GetAgentVersionCommand(actor, agent.id, 2))
    assert (v1.snapshot["prompt"], v2.snapshot["prompt"]) == ("Hello", "Changed")
    listed = await app.run(ListAgentVersions, ListAgentVersionsCommand(actor, agent.id, PAGE))
    assert sorted(v.version for v in listed.items) == [1, 2]
    with pytest.raises(NotFound):
        await app.run(GetAgentVersion, GetAgentVersionCommand(actor, agent.id, 3))


async def test_a_duplicate_is_a_fresh_draft_with_a_copy_of_the_configuration(app: App) -> None:
    actor = await app.actor()
    agent = await create(app, actor, metadata={"team": "sales"})
    await app.run(PublishAgent, PublishAgentCommand(actor, agent.id))
    app.clock.advance(hours=1)
    copy = await app.run(DuplicateAgent, DuplicateAgentCommand(actor, agent.id, None))
    assert copy.id != agent.id and copy.name != agent.name and agent.name in copy.name
    assert (copy.status, copy.current_version, copy.prompt, copy.metadata) == ("draft", None, "Hello",
                                                                              {"team": "sales"})
    assert copy.created_at == app.clock.now()
    named = await app.run(DuplicateAgent, DuplicateAgentCommand(actor, agent.id, "Bob"))
    assert named.name == "Bob"


async def test_agents_of_another_organization_do_not_exist(app: App) -> None:
    mine, theirs = await app.actor(), await app.actor()
    agent = await create(app, theirs)
    for case, command in [(GetAgent, GetAgentCommand(mine, agent.id or 0)),
                          (PublishAgent, PublishAgentCommand(mine, agent.id or 0)),
                          (DeleteAgent, DeleteAgentCommand(mine, agent.id or 0)),
                          (DuplicateAgent, DuplicateAgentCommand(mine, agent.id or 0, None)),
                          (ListAgentVersions, ListAgentVersionsCommand(mine, agent.id or 0, PAGE))]:
        with pytest.raises(NotFound):
            await app.run(case, command)
    with pytest.raises(NotFound):
        await patch(app, mine, agent, name="Mine now")
    assert (await app.run(ListAgents, ListAgentsCommand(mine, AgentFilter(), PAGE))).items == []
    listed = await app.run(ListAgents, ListAgentsCommand(theirs, AgentFilter(), PAGE))
    assert [a.id for a in listed.items] == [agent.id]


async def test_a_deleted_agent_is_gone(app: App) -> None:
    actor = await app.actor()
    agent = await create(app, actor)
    await app.run(DeleteAgent, DeleteAgentCommand(actor, agent.id))
    with pytest.raises(NotFound):
        await app.run(GetAgent, GetAgentCommand(actor, agent.id))
    with pytest.raises(NotFound):
        await app.run(DeleteAgent, DeleteAgentCommand(actor, agent.id))


async def test_an_agent_points_only_at_a_live_calendar_of_its_own(app: App) -> None:
    actor = await app.actor()
    with pytest.raises(NotFound) as missing:
        await create(app, actor, calendar_id=12345)
    assert "calendar" in str(missing.value)
    agent = await create(app, actor)
    with pytest.raises(NotFound):
        await patch(app, actor, agent, calendar_id=12345)
