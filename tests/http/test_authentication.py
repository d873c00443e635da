"""Authentication at the edge: malformed, unknown, revoked and expired keys, and the expiry notice."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

import httpx

from adapters.memory.clock import ManualClock
from domain.api_keys import BASE62, PREFIX, SECRET_LENGTH, compose
from tests.support.apps import Api, ApiFactory

PROTECTED = "/v2/agents"


def _unauthorized(response: httpx.Response, code: str) -> None:
    assert response.status_code == 401, response.text
    body = response.json()
    assert body == {"success": False, "error": {"code": code, "message": body["error"]["message"]}}
    assert body["error"]["message"]
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.headers.get("x-request-id")
    assert "x-ratelimit-limit" not in response.headers, "an unauthenticated request is not counted"


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _random_key() -> str:
    return compose("".join(secrets.choice(BASE62) for _ in range(SECRET_LENGTH)))


async def test_missing_or_empty_credentials_answer_missing_auth(api: Api) -> None:
    for headers in ({}, {"Authorization": ""}, {"Authorization": "Bearer"}, {"Authorization": "Bearer   "},
                    {"Authorization": "Token abc"}, {"Authorization": "Basic dXNlcjpwYXNz"}):
        _unauthorized(await api.client.get(PROTECTED, headers=headers), "MISSING_AUTH")


async def test_a_malformed_key_answers_invalid_api_key(api: Api) -> None:
    t = await api.tenant()
    last = t.key[-1]
    bad_checksum = t.key[:-1] + ("A" if last != "A" else "B")
    for key in (bad_checksum, t.key[:-1], t.key + "x", "parley_sk_short", "sk_live_" + t.key[10:],
                t.key.replace(PREFIX, "other_sk_"), "not a key at all", t.key.upper()):
        _unauthorized(await api.client.get(PROTECTED, headers=_bearer(key)), "INVALID_API_KEY")
    assert (await api.client.get(PROTECTED, headers=t.headers)).status_code == 200


async def test_a_well_formed_unknown_key_answers_invalid_api_key(api: Api) -> None:
    _unauthorized(await api.client.get(PROTECTED, headers=_bearer(_random_key())), "INVALID_API_KEY")


async def test_the_scheme_is_case_insensitive(api: Api) -> None:
    t = await api.tenant()
    for scheme in ("bearer", "BEARER", "Bearer"):
        response = await api.client.get(PROTECTED, headers={"Authorization": f"{scheme} {t.key}"})
        assert response.status_code == 200, scheme


async def test_a_revoked_key_answers_401(api: Api) -> None:
    admin = await api.tenant(plan="enterprise")
    doomed = await api.key_for(admin.organization_id, ("agents:read",))
    assert (await api.client.get(PROTECTED, headers=doomed.headers)).status_code == 200
    revoked = await api.client.delete(f"/v2/api-keys/{doomed.key_id}", headers=admin.headers)
    assert revoked.status_code == 204
    _unauthorized(await api.client.get(PROTECTED, headers=doomed.headers), "INVALID_API_KEY")
    assert (await api.client.get(PROTECTED, headers=admin.headers)).status_code == 200


async def test_an_expired_key_answers_401(make_api: ApiFactory, sqlite_url: str) -> None:
    clock = ManualClock()
    api = await make_api(sqlite_url, clock=clock)
    t = await api.tenant(expires_at=clock.now() + timedelta(days=7))
    assert (await api.client.get(PROTECTED, headers=t.headers)).status_code == 200
    clock.advance(days=7, seconds=-1)
    assert (await api.client.get(PROTECTED, headers=t.headers)).status_code == 200
    clock.advance(seconds=1)
    _unauthorized(await api.client.get(PROTECTED, headers=t.headers), "INVALID_API_KEY")
    clock.advance(days=1)
    _unauthorized(await api.client.get(PROTECTED, headers=t.headers), "INVALID_API_KEY")


def _days_left(expires_at: datetime, now: datetime) -> int:
    return int((expires_at - now).total_seconds() // 86400)


async def test_a_key_near_expiry_gets_the_expiry_headers(make_api: ApiFactory, sqlite_url: str) -> None:
    clock = ManualClock()
    api = await make_api(sqlite_url, clock=clock)
    expires_at = clock.now() + timedelta(days=5)
    t = await api.tenant(expires_at=expires_at)
    response = await api.client.get(PROTECTED, headers=t.headers)
    assert response.status_code == 200
    assert response.headers["x-api-key-expires-at"] == expires_at.isoformat().replace("+00:00", "Z")
    assert datetime.fromisoformat(response.headers["x-api-key-expires-at"]) == expires_at
    assert response.headers["x-api-key-expires-in-days"] == str(_days_left(expires_at, clock.now())) == "5"

    clock.advance(days=1, hours=12)
    later = await api.client.get(PROTECTED, headers=t.headers)
    assert later.headers["x-api-key-expires-in-days"] == str(_days_left(expires_at, clock.now())) == "3"
    clock.advance(days=3, hours=11)
    last_hour = await api.client.get(PROTECTED, headers=t.headers)
    assert last_hour.headers["x-api-key-expires-in-days"] == "0"

    # on error answers of an authenticated request too
    missing = await api.client.get("/v2/agents/999999", headers=t.headers)
    assert missing.status_code == 404 and missing.headers["x-api-key-expires-in-days"] == "0"


async def test_the_notice_starts_seven_days_before_expiry(make_api: ApiFactory, sqlite_url: str) -> None:
    clock = ManualClock()
    api = await make_api(sqlite_url, clock=clock)
    far = await api.tenant(expires_at=clock.now() + timedelta(days=30))
    never = await api.tenant()
    for t in (far, never):
        response = await api.client.get(PROTECTED, headers=t.headers)
        assert response.status_code == 200
        assert "x-api-key-expires-at" not in response.headers
        assert "x-api-key-expires-in-days" not in response.headers
    clock.advance(days=23, seconds=-1)
    assert "x-api-key-expires-at" not in (await api.client.get(PROTECTED, headers=far.headers)).headers
    clock.advance(seconds=1)
    at_seven = await api.client.get(PROTECTED, headers=far.headers)
    assert at_seven.headers["x-api-key-expires-in-days"] == "7"


async def test_a_real_clock_key_expiring_in_five_days_reports_four_or_five(api: Api) -> None:
    expires_at = datetime.now(UTC) + timedelta(days=5)
    t = await api.tenant(expires_at=expires_at)
    response = await api.client.get(PROTECTED, headers=t.headers)
    assert response.headers["x-api-key-expires-in-days"] in ("4", "5")


async def test_two_authorization_headers_are_refused(api: Api) -> None:
    """Which of two credentials counts would be a guess (a proxy and the server may pick differently): 400."""
    tenant = await api.tenant()
    for second in (f"Bearer {tenant.key}", "Bearer parley_sk_other", "Widget abc"):
        response = await api.client.get(PROTECTED, headers=[("Authorization", f"Bearer {tenant.key}"),
                                                            ("Authorization", second)])
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["code"] == "bad_request"
        assert error["details"]["validation_errors"] == {"Authorization": "must be sent once"}
        assert response.headers.get("x-request-id")
    assert (await api.client.get(PROTECTED, headers=_bearer(tenant.key))).status_code == 200
