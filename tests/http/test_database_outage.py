"""An unreachable database answers 503 service_unavailable with Retry-After, never 500, on every kind of route:
the app is pointed at a PostgreSQL port nobody listens on, or at an SQLite file that cannot be opened."""

from __future__ import annotations

import secrets
import socket
from pathlib import Path

import httpx
import pytest

from domain.api_keys import BASE62, SECRET_LENGTH, compose
from tests.conftest import ApiFactory


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
