"""Webhook subscriptions through the real HTTP API (no deliveries: see tests/http/test_webhook_delivery_flow.py)."""

from __future__ import annotations

import re

from entrypoints.runtime import JOB_WAKE_UPS
from tests.http.test_dashboard_sections_http import webhook_with_a_failed_attempt
from tests.support.apps import Api, ApiFactory, Tenant

HOOK = "https://hooks.example.com/parley"


async def _hook(api: Api, tenant: Tenant) -> dict:
    r = await api.client.post("/v2/webhooks", json={"url": HOOK, "events": ["call.ended"]}, headers=tenant.headers)
    assert r.status_code == 201, r.text
    return r.json()["data"]  # type: ignore[no-any-return]


async def test_create_shows_the_secret_once_and_defaults_the_name(any_api: Api) -> None:
    t = await any_api.tenant()
    c = any_api.client
    created = await c.post("/v2/webhooks", json={"url": HOOK, "events": ["call.ended", "appointment.booked"]},
                           headers=t.headers)
    assert created.status_code == 201, created.text
    data = created.json()["data"]
    assert re.fullmatch(r"[0-9a-f]{64}", data["secret"])
    assert data["name"] == "hooks.example.com/parley" and data["status"] == "active"
    assert data["url"] == HOOK and data["events"] == ["call.ended", "appointment.booked"]
    got = (await c.get(f"/v2/webhooks/{data['id']}", headers=t.headers)).json()["data"]
    assert "secret" not in got and got["id"] == data["id"]
    listed = (await c.get("/v2/webhooks", headers=t.headers)).json()
    assert listed["meta"] == {"total": 1, "limit": 25, "offset": 0}
    assert "secret" not in listed["data"][0]
    named = await c.post("/v2/webhooks", json={"url": HOOK, "events": ["call.ended"], "name": "CRM"},
                         headers=t.headers)
    assert named.json()["data"]["name"] == "CRM"
    assert named.json()["data"]["secret"] != data["secret"]


async def test_event_catalogue(api: Api) -> None:
    t = await api.tenant(scopes=("webhooks:read",))
    r = await api.client.get("/v2/webhooks/events", headers=t.headers)
    assert r.status_code == 200
    names = {e["name"]: e for e in r.json()["data"]}
    assert len(names) == 34 and names["appointment.rescheduled"]["group"] == "appointments"
    assert names["subscription.updated"]["group"] == "billing"
    for name in ("invoice.created", "invoice.paid", "invoice.payment_failed"):
        assert names[name]["group"] == "billing" and names[name]["example"]["currency"] == "usd", name
    assert names["invoice.payment_failed"]["example"]["last_payment_error"] == "insufficient_funds"
    assert names["lead.created"]["group"] == "leads" and names["usage.threshold"]["group"] == "usage"
    assert {names[f"sms.{x}"]["group"] for x in ("sent", "delivered", "failed", "received")} == {"sms"}
    assert names["webhook.test"]["description"]
    # the knowledge-base events the code emits are listed (so they can be subscribed to), with example data
    assert names["document.ready"]["group"] == "knowledge_bases"
    assert names["knowledge_base.created"]["example"]["knowledge_base_id"]
    assert all(isinstance(e["example"], dict) and e["example"] for e in names.values())


async def test_invalid_bodies_are_400(api: Api) -> None:
    t = await api.tenant()
    c = api.client
    cases = [
        ({"url": HOOK, "events": []}, "events"),
        ({"url": HOOK, "events": ["call.exploded"]}, "events"),
        ({"url": HOOK}, "events"),
        ({"url": "ftp://example.com/x", "events": ["call.ended"]}, "url"),
        ({"url": "http://exa mple.com", "events": ["call.ended"]}, "url"),
        ({"url": HOOK, "events": ["call.ended"], "secret": "mine"}, None),
        ({"url": HOOK, "events": ["call.ended"], "name": "  "}, "name"),
    ]
    for body, field in cases:
        r = await c.post("/v2/webhooks", json=body, headers=t.headers)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["error"]["code"] == "bad_request"
        if field:
            assert field in r.json()["error"]["details"]["validation_errors"], (body, r.json())


async def test_loopback_targets_may_use_any_port_and_nothing_else_may(api: Api) -> None:
    """PARLEY_ALLOW_LOOPBACK_TARGETS (on in tests): loopback receivers on any port, the same rule as
    for scraping; every other target keeps 80, 443, 8080 and 8443."""
    t = await api.tenant()
    for url in ("http://127.0.0.1:5999/in", "http://localhost:5999/in", "http://[::1]:5999/in",
                "https://hooks.example.com:8443/in"):
        r = await api.client.post("/v2/webhooks", json={"url": url, "events": ["call.ended"]}, headers=t.headers)
        assert r.status_code == 201, (url, r.text)
    for url in ("http://hooks.example.com:5999/in", "https://93.184.215.14:22/in"):
        r = await api.client.post("/v2/webhooks", json={"url": url, "events": ["call.ended"]}, headers=t.headers)
        assert r.status_code == 400 and "url" in r.json()["error"]["details"]["validation_errors"], (url, r.text)


async def test_private_targets_are_blocked(make_api: ApiFactory, sqlite_url: str) -> None:
    await _blocked(await make_api(sqlite_url, allow_loopback_targets=False))  # production: no loopback targets


async def _blocked(strict: Api) -> None:
    t = await strict.tenant()
    for url in ("http://127.0.0.1:8080/x", "http://10.0.0.8/x", "http://169.254.169.254/", "http://localhost/x",
                "http://[::1]/x"):
        r = await strict.client.post("/v2/webhooks", json={"url": url, "events": ["call.ended"]}, headers=t.headers)
        assert r.status_code == 400 and r.json()["error"]["code"] == "blocked_address", (url, r.text)
        assert r.json()["error"]["details"] == {"field": "url"}, (url, r.text)
    # a loopback receiver (a local server on any port, as under `make run`) is refused with the setting that allows
    # it named; any other private target is not told about it
    for url in ("http://127.0.0.1:9000/hook", "http://localhost:5999/in", "http://127.0.0.1/x", "http://[::1]/x"):
        r = await strict.client.post("/v2/webhooks", json={"url": url, "events": ["call.ended"]}, headers=t.headers)
        assert r.status_code == 400 and r.json()["error"]["code"] == "blocked_address", (url, r.text)
        assert "PARLEY_ALLOW_LOOPBACK_TARGETS=true" in r.json()["error"]["message"], (url, r.text)
    r = await strict.client.post("/v2/webhooks", json={"url": "http://10.0.0.8/x", "events": ["call.ended"]},
                                 headers=t.headers)
    assert "PARLEY_ALLOW_LOOPBACK_TARGETS" not in r.json()["error"]["message"]
    ok = await strict.client.post("/v2/webhooks", json={"url": HOOK, "events": ["call.ended"]}, headers=t.headers)
    hook = ok.json()["data"]["id"]
    r = await strict.client.patch(f"/v2/webhooks/{hook}", json={"url": "http://192.168.1.1/"}, headers=t.headers)
    assert r.status_code == 400 and r.json()["error"]["code"] == "blocked_address"


async def test_patch_pause_resume_and_fields(api: Api) -> None:
    t = await api.tenant()
    c = api.client
    hook = await _hook(api, t)
    paused = await c.patch(f"/v2/webhooks/{hook['id']}", json={"status": "paused"}, headers=t.headers)
    assert paused.status_code == 200 and paused.json()["data"]["status"] == "paused"
    listed = (await c.get("/v2/webhooks?status=paused", headers=t.headers)).json()
    assert [h["id"] for h in listed["data"]] == [hook["id"]]
    changed = await c.patch(f"/v2/webhooks/{hook['id']}", headers=t.headers, json={
        "status": "active", "name": "Renamed", "events": ["call.started", "call.started"],
        "url": "https://other.example.com/in"})
    data = changed.json()["data"]
    assert (data["status"], data["name"], data["events"], data["url"]) == (
        "active", "Renamed", ["call.started"], "https://other.example.com/in")
    for body in ({"status": "disabled"}, {"events": []}, {"events": ["nope.nope"]}, {"url": "gopher://x"},
                 {"secret": "x"}):
        r = await c.patch(f"/v2/webhooks/{hook['id']}", json=body, headers=t.headers)
        assert r.status_code == 400, (body, r.text)


async def test_delete_and_other_organizations(api: Api) -> None:
    a, b = await api.tenant(), await api.tenant()
    c = api.client
    hook = await _hook(api, a)
    for method, path in [("GET", ""), ("PATCH", ""), ("DELETE", ""), ("POST", "/test"), ("GET", "/logs"),
                         ("POST", "/rotate-secret"), ("POST", "/logs/1/redeliver")]:
        r = await c.request(method, f"/v2/webhooks/{hook['id']}{path}", headers=b.headers,
                            json={"name": "x"} if method == "PATCH" else None)
        assert r.status_code == 404, (method, path, r.text)
    assert (await c.delete(f"/v2/webhooks/{hook['id']}", headers=a.headers)).status_code == 204
    assert (await c.get(f"/v2/webhooks/{hook['id']}", headers=a.headers)).status_code == 404
    assert (await c.get("/v2/webhooks", headers=a.headers)).json()["meta"]["total"] == 0


async def test_scopes(api: Api) -> None:
    owner = await api.tenant()
    c = api.client
    hook = (await c.post("/v2/webhooks", json={"url": HOOK, "events": ["call.ended"]},
                         headers=owner.headers)).json()["data"]
    org = owner.organization_id
    read = await api.key_for(org, ("webhooks:read",))
    write = await api.key_for(org, ("webhooks:write",))
    manage = await api.key_for(org, ("webhooks:manage",))
    delete = await api.key_for(org, ("webhooks:delete",))
    family = await api.key_for(org, ("webhooks:*",))
    hid = hook["id"]
    expectations = [
        (read, "GET", "/v2/webhooks", 200), (read, "GET", f"/v2/webhooks/{hid}/logs", 200),
        (read, "POST", "/v2/webhooks", 403), (write, "GET", "/v2/webhooks", 403),
        (write, "PATCH", f"/v2/webhooks/{hid}", 200), (write, "DELETE", f"/v2/webhooks/{hid}", 403),
        (write, "POST", f"/v2/webhooks/{hid}/rotate-secret", 403),
        (manage, "POST", f"/v2/webhooks/{hid}/rotate-secret", 200),
        (manage, "PATCH", f"/v2/webhooks/{hid}", 403),
        (write, "POST", f"/v2/webhooks/{hid}/logs/999999/redeliver", 404),
        (manage, "POST", f"/v2/webhooks/{hid}/logs/999999/redeliver", 404),
        (read, "POST", f"/v2/webhooks/{hid}/logs/999999/redeliver", 403),
        (family, "GET", "/v2/webhooks/events", 200), (delete, "DELETE", f"/v2/webhooks/{hid}", 204),
    ]
    for tenant, method, path, status in expectations:
        r = await c.request(method, path, headers=tenant.headers, json={"name": "n"} if method == "PATCH" else None)
        assert r.status_code == status, (method, path, r.text)


async def test_rotate_secret_returns_a_new_secret_with_its_grace_period(api: Api) -> None:
    t = await api.tenant()
    c = api.client
    hook = await _hook(api, t)
    r = await c.post(f"/v2/webhooks/{hook['id']}/rotate-secret", json={"grace_period_hours": 2}, headers=t.headers)
    assert r.status_code == 200
    rotated = r.json()["data"]
    assert re.fullmatch(r"[0-9a-f]{64}", rotated["secret"]) and rotated["secret"] != hook["secret"]
    assert rotated["previous_secret_expires_at"] is not None
    now_only = await c.post(f"/v2/webhooks/{hook['id']}/rotate-secret", json={"grace_period_hours": 0},
                            headers=t.headers)
    assert now_only.json()["data"]["previous_secret_expires_at"] is None
    bad = await c.post(f"/v2/webhooks/{hook['id']}/rotate-secret", json={"grace_period_hours": 169},
                       headers=t.headers)
    assert bad.status_code == 400


async def test_test_send_is_queued_and_refused_while_paused(api: Api) -> None:
    t = await api.tenant()
    c = api.client
    hook = await _hook(api, t)
    queued = await c.post(f"/v2/webhooks/{hook['id']}/test", headers=t.headers)
    assert queued.status_code == 202, queued.text
    data = queued.json()["data"]
    assert data["event"] == "webhook.test" and data["status"] == "pending" and data["message_id"].startswith("msg_")
    assert data["webhook_id"] == hook["id"]  # the subscription; message_id is the X-Webhook-Id
    await c.patch(f"/v2/webhooks/{hook['id']}", json={"status": "paused"}, headers=t.headers)
    refused = await c.post(f"/v2/webhooks/{hook['id']}/test", headers=t.headers)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "conflict"


async def test_a_test_send_and_a_redelivery_wake_the_delivery_senders(any_api: Api) -> None:
    """The 202 of a test send or a redelivery comes after a commit that woke this process's delivery senders (as a
    dispatched event does), so the delivery leaves at once instead of at their next idle poll."""
    t = await any_api.tenant()
    hook = await _hook(any_api, t)
    wake = JOB_WAKE_UPS.subscribe()
    try:
        queued = await any_api.client.post(f"/v2/webhooks/{hook['id']}/test", headers=t.headers)
        assert queued.status_code == 202, queued.text
        assert wake.is_set()
        wake.clear()
        assert (await any_api.client.get(f"/v2/webhooks/{hook['id']}", headers=t.headers)).status_code == 200
        assert not wake.is_set()  # a read wakes nobody
        hook_id, log_id = await webhook_with_a_failed_attempt(any_api, t)
        wake.clear()
        again = await any_api.client.post(f"/v2/webhooks/{hook_id}/logs/{log_id}/redeliver", headers=t.headers)
        assert again.status_code == 202, again.text
        assert wake.is_set()
    finally:
        JOB_WAKE_UPS.unsubscribe(wake)


async def test_logs_paging_and_filter_validation(api: Api) -> None:
    t = await api.tenant()
    c = api.client
    hook = await _hook(api, t)
    logs = await c.get(f"/v2/webhooks/{hook['id']}/logs?event=call.ended&status=failed", headers=t.headers)
    assert logs.status_code == 200 and logs.json()["meta"] == {"total": 0, "limit": 25, "offset": 0}
    for query in ("event=nope", "status=maybe", "limit=0", "limit=101", "offset=-1"):
        r = await c.get(f"/v2/webhooks/{hook['id']}/logs?{query}", headers=t.headers)
        assert r.status_code == 400, query
