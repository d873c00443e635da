"""Media-stream tokens on memory, SQLite and PostgreSQL: single use (also when redeemed at once from several
units), expiry, forgery; only a hash is stored."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from application.ports.media import MediaStreamTokens
from application.ports.platform import UnitOfWork
from tests.support.apps import new_organization

NOW = datetime(2026, 11, 27, 9, tzinfo=UTC)


async def _issue(container: Any, org: int, call_id: str, at: datetime = NOW) -> str:
    async with container() as r:
        token = await (await r.get(MediaStreamTokens)).issue(call_id, org, at)
        await (await r.get(UnitOfWork)).commit()
    return token


async def _redeem(container: Any, token: str, at: datetime = NOW) -> Any:
    async with container() as r:
        grant = await (await r.get(MediaStreamTokens)).redeem(token, at)
        await (await r.get(UnitOfWork)).commit()
    return grant


async def test_a_token_is_redeemed_once_before_it_expires(container: Any) -> None:
    org = await new_organization(container)
    token = await _issue(container, org, "call-1")
    assert len(token) >= 40 and token.replace("-", "").replace("_", "").isalnum()
    grant = await _redeem(container, token, NOW + timedelta(seconds=5))
    assert (grant.call_id, grant.organization_id) == ("call-1", org)
    assert grant.expires_at > NOW
    assert await _redeem(container, token, NOW + timedelta(seconds=6)) is None
    late = await _issue(container, org, "call-2")
    assert await _redeem(container, late, NOW + timedelta(hours=2)) is None
    assert await _redeem(container, "forged" + token[6:]) is None


async def test_of_concurrent_redeems_one_wins(container: Any) -> None:
    org = await new_organization(container)
    token = await _issue(container, org, "call-3")
    grants = await asyncio.gather(*(_redeem(container, token) for _ in range(8)))
    assert sum(grant is not None for grant in grants) == 1


async def test_only_a_hash_of_the_token_is_stored(container: Any, database_url: str) -> None:
    if database_url == "memory://":
        return
    import sqlalchemy as sa

    from adapters.sql.uow import SqlUnitOfWork

    org = await new_organization(container)
    token = await _issue(container, org, "call-4")
    async with container() as r:
        conn = await (await r.get(SqlUnitOfWork)).connection()
        rows = (await conn.execute(sa.text("SELECT token_hash FROM media_stream_tokens"))).all()
    assert rows and all(token not in row.token_hash for row in rows)


async def test_expired_tokens_are_purged_used_or_not(container: Any) -> None:
    org = await new_organization(container)
    far = NOW + timedelta(days=400)  # past every token the other tests issued
    used = await _issue(container, org, "call-5", far)
    assert await _redeem(container, used, far) is not None
    await _issue(container, org, "call-6", far)
    fresh = await _issue(container, org, "call-7", far + timedelta(minutes=10))
    async with container() as r:
        tokens = await r.get(MediaStreamTokens)
        assert await tokens.purge(far + timedelta(minutes=14)) >= 0  # whatever earlier tests left
        assert await tokens.purge(far + timedelta(minutes=14)) == 0  # the three still live
        assert await tokens.purge(far + timedelta(minutes=16)) == 2  # call-5 and call-6 expired at +15 min
        await (await r.get(UnitOfWork)).commit()
    assert (await _redeem(container, fresh, far + timedelta(minutes=16))).call_id == "call-7"
