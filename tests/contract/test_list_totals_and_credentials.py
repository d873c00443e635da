"""The hot path's shortcuts keep the ports' answers: list totals (kept per organization on SQL) and the
short-lived credential cache (a change made through the repositories applies at once)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from application.ports.accounts import ApiKeyRepository, OrganizationRepository
from application.ports.agents import AgentFilter, AgentRepository
from application.ports.platform import PageRequest, UnitOfWork
from domain.agents import Agent, HttpTool, Llm, Transcriber, Voice, Voicemail
from domain.api_keys import ApiKey, digest
from tests.support.apps import new_organization

NOW = datetime(2026, 3, 3, 9, tzinfo=UTC)


async def _totals(container: Any, org: int) -> tuple[int, int, int, int]:
    async with container() as r:
        repo = await r.get(AgentRepository)
        first = await repo.list(org, AgentFilter(), PageRequest(2, 0))
        past_end = await repo.list(org, AgentFilter(), PageRequest(2, 50))
        drafts = await repo.list(org, AgentFilter(status="draft"), PageRequest(2, 0))
        found = await repo.list(org, AgentFilter(search="alp"), PageRequest(2, 0))
        assert len(first.items) == min(2, first.total) and past_end.items == []
        assert past_end.total == first.total
        return first.total, past_end.total, drafts.total, found.total


async def test_list_totals_follow_creates_deletes_and_rollbacks(container: Any) -> None:
    org = await new_organization(container)
    other = await new_organization(container)
    assert await _totals(container, org) == (0, 0, 0, 0)
    async with container() as r:
        repo = await r.get(AgentRepository)
        made = [await repo.add(Agent(None, org, f"Alpha {n}", status="draft" if n % 2 else "active",
                                     created_at=NOW, updated_at=NOW)) for n in range(5)]
        await repo.add(Agent(None, other, "Alpha elsewhere", created_at=NOW, updated_at=NOW))
        await (await r.get(UnitOfWork)).commit()
    assert await _totals(container, org) == (5, 5, 2, 5)
    async with container() as r:
        repo = await r.get(AgentRepository)
        await repo.delete(org, made[0].id or 0, NOW)
        await repo.delete(org, made[0].id or 0, NOW)  # already deleted: no change
        await repo.delete(other, made[1].id or 0, NOW)  # another organization's agent: no change
        await (await r.get(UnitOfWork)).commit()
    assert await _totals(container, org) == (4, 4, 2, 4)
    async with container() as r:
        repo = await r.get(AgentRepository)
        await repo.add(Agent(None, org, "Rolled back", created_at=NOW, updated_at=NOW))
        await repo.delete(org, made[1].id or 0, NOW)
        await (await r.get(UnitOfWork)).rollback()
    assert await _totals(container, org) == (4, 4, 2, 4)
    assert (await _totals(container, other))[0] == 1


async def test_a_revoked_key_or_deleted_organization_stops_authenticating_at_once(container: Any) -> None:
    org = await new_organization(container)
    secret = f"cache-{org}-{id(container)}"
    async with container() as r:
        keys = await r.get(ApiKeyRepository)
        await keys.add(ApiKey(None, org, "k", "parley_sk_x", "abcd", digest(secret), ("*",), "active", NOW, None,
                              None, None))
        await (await r.get(UnitOfWork)).commit()
    for _ in range(2):  # the second lookup may be served from the cache
        async with container() as r:
            found = await (await r.get(ApiKeyRepository)).find_credential(digest(secret))
            assert found is not None and found[0].status == "active" and found[0].last_used_at is None
    async with container() as r:
        keys = await r.get(ApiKeyRepository)
        await keys.touch(found[0].id or 0, NOW)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        found = await (await r.get(ApiKeyRepository)).find_credential(digest(secret))
        assert found is not None and found[0].last_used_at == NOW
    async with container() as r:
        keys = await r.get(ApiKeyRepository)
        await keys.update(replace(found[0], status="revoked"))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        found = await (await r.get(ApiKeyRepository)).find_credential(digest(secret))
        assert found is not None and found[0].status == "revoked"
    async with container() as r:
        await (await r.get(OrganizationRepository)).delete(org, NOW)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        assert await (await r.get(ApiKeyRepository)).find_credential(digest(secret)) is None


async def test_a_listed_agent_is_the_agent_read_alone(container: Any) -> None:
    """The list's one-statement page (a JSON document per agent on SQL) reads every field as ``get`` does: nested
    settings, tools, an analysis schema, metadata of every JSON kind, times with microseconds."""
    org = await new_organization(container)
    at = datetime(2026, 3, 3, 9, 30, 15, 123456, tzinfo=UTC)
    rich = Agent(None, org, "Rich", description="d\u00e9j\u00e0 \"vu\"", status="active", language="de-DE",
                 voice=Voice("simulator", "v2", None, 1.25), llm=Llm("parley-sim-1", 0.35, None),
                 prompt="Hello {{contact_name}}", first_message=None, max_call_duration_seconds=900,
                 voicemail=Voicemail("leave_message", "Call back"), transfer_phone="+14155550100",
                 timezone="Europe/Berlin",
                 metadata={"n": 7, "ratio": 0.5, "big": 2**53, "flag": True, "none": None, "list": [1, "a"],
                           "nested": {"x": {"y": "z"}}},
                 transcriber=Transcriber(None, "whisper-small", "de"),
                 tools=(HttpTool("lookup", "https://example.com/hook", "finds", {"type": "object",
                                                                                 "properties": {}}, 2500),),
                 analysis_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}},
                 end_of_turn_silence_ms=700, current_version=3, has_unpublished_changes=False,
                 created_at=at, updated_at=at)
    async with container() as r:
        repo = await r.get(AgentRepository)
        made = [await repo.add(rich), await repo.add(Agent(None, org, "Plain", created_at=NOW, updated_at=NOW))]
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        repo = await r.get(AgentRepository)
        alone = [await repo.get(org, agent.id or 0) for agent in made]
        listed = (await repo.list(org, AgentFilter(), PageRequest(10, 0))).items
    assert listed == alone
    assert listed[0].created_at == at and listed[0].created_at.utcoffset() == timedelta(0)
