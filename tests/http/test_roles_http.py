"""Roles at the HTTP level, read from the route table (pages and API routes added later are covered too): every
role, every dashboard page and form, every session-authenticated API route; a page or route answers 403 exactly
when the role's scopes (domain/roles.py) hold none of the scopes it declares. And the day-to-day expectations in
words: a viewer reads and changes nothing, a member works but mints no key, changes no billing and manages no
user, an admin and an owner do everything."""

from __future__ import annotations

from typing import Any

import pytest

from domain.roles import ROLES, Role, scopes_of
from entrypoints.http.dashboard import page_handlers
from entrypoints.http.dashboard.gate import PUBLIC, SCOPES, STREAM
from entrypoints.http.routing import AuthMode
from tests.http.dashboard_support import add_user, cookie, csrf_of, login
from tests.http.route_table import served_operations
from tests.support.apps import Api, ApiFactory

UNKNOWN = "999999"


@pytest.fixture
async def open_api(make_api: ApiFactory, sql_url: str) -> Api:
    """A user's request budget lifted: the matrix sends a request for every page and route, and a 429 would mask
    the authorization answer it reads."""
    return await make_api(sql_url, rate_limit_per_minute=100_000, rate_limit_per_hour=1_000_000,
                          org_rate_limit_per_minute=100_000, org_rate_limit_per_hour=1_000_000)


def _concrete(path: str) -> str:
    out, i = "", 0
    while i < len(path):
        if path[i] == "{":
            end = path.index("}", i)
            out += UNKNOWN
            i = end + 1
            continue
        out += path[i]
        i += 1
    return out


def page_table() -> list[tuple[str, str, tuple[str, ...], bool]]:
    """Every signed-in page: method, concrete path, declared scopes, and whether it is a live view's event stream."""
    found = []
    for handler in page_handlers():
        if handler.opt.get(PUBLIC):
            continue
        for method in sorted(handler.http_methods - {"OPTIONS", "HEAD"}):
            for path in handler.paths:
                found.append((method, ("/dashboard" + _concrete(path)).rstrip("/") or "/dashboard",
                              tuple(handler.opt.get(SCOPES) or ()), bool(handler.opt.get(STREAM))))
    return found


async def signed_in(api: Api, tenant: Any, role: Role) -> dict[str, str]:
    user = await add_user(api, tenant, role=role)
    session, csrf = await login(api, user)
    return {**cookie(session), "X-CSRF-Token": csrf}


def allowed(role: Role, required: tuple[str, ...]) -> bool:
    return not required or scopes_of(role).grants_any(required)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.slow
async def test_every_page_and_form_answers_403_exactly_when_the_role_lacks_its_scopes(open_api: Api,
                                                                                     role: Role) -> None:
    tenant = await open_api.tenant()
    headers = await signed_in(open_api, tenant, role)
    token = headers["X-CSRF-Token"]
    table = page_table()
    assert len(table) >= 30
    for method, path, required, streams in table:
        if path == "/dashboard/logout":
            continue  # it ends the session the next requests use
        if streams and allowed(role, required):
            continue  # an admitted live view streams until its session ends (test_dashboard_live_http.py)
        if method == "GET":
            response = await open_api.client.get(path, headers=headers)
        else:
            response = await open_api.client.post(path, data={"csrf_token": token}, headers=headers)
        if allowed(role, required):
            assert response.status_code != 403, f"{role} {method} {path}: {response.status_code}"
        else:
            assert response.status_code == 403, f"{role} {method} {path}: {response.status_code}"
            assert f"Your role ({role})" in response.text


@pytest.mark.parametrize("role", ROLES)
async def test_every_session_api_route_answers_403_exactly_when_the_role_lacks_its_scopes(open_api: Api,
                                                                                         role: Role) -> None:
    tenant = await open_api.tenant()
    headers = await signed_in(open_api, tenant, role)
    checked = 0
    for op in served_operations(open_api.client.app):
        access = op.access
        if access is None or access.auth not in (AuthMode.KEY_OR_SESSION, AuthMode.SESSION):
            continue
        if op.label == "POST /auth/logout":
            continue
        response = await open_api.client.request(op.method, op.url(), headers=headers)
        if allowed(role, access.scopes):
            assert response.status_code not in (401, 403), f"{role} {op.label}: {response.text}"
        else:
            assert response.status_code == 403, f"{role} {op.label}: {response.status_code} {response.text}"
            assert response.json()["error"]["code"] == "INSUFFICIENT_SCOPE"
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize(("role", "reads", "works", "administers"), [
    (Role.OWNER, True, True, True),
    (Role.ADMIN, True, True, True),
    (Role.MEMBER, True, True, False),
    (Role.VIEWER, True, False, False),
])
async def test_what_each_role_may_do_in_words(any_api: Api, role: Role, reads: bool, works: bool,
                                             administers: bool) -> None:
    tenant = await any_api.tenant()
    headers = await signed_in(any_api, tenant, role)
    agents = await any_api.client.get("/dashboard/agents", headers=headers)
    assert (agents.status_code == 200) is reads
    token = csrf_of(agents.text)
    created = await any_api.client.post("/dashboard/agents", headers=headers, follow_redirects=False,
                                        data={"csrf_token": token, "name": "Front desk", "prompt": "Hello"})
    assert (created.status_code == 303) is works, created.status_code
    keys = await any_api.client.get("/dashboard/api-keys", headers=headers)
    assert (keys.status_code == 200) is administers
    plan = await any_api.client.patch("/v2/billing/subscription", json={"plan": "enterprise"}, headers=headers)
    assert (plan.status_code != 403) is administers, plan.text
    invoices = await any_api.client.get("/v2/billing/invoices", headers=headers)
    assert invoices.status_code == 200  # every role reads billing
