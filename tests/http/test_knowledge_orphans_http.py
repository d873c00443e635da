"""A knowledge base outlives its owning agent: the organization's list shows it, it stays readable and
deletable by id, and the plan-limit error says what the limit and the count are."""

from __future__ import annotations

from tests.support.apps import Api


async def test_a_knowledge_base_stays_reachable_after_its_agent_is_deleted(any_api: Api) -> None:
    t = await any_api.tenant(plan="starter")
    c = any_api.client
    agent = (await c.post("/v2/agents", json={"name": "Owner"}, headers=t.headers)).json()["data"]["id"]
    kb = (await c.post("/v2/knowledge-bases", json={"name": "FAQ", "agent_id": agent},
                       headers=t.headers)).json()["data"]
    assert (await c.delete(f"/v2/agents/{agent}", headers=t.headers)).status_code == 204
    assert (await c.get(f"/v2/knowledge-bases?agent_id={agent}", headers=t.headers)).status_code == 404

    listed = await c.get("/v2/knowledge-bases", headers=t.headers)
    assert listed.status_code == 200, listed.text
    body = listed.json()
    assert [k["id"] for k in body["data"]["knowledge_bases"]] == [kb["id"]]
    assert body["data"]["count"] == 1 and body["meta"] == {"total": 1, "limit": 25, "offset": 0}
    got = await c.get(f"/v2/knowledge-bases/{kb['id']}", headers=t.headers)
    assert got.status_code == 200 and got.json()["data"]["name"] == "FAQ"

    other = (await c.post("/v2/agents", json={"name": "Next"}, headers=t.headers)).json()["data"]["id"]
    refused = await c.post("/v2/knowledge-bases", json={"name": "Second", "agent_id": other}, headers=t.headers)
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "plan_limit_reached"
    assert error["details"] | {"max": 1} == {"limit_name": "max_knowledge_bases", "limit": 1, "used": 1,
                                             "plan": "starter", "max": 1}
    assert "max_knowledge_bases" in error["message"] and "allows 1" in error["message"] and "has 1" in error["message"]

    assert (await c.delete(f"/v2/knowledge-bases/{kb['id']}", headers=t.headers)).status_code == 204
    assert (await c.get("/v2/knowledge-bases", headers=t.headers)).json()["meta"]["total"] == 0
    created = await c.post("/v2/knowledge-bases", json={"name": "Second", "agent_id": other}, headers=t.headers)
    assert created.status_code == 201, created.text


async def test_the_organization_list_is_paged_and_filterable_by_agent(any_api: Api) -> None:
    t, stranger = await any_api.tenant(), await any_api.tenant()
    c = any_api.client
    first = (await c.post("/v2/agents", json={"name": "A"}, headers=t.headers)).json()["data"]["id"]
    second = (await c.post("/v2/agents", json={"name": "B"}, headers=t.headers)).json()["data"]["id"]
    ids = []
    for name, agent in [("one", first), ("two", second), ("three", first)]:
        created = await c.post("/v2/knowledge-bases", json={"name": name, "agent_id": agent}, headers=t.headers)
        ids.append(created.json()["data"]["id"])
    page = (await c.get("/v2/knowledge-bases?limit=2&offset=1", headers=t.headers)).json()
    assert [k["id"] for k in page["data"]["knowledge_bases"]] == ids[1:]
    assert page["meta"] == {"total": 3, "limit": 2, "offset": 1} and page["data"]["count"] == 2
    by_agent = (await c.get(f"/v2/knowledge-bases?agent_id={first}", headers=t.headers)).json()
    assert [k["id"] for k in by_agent["data"]["knowledge_bases"]] == [ids[0], ids[2]]
    assert (await c.get("/v2/knowledge-bases", headers=stranger.headers)).json()["meta"]["total"] == 0
