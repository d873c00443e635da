"""Partner sub-organizations and X-Sub-Org-Id."""

from __future__ import annotations

import pytest

from domain.errors import DomainError
from tests.support.apps import Api


async def test_partner_manages_sub_organizations(any_api: Api) -> None:
    partner = await any_api.tenant(org_type="partner", plan="enterprise")
    c = any_api.client
    created = await c.post("/v2/organizations", json={"name": "Client A", "plan": "business"}, headers=partner.headers)
    assert created.status_code == 201
    child = created.json()["data"]
    assert child["parent_id"] == partner.organization_id and child["org_type"] == "standard"
    listed = (await c.get("/v2/organizations", headers=partner.headers)).json()
    assert listed["meta"]["total"] == 1 and listed["data"][0]["id"] == child["id"]
    patched = await c.patch(f"/v2/organizations/{child['id']}", json={"name": "Client A2"}, headers=partner.headers)
    assert patched.json()["data"]["name"] == "Client A2" and patched.json()["data"]["plan"] == "business"
    assert (await c.get(f"/v2/organizations/{child['id']}", headers=partner.headers)).status_code == 200
    assert (await c.delete(f"/v2/organizations/{child['id']}", headers=partner.headers)).status_code == 204
    assert (await c.get(f"/v2/organizations/{child['id']}", headers=partner.headers)).status_code == 404
    own = f"/v2/organizations/{partner.organization_id}"
    itself = await c.delete(own, headers=partner.headers)  # its own record: read and changed here, not deleted
    assert itself.status_code == 409 and itself.json()["error"]["code"] == "conflict", itself.text
    assert (await c.get(own, headers=partner.headers)).status_code == 200


async def test_standard_key_cannot_manage_organizations(api: Api) -> None:
    t = await api.tenant(org_type="standard")
    r = await api.client.get("/v2/organizations", headers=t.headers)
    assert r.status_code == 403 and r.json()["error"]["code"] == "sub_org_forbidden"


async def test_sub_org_header_acts_on_the_child(api: Api) -> None:
    partner = await api.tenant(org_type="partner")
    child = (await api.client.post("/v2/organizations", json={"name": "C"}, headers=partner.headers)).json()["data"]
    as_child = {**partner.headers, "X-Sub-Org-Id": str(child["id"])}
    agent = (await api.client.post("/v2/agents", json={"name": "Child agent"}, headers=as_child)).json()["data"]
    assert (await api.client.get(f"/v2/agents/{agent['id']}", headers=as_child)).status_code == 200
    assert (await api.client.get(f"/v2/agents/{agent['id']}", headers=partner.headers)).status_code == 404
    child_key = await api.key_for(child["id"], ("*",))
    assert (await api.client.get(f"/v2/agents/{agent['id']}", headers=child_key.headers)).status_code == 200


async def test_sub_org_header_is_refused_when_not_allowed(api: Api) -> None:
    partner = await api.tenant(org_type="partner")
    other_partner = await api.tenant(org_type="partner")
    foreign = (await api.client.post("/v2/organizations", json={"name": "F"},
                                     headers=other_partner.headers)).json()["data"]
    standard = await api.tenant(org_type="standard")
    cases = [
        (partner.headers, str(foreign["id"])),        # someone else's child
        (partner.headers, str(standard.organization_id)),  # not a child at all
        (partner.headers, "99999999"),                # unknown
        (standard.headers, str(foreign["id"])),       # not a partner key
    ]
    for headers, sub in cases:
        r = await api.client.get("/v2/agents", headers={**headers, "X-Sub-Org-Id": sub})
        assert r.status_code == 403 and r.json()["error"]["code"] == "sub_org_forbidden", sub
    r = await api.client.get("/v2/agents", headers={**partner.headers, "X-Sub-Org-Id": "abc"})
    assert r.status_code == 400
    assert (await api.client.get(f"/v2/organizations/{foreign['id']}", headers=partner.headers)).status_code == 404


async def test_deleting_a_sub_organization_revokes_its_keys(api: Api) -> None:
    partner = await api.tenant(org_type="partner")
    child = (await api.client.post("/v2/organizations", json={"name": "C"}, headers=partner.headers)).json()["data"]
    child_key = await api.key_for(child["id"], ("*",))
    assert (await api.client.get("/v2/agents", headers=child_key.headers)).status_code == 200
    await api.client.delete(f"/v2/organizations/{child['id']}", headers=partner.headers)
    assert (await api.client.get("/v2/agents", headers=child_key.headers)).status_code == 401


async def test_a_sub_organization_plan_never_exceeds_its_parents(any_api: Api) -> None:
    partner = await any_api.tenant(org_type="partner", plan="business")
    c = any_api.client
    refused = await c.post("/v2/organizations", json={"name": "Up", "plan": "enterprise"}, headers=partner.headers)
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert error["code"] == "plan_required" and "plan" in error["message"]
    assert error["details"]["parent_plan"] == "business" and error["details"]["requested_plan"] == "enterprise"
    assert (await c.get("/v2/organizations", headers=partner.headers)).json()["meta"]["total"] == 0

    child = (await c.post("/v2/organizations", json={"name": "Same", "plan": "business"},
                          headers=partner.headers)).json()["data"]
    lower = await c.post("/v2/organizations", json={"name": "Low", "plan": "starter"}, headers=partner.headers)
    assert lower.status_code == 201 and lower.json()["data"]["plan"] == "starter"
    raised = await c.patch(f"/v2/organizations/{child['id']}", json={"plan": "enterprise"}, headers=partner.headers)
    assert raised.status_code == 403 and raised.json()["error"]["code"] == "plan_required"
    assert (await c.get(f"/v2/organizations/{child['id']}", headers=partner.headers)).json()["data"]["plan"] == \
        "business"
    # a partner manages its client's keys whatever the client's plan; the client's own key keeps the plan rule
    as_child = {**partner.headers, "X-Sub-Org-Id": str(child["id"])}
    assert (await c.get("/v2/api-keys", headers=as_child)).status_code == 200
    own = await any_api.key_for(child["id"], ("*",))
    keys = await c.get("/v2/api-keys", headers=own.headers)
    assert keys.status_code == 403 and keys.json()["error"]["code"] == "plan_required"
    lowered = await c.patch(f"/v2/organizations/{lower.json()['data']['id']}", json={"plan": "business"},
                            headers=partner.headers)
    assert lowered.status_code == 200 and lowered.json()["data"]["plan"] == "business"


async def test_the_operator_cannot_give_a_child_a_higher_plan_either(any_api: Api) -> None:
    partner = await any_api.tenant(org_type="partner", plan="starter")
    with pytest.raises(DomainError) as raised:
        await any_api.tenant(plan="business", parent_id=partner.organization_id)
    assert raised.value.code == "plan_required"
    child = await any_api.tenant(plan="starter", parent_id=partner.organization_id)
    assert child.organization_id > partner.organization_id
