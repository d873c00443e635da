"""Two-factor sign-in (TOTP, computed in the test with pyotp at the app's clock) and asking again ("sudo mode"),
through the dashboard and the API, on SQLite and PostgreSQL: enrolling, signing in with a code (MFA_REQUIRED
without it, INVALID_CREDENTIALS with a wrong one), an organization that requires it sending its users to enrol
first, and a session older than 5 minutes asked for the password (or a code) before minting a key or changing
billing."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pyotp
import pytest

from adapters.memory.clock import ManualClock
from tests.http.dashboard_support import PASSWORD, User, add_user, cookie, login, new_user
from tests.http.scheduling_support import UNLIMITED
from tests.support.apps import Api, ApiFactory

START = datetime(2026, 3, 2, 12, tzinfo=UTC)


@pytest.fixture
async def api(make_api: ApiFactory, sql_url: str) -> AsyncIterator[Api]:
    yield await make_api(sql_url, clock=ManualClock(START), **UNLIMITED)


async def signed_in(api: Api, user: User, totp: str | None = None) -> tuple[dict[str, str], str]:
    if totp is None:
        session, csrf = await login(api, user)
        return cookie(session), csrf
    response = await api.client.post("/v2/auth/login", json={"email": user.email, "password": user.password,
                                                             "totp": totp})
    assert response.status_code == 200, response.text
    api.client.cookies.clear()
    return cookie(response.cookies["parley_session"]), response.json()["data"]["csrf_token"]


async def enrol(api: Api, headers: dict[str, str], csrf: str) -> str:
    page = await api.client.get("/dashboard/account/mfa", headers=headers)
    assert page.status_code == 200, page.text
    key = re.search(r'<code id="otp-key">([A-Z2-7]+)</code>', page.text).group(1)  # type: ignore[union-attr]
    assert f"secret={key}" in page.text and "otpauth://totp/" in page.text
    wrong = await api.client.post("/dashboard/account/mfa", headers=headers, follow_redirects=False,
                                  data={"csrf_token": csrf, "code": "000000" if pyotp.TOTP(key).at(
                                      api.clock.now()) != "000000" else "111111"})
    assert wrong.status_code == 400
    done = await api.client.post("/dashboard/account/mfa", headers=headers, follow_redirects=False,
                                 data={"csrf_token": csrf, "code": pyotp.TOTP(key).at(api.clock.now())})
    assert done.status_code == 303, done.text
    return key


async def test_a_user_enrols_and_then_signs_in_with_a_code(api: Api) -> None:
    user = await new_user(api)
    headers, csrf = await signed_in(api, user)
    key = await enrol(api, headers, csrf)
    bare = await api.client.post("/v2/auth/login", json={"email": user.email, "password": PASSWORD})
    assert bare.status_code == 401 and bare.json()["error"]["code"] == "MFA_REQUIRED"
    wrong = await api.client.post("/v2/auth/login", json={"email": user.email, "password": PASSWORD,
                                                          "totp": "123456" if pyotp.TOTP(key).at(
                                                              api.clock.now()) != "123456" else "654321"})
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "INVALID_CREDENTIALS"
    api.clock.advance(minutes=1)
    await signed_in(api, user, pyotp.TOTP(key).at(api.clock.now()))
    form = await api.client.post("/dashboard/login", data={"email": user.email, "password": PASSWORD},
                                 follow_redirects=False)
    assert form.status_code == 401 and 'name="code"' in form.text
    ok = await api.client.post("/dashboard/login", follow_redirects=False, data={
        "email": user.email, "password": PASSWORD, "code": pyotp.TOTP(key).at(api.clock.now())})
    assert ok.status_code == 303
    api.client.cookies.clear()


async def test_an_organization_that_requires_it_sends_its_users_to_enrol_first(api: Api) -> None:
    owner = await new_user(api)
    member = await add_user(api, owner.tenant, role="member")
    headers, csrf = await signed_in(api, owner)
    required = await api.client.post("/dashboard/users/mfa-required", headers=headers, follow_redirects=False,
                                     data={"csrf_token": csrf, "required": "1"})
    assert required.status_code == 303
    member_headers, member_csrf = await signed_in(api, member)
    sent = await api.client.get("/dashboard/agents", headers=member_headers, follow_redirects=False)
    assert sent.status_code == 303 and sent.headers["location"] == "/dashboard/account/mfa"
    refused = await api.client.get("/v2/billing/invoices", headers=member_headers)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "MFA_ENROLMENT_REQUIRED"
    await enrol(api, member_headers, member_csrf)
    assert (await api.client.get("/dashboard/agents", headers=member_headers)).status_code == 200
    assert (await api.client.get("/v2/billing/invoices", headers=member_headers)).status_code == 200


async def test_an_old_session_is_asked_again_before_minting_a_key_in_the_dashboard(api: Api) -> None:
    owner = await new_user(api)
    headers, csrf = await signed_in(api, owner)
    api.clock.advance(minutes=6)
    asked = await api.client.post("/dashboard/api-keys", headers=headers, follow_redirects=False,
                                  data={"csrf_token": csrf, "name": "ci", "preset": "read_only"})
    assert asked.status_code == 303 and asked.headers["location"] == "/dashboard/verify?next=/dashboard/api-keys"
    keys = await api.client.get("/dashboard/api-keys", headers=headers)
    assert "ci</td>" not in keys.text  # nothing minted
    wrong = await api.client.post("/dashboard/verify", headers=headers, follow_redirects=False,
                                  data={"csrf_token": csrf, "password": "not it", "next": "/dashboard/api-keys"})
    assert wrong.status_code == 400
    proven = await api.client.post("/dashboard/verify", headers=headers, follow_redirects=False,
                                   data={"csrf_token": csrf, "password": PASSWORD, "next": "/dashboard/api-keys"})
    assert proven.status_code == 303 and proven.headers["location"] == "/dashboard/api-keys"
    minted = await api.client.post("/dashboard/api-keys", headers=headers, follow_redirects=False,
                                   data={"csrf_token": csrf, "name": "ci", "preset": "read_only"})
    assert minted.status_code == 201
    elsewhere = await api.client.post("/dashboard/verify", headers=headers, follow_redirects=False,
                                      data={"csrf_token": csrf, "password": PASSWORD, "next": "https://evil.test"})
    assert elsewhere.headers["location"] == "/dashboard"  # never another site


async def test_an_old_session_is_asked_again_before_changing_billing_over_the_api(api: Api) -> None:
    owner = await new_user(api)
    headers, csrf = await signed_in(api, owner)
    headers = {**headers, "X-CSRF-Token": csrf}
    api.clock.advance(minutes=6)
    refused = await api.client.patch("/v2/billing/subscription", json={"plan": "enterprise"}, headers=headers)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "reauthentication_required"
    assert (await api.client.get("/v2/billing/invoices", headers=headers)).status_code == 200  # reads are not asked
    wrong = await api.client.post("/v2/auth/verify", json={"password": "not it"}, headers=headers)
    assert wrong.status_code == 400
    proven = await api.client.post("/v2/auth/verify", json={"password": PASSWORD}, headers=headers)
    assert proven.status_code == 204, proven.text
    allowed = await api.client.patch("/v2/billing/subscription", json={"plan": "enterprise"}, headers=headers)
    assert allowed.status_code != 403, allowed.text
    api.clock.advance(minutes=5)
    again = await api.client.patch("/v2/billing/subscription", json={"plan": "enterprise"}, headers=headers)
    assert again.status_code == 403
