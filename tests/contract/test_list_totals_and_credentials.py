"""The hot path's shortcuts keep the ports' answers: list totals (kept per organization on SQL) and the
short-lived credential cache (a change made through the repositories applies at once)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from application.ports.accounts import ApiKeyRepository, OrganizationRepository
from application.ports.agents import AgentFilter, AgentRepository
from application.ports.platform import PageRequest, UnitOfWork
from domain.agents import Agent
from domain.api_keys import ApiKey, digest
from tests.conftest import new_organization

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
