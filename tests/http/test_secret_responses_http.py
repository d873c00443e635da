"""Responses that carry a secret (a new or rotated API key, a webhook signing secret, a calendar feed token,
a widget token): their stored idempotent copy is sealed, never plain text in the database, and is still
replayed byte for byte; they, and their replays, say Cache-Control: no-store. Every response says
X-Content-Type-Options: nosniff."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import sqlalchemy as sa

from adapters.sql.engine import create_engine
from adapters.sql.tables import idempotency_keys
from entrypoints.http.routing import AuthMode
from tests.http.route_table import served_operations
from tests.support.apps import Api, ApiFactory, Tenant

HOOK = "https://hooks.example.com/parley"
# path, body, and the field of ``data`` that holds the secret
SecretRequest = tuple[str, dict[str, Any] | None, str]


async def _created(api: Api, t: Tenant, path: str, body: dict[str, Any]) -> int:
    response = await api.client.post(path, json=body, headers=t.headers)
    assert response.status_code == 201, response.text
    return int(response.json()["data"]["id"])


async def _new_key(api: Api, t: Tenant) -> SecretRequest:
    return "/v2/api-keys", {"name": "crm", "scopes": ["agents:read"]}, "key"


async def _rotated_key(api: Api, t: Tenant) -> SecretRequest:
    other = await api.key_for(t.organization_id, ("agents:read",))
    return f"/v2/api-keys/{other.key_id}/rotate", {"grace_period_hours": 1}, "key"


async def _webhook(api: Api, t: Tenant) -> SecretRequest:
    return "/v2/webhooks", {"url": HOOK, "events": ["call.ended"]}, "secret"


async def _webhook_secret(api: Api, t: Tenant) -> SecretRequest:
    hook = await _created(api, t, "/v2/webhooks", {"url": HOOK, "events": ["call.ended"]})
    return f"/v2/webhooks/{hook}/rotate-secret", {"grace_period_hours": 1}, "secret"


async def _feed_token(api: Api, t: Tenant) -> SecretRequest:
    calendar = await _created(api, t, "/v2/scheduling/calendars", {"name": "Desk", "timezone": "UTC"})
    return f"/v2/scheduling/calendars/{calendar}/feed-token", None, "token"


async def _widget_token(api: Api, t: Tenant) -> SecretRequest:
    agent = await _created(api, t, "/v2/agents", {"name": "Caller"})
    campaign = await _created(api, t, "/v2/campaigns", {"name": "Call me", "agent_id": agent})
    return "/v2/widget/tokens", {"campaign_id": campaign, "allowed_origins": ["https://shop.example"]}, "token"


SECRET_ROUTES: dict[str, Callable[[Api, Tenant], Awaitable[SecretRequest]]] = {
    "createApiKey": _new_key,
    "rotateApiKey": _rotated_key,
    "createWebhook": _webhook,
    "rotateWebhookSecret": _webhook_secret,
    "createCalendarFeedToken": _feed_token,
    "createWidgetToken": _widget_token,
}


async def _stored_rows(api: Api, organization_id: int) -> list[dict[str, Any]]:
    engine = create_engine(api.settings.database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(sa.select(idempotency_keys).where(
                idempotency_keys.c.organization_id == organization_id))
            return [dict(row) for row in rows.mappings()]
    finally:
        await engine.dispose()


@pytest.mark.parametrize("operation", sorted(SECRET_ROUTES))
async def test_a_stored_secret_is_sealed_and_replayed_whole(any_api: Api, operation: str) -> None:
    t = await any_api.tenant(plan="enterprise")
    path, body, field = await SECRET_ROUTES[operation](any_api, t)
    headers = {**t.headers, "Idempotency-Key": f"sealed-{operation}"}
    first = await any_api.client.post(path, json=body, headers=headers)
    assert first.status_code in (200, 201), first.text
    secret = first.json()["data"][field]
    assert len(secret) >= 20
    assert first.headers["cache-control"] == "no-store"

    [row] = await _stored_rows(any_api, t.organization_id)
    assert row["key"] == f"sealed-{operation}" and row["response_sealed"] is True
    everything = repr(row).encode() + bytes(row["response_body"])
    for fragment in (secret, secret[-16:], secret[:16]):
        assert fragment.encode() not in everything, f"{operation}: the secret is stored in plain text"

    replay = await any_api.client.post(path, json=body, headers=headers)
    assert replay.status_code == first.status_code
    assert replay.headers.get("idempotency-replayed") == "true"
    assert replay.content == first.content
    assert replay.headers["cache-control"] == "no-store"
    assert replay.headers["content-type"] == first.headers["content-type"]


async def test_a_response_without_a_secret_is_stored_as_it_is(any_api: Api) -> None:
    """Stored in plain text; like every answer to an authenticated request, it is kept out of caches."""
    t = await any_api.tenant()
    headers = {**t.headers, "Idempotency-Key": "plain"}
    created = await any_api.client.post("/v2/agents", json={"name": "Plain"}, headers=headers)
    assert created.status_code == 201 and created.headers["cache-control"] == "no-store"
    [row] = await _stored_rows(any_api, t.organization_id)
    assert row["response_sealed"] is False and bytes(row["response_body"]) == created.content
    replay = await any_api.client.post("/v2/agents", json={"name": "Plain"}, headers=headers)
    assert replay.headers.get("idempotency-replayed") == "true" and replay.headers["cache-control"] == "no-store"
    listed = await any_api.client.get("/v2/agents", headers=t.headers)
    assert listed.status_code == 200 and listed.headers["cache-control"] == "no-store"


async def test_every_authenticated_json_response_says_no_store(make_api: ApiFactory, sqlite_url: str) -> None:
    """Read from the route table: every GET for a key answers with Cache-Control: no-store (transcripts, call logs,
    usage, billing...), its errors included (a 404, a 403 for a missing scope, a 429); an unauthenticated 401 of
    a route without a secret is no one's data and says nothing."""
    api = await make_api(sqlite_url, rate_limit_per_minute=100_000, rate_limit_per_hour=1_000_000)
    t = await api.tenant(plan="enterprise")
    checked = []
    for op in served_operations(api.client.app):
        if op.method != "GET" or op.access is None or op.access.auth not in (AuthMode.KEY, AuthMode.KEY_OR_SESSION):
            continue
        response = await api.client.get(op.url(), headers=t.headers)
        if response.headers.get("content-type", "").startswith("application/json"):
            assert response.headers.get("cache-control") == "no-store", (op.label, response.status_code)
            checked.append(op.label)
    assert {"GET /call-logs", "GET /call-logs/{id}/transcript", "GET /usage", "GET /billing/invoices",
            "GET /billing/subscription", "GET /api-keys", "GET /agents"} <= set(checked), checked
    narrow = await api.key_for(t.organization_id, ("agents:read",))
    forbidden = await api.client.get("/v2/usage", headers=narrow.headers)
    assert forbidden.status_code == 403 and forbidden.headers["cache-control"] == "no-store"
    missing = await api.client.get("/v2/agents/999999", headers=t.headers)
    assert missing.status_code == 404 and missing.headers["cache-control"] == "no-store"
    anonymous = await api.client.get("/v2/agents")
    assert anonymous.status_code == 401 and "cache-control" not in anonymous.headers


async def test_every_response_of_a_secret_route_says_no_store(api: Api) -> None:
    t = await api.tenant(plan="enterprise")
    unauthenticated = await api.client.post("/v2/api-keys", json={"name": "x", "scopes": ["*"]})
    assert unauthenticated.status_code == 401 and unauthenticated.headers["cache-control"] == "no-store"
    refused = await api.client.post("/v2/api-keys", json={"name": "x", "scopes": []}, headers=t.headers)
    assert refused.status_code == 400 and refused.headers["cache-control"] == "no-store"
    made = await api.client.post("/v2/api-keys", json={"name": "x", "scopes": ["agents:read"]}, headers=t.headers)
    assert made.status_code == 201 and made.headers["cache-control"] == "no-store"


async def test_every_kind_of_response_says_nosniff(api: Api) -> None:
    t = await api.tenant()
    for method, url, headers in [
        ("GET", "/v2/agents", t.headers),  # 200
        ("GET", "/v2/agents", {}),  # 401
        ("GET", "/v2/agents", {"Authorization": "Bearer parley_sk_bogus"}),  # 401
        ("GET", "/v2/nowhere", {}),  # 404, no route
        ("GET", "/v2/agents/999999", t.headers),  # 404 from the handler
        ("GET", "/v2/agents?search=%00", t.headers),  # 400 before routing
        ("GET", "/v2/openapi.json", {}),
        ("GET", "/v2/health", {}),
        ("PATCH", "/v2/health", {}),  # 405
    ]:
        response = await api.client.request(method, url, headers=headers)
        assert response.headers.get("x-content-type-options") == "nosniff", (method, url, response.status_code)


ROTATED_KEY = "a-rotated-secret-key-of-fifty-random-characters-0123"


async def test_a_sealed_replay_survives_a_secret_key_rotation(any_api: Api, make_api: Any) -> None:
    t = await any_api.tenant(plan="enterprise")
    path, body, _ = await _webhook(any_api, t)
    headers = {**t.headers, "Idempotency-Key": "before-rotation"}
    first = await any_api.client.post(path, json=body, headers=headers)
    assert first.status_code == 201, first.text

    rotated = await make_api(any_api.settings.database_url, secret_key=ROTATED_KEY,
                             previous_secret_keys=(any_api.settings.secret_key,))
    replay = await rotated.client.post(path, json=body, headers=headers)
    assert replay.status_code == 201 and replay.headers.get("idempotency-replayed") == "true"
    assert replay.content == first.content
    # what the new key seals opens too
    again = await rotated.client.post(path, json=body, headers={**t.headers, "Idempotency-Key": "after-rotation"})
    assert again.status_code == 201
    assert (await rotated.client.post(path, json=body, headers={**t.headers, "Idempotency-Key": "after-rotation"})
            ).content == again.content


async def test_a_sealed_replay_under_a_forgotten_key_is_a_documented_conflict(any_api: Api, make_api: Any) -> None:
    t = await any_api.tenant(plan="enterprise")
    path, body, _ = await _webhook(any_api, t)
    headers = {**t.headers, "Idempotency-Key": "forgotten-key"}
    first = await any_api.client.post(path, json=body, headers=headers)
    assert first.status_code == 201, first.text

    rotated = await make_api(any_api.settings.database_url, secret_key=ROTATED_KEY)
    replay = await rotated.client.post(path, json=body, headers=headers)
    assert replay.status_code == 409, replay.text
    assert replay.json()["error"]["code"] == "idempotency_replay_unavailable"
    assert "idempotency-replayed" not in replay.headers
    listed = await rotated.client.get("/v2/webhooks", headers=t.headers)
    assert len(listed.json()["data"]) == 1  # not acted on again
    document = (await rotated.client.get("/v2/openapi.json")).json()
    conflict = document["paths"]["/webhooks"]["post"]["responses"]["409"]["description"]
    assert "idempotency_replay_unavailable" in conflict
