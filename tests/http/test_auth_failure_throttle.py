"""Failed authentications are limited per client address (429 RATE_LIMIT_EXCEEDED with Retry-After),
without slowing the keys that authenticate from the same address."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

import pytest

from adapters.memory.clock import ManualClock
from tests.support.apps import ApiFactory

START = datetime(2026, 5, 4, 10, 0, 15, tzinfo=UTC)


def _bad_key() -> dict[str, str]:
    return {"Authorization": f"Bearer parley_sk_{secrets.token_urlsafe(24)}"}


@pytest.mark.parametrize("backend", ["memory", "database"])
async def test_failed_authentications_are_throttled_per_address(make_api: ApiFactory, sql_url: str,
                                                                backend: str) -> None:
    clock = ManualClock(START)
    api = await make_api(sql_url, clock=clock, rate_limit_backend=backend, auth_failures_per_minute=5)
    good = await api.tenant()
    c = api.client
    for _ in range(5):
        r = await c.get("/v2/agents", headers=_bad_key())
        assert r.status_code == 401 and r.json()["error"]["code"] == "INVALID_API_KEY"
    refused = await c.get("/v2/agents", headers=_bad_key())
    assert refused.status_code == 429
    body = refused.json()
    assert body == {"success": False, "error": {"code": "RATE_LIMIT_EXCEEDED", "message": body["error"]["message"],
                                                "retry_after": 45}}
    assert refused.headers["retry-after"] == "45"
    assert refused.headers["x-ratelimit-limit"] == "5" and refused.headers["x-ratelimit-remaining"] == "0"
    assert int(refused.headers["x-ratelimit-reset"]) == int(START.timestamp()) - 15 + 60
    # a valid key from the same address is not slowed while the address is throttled
    for _ in range(3):
        assert (await c.get("/v2/agents", headers=good.headers)).status_code == 200
    assert (await c.get("/v2/agents", headers=_bad_key())).status_code == 429
    clock.advance(seconds=45)
    assert (await c.get("/v2/agents", headers=_bad_key())).status_code == 401


async def test_failed_authentications_are_counted_across_processes(make_api: ApiFactory, sql_url: str) -> None:
    """With the database backend two processes (two apps, each with its own memory) share the count."""
    clock = ManualClock(START)
    first = await make_api(sql_url, clock=clock, rate_limit_backend="database", auth_failures_per_minute=4)
    second = await make_api(sql_url, clock=clock, rate_limit_backend="database", auth_failures_per_minute=4)
    clock.advance(seconds=3600)  # a window of its own, apart from the other tests on this database
    for api in (first, second, first, second):
        assert (await api.client.get("/v2/agents", headers=_bad_key())).status_code == 401
    assert (await first.client.get("/v2/agents", headers=_bad_key())).status_code == 429
    assert (await second.client.get("/v2/agents", headers=_bad_key())).status_code == 429


async def test_throttle_counts_only_failures(make_api: ApiFactory, sqlite_url: str) -> None:
    clock = ManualClock(START)
    api = await make_api(sqlite_url, clock=clock, auth_failures_per_minute=2, rate_limit_per_minute=100)
    good = await api.tenant()
    for _ in range(10):
        assert (await api.client.get("/v2/agents", headers=good.headers)).status_code == 200
    assert (await api.client.get("/v2/agents", headers=_bad_key())).status_code == 401
    assert (await api.client.get("/v2/agents", headers=_bad_key())).status_code == 401
    assert (await api.client.get("/v2/agents", headers=_bad_key())).status_code == 429
