"""API keys through HTTP: catalogue, plan gates, create/list/get/revoke, rotation with grace."""

from __future__ import annotations

from datetime import timedelta

from adapters.memory.clock import ManualClock
from tests.support.apps import Api, ApiFactory


async def test_scope_catalogue_lists_scopes_and_presets(api: Api) -> None:
    t = await api.tenant(plan="business", scopes=("api-keys:read",))
    data = (await api.client.get("/v2/api-keys/scopes", headers=t.headers)).json()["data"]
    scopes = {s["scope"]: s["description"] for s in data["scopes"]}
    assert "agents:read" in scopes and all(scopes.values())
    assert len(scopes) >= 40
    assert set(data["presets"]) >= {"read_only", "full_access", "calls_only", "scheduling_only"}
    assert "agents:*" in {w["scope"] for w in data["wildcards"]}


async def test_key_management_needs_enterprise(api: Api) -> None:
    t = await api.tenant(plan="business")
    for method, path, body in [("GET", "/v2/api-keys", None), ("POST", "/v2/api-keys", {"name": "x", "scopes": ["*"]}),
                               ("GET", f"/v2/api-keys/{t.key_id}", None), ("DELETE", f"/v2/api-keys/{t.key_id}", None)]:
        r = await api.client.request(method, path, json=body, headers=t.headers)
        assert r.status_code == 403, (method, path)
        assert r.json()["error"]["code"] == "plan_required"


async def test_create_list_get_revoke(api: Api) -> None:
    t = await api.tenant(plan="enterprise")
    created = await api.client.post("/v2/api-keys", json={"name": "crm", "scopes": ["agents:read"]},
                                    headers=t.headers)
    assert created.status_code == 201
    new = created.json()["data"]
    assert new["key"].startswith("parley_sk_") and new["scopes"] == ["agents:read"]
    assert new["last_four"] == new["key"][-4:]
    new_headers = {"Authorization": f"Bearer {new['key']}"}
    assert (await api.client.get("/v2/agents", headers=new_headers)).status_code == 200
    assert (await api.client.post("/v2/agents", json={"name": "x"}, headers=new_headers)).status_code == 403

    listed = (await api.client.get("/v2/api-keys", headers=t.headers)).json()
    assert listed["meta"]["total"] == 2
    assert all("key" not in k and "key_hash" not in k for k in listed["data"])
    assert new["key"] not in str(listed)
    one = (await api.client.get(f"/v2/api-keys/{new['id']}", headers=t.headers)).json()["data"]
    assert one["status"] == "active" and one["prefix"] == new["key"][:14]

    assert (await api.client.delete(f"/v2/api-keys/{new['id']}", headers=t.headers)).status_code == 204
    revoked = await api.client.get("/v2/agents", headers=new_headers)
    assert revoked.status_code == 401 and revoked.json()["error"]["code"] == "INVALID_API_KEY"
    assert (await api.client.get(f"/v2/api-keys/{new['id']}", headers=t.headers)).json()["data"]["status"] == "revoked"


async def test_a_key_cannot_grant_more_than_it_holds(api: Api) -> None:
    t = await api.tenant(plan="enterprise", scopes=("api-keys:write", "agents:read"))
    ok = await api.client.post("/v2/api-keys", json={"name": "r", "scopes": ["agents:read"]}, headers=t.headers)
    assert ok.status_code == 201
    for scopes in (["agents:write"], ["*"], ["agents:*"]):
        r = await api.client.post("/v2/api-keys", json={"name": "w", "scopes": scopes}, headers=t.headers)
        assert r.status_code == 400 and "scopes" in r.json()["error"]["details"]["validation_errors"]


async def test_invalid_key_requests(api: Api) -> None:
    t = await api.tenant(plan="enterprise")
    for body in ({"name": "x", "scopes": []}, {"name": "x", "scopes": ["agents:fly"]},
                 {"name": "x", "scopes": ["*"], "expires_at": "2000-01-01T00:00:00Z"}, {"name": "", "scopes": ["*"]}):
        r = await api.client.post("/v2/api-keys", json=body, headers=t.headers)
        assert r.status_code == 400, body
    assert (await api.client.get("/v2/api-keys/999999", headers=t.headers)).status_code == 404


async def test_rotation_keeps_the_old_key_for_the_grace_period(make_api: ApiFactory, sqlite_url: str) -> None:
    clock = ManualClock()
    api = await make_api(sqlite_url, clock=clock)
    t = await api.tenant(plan="business", scopes=("api-keys:manage", "agents:read"))
    r = await api.client.post(f"/v2/api-keys/{t.key_id}/rotate", json={"grace_period_hours": 2}, headers=t.headers)
    assert r.status_code == 200
    data = r.json()["data"]
    assert data["key"] != t.key and data["id"] != t.key_id
    assert data["previous_key_expires_at"].startswith(clock.now().replace(microsecond=0).isoformat()[:11])
    new = {"Authorization": f"Bearer {data['key']}"}
    old = await api.client.get("/v2/agents", headers=t.headers)
    assert old.status_code == 200 and "x-api-key-expires-in-days" in old.headers  # expiring within 7 days
    assert (await api.client.get("/v2/agents", headers=new)).status_code == 200
    again = await api.client.post(f"/v2/api-keys/{t.key_id}/rotate", json={}, headers=new)
    assert again.status_code == 409
    in_grace = await api.client.post(f"/v2/api-keys/{t.key_id}/rotate", json={}, headers=t.headers)
    assert in_grace.status_code == 403 and in_grace.json()["error"]["code"] == "key_in_grace_period"
    clock.advance(hours=2, seconds=1)
    assert (await api.client.get("/v2/agents", headers=t.headers)).status_code == 401
    assert (await api.client.get("/v2/agents", headers=new)).status_code == 200


async def test_rotation_grace_bounds_and_plan(api: Api) -> None:
    t = await api.tenant(plan="enterprise")
    for hours in (0, 169):
        r = await api.client.post(f"/v2/api-keys/{t.key_id}/rotate", json={"grace_period_hours": hours},
                                  headers=t.headers)
        assert r.status_code == 400
    starter = await api.tenant(plan="starter")
    r = await api.client.post(f"/v2/api-keys/{starter.key_id}/rotate", json={}, headers=starter.headers)
    assert r.status_code == 403 and r.json()["error"]["code"] == "plan_required"
    default = await api.client.post(f"/v2/api-keys/{t.key_id}/rotate", headers=t.headers)
    assert default.status_code == 200


async def test_a_narrow_key_cannot_rotate_or_revoke_a_broader_key(any_api: Api) -> None:
    """Rotating a full-access key would hand its successor's secret to a key holding only api-keys scopes,
    and cut the victim's life to the grace period: both need every scope of the key managed."""
    victim = await any_api.tenant(plan="enterprise")  # "*"
    rotate = f"/v2/api-keys/{victim.key_id}/rotate"
    for scopes in (("api-keys:write",), ("api-keys:manage",), ("api-keys:*", "agents:*")):
        narrow = await any_api.key_for(victim.organization_id, scopes)
        for headers in (narrow.headers, {**narrow.headers, "Idempotency-Key": f"take-over-{scopes[0]}"}):
            r = await any_api.client.post(rotate, json={"grace_period_hours": 1}, headers=headers)
            assert r.status_code == 403, (scopes, r.text)
            assert r.json()["error"]["code"] == "INSUFFICIENT_SCOPE"
            assert "key" not in r.json().get("data", {})
    deleter = await any_api.key_for(victim.organization_id, ("api-keys:delete",))
    r = await any_api.client.delete(f"/v2/api-keys/{victim.key_id}", headers=deleter.headers)
    assert r.status_code == 403 and r.json()["error"]["code"] == "INSUFFICIENT_SCOPE"

    still = await any_api.client.get("/v2/agents", headers=victim.headers)
    assert still.status_code == 200 and "x-api-key-expires-at" not in still.headers
    record = (await any_api.client.get(f"/v2/api-keys/{victim.key_id}", headers=victim.headers)).json()["data"]
    assert record["status"] == "active" and record["expires_at"] is None
    listed = (await any_api.client.get("/v2/api-keys", headers=victim.headers)).json()
    assert listed["meta"]["total"] == 5, "no successor was issued"


async def test_a_key_manages_keys_whose_scopes_it_holds(any_api: Api) -> None:
    owner = await any_api.tenant(plan="enterprise")
    manager = await any_api.key_for(owner.organization_id, ("api-keys:write", "api-keys:delete", "agents:*"))
    reader = await any_api.key_for(owner.organization_id, ("agents:read",))
    writer = await any_api.key_for(owner.organization_id, ("agents:read", "agents:write"))
    rotated = await any_api.client.post(f"/v2/api-keys/{reader.key_id}/rotate", json={"grace_period_hours": 1},
                                        headers=manager.headers)
    assert rotated.status_code == 200, rotated.text
    successor = {"Authorization": f"Bearer {rotated.json()['data']['key']}"}
    assert (await any_api.client.get("/v2/agents", headers=successor)).status_code == 200
    assert (await any_api.client.delete(f"/v2/api-keys/{writer.key_id}", headers=manager.headers)).status_code == 204
    assert (await any_api.client.get("/v2/agents", headers=writer.headers)).status_code == 401
    itself = await any_api.client.post(f"/v2/api-keys/{manager.key_id}/rotate", headers=manager.headers)
    assert itself.status_code == 200, "a key holds its own scopes"


async def test_a_key_never_mints_a_key_that_outlives_it(make_api: ApiFactory, sql_url: str) -> None:
    """The attack: a 1-day key minted a never-expiring key. Now a new key's expires_at is at most its creator's."""
    clock = ManualClock()
    api = await make_api(sql_url, clock=clock)
    owner = await api.tenant(plan="enterprise")
    day_key = await api.key_for(owner.organization_id, ("*",), expires_at=clock.now() + timedelta(days=1))
    ceiling = clock.now() + timedelta(days=1)
    for asked in ({"name": "forever"}, {"name": "forever", "expires_at": None},
                  {"name": "later", "expires_at": (ceiling + timedelta(seconds=1)).isoformat()}):
        refused = await api.client.post("/v2/api-keys", json={**asked, "scopes": ["agents:read"]},
                                        headers=day_key.headers)
        assert refused.status_code == 400, refused.text
        assert "expires_at" in refused.json()["error"]["details"]["validation_errors"]
    at_ceiling = await api.client.post("/v2/api-keys", json={"name": "same day", "scopes": ["agents:read"],
                                                             "expires_at": ceiling.isoformat()},
                                       headers=day_key.headers)
    assert at_ceiling.status_code == 201, at_ceiling.text
    # nor by rotating a longer-lived key: the successor would keep the victim's (absent) expiry
    rotated = await api.client.post(f"/v2/api-keys/{owner.key_id}/rotate", json={}, headers=day_key.headers)
    assert rotated.status_code == 400, rotated.text
    listed = (await api.client.get("/v2/api-keys", headers=owner.headers)).json()
    assert listed["meta"]["total"] == 3, "only the key expiring with its creator was created"
    # a key that never expires may still create one that never expires
    forever = await api.client.post("/v2/api-keys", json={"name": "forever", "scopes": ["agents:read"]},
                                    headers=owner.headers)
    assert forever.status_code == 201 and forever.json()["data"]["expires_at"] is None


async def test_a_rotated_key_cannot_manage_keys_in_its_grace_period(any_api: Api) -> None:
    """The attack: after rotation the old (leaked) key revoked its successor and minted a fresh key."""
    owner = await any_api.tenant(plan="enterprise")
    rotated = await any_api.client.post(f"/v2/api-keys/{owner.key_id}/rotate", json={"grace_period_hours": 24},
                                        headers=owner.headers)
    assert rotated.status_code == 200, rotated.text
    successor_id = rotated.json()["data"]["id"]
    successor = {"Authorization": f"Bearer {rotated.json()['data']['key']}"}
    other = await any_api.key_for(owner.organization_id, ("agents:read",))
    attempts = [("DELETE", f"/v2/api-keys/{successor_id}", None),
                ("POST", f"/v2/api-keys/{successor_id}/rotate", {"grace_period_hours": 1}),
                ("POST", f"/v2/api-keys/{other.key_id}/rotate", {"grace_period_hours": 1}),
                ("POST", "/v2/api-keys", {"name": "fresh", "scopes": ["*"]}),
                ("DELETE", f"/v2/api-keys/{other.key_id}", None)]
    for method, path, body in attempts:
        refused = await any_api.client.request(method, path, json=body, headers=owner.headers)
        assert refused.status_code == 403, (method, path, refused.text)
        assert refused.json()["error"]["code"] == "key_in_grace_period"
    assert (await any_api.client.get("/v2/agents", headers=successor)).status_code == 200
    assert (await any_api.client.get("/v2/agents", headers=other.headers)).status_code == 200
    assert (await any_api.client.get("/v2/agents", headers=owner.headers)).status_code == 200, "still in grace"
    listed = (await any_api.client.get("/v2/api-keys", headers=successor)).json()
    assert listed["meta"]["total"] == 3, "nothing was minted"
    # the successor manages keys as its predecessor did
    assert (await any_api.client.delete(f"/v2/api-keys/{other.key_id}", headers=successor)).status_code == 204
