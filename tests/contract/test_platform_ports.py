"""The foundation's ports behave the same on memory, SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from application.ports.accounts import ApiKeyRepository, IdempotencyStore, OrganizationRepository, RateLimiter
from application.ports.agents import AgentFilter, AgentRepository
from application.ports.platform import PageRequest, UnitOfWork
from domain.agents import Agent, AgentVersion
from domain.api_keys import ApiKey, digest
from domain.destinations import DialingPolicy
from domain.idempotency import IdempotencyRecord, StoredResponse
from domain.rate_limit import Window
from tests.support.apps import new_organization

NOW = datetime(2026, 2, 2, 12, tzinfo=UTC)


async def test_agents_are_stored_filtered_and_scoped(container: Any) -> None:
    org = await new_organization(container)
    other = await new_organization(container)
    async with container() as r:
        repo = await r.get(AgentRepository)
        a = await repo.add(Agent(None, org, "Alpha sales", metadata={"k": [1]}, created_at=NOW, updated_at=NOW))
        await repo.add(Agent(None, org, "Beta", agent_mode="inbound", created_at=NOW, updated_at=NOW))
        await repo.add(Agent(None, other, "Alpha other", created_at=NOW, updated_at=NOW))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        repo = await r.get(AgentRepository)
        got = await repo.get(org, a.id)
        assert got is not None and got.metadata == {"k": [1]} and got.created_at == NOW
        assert await repo.get(other, a.id) is None
        page = await repo.list(org, AgentFilter(search="alpha"), PageRequest(10, 0))
        assert [x.name for x in page.items] == ["Alpha sales"] and page.total == 1
        page = await repo.list(org, AgentFilter(agent_mode="inbound"), PageRequest(10, 0))
        assert [x.name for x in page.items] == ["Beta"]
        assert (await repo.list(org, AgentFilter(), PageRequest(1, 5))).total == 2
        await repo.add_version(org, AgentVersion(a.id, 1, {"prompt": "p"}, NOW, None))
        await repo.add_version(org, AgentVersion(a.id, 2, {"prompt": "q"}, NOW, None))
        versions = await repo.list_versions(org, a.id, PageRequest(1, 1))
        assert [v.version for v in versions.items] == [2] and versions.total == 2
        assert (await repo.list_versions(org, a.id, PageRequest(10, 5))).total == 2
        assert (await repo.list_versions(other, a.id, PageRequest(10, 0))).total == 0
        assert await repo.get_version(other, a.id, 1) is None
        await repo.update(replace(got, name="Renamed", status="paused"))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        repo = await r.get(AgentRepository)
        got = await repo.get(org, a.id)
        assert got is not None and got.name == "Renamed" and got.status == "paused"
        await repo.delete(org, a.id, NOW)
        await (await r.get(UnitOfWork)).rollback()
        assert await repo.get(org, a.id) is not None  # rolled back
        await repo.delete(org, a.id, NOW)
        await (await r.get(UnitOfWork)).commit()
        assert await repo.get(org, a.id) is None


async def test_api_keys_resolve_by_hash_with_their_organization(container: Any) -> None:
    org = await new_organization(container, plan="business")
    async with container() as r:
        keys = await r.get(ApiKeyRepository)
        stored = await keys.add(ApiKey(None, org, "k", "parley_sk_x", "abcd", digest(f"secret-{org}"), ("agents:read",),
                                       "active", NOW, None, None, None))
        assert stored.lineage_id == stored.id
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        keys = await r.get(ApiKeyRepository)
        found = await keys.find_credential(digest(f"secret-{org}"))
        assert found is not None
        key, organization = found
        assert key.id == stored.id and organization.id == org and organization.plan == "business"
        assert await keys.find_credential(digest("nope")) is None
        await keys.update(replace(key, status="revoked"))
        await (await r.get(UnitOfWork)).commit()
        assert (await keys.get(org, key.id)).status == "revoked"  # type: ignore[union-attr]


async def test_deleted_organizations_disappear(container: Any) -> None:
    org = await new_organization(container, org_type="partner")
    async with container() as r:
        orgs = await r.get(OrganizationRepository)
        await orgs.delete(org, NOW)
        await (await r.get(UnitOfWork)).commit()
        assert await orgs.get(org) is None


async def test_idempotency_claims_are_exclusive(container: Any) -> None:
    org = await new_organization(container)
    record = IdempotencyRecord(org, 7, "k", "fp", NOW, NOW, "t1", None)
    async with container() as r:
        store = await r.get(IdempotencyStore)
        assert await store.insert_if_absent(record)
        assert not await store.insert_if_absent(replace(record, token="t2"))
        await (await r.get(UnitOfWork)).commit()
        assert not await store.take_over(replace(record, token="wrong"), replace(record, token="t3"))
        assert await store.take_over(record, replace(record, token="t3"))
        await store.complete(org, 7, "k", "t3", StoredResponse(201, (("content-type", "application/json"),), b"{}"))
        await (await r.get(UnitOfWork)).commit()
        got = await store.get(org, 7, "k")
        assert got is not None and got.response == StoredResponse(201, (("content-type", "application/json"),), b"{}")
        assert got.locked_at is None
        await store.release(org, 7, "k", "not-mine")
        assert await store.get(org, 7, "k") is not None
        assert await store.purge_expired(NOW + timedelta(days=2)) >= 1
        await (await r.get(UnitOfWork)).commit()
        assert await store.get(org, 7, "k") is None


async def test_idempotency_records_are_scoped_to_the_key_lineage(container: Any) -> None:
    """The same key under two lineages of one organization is two records; each is read, completed
    and released on its own."""
    org = await new_organization(container)
    mine = IdempotencyRecord(org, 1, "same", "fp", NOW, NOW, "t1", None)
    theirs = replace(mine, lineage_id=2, fingerprint="other", token="t2")
    async with container() as r:
        store = await r.get(IdempotencyStore)
        assert await store.insert_if_absent(mine)
        assert await store.insert_if_absent(theirs)
        await store.complete(org, 1, "same", "t1", StoredResponse(201, (), b"sealed", sealed=True))
        await (await r.get(UnitOfWork)).commit()
        assert (await store.get(org, 3, "same")) is None
        first, second = await store.get(org, 1, "same"), await store.get(org, 2, "same")
        assert first is not None and first.response == StoredResponse(201, (), b"sealed", sealed=True)
        assert second is not None and second.fingerprint == "other" and second.response is None
        assert not await store.take_over(replace(theirs, lineage_id=1), replace(mine, token="t3"))
        await store.release(org, 2, "same", "t2")
        await (await r.get(UnitOfWork)).commit()
        assert await store.get(org, 2, "same") is None
        assert await store.get(org, 1, "same") is not None
        assert await store.purge_expired(NOW + timedelta(days=2)) >= 1
        await (await r.get(UnitOfWork)).commit()


async def test_rate_limiter_counts_and_refuses(container: Any) -> None:
    windows = (Window(60, 2), Window(3600, 100))
    bucket = f"contract:{id(container)}:{NOW.timestamp()}"
    async with container() as r:
        limiter = await r.get(RateLimiter)
        first = await limiter.hit(bucket, windows, NOW)
        second = await limiter.hit(bucket, windows, NOW)
        third = await limiter.hit(bucket, windows, NOW + timedelta(seconds=1))
        assert first.allowed and second.allowed and not third.allowed
        assert (first.remaining, second.remaining) == (1, 0)
        assert third.retry_after == 59
        later = await limiter.hit(bucket, windows, NOW + timedelta(seconds=60))
        assert later.allowed


async def test_rate_limiter_counts_several_buckets_together_or_not_at_all(container: Any) -> None:
    """``hit_all`` (a key's bucket and its organization's ceiling): counted in both while both allow; once one
    refuses, neither counts the request, and each decision says which refused."""
    key = f"contract-key:{id(container)}:{NOW.timestamp()}"
    ceiling = f"contract-org:{id(container)}:{NOW.timestamp()}"
    own, shared = (Window(60, 3), Window(3600, 100)), (Window(60, 2),)
    async with container() as r:
        limiter = await r.get(RateLimiter)
        first, first_all = await limiter.hit_all([(key, own), (ceiling, shared)], NOW)
        assert first.allowed and first_all.allowed and (first.remaining, first_all.remaining) == (2, 1)
        assert all(d.allowed for d in await limiter.hit_all([(key, own), (ceiling, shared)], NOW))
        mine, over_all = await limiter.hit_all([(key, own), (ceiling, shared)], NOW)
        assert mine.allowed and not over_all.allowed and over_all.retry_after == 60
        assert (await limiter.peek(key, own, NOW)).remaining == 1  # the refused request took nothing from the key
        assert (await limiter.peek(ceiling, shared, NOW)).remaining == 0
        assert (await limiter.hit(key, own, NOW)).remaining == 0
        mine, over_all = await limiter.hit_all([(key, own), (ceiling, shared)], NOW + timedelta(seconds=60))
        assert mine.allowed and over_all.allowed and over_all.remaining == 1
        await (await r.get(UnitOfWork)).commit()


async def test_rate_limiter_works_in_its_callers_transaction_and_never_ends_it(container: Any) -> None:
    """``hit`` and ``release`` neither commit nor roll back: what the caller wrote before them is still its own to
    roll back, and the counts are kept once the caller commits (each step of a request owns its transaction)."""
    windows = (Window(60, 10), Window(3600, 100))
    bucket = f"contract-caller:{id(container)}:{NOW.timestamp()}"
    org = await new_organization(container)
    async with container() as r:
        orgs = await r.get(OrganizationRepository)
        original = await orgs.get(org)
        assert original is not None
        await orgs.update(replace(original, name="Renamed, then rolled back"))
        limiter = await r.get(RateLimiter)
        assert (await limiter.hit(f"{bucket}:other", windows, NOW)).allowed
        await limiter.release(f"{bucket}:other", windows, NOW)
        await (await r.get(UnitOfWork)).rollback()
    async with container() as r:
        kept = await (await r.get(OrganizationRepository)).get(org)
        assert kept is not None and kept.name == original.name
        assert (await (await r.get(RateLimiter)).hit(bucket, windows, NOW)).remaining == 9
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        limiter = await r.get(RateLimiter)
        seen = await limiter.peek(bucket, windows, NOW)
        assert seen.allowed and seen.remaining == 9
        assert (await limiter.hit(bucket, windows, NOW)).remaining == 8


async def test_housekeeping_purges_only_what_expired(container: Any) -> None:
    from application.housekeeping import PurgeExpired, PurgeExpiredCommand

    org = await new_organization(container)
    async with container() as r:
        store = await r.get(IdempotencyStore)
        await store.insert_if_absent(IdempotencyRecord(org, 1, "old", "fp", NOW - timedelta(days=3), None, "t", None))
        await store.insert_if_absent(IdempotencyRecord(org, 1, "new", "fp", datetime.now(UTC), None, "t", None))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        await (await r.get(PurgeExpired)).execute(PurgeExpiredCommand())
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        store = await r.get(IdempotencyStore)
        assert await store.get(org, 1, "old") is None
        assert await store.get(org, 1, "new") is not None


async def test_an_organizations_dialing_policy_round_trips_and_reaches_authentication(container: Any) -> None:
    org = await new_organization(container)
    async with container() as r:
        orgs = await r.get(OrganizationRepository)
        found = await orgs.get(org)
        assert found is not None and found.dialing_policy == DialingPolicy()  # the default: US and CA, no premium
        await orgs.update(replace(found, dialing_policy=DialingPolicy(("GB", "US"), block_premium=False)))
        keys = await r.get(ApiKeyRepository)
        await keys.add(ApiKey(None, org, "k", "parley_sk_x", "abcd", digest(f"policy-{org}"), ("agents:read",),
                              "active", NOW, None, None, None))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        orgs = await r.get(OrganizationRepository)
        assert (await orgs.get(org)).dialing_policy == DialingPolicy(("GB", "US"), False)  # type: ignore[union-attr]
        credential = await (await r.get(ApiKeyRepository)).find_credential(digest(f"policy-{org}"))
        assert credential is not None and credential[1].dialing_policy == DialingPolicy(("GB", "US"), False)


async def test_rate_limiter_gives_back_a_slot(container: Any) -> None:
    """``release`` gives back what ``hit`` took at the same instant, in every window, and never goes below zero."""
    windows = (Window(60, 2), Window(3600, 100))
    bucket = f"contract-release:{id(container)}:{NOW.timestamp()}"
    async with container() as r:
        limiter = await r.get(RateLimiter)
        assert (await limiter.hit(bucket, windows, NOW)).allowed
        assert (await limiter.hit(bucket, windows, NOW)).allowed
        assert not (await limiter.hit(bucket, windows, NOW)).allowed
        await limiter.release(bucket, windows, NOW)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        limiter = await r.get(RateLimiter)
        seen = await limiter.peek(bucket, windows, NOW + timedelta(seconds=1))
        assert seen.allowed and seen.remaining == 1
        for _ in range(4):
            await limiter.release(bucket, windows, NOW)
        await (await r.get(UnitOfWork)).commit()
        emptied = await limiter.peek(bucket, windows, NOW)
        assert emptied.remaining == 2
