"""An unreachable database answers 503 service_unavailable with Retry-After, never 500, on every kind of route:
the app is pointed at a PostgreSQL port nobody listens on, or at an SQLite file that cannot be opened; a PostgreSQL
that refuses new connections (too many) is unavailable too."""

from __future__ import annotations

import secrets
import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from domain.api_keys import BASE62, SECRET_LENGTH, compose
from tests.support.apps import ApiFactory
from tests.support.databases import asyncpg_dsn, pg_admin_url


def _dead_port() -> int:
    """A local port nobody listens on (taken from the system, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["success"] is False and body["error"]["code"] == "service_unavailable"
    assert int(response.headers["retry-after"]) >= 1
    assert response.headers.get("x-request-id")
    assert "Traceback" not in response.text


@pytest.fixture(params=["sqlite", "postgres"])
def dead_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path}/no-such-directory/parley.db"
    return f"postgresql+asyncpg://postgres@127.0.0.1:{_dead_port()}/parley"


async def test_an_unreachable_database_answers_503_everywhere(make_api: ApiFactory, dead_url: str) -> None:
    api = await make_api(dead_url, rate_limit_backend="database")
    key = {"Authorization": f"Bearer {compose(''.join(secrets.choice(BASE62) for _ in range(SECRET_LENGTH)))}"}
    attempts = [
        ("GET", "/v2/agents", {"headers": key}),  # a key route: authentication reads the database
        ("POST", "/v2/agents", {"headers": {**key, "Idempotency-Key": "k1"}, "json": {"name": "A"}}),
        ("GET", "/v2/billing/subscription", {"headers": {"Cookie": "parley_session=abc"}}),  # a session route
        ("POST", "/v2/auth/login", {"json": {"email": "ada@example.com", "password": "correct horse"}}),  # public
        ("GET", "/v2/widget/campaign", {"headers": {"Authorization": "Widget abc.def.ghi"}}),
    ]
    for method, path, options in attempts:
        response = await api.client.request(method, path, **options)
        if path == "/v2/widget/campaign" and response.status_code == 401:
            continue  # a token that does not verify is refused without the database
        _unavailable(response)


async def test_the_dashboard_says_so_too(make_api: ApiFactory, dead_url: str) -> None:
    api = await make_api(dead_url)
    for method, path, options in (("GET", "/dashboard", {"headers": {"Cookie": "parley_session=abc"}}),
                                  ("POST", "/dashboard/login", {"data": {"email": "a@example.com", "password": "pw"},
                                                                "headers": {"Origin": "http://testserver.local"}})):
        response = await api.client.request(method, path, **options)
        assert response.status_code == 503, (path, response.status_code, response.text[:300])
        assert int(response.headers["retry-after"]) >= 1


@pytest.fixture
async def refusing_url(postgres_url: str) -> AsyncIterator[str]:
    """The run's PostgreSQL as a role allowed no connection: every connect is refused with 53300, "too many
    connections for role", as a server at ``max_connections`` refuses them ("too many clients already")."""
    import asyncpg

    role = f"parley_full_{uuid.uuid4().hex[:10]}"
    dsn = asyncpg_dsn(pg_admin_url())
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT 0')
        yield postgres_url.replace("postgres@", f"{role}@", 1)
    finally:
        await conn.execute(f'DROP ROLE IF EXISTS "{role}"')
        await conn.close()


@pytest.mark.postgres
async def test_a_postgresql_refusing_new_connections_answers_503(make_api: ApiFactory, refusing_url: str) -> None:
    api = await make_api(refusing_url, rate_limit_backend="database")
    key = {"Authorization": f"Bearer {compose(''.join(secrets.choice(BASE62) for _ in range(SECRET_LENGTH)))}"}
    _unavailable(await api.client.get("/v2/agents", headers=key))
    _unavailable(await api.client.post("/v2/auth/login", json={"email": "ada@example.com", "password": "pw"}))
