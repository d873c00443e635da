"""The audit log through HTTP on both databases: a key's change and a user's dashboard form each leave one event
with their actor, action, resource, address and request id (a read leaves none; a refusal after authentication
leaves one with its status); GET /audit-events and the dashboard's audit page filter them; another organization's
events stay out of sight; housekeeping forgets them after 365 days (the fake clock)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from adapters.memory.clock import ManualClock
from application.housekeeping import purge_once
from domain.audit import ACTION_PATTERN
from entrypoints.http.dashboard import page_handlers
from entrypoints.http.dashboard.gate import ACTION, PUBLIC
from entrypoints.http.routes import ROUTES
from entrypoints.http.routing import AuthMode, access_of
from entrypoints.ioc import build_container
from entrypoints.units import ScopedUnits
from tests.http.dashboard_support import add_user, cookie, login, new_user
from tests.support.apps import Api, ApiFactory, Tenant

START = datetime(2026, 3, 2, 9, tzinfo=UTC)
LONG_AGO = datetime(2001, 3, 2, 9, tzinfo=UTC)
"""The purge test's start: its purges reach no event another test of the run's shared databases keeps."""


async def _events(api: Api, tenant: Tenant, **filters: Any) -> list[dict[str, Any]]:
    response = await api.client.get("/v2/audit-events", params=filters, headers=tenant.headers)
    assert response.status_code == 200, response.text
    return response.json()["data"]  # type: ignore[no-any-return]


async def _agent(api: Api, tenant: Tenant, name: str = "Front desk") -> dict[str, Any]:
    created = await api.client.post("/v2/agents", json={"name": name, "prompt": "Be brief."}, headers=tenant.headers)
    assert created.status_code == 201, created.text
    return created.json()["data"]  # type: ignore[no-any-return]


async def test_a_keys_patch_of_an_agent_is_one_event_and_a_read_none(any_api: Api) -> None:
    tenant = await any_api.tenant()
    agent = await _agent(any_api, tenant)
    patched = await any_api.client.patch(f"/v2/agents/{agent['id']}", json={"name": "Reception", "prompt": "Hi."},
                                         headers={**tenant.headers, "X-Request-ID": "req-audit-patch-1"})
    assert patched.status_code == 200, patched.text
    before = await _events(any_api, tenant)
    assert (await any_api.client.get(f"/v2/agents/{agent['id']}", headers=tenant.headers)).status_code == 200
    assert await _events(any_api, tenant) == before  # a read is not recorded (nor is listing the log)

    [updated, created] = before
    assert created["action"] == "agent.created" and created["resource"] == {"type": "agent", "id": str(agent["id"])}
    assert updated["action"] == "agent.updated" and updated["status"] == 200
    assert updated["resource"] == {"type": "agent", "id": str(agent["id"])}
    assert updated["actor"]["type"] == "api_key" and updated["actor"]["id"] == tenant.key_id
    assert re.fullmatch(r"test \(parley_sk_\w+…\w{4}\)", updated["actor"]["label"]), updated["actor"]
    assert tenant.key not in str(before)  # the key itself is never kept
    assert updated["method"] == "PATCH" and updated["path"] == f"/v2/agents/{agent['id']}"
    assert updated["request_id"] == "req-audit-patch-1" == patched.headers["x-request-id"]
    assert updated["ip"] and updated["ip"] != "unknown"
    assert updated["fields"] == ["name", "prompt"]  # the field names, never their values
    assert "Reception" not in str(before)
    assert created["fields"] == []


async def test_refusals_after_authentication_are_recorded_with_their_status(any_api: Api) -> None:
    tenant = await any_api.tenant()
    reader = await any_api.key_for(tenant.organization_id, ("agents:read",))
    agent = await _agent(any_api, tenant)
    refused = await any_api.client.patch(f"/v2/agents/{agent['id']}", json={"name": "X"}, headers=reader.headers)
    assert refused.status_code == 403
    missing = await any_api.client.delete("/v2/agents/999999", headers=tenant.headers)
    assert missing.status_code == 404
    bad = await any_api.client.post("/v2/agents", json={"name": " "}, headers=tenant.headers)
    assert bad.status_code == 400
    unknown = await any_api.client.patch(f"/v2/agents/{agent['id']}", json={"name": "Y"},
                                         headers={"Authorization": "Bearer parley_sk_" + "0" * 38})
    assert unknown.status_code == 401  # a credential refused is not an actor: nothing recorded
    found = await _events(any_api, tenant)
    assert [(e["action"], e["status"], e["resource"]["id"]) for e in found] == [
        ("agent.created", 400, None), ("agent.deleted", 404, "999999"), ("agent.updated", 403, str(agent["id"])),
        ("agent.created", 201, str(agent["id"]))]
    assert found[2]["actor"]["id"] == reader.key_id and found[2]["fields"] == []
    # the agent was not changed by the refused request
    assert (await any_api.client.get(f"/v2/agents/{agent['id']}", headers=tenant.headers)).json()["data"][
        "name"] == "Front desk"


async def test_a_users_dashboard_form_is_one_event_shown_on_the_audit_page(any_api: Api) -> None:
    user = await new_user(any_api)
    session, csrf = await login(any_api, user)
    headers = cookie(session)
    created = await any_api.client.post("/dashboard/agents", headers={**headers, "X-Request-ID": "req-form-1"},
                                        data={"csrf_token": csrf, "name": "Desk", "prompt": "Be brief."},
                                        follow_redirects=False)
    assert created.status_code == 303, created.text
    agent_id = created.headers["location"].split("?")[0].rsplit("/", 1)[1]
    assert (await any_api.client.get(f"/dashboard/agents/{agent_id}", headers=headers)).status_code == 200

    [event] = await _events(any_api, user.tenant, actor_type="user")
    assert event["action"] == "agent.created" and event["resource"] == {"type": "agent", "id": agent_id}
    assert event["actor"]["type"] == "user" and event["actor"]["label"] == user.email
    assert event["method"] == "POST" and event["path"] == "/dashboard/agents" and event["status"] == 303
    assert event["request_id"] == "req-form-1" and event["ip"]
    by_id = await _events(any_api, user.tenant, actor_type="user", actor_id=event["actor"]["id"])
    assert [e["id"] for e in by_id] == [event["id"]]

    page = await any_api.client.get("/dashboard/audit", headers=headers)
    assert page.status_code == 200 and "agent.created" in page.text and user.email in page.text
    assert 'href="/dashboard/audit"' in page.text  # in the navigation, for an owner
    filtered = await any_api.client.get("/dashboard/audit", params={"action": "agent.deleted"}, headers=headers)
    assert filtered.status_code == 200 and "Nothing matches these filters." in filtered.text
    wrong = await any_api.client.get("/dashboard/audit", params={"from": "yesterday"}, headers=headers)
    assert wrong.status_code == 400 and "must be a date" in wrong.text

    member = await add_user(any_api, user.tenant, role="member")
    member_session, _ = await login(any_api, member)
    refused = await any_api.client.get("/dashboard/audit", headers=cookie(member_session))
    assert refused.status_code == 403
    overview = await any_api.client.get("/dashboard", headers=cookie(member_session))
    assert 'href="/dashboard/audit"' not in overview.text


async def test_filters_and_another_organizations_events(make_api: ApiFactory, sql_url: str) -> None:
    clock = ManualClock(START)
    api = await make_api(sql_url, clock=clock)
    tenant, other = await api.tenant(), await api.tenant()
    first = await _agent(api, tenant, "First")
    clock.advance(days=2)
    second = await _agent(api, tenant, "Second")
    assert (await api.client.delete(f"/v2/agents/{first['id']}", headers=tenant.headers)).status_code == 204
    helper = await api.key_for(tenant.organization_id, ("agents:*", "organizations:read"))
    assert (await api.client.post(f"/v2/agents/{second['id']}/duplicate", headers=helper.headers)).status_code == 201
    await _agent(api, other, "Theirs")

    every = await _events(api, tenant)
    assert [e["action"] for e in every] == ["agent.duplicated", "agent.deleted", "agent.created", "agent.created"]
    assert [e["action"] for e in await _events(api, tenant, action="agent.created")] == ["agent.created"] * 2
    assert [e["actor"]["id"] for e in await _events(api, tenant, actor_type="api_key", actor_id=helper.key_id)] == [
        helper.key_id]
    on_first = await _events(api, tenant, resource_type="agent", resource_id=str(first["id"]))
    assert [e["action"] for e in on_first] == ["agent.deleted", "agent.created"]
    day_two = (START + timedelta(days=1)).isoformat().replace("+00:00", "Z")
    assert len(await _events(api, tenant, created_after=day_two)) == 3
    assert [e["resource"]["id"] for e in await _events(api, tenant, created_before=day_two)] == [str(first["id"])]
    assert len(await _events(api, tenant, limit=1, offset=1)) == 1
    assert (await api.client.get("/v2/audit-events", params={"limit": 1}, headers=tenant.headers)).json()[
        "meta"] == {"total": 4, "limit": 1, "offset": 0}

    # another organization sees only its own, whatever the filter
    theirs = await _events(api, other)
    assert [e["action"] for e in theirs] == ["agent.created"]
    assert await _events(api, other, resource_type="agent", resource_id=str(first["id"])) == []
    assert await _events(api, other, actor_type="api_key", actor_id=tenant.key_id) == []

    bad = await api.client.get("/v2/audit-events", params={"actor_id": 3}, headers=tenant.headers)
    assert bad.status_code == 400 and "actor_id" in bad.text
    unscoped = await api.key_for(tenant.organization_id, ("agents:read",))
    assert (await api.client.get("/v2/audit-events", headers=unscoped.headers)).status_code == 403


async def test_a_partner_acting_in_a_sub_organization_is_in_the_sub_organizations_log(any_api: Api) -> None:
    partner = await any_api.tenant(org_type="partner")
    child = (await any_api.client.post("/v2/organizations", json={"name": "Client"}, headers=partner.headers)
             ).json()["data"]
    as_child = {**partner.headers, "X-Sub-Org-Id": str(child["id"])}
    agent = (await any_api.client.post("/v2/agents", json={"name": "Theirs"}, headers=as_child)).json()["data"]
    stranger = await any_api.tenant()
    refused = await any_api.client.post("/v2/agents", json={"name": "No"},
                                        headers={**partner.headers, "X-Sub-Org-Id": str(stranger.organization_id)})
    assert refused.status_code == 403

    in_child = await any_api.client.get("/v2/audit-events", headers=as_child)
    assert [(e["action"], e["resource"]["id"], e["actor"]["id"]) for e in in_child.json()["data"]] == [
        ("agent.created", str(agent["id"]), partner.key_id)]
    own = await _events(any_api, partner)
    assert [(e["action"], e["status"]) for e in own] == [("agent.created", 403), ("organization.created", 201)]
    assert await _events(any_api, stranger) == []


async def test_housekeeping_forgets_events_after_365_days(make_api: ApiFactory, sql_url: str) -> None:
    clock = ManualClock(LONG_AGO)
    api = await make_api(sql_url, clock=clock)
    tenant = await api.tenant()
    await _agent(api, tenant, "Old")
    clock.advance(days=200)
    await _agent(api, tenant, "Young")
    container = build_container(api.settings, *api.overrides)
    try:
        clock.advance(days=165)  # the old one is 365 days old: kept until it is older
        await purge_once(ScopedUnits(container))
        assert len(await _events(api, tenant)) == 2
        clock.advance(days=1)
        await purge_once(ScopedUnits(container))
    finally:
        await container.close()
    [kept] = await _events(api, tenant)
    assert kept["created_at"].startswith((LONG_AGO + timedelta(days=200)).date().isoformat())


def test_every_state_changing_route_and_form_of_a_key_or_a_user_has_an_action() -> None:
    audited = unaudited = 0
    for handler in (h for handlers in ROUTES.values() for h in handlers):
        access = access_of(getattr(handler, "opt", {}) or {})
        methods = set(getattr(handler, "http_methods", ())) - {"GET", "HEAD", "OPTIONS"}
        if access is None or not methods:
            continue
        if access.auth in (AuthMode.KEY, AuthMode.KEY_OR_SESSION, AuthMode.SESSION):
            assert access.action is not None and ACTION_PATTERN.match(access.action), handler
            audited += 1
        else:
            assert access.action is None, handler  # widget and public routes act for no key or user
            unaudited += 1
    assert audited >= 80 and unaudited >= 5
    forms = [h for h in page_handlers() if "POST" in h.http_methods and not h.opt.get(PUBLIC)]
    assert len(forms) >= 20
    assert all(ACTION_PATTERN.match(h.opt.get(ACTION) or "") for h in forms)
