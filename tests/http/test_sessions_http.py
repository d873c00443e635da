"""Dashboard sessions through HTTP on both databases: POST /auth/login, GET /auth/session, POST /auth/logout, the
cookie's flags, fixation, CSRF, idle and absolute expiry on a manual clock, the sign-in throttle, and what a
session opens (billing, cloud status, the dashboard) and what it does not (every other route)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from adapters.memory.clock import ManualClock
from entrypoints.http.routing import AuthMode
from tests.http.dashboard_support import PASSWORD, cookie, login, new_user, session_id, set_cookie_header
from tests.http.route_table import served_operations
from tests.support.apps import Api, ApiFactory


async def test_login_answers_the_user_and_sets_a_strict_cookie(any_api: Api) -> None:
    user = await new_user(any_api)
    response = await any_api.client.post("/v2/auth/login", json={"email": user.email.upper(), "password": PASSWORD})
    any_api.client.cookies.clear()
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["user"]["email"] == user.email and isinstance(data["user"]["id"], int)
    assert data["organization_id"] == user.tenant.organization_id
    assert len(data["csrf_token"]) >= 32
    header = set_cookie_header(response)
    flags = {part.strip().split("=")[0].lower() for part in header.split(";")[1:]}
    assert {"httponly", "path", "samesite"} <= flags and "secure" not in flags
    assert "SameSite=Lax" in header or "samesite=lax" in header.lower()
    assert "Path=/" in header
    assert response.headers["cache-control"] == "no-store"
    session = session_id(response)
    described = await any_api.client.get("/v2/auth/session", headers=cookie(session))
    assert described.status_code == 200
    assert described.json()["data"]["csrf_token"] == data["csrf_token"]


async def test_the_cookie_is_secure_over_https(any_api: Api) -> None:
    user = await new_user(any_api)
    response = await any_api.client.post("https://testserver.local/v2/auth/login",
                                         json={"email": user.email, "password": PASSWORD})
    any_api.client.cookies.clear()
    assert response.status_code == 200
    assert "secure" in set_cookie_header(response).lower()


async def test_wrong_password_and_unknown_email_get_the_same_401(any_api: Api) -> None:
    user = await new_user(any_api)
    wrong = await any_api.client.post("/v2/auth/login", json={"email": user.email, "password": "nope-nope"})
    unknown = await any_api.client.post("/v2/auth/login", json={"email": "x" + user.email, "password": PASSWORD})
    assert wrong.status_code == unknown.status_code == 401
    assert wrong.json()["error"]["code"] == unknown.json()["error"]["code"] == "INVALID_CREDENTIALS"
    assert "set-cookie" not in wrong.headers


async def test_a_session_opens_cloud_status(any_api: Api) -> None:
    user = await new_user(any_api)
    session, _ = await login(any_api, user)
    response = await any_api.client.get("/v2/cloud/status", headers=cookie(session))
    assert response.status_code == 200, response.text


async def test_logout_ends_the_session_on_the_server(any_api: Api) -> None:
    user = await new_user(any_api)
    session, csrf = await login(any_api, user)
    response = await any_api.client.post("/v2/auth/logout", headers={**cookie(session), "X-CSRF-Token": csrf})
    assert response.status_code == 204
    assert "max-age=0" in set_cookie_header(response).lower()
    again = await any_api.client.get("/v2/cloud/status", headers=cookie(session))
    assert again.status_code == 401
    assert (await any_api.client.get("/v2/auth/session", headers=cookie(session))).status_code == 401


async def test_the_session_id_changes_at_every_login_and_the_old_one_ends(any_api: Api) -> None:
    user = await new_user(any_api)
    first, _ = await login(any_api, user)
    second, _ = await login(any_api, user, headers=cookie(first))
    assert first != second
    assert (await any_api.client.get("/v2/auth/session", headers=cookie(first))).status_code == 401
    assert (await any_api.client.get("/v2/auth/session", headers=cookie(second))).status_code == 200


async def test_a_planted_session_id_is_never_adopted(any_api: Api) -> None:
    user = await new_user(any_api)
    planted = "attacker-chosen-value"
    response = await any_api.client.post("/v2/auth/login", json={"email": user.email, "password": PASSWORD},
                                         headers=cookie(planted))
    any_api.client.cookies.clear()
    assert session_id(response) != planted
    assert (await any_api.client.get("/v2/auth/session", headers=cookie(planted))).status_code == 401


@pytest.mark.parametrize("token", [None, "", "wrong-token"])
async def test_unsafe_methods_need_the_csrf_token(any_api: Api, token: str | None) -> None:
    user = await new_user(any_api)
    session, _ = await login(any_api, user)
    headers = cookie(session) | ({"X-CSRF-Token": token} if token is not None else {})
    response = await any_api.client.post("/v2/auth/logout", headers=headers)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "csrf_failed"
    assert (await any_api.client.get("/v2/auth/session", headers=cookie(session))).status_code == 200


async def test_idle_and_absolute_expiry(make_api: ApiFactory, sql_url: str) -> None:
    clock = ManualClock()
    api = await make_api(sql_url, clock=clock)
    user = await new_user(api)
    session, _ = await login(api, user)
    # used every 29 minutes, it stays open ...
    for _ in range(4):
        clock.advance(minutes=29)
        assert (await api.client.get("/v2/auth/session", headers=cookie(session))).status_code == 200
    # ... until 30 idle minutes (and the minute the last use may not have been written in)
    clock.advance(minutes=31, seconds=1)
    idle = await api.client.get("/v2/auth/session", headers=cookie(session))
    assert idle.status_code == 401 and idle.json()["error"]["code"] == "INVALID_SESSION"

    session, _ = await login(api, user)
    for _ in range(int(timedelta(hours=12) / timedelta(minutes=20))):
        clock.advance(minutes=20)
        last = await api.client.get("/v2/auth/session", headers=cookie(session))
    assert last.status_code == 401  # 12 hours after sign-in, however busy
    clock.advance(seconds=0)


async def test_idle_expiry_never_comes_early(make_api: ApiFactory, sql_url: str) -> None:
    """The last use is written at most once a minute: a use 59 s after the written one is not written, yet the
    session lives 30 idle minutes from it, not from the written one."""
    clock = ManualClock()
    api = await make_api(sql_url, clock=clock)
    user = await new_user(api)
    session, _ = await login(api, user)  # written: the sign-in
    clock.advance(seconds=59)
    assert (await api.client.get("/v2/auth/session", headers=cookie(session))).status_code == 200  # not written
    clock.advance(minutes=29, seconds=59)  # 30:58 after sign-in, 29:59 after the last use
    assert (await api.client.get("/v2/auth/session", headers=cookie(session))).status_code == 200
    clock.advance(minutes=31, seconds=1)  # over 30 idle minutes after any use the session may have had
    ended = await api.client.get("/v2/auth/session", headers=cookie(session))
    assert ended.status_code == 401 and ended.json()["error"]["code"] == "INVALID_SESSION"


async def test_five_failed_logins_per_email_then_429(make_api: ApiFactory, sql_url: str) -> None:
    clock = ManualClock()
    api = await make_api(sql_url, clock=clock)
    user = await new_user(api)
    other = await new_user(api)
    for _ in range(5):
        response = await api.client.post("/v2/auth/login", json={"email": user.email, "password": "wrong-pass"})
        assert response.status_code == 401
    refused = await api.client.post("/v2/auth/login", json={"email": user.email, "password": PASSWORD})
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "RATE_LIMIT_EXCEEDED"
    assert int(refused.headers["retry-after"]) >= 1
    # another email is not affected
    assert (await api.client.post("/v2/auth/login", json={"email": other.email, "password": PASSWORD})
            ).status_code == 200
    api.client.cookies.clear()
    clock.advance(minutes=15)
    assert (await api.client.post("/v2/auth/login", json={"email": user.email, "password": PASSWORD})
            ).status_code == 200
    api.client.cookies.clear()


async def test_failed_logins_per_client_address_then_429_whatever_the_email(make_api: ApiFactory,
                                                                             private_sql_url: str) -> None:
    # a database of its own: every test's client signs in from the same address, and the count is per address
    clock = ManualClock()
    api = await make_api(private_sql_url, clock=clock, environ={"PARLEY_SESSION_LOGIN_FAILURES_PER_ADDRESS": "3"})
    users = [await new_user(api) for _ in range(3)]
    for user in users:  # one failure per email: the per-email throttle (5) never trips
        response = await api.client.post("/v2/auth/login", json={"email": user.email, "password": "wrong-pass"})
        assert response.status_code == 401, response.text
    fresh = await new_user(api)
    for attempt in ({"email": "nobody@example.test", "password": "wrong-pass"},
                    {"email": fresh.email, "password": PASSWORD}):  # the right password too
        refused = await api.client.post("/v2/auth/login", json=attempt)
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "RATE_LIMIT_EXCEEDED"
        assert "address" in refused.json()["error"]["message"] and int(refused.headers["retry-after"]) >= 1
    page = await api.client.post("/dashboard/login", data={"email": fresh.email, "password": PASSWORD},
                                 headers={"Origin": "http://testserver.local"})
    assert page.status_code == 429 and "from this address" in page.text
    # a forwarded-for header does not change the address counted (only the connection's is)
    other = await api.client.post("/v2/auth/login", json={"email": fresh.email, "password": PASSWORD},
                                  headers={"X-Forwarded-For": "203.0.113.9"})
    assert other.status_code == 429
    clock.advance(minutes=15)
    assert (await api.client.post("/v2/auth/login", json={"email": fresh.email, "password": PASSWORD})
            ).status_code == 200
    api.client.cookies.clear()


async def test_a_session_opens_only_the_routes_that_accept_one(any_api: Api) -> None:
    """Read from the route table: every route for a Bearer key (or a widget token) answers 401 to a session (with
    its CSRF token); the billing, cloud-status and audit-log routes and /auth/* take it."""
    user = await new_user(any_api)
    session, csrf = await login(any_api, user)
    headers = {**cookie(session), "X-CSRF-Token": csrf}
    accepting = []
    operations = [op for op in served_operations(any_api.client.app) if op.access is not None]
    for op in operations:
        assert op.access is not None
        if op.access.public or op.label == "POST /auth/logout":
            continue
        response = await any_api.client.request(op.method, op.url(), headers=headers)
        if op.access.auth in (AuthMode.KEY_OR_SESSION, AuthMode.SESSION):
            assert response.status_code not in (401, 403), f"{op.label}: {response.status_code} {response.text}"
            accepting.append(op.label)
        else:
            assert response.status_code == 401, f"{op.label}: {response.status_code} {response.text}"
            assert response.json()["error"]["code"] in ("MISSING_AUTH", "INVALID_WIDGET_TOKEN"), op.label
    assert "GET /cloud/status" in accepting and "GET /auth/session" in accepting
    assert "GET /audit-events" in accepting  # an owner's or admin's session reads the audit log
    assert all(label.split(" ", 1)[1].startswith(("/billing", "/cloud", "/auth/", "/audit-events"))
               for label in accepting), accepting
    assert len(operations) - len(accepting) > 100
