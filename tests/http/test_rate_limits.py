"""Rate limits (docs/api.md, Rate limits): fixed windows per key lineage, 429 with Retry-After."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from adapters.memory.clock import ManualClock
from adapters.sql.tables import rate_limit_counters
from adapters.sql.uow import SqlUnitOfWork
from tests.support.apps import Api, ApiFactory

START = datetime(2026, 5, 4, 10, 0, 10, tzinfo=UTC)


@pytest.mark.parametrize("backend", ["memory", "database"])
async def test_minute_window_refuses_with_retry_after(make_api: ApiFactory, sql_url: str, backend: str) -> None:
    clock = ManualClock(START)
    api = await make_api(sql_url, clock=clock, rate_limit_per_minute=3, rate_limit_per_hour=100,
                         rate_limit_backend=backend)
    t = await api.tenant()
    remaining = []
    for _ in range(3):
        r = await api.client.get("/v2/agents", headers=t.headers)
        assert r.status_code == 200
        remaining.append(int(r.headers["x-ratelimit-remaining"]))
        assert r.headers["x-ratelimit-limit"] == "3"
        assert int(r.headers["x-ratelimit-reset"]) == int(START.timestamp()) - 10 + 60
    assert remaining == [2, 1, 0]
    refused = await api.client.get("/v2/agents", headers=t.headers)
    assert refused.status_code == 429
    body = refused.json()
    assert body["success"] is False and body["error"]["code"] == "RATE_LIMIT_EXCEEDED"
    assert refused.headers["retry-after"] == "50" and body["error"]["retry_after"] == 50
    assert "x-request-id" in refused.headers
    clock.advance(seconds=50)
    assert (await api.client.get("/v2/agents", headers=t.headers)).status_code == 200


@pytest.mark.parametrize("backend", ["memory", "database"])
async def test_requests_the_handler_refuses_still_count(make_api: ApiFactory, sql_url: str, backend: str) -> None:
    """Only a 429 gives its request back: a 404 or a 400 from the handler counts (the counters commit before the
    handler runs, in a transaction of their own, so its rollback cannot undo them)."""
    api = await make_api(sql_url, clock=ManualClock(START), rate_limit_per_minute=3, rate_limit_per_hour=100,
                         rate_limit_backend=backend)
    t = await api.tenant()
    assert (await api.client.get("/v2/agents", headers=t.headers)).status_code == 200
    assert (await api.client.get("/v2/agents/999999", headers=t.headers)).status_code == 404
    assert (await api.client.post("/v2/agents", json={"name": ""}, headers=t.headers)).status_code == 400
    assert (await api.client.get("/v2/agents", headers=t.headers)).status_code == 429


async def test_refused_requests_do_not_consume_quota(make_api: ApiFactory, sqlite_url: str) -> None:
    clock = ManualClock(START)
    api = await make_api(sqlite_url, clock=clock, rate_limit_per_minute=2, rate_limit_per_hour=3)
    t = await api.tenant()
    for _ in range(2):
        assert (await api.client.get("/v2/agents", headers=t.headers)).status_code == 200
    for _ in range(5):
        assert (await api.client.get("/v2/agents", headers=t.headers)).status_code == 429
    clock.advance(seconds=60)
    ok = await api.client.get("/v2/agents", headers=t.headers)
    assert ok.status_code == 200
    # the hour window is now the tightest: 3 allowed, 3 used
    assert ok.headers["x-ratelimit-limit"] == "3" and ok.headers["x-ratelimit-remaining"] == "0"
    hour = await api.client.get("/v2/agents", headers=t.headers)
    assert hour.status_code == 429
    assert int(hour.headers["retry-after"]) == int(datetime(2026, 5, 4, 11, tzinfo=UTC).timestamp()
                                                    - clock.now().timestamp())


async def test_keys_have_their_own_counters_and_rotation_shares_them(make_api: ApiFactory, sqlite_url: str) -> None:
    clock = ManualClock(START)
    api = await make_api(sqlite_url, clock=clock, rate_limit_per_minute=3, rate_limit_per_hour=100)
    a = await api.tenant(plan="enterprise")
    b = await api.key_for(a.organization_id, ("*",))
    await api.client.get("/v2/agents", headers=a.headers)
    r = await api.client.get("/v2/agents", headers=b.headers)
    assert r.headers["x-ratelimit-remaining"] == "2"
    rotated = await api.client.post(f"/v2/api-keys/{a.key_id}/rotate", json={}, headers=a.headers)
    assert rotated.status_code == 200
    new = {"Authorization": f"Bearer {rotated.json()['data']['key']}"}
    r = await api.client.get("/v2/agents", headers=new)
    assert r.status_code == 200 and r.headers["x-ratelimit-remaining"] == "0"  # a's GET + rotate + this one
    assert (await api.client.get("/v2/agents", headers=a.headers)).status_code == 429  # old key, same lineage
    assert (await api.client.get("/v2/agents", headers=b.headers)).status_code == 200


@pytest.mark.postgres
async def test_api_processes_on_one_postgresql_share_a_keys_counters(make_api: ApiFactory,
                                                                      postgres_url: str) -> None:
    """Two app instances started separately on the same PostgreSQL database, default backend
    setting: the key's quota is one quota, whichever instance answers."""
    clock = ManualClock(START)
    first = await make_api(postgres_url, clock=clock, rate_limit_per_minute=4, rate_limit_per_hour=100)
    second = await make_api(postgres_url, clock=clock, rate_limit_per_minute=4, rate_limit_per_hour=100)
    assert first.settings.rate_limit_backend == "auto" and first.settings.processes == 1
    t = await first.tenant()
    statuses = []
    for i in range(6):
        app = (first, second)[i % 2]
        statuses.append((await app.client.get("/v2/agents", headers=t.headers)).status_code)
    assert statuses == [200, 200, 200, 200, 429, 429]


async def _counted(api: Api, bucket: str, seconds: int) -> int:
    """The shared counter of ``bucket``'s window of ``seconds`` (the test's only one of that length)."""
    c = rate_limit_counters.c
    async with api.worker()() as r:
        conn = await (await r.get(SqlUnitOfWork)).connection()
        value = (await conn.execute(sa.select(sa.func.max(c.count)).where(
            c.bucket == bucket, c.window_seconds == seconds))).scalar()
        return int(value or 0)


async def test_an_api_process_reserves_a_raised_limits_requests_a_lease_at_a_time(make_api: ApiFactory,
                                                                              sql_url: str) -> None:
    """Shared counters (docs/api.md, Rate limits): a key whose limit was raised to 4,096 a minute has 4 of its
    requests reserved in the database at once, served without a statement, then 3 (a 1,024th of what is left);
    the headers count every request."""
    api = await make_api(sql_url, clock=ManualClock(START), rate_limit_per_minute=4096, rate_limit_per_hour=100_000,
                         rate_limit_backend="database")
    t = await api.tenant()
    remaining, counted = [], []
    for _ in range(8):
        response = await api.client.get("/v2/agents", headers=t.headers)
        assert response.status_code == 200, response.text
        remaining.append(int(response.headers["x-ratelimit-remaining"]))
        counted.append(await _counted(api, f"key:{t.key_id}", 60))
    assert remaining == list(range(4095, 4087, -1))
    assert counted == [4, 4, 4, 4, 7, 7, 7, 10]


async def test_the_default_limits_are_counted_a_request_at_a_time(make_api: ApiFactory, sql_url: str) -> None:
    """Under 2,048 left in a window (every default limit) each request is its own statement: the shared counter
    is exact at every moment, whichever process looks."""
    api = await make_api(sql_url, clock=ManualClock(START), rate_limit_per_minute=60, rate_limit_per_hour=1000,
                         rate_limit_backend="database")
    t = await api.tenant()
    counted = []
    for _ in range(5):
        assert (await api.client.get("/v2/agents", headers=t.headers)).status_code == 200
        counted.append((await _counted(api, f"key:{t.key_id}", 60), await _counted(api, f"key:{t.key_id}", 3600)))
    assert counted == [(n, n) for n in range(1, 6)]


async def test_a_refused_request_gives_back_what_its_process_held(make_api: ApiFactory, sql_url: str) -> None:
    """A request the minute refuses hands the hour's unserved lease back to the shared counter: other processes
    are not refused for requests nobody made."""
    api = await make_api(sql_url, clock=ManualClock(START), rate_limit_per_minute=3, rate_limit_per_hour=100_000,
                         rate_limit_backend="database")
    t = await api.tenant()
    for _ in range(3):
        assert (await api.client.get("/v2/agents", headers=t.headers)).status_code == 200
    assert await _counted(api, f"key:{t.key_id}", 3600) == 32  # the raised hour leased 32 at once (the cap)
    assert (await api.client.get("/v2/agents", headers=t.headers)).status_code == 429
    assert await _counted(api, f"key:{t.key_id}", 3600) == 3
    assert await _counted(api, f"key:{t.key_id}", 60) == 3


@pytest.mark.postgres
async def test_processes_sharing_one_keys_counters_admit_exactly_its_limit(make_api: ApiFactory,
                                                                          postgres_url: str) -> None:
    """Two API processes on one PostgreSQL serve a key in turns at 40 a minute and an hour raised to 100,000
    (leased): together they admit 40, never one more, and the shared counter never passes the limit."""
    clock = ManualClock(START)
    first = await make_api(postgres_url, clock=clock, rate_limit_per_minute=40, rate_limit_per_hour=100_000)
    second = await make_api(postgres_url, clock=clock, rate_limit_per_minute=40, rate_limit_per_hour=100_000)
    t = await first.tenant()
    admitted = 0
    for i in range(100):
        response = await (first, second)[i % 2].client.get("/v2/agents", headers=t.headers)
        assert response.status_code in (200, 429), response.text
        admitted += response.status_code == 200
        assert await _counted(first, f"key:{t.key_id}", 60) <= 40
    assert admitted == 40


@pytest.mark.parametrize("backend", ["memory", "database"])
async def test_an_organizations_keys_share_its_ceiling(make_api: ApiFactory, sql_url: str, backend: str) -> None:
    """Many keys do not multiply an organization's rate: all its keys together get the organization's ceiling,
    besides each key's own limits; a request the ceiling refuses costs its key nothing."""
    clock = ManualClock(START)
    api = await make_api(sql_url, clock=clock, rate_limit_per_minute=3, rate_limit_per_hour=100,
                         org_rate_limit_per_minute=4, org_rate_limit_per_hour=100, rate_limit_backend=backend)
    first = await api.tenant()
    second = await api.key_for(first.organization_id, ("*",))
    third = await api.key_for(first.organization_id, ("*",))
    for tenant in (first, first, second, second):
        response = await api.client.get("/v2/agents", headers=tenant.headers)
        assert response.status_code == 200, response.text
    tightest = response.headers
    assert (tightest["x-ratelimit-limit"], tightest["x-ratelimit-remaining"]) == ("4", "0")
    refused = await api.client.get("/v2/agents", headers=third.headers)
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"]["code"] == "RATE_LIMIT_EXCEEDED"
    assert refused.headers["retry-after"] == "50" and refused.json()["error"]["retry_after"] == 50
    assert (refused.headers["x-ratelimit-limit"], refused.headers["x-ratelimit-remaining"]) == ("4", "0")
    assert "x-request-id" in refused.headers
    other = await api.tenant()  # another organization has a ceiling of its own
    assert (await api.client.get("/v2/agents", headers=other.headers)).status_code == 200
    clock.advance(seconds=50)
    for _ in range(3):  # the refused request did not count against the third key's own 3 a minute
        assert (await api.client.get("/v2/agents", headers=third.headers)).status_code == 200
