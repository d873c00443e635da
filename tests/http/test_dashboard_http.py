"""The dashboard's pages through HTTP: signing in with the form, the overview, errors as HTML pages, CSRF on
forms, and the session of one organization never reaching another's data."""

from __future__ import annotations

from datetime import UTC, datetime

from adapters.memory.clock import ManualClock
from tests.http.dashboard_support import PASSWORD, cookie, csrf_of, login, new_user, session_id
from tests.support.apps import Api, ApiFactory


async def test_pages_need_a_session_and_send_to_the_sign_in_form(any_api: Api) -> None:
    response = await any_api.client.get("/dashboard/agents", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/dashboard/login?next=/dashboard/agents"
    form = await any_api.client.get("/dashboard/login")
    assert form.status_code == 200 and "text/html" in form.headers["content-type"]
    assert 'name="password"' in form.text


async def test_signing_in_with_the_form_opens_the_overview(any_api: Api) -> None:
    user = await new_user(any_api)
    response = await any_api.client.post("/dashboard/login", data={"email": user.email, "password": PASSWORD,
                                                                   "next": "/dashboard"}, follow_redirects=False)
    any_api.client.cookies.clear()
    assert response.status_code == 303 and response.headers["location"] == "/dashboard"
    session = session_id(response)
    page = await any_api.client.get("/dashboard", headers=cookie(session))
    assert page.status_code == 200, page.text
    assert "Overview" in page.text and "Call minutes" in page.text and "Cloud status" in page.text
    assert user.email in page.text
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"
    for section in ("Agents", "Calls", "Appointments", "Campaigns", "Webhooks", "API keys", "Billing"):
        assert f">{section}</a>" in page.text
    for path in ("/agents", "/calls", "/appointments", "/campaigns", "/webhooks", "/api-keys", "/billing"):
        opened = await any_api.client.get(f"/dashboard{path}", headers=cookie(session))
        assert opened.status_code == 200 and "Coming soon" not in opened.text, path


async def test_a_wrong_password_shows_the_form_again(any_api: Api) -> None:
    user = await new_user(any_api)
    response = await any_api.client.post("/dashboard/login", data={"email": user.email, "password": "wrong-pass"})
    assert response.status_code == 401
    assert "Email or password is not correct" in response.text and user.email in response.text
    assert "set-cookie" not in response.headers


async def test_sign_out_needs_the_form_token_and_ends_the_session(any_api: Api) -> None:
    user = await new_user(any_api)
    session, _ = await login(any_api, user)
    page = await any_api.client.get("/dashboard", headers=cookie(session))
    token = csrf_of(page.text)
    forged = await any_api.client.post("/dashboard/logout", headers=cookie(session), data={"csrf_token": "forged"})
    assert forged.status_code == 403 and "text/html" in forged.headers["content-type"]
    missing = await any_api.client.post("/dashboard/logout", headers=cookie(session), data={})
    assert missing.status_code == 403
    out = await any_api.client.post("/dashboard/logout", headers=cookie(session), data={"csrf_token": token},
                                    follow_redirects=False)
    assert out.status_code == 303
    assert (await any_api.client.get("/dashboard", headers=cookie(session), follow_redirects=False)
            ).status_code == 303


async def test_errors_are_pages(any_api: Api) -> None:
    user = await new_user(any_api)
    session, _ = await login(any_api, user)
    missing = await any_api.client.get("/dashboard/no-such-page", headers=cookie(session))
    assert missing.status_code == 404 and "text/html" in missing.headers["content-type"]
    assert "Not found" in missing.text


async def test_no_other_site_can_post_a_dashboard_form(any_api: Api) -> None:
    user = await new_user(any_api)
    session, csrf = await login(any_api, user)
    foreign = {"Origin": "https://attacker.example"}
    signin = await any_api.client.post("/dashboard/login", headers=foreign,
                                       data={"email": user.email, "password": PASSWORD})
    assert signin.status_code == 403 and "set-cookie" not in signin.headers
    out = await any_api.client.post("/dashboard/logout", headers={**cookie(session), **foreign},
                                    data={"csrf_token": csrf})
    assert out.status_code == 403
    own = await any_api.client.post("/dashboard/login", headers={"Origin": "http://testserver.local"},
                                    data={"email": user.email, "password": PASSWORD}, follow_redirects=False)
    any_api.client.cookies.clear()
    assert own.status_code == 303


async def test_only_the_dashboards_own_redirects_put_a_message_on_a_page(any_api: Api) -> None:
    user = await new_user(any_api)
    session, csrf = await login(any_api, user)
    forged = await any_api.client.get("/dashboard?flash=Your%20account%20is%20locked%3A%20call%20us",
                                      headers=cookie(session))
    assert forged.status_code == 200 and "Your account is locked" not in forged.text
    created = await any_api.client.post("/dashboard/agents", headers=cookie(session), follow_redirects=False,
                                        data={"csrf_token": csrf, "name": "Greeter"})
    shown = await any_api.client.get(created.headers["location"], headers=cookie(session))
    assert "Agent Greeter created" in shown.text
    other, _ = await login(any_api, await new_user(any_api))
    elsewhere = await any_api.client.get(created.headers["location"].replace(
        created.headers["location"].split("?")[0], "/dashboard"), headers=cookie(other))
    assert "Agent Greeter created" not in elsewhere.text  # signed for the session that was redirected


async def test_pages_spend_the_users_rate_limit_shared_with_the_api(make_api: ApiFactory, sql_url: str) -> None:
    clock = ManualClock(datetime(2026, 5, 4, 10, 0, 10, tzinfo=UTC))
    api = await make_api(sql_url, clock=clock, rate_limit_per_minute=3, rate_limit_per_hour=100)
    user, other = await new_user(api), await new_user(api)
    session, _ = await login(api, user)
    assert (await api.client.get("/v2/auth/session", headers=cookie(session))).status_code == 200
    for path in ("/dashboard", "/dashboard/agents"):
        assert (await api.client.get(path, headers=cookie(session))).status_code == 200, path
    refused = await api.client.get("/dashboard/calls", headers=cookie(session))
    assert refused.status_code == 429 and "text/html" in refused.headers["content-type"]
    assert refused.headers["retry-after"] == "50" and "try again in 50 s" in refused.text
    assert refused.headers["cache-control"] == "no-store"  # a page like any other
    assert (await api.client.get("/v2/auth/session", headers=cookie(session))).status_code == 429
    other_session, _ = await login(api, other)  # another user's budget is their own
    assert (await api.client.get("/dashboard", headers=cookie(other_session))).status_code == 200
    clock.advance(seconds=50)
    assert (await api.client.get("/dashboard/calls", headers=cookie(session))).status_code == 200
