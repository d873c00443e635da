"""Knowledge bases through the real HTTP API: CRUD, agent links, plan limits, scopes, search."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.knowledge_samples import TEXT, running_app
from tests.support.apps import Api, AppPool, Tenant


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def module_db(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture(scope="module")
async def api(module_db: str, tmp_root: Path, app_pool: AppPool) -> AsyncIterator[Api]:
    """One app per database for the whole module."""
    async with running_app(app_pool, module_db, tmp_root / "var") as app:
        yield app


async def _agent(api: Api, t: Tenant, name: str = "Front desk") -> int:
    r = await api.client.post("/v2/agents", json={"name": name}, headers=t.headers)
    assert r.status_code == 201, r.text
    return r.json()["data"]["id"]


async def _kb(api: Api, t: Tenant, agent_id: int, name: str = "Policies", **extra: Any) -> dict[str, Any]:
    r = await api.client.post("/v2/knowledge-bases", json={"name": name, "agent_id": agent_id, **extra},
                              headers=t.headers)
    assert r.status_code == 201, r.text
    return r.json()["data"]


async def _upload(api: Api, t: Tenant, kb_id: int, *files: tuple[str, bytes]) -> Any:
    return await api.client.post(f"/v2/knowledge-bases/{kb_id}/documents", headers=t.headers,
                                 files=[("files", (name, data)) for name, data in files])


async def test_knowledge_base_lifecycle(api: Api) -> None:
    t = await api.tenant()
    agent = await _agent(api, t)
    kb = await _kb(api, t, agent, description="Refunds and returns")
    assert kb["name"] == "Policies" and kb["description"] == "Refunds and returns" and kb["agent_id"] == agent
    assert kb["agents"] == [{"id": agent, "name": "Front desk"}] and kb["document_count"] == 0
    assert "documents" not in kb

    got = await api.client.get(f"/v2/knowledge-bases/{kb['id']}", headers=t.headers)
    assert got.status_code == 200 and got.json()["data"] == kb

    listed = await api.client.get(f"/v2/knowledge-bases?agent_id={agent}", headers=t.headers)
    assert listed.status_code == 200
    body = listed.json()
    assert body["success"] is True and body["data"]["count"] == 1
    assert [k["id"] for k in body["data"]["knowledge_bases"]] == [kb["id"]]
    assert body["meta"] == {"total": 1, "limit": 25, "offset": 0}

    patched = await api.client.patch(f"/v2/knowledge-bases/{kb['id']}", json={"name": "FAQ", "description": None},
                                     headers=t.headers)
    assert patched.status_code == 200
    assert (patched.json()["data"]["name"], patched.json()["data"]["description"]) == ("FAQ", None)

    assert (await _upload(api, t, kb["id"], ("faq.txt", TEXT.encode()))).status_code == 201
    with_docs = (await api.client.get(f"/v2/knowledge-bases/{kb['id']}?with_documents=true",
                                      headers=t.headers)).json()["data"]
    assert with_docs["document_count"] == 1 and [d["file_name"] for d in with_docs["documents"]] == ["faq.txt"]
    without = (await api.client.get(f"/v2/knowledge-bases/{kb['id']}?with_documents=false",
                                    headers=t.headers)).json()["data"]
    assert "documents" not in without

    deleted = await api.client.delete(f"/v2/knowledge-bases/{kb['id']}", headers=t.headers)
    assert deleted.status_code == 204 and deleted.content == b""
    assert (await api.client.get(f"/v2/knowledge-bases/{kb['id']}", headers=t.headers)).status_code == 404
    assert (await api.client.get(f"/v2/knowledge-bases/{kb['id']}/documents", headers=t.headers)).status_code == 404
    assert (await api.client.get(f"/v2/knowledge-bases?agent_id={agent}",
                                 headers=t.headers)).json()["data"]["count"] == 0


async def test_create_and_list_need_a_known_agent_and_valid_fields(api: Api) -> None:
    t = await api.tenant()
    other = await api.tenant()
    foreign_agent = await _agent(api, other)
    r = await api.client.post("/v2/knowledge-bases", json={"name": "X", "agent_id": foreign_agent}, headers=t.headers)
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = await api.client.get(f"/v2/knowledge-bases?agent_id={foreign_agent}", headers=t.headers)
    assert r.status_code == 404
    r = await api.client.get("/v2/knowledge-bases", headers=t.headers)  # without agent_id: the organization's
    assert r.status_code == 200 and r.json()["meta"]["total"] == 0
    r = await api.client.get("/v2/knowledge-bases?agent_id=0", headers=t.headers)
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request"
    agent = await _agent(api, t)
    for body in [{"agent_id": agent}, {"name": "  ", "agent_id": agent}, {"name": "x" * 201, "agent_id": agent},
                 {"name": "x", "agent_id": 0}, {"name": "x", "agent_id": agent, "extra": 1}]:
        r = await api.client.post("/v2/knowledge-bases", json=body, headers=t.headers)
        assert r.status_code == 400, body
        assert r.json()["error"]["code"] == "bad_request"
    r = await api.client.patch("/v2/knowledge-bases/1", json={"agent_id": agent}, headers=t.headers)
    assert r.status_code == 400
    assert (await api.client.get("/v2/knowledge-bases?agent_id=1&limit=101", headers=t.headers)).status_code == 400


async def test_another_organizations_knowledge_base_is_not_found(api: Api) -> None:
    a, b = await api.tenant(), await api.tenant()
    kb = await _kb(api, a, await _agent(api, a))
    b_agent = await _agent(api, b)
    for method, path, body in [
        ("GET", f"/v2/knowledge-bases/{kb['id']}", None),
        ("PATCH", f"/v2/knowledge-bases/{kb['id']}", {"name": "mine now"}),
        ("DELETE", f"/v2/knowledge-bases/{kb['id']}", None),
        ("GET", f"/v2/knowledge-bases/{kb['id']}/documents", None),
        ("GET", f"/v2/knowledge-bases/{kb['id']}/search?q=refund", None),
        ("POST", f"/v2/knowledge-bases/{kb['id']}/scrape", {"url": "https://example.com/"}),
        ("POST", f"/v2/agents/{b_agent}/knowledge-bases", {"knowledge_base_id": kb["id"]}),
        ("DELETE", f"/v2/agents/{b_agent}/knowledge-bases/{kb['id']}", None),
    ]:
        r = await api.client.request(method, path, json=body, headers=b.headers)
        assert r.status_code == 404, (method, path, r.text)
    r = await _upload(api, b, kb["id"], ("a.txt", b"hello"))
    assert r.status_code == 404
    assert (await api.client.get(f"/v2/knowledge-bases/{kb['id']}", headers=a.headers)).status_code == 200


async def test_agent_links(api: Api) -> None:
    t = await api.tenant()
    owner, helper = await _agent(api, t, "Owner"), await _agent(api, t, "Helper")
    kb = await _kb(api, t, owner)
    second = await _kb(api, t, helper, "Helper's own")

    attached = await api.client.post(f"/v2/agents/{helper}/knowledge-bases", json={"knowledge_base_id": kb["id"]},
                                     headers=t.headers)
    assert attached.status_code == 200
    data = attached.json()["data"]
    assert data["agent_id"] == helper
    assert [k["id"] for k in data["knowledge_bases"]] == [kb["id"], second["id"]]
    again = await api.client.post(f"/v2/agents/{helper}/knowledge-bases", json={"knowledge_base_id": kb["id"]},
                                  headers=t.headers)
    assert again.status_code == 200 and again.json()["data"] == data

    listed = (await api.client.get(f"/v2/agents/{helper}/knowledge-bases", headers=t.headers)).json()
    assert listed["data"]["count"] == 2 and listed["meta"]["total"] == 2
    shown = (await api.client.get(f"/v2/knowledge-bases/{kb['id']}", headers=t.headers)).json()["data"]
    assert shown["agents"] == [{"id": owner, "name": "Owner"}, {"id": helper, "name": "Helper"}]
    by_query = (await api.client.get(f"/v2/knowledge-bases?agent_id={helper}&limit=1&offset=1",
                                     headers=t.headers)).json()
    assert [k["id"] for k in by_query["data"]["knowledge_bases"]] == [second["id"]]
    assert by_query["data"]["count"] == 1 and by_query["meta"] == {"total": 2, "limit": 1, "offset": 1}

    owner_unlink = await api.client.delete(f"/v2/agents/{owner}/knowledge-bases/{kb['id']}", headers=t.headers)
    assert owner_unlink.status_code == 400 and owner_unlink.json()["error"]["code"] == "bad_request"
    detached = await api.client.delete(f"/v2/agents/{helper}/knowledge-bases/{kb['id']}", headers=t.headers)
    assert detached.status_code == 204 and detached.content == b""
    not_linked = await api.client.delete(f"/v2/agents/{helper}/knowledge-bases/{kb['id']}", headers=t.headers)
    assert not_linked.status_code == 400
    assert (await api.client.delete(f"/v2/agents/{helper}/knowledge-bases/999999",
                                    headers=t.headers)).status_code == 404
    assert (await api.client.delete(f"/v2/agents/999999/knowledge-bases/{kb['id']}",
                                    headers=t.headers)).status_code == 404
    assert (await api.client.post("/v2/agents/999999/knowledge-bases", json={"knowledge_base_id": kb["id"]},
                                  headers=t.headers)).status_code == 404
    assert (await api.client.post(f"/v2/agents/{helper}/knowledge-bases", json={"knowledge_base_id": 999999},
                                  headers=t.headers)).status_code == 404
    assert (await api.client.post(f"/v2/agents/{helper}/knowledge-bases", json={},
                                  headers=t.headers)).status_code == 400
    assert (await api.client.get("/v2/agents/999999/knowledge-bases", headers=t.headers)).status_code == 404
    after = (await api.client.get(f"/v2/agents/{helper}/knowledge-bases", headers=t.headers)).json()["data"]
    assert [k["id"] for k in after["knowledge_bases"]] == [second["id"]]


async def test_a_deleted_agent_disappears_from_its_links(api: Api) -> None:
    t = await api.tenant()
    owner, helper = await _agent(api, t, "Owner"), await _agent(api, t, "Helper")
    kb = await _kb(api, t, owner)
    await api.client.post(f"/v2/agents/{helper}/knowledge-bases", json={"knowledge_base_id": kb["id"]},
                          headers=t.headers)
    assert (await api.client.delete(f"/v2/agents/{helper}", headers=t.headers)).status_code == 204
    shown = (await api.client.get(f"/v2/knowledge-bases/{kb['id']}", headers=t.headers)).json()["data"]
    assert [a["id"] for a in shown["agents"]] == [owner]


@pytest.mark.parametrize(("plan", "limit"), [("starter", 1), ("business", 10)])
async def test_plan_limit_per_plan(api: Api, plan: str, limit: int) -> None:
    t = await api.tenant(plan=plan)
    agent = await _agent(api, t)
    for i in range(limit):
        await _kb(api, t, agent, f"KB {i}")
    refused = await api.client.post("/v2/knowledge-bases", json={"name": "one too many", "agent_id": agent},
                                    headers=t.headers)
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "plan_limit_reached" and error["details"]["max"] == limit
    # deleting one frees a place
    first = (await api.client.get(f"/v2/knowledge-bases?agent_id={agent}", headers=t.headers)).json()
    await api.client.delete(f"/v2/knowledge-bases/{first['data']['knowledge_bases'][0]['id']}", headers=t.headers)
    await _kb(api, t, agent, "replacement")


@pytest.mark.slow
async def test_enterprise_plan_allows_one_hundred(api: Api) -> None:
    t = await api.tenant(plan="enterprise")
    agent = await _agent(api, t)
    for i in range(100):
        await _kb(api, t, agent, f"KB {i}")
    refused = await api.client.post("/v2/knowledge-bases", json={"name": "101", "agent_id": agent},
                                    headers=t.headers)
    assert refused.status_code == 403 and refused.json()["error"]["details"]["max"] == 100


async def test_concurrent_creates_cannot_pass_the_plan_limit(api: Api) -> None:
    t = await api.tenant(plan="starter")
    agent = await _agent(api, t)
    results = await asyncio.gather(*(
        api.client.post("/v2/knowledge-bases", json={"name": f"race {i}", "agent_id": agent}, headers=t.headers)
        for i in range(6)
    ))
    assert sorted(r.status_code for r in results) == [201, 403, 403, 403, 403, 403]
    listed = (await api.client.get(f"/v2/knowledge-bases?agent_id={agent}", headers=t.headers)).json()
    assert listed["meta"]["total"] == 1


async def test_a_sub_organization_counts_against_its_own_plan(api: Api) -> None:
    partner = await api.tenant(plan="business", org_type="partner")
    child = await api.client.post("/v2/organizations", json={"name": "Child", "plan": "starter"},
                                  headers=partner.headers)
    assert child.status_code == 201, child.text
    headers = {**partner.headers, "X-Sub-Org-Id": str(child.json()["data"]["id"])}
    agent = (await api.client.post("/v2/agents", json={"name": "A"}, headers=headers)).json()["data"]["id"]
    assert (await api.client.post("/v2/knowledge-bases", json={"name": "1", "agent_id": agent},
                                  headers=headers)).status_code == 201
    refused = await api.client.post("/v2/knowledge-bases", json={"name": "2", "agent_id": agent}, headers=headers)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "plan_limit_reached"


async def test_scopes_follow_the_spec_table(api: Api) -> None:
    admin = await api.tenant()
    agent = await _agent(api, admin)
    kb = await _kb(api, admin, agent)
    read = await api.key_for(admin.organization_id, ("kb:read",))
    write = await api.key_for(admin.organization_id, ("kb:write",))
    family = await api.key_for(admin.organization_id, ("kb:*",))
    agents_only = await api.key_for(admin.organization_id, ("agents:*",))

    reads = [f"/v2/knowledge-bases?agent_id={agent}", f"/v2/knowledge-bases/{kb['id']}",
             f"/v2/knowledge-bases/{kb['id']}/documents", f"/v2/knowledge-bases/{kb['id']}/search?q=x",
             f"/v2/agents/{agent}/knowledge-bases"]
    for path in reads:
        assert (await api.client.get(path, headers=read.headers)).status_code == 200, path
        assert (await api.client.get(path, headers=family.headers)).status_code == 200, path
        for other in (write, agents_only):
            r = await api.client.get(path, headers=other.headers)
            assert r.status_code == 403 and r.json()["error"]["code"] == "INSUFFICIENT_SCOPE", path

    create = {"name": "by scope", "agent_id": agent}
    refused = await api.client.post("/v2/knowledge-bases", json=create, headers=read.headers)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "INSUFFICIENT_SCOPE"
    assert (await api.client.post("/v2/knowledge-bases", json=create, headers=agents_only.headers)).status_code == 403
    made = await api.client.post("/v2/knowledge-bases", json=create, headers=write.headers)
    assert made.status_code == 201
    new_id = made.json()["data"]["id"]
    assert (await api.client.patch(f"/v2/knowledge-bases/{new_id}", json={"name": "r"},
                                   headers=read.headers)).status_code == 403
    assert (await api.client.patch(f"/v2/knowledge-bases/{new_id}", json={"name": "r"},
                                   headers=family.headers)).status_code == 200
    assert (await _upload(api, read, new_id, ("a.txt", b"words"))).status_code == 403
    assert (await api.client.delete(f"/v2/knowledge-bases/{new_id}", headers=read.headers)).status_code == 403
    assert (await api.client.delete(f"/v2/knowledge-bases/{new_id}", headers=write.headers)).status_code == 204


async def test_creating_is_idempotent_with_a_key(api: Api) -> None:
    t = await api.tenant()
    agent = await _agent(api, t)
    headers = {**t.headers, "Idempotency-Key": "kb-create-1"}
    first = await api.client.post("/v2/knowledge-bases", json={"name": "Once", "agent_id": agent}, headers=headers)
    second = await api.client.post("/v2/knowledge-bases", json={"name": "Once", "agent_id": agent}, headers=headers)
    assert first.status_code == second.status_code == 201
    assert second.headers.get("idempotency-replayed") == "true" and second.content == first.content
    assert (await api.client.get(f"/v2/knowledge-bases?agent_id={agent}",
                                 headers=t.headers)).json()["meta"]["total"] == 1


async def test_search_ranks_chunks_across_documents(api: Api) -> None:
    t = await api.tenant()
    kb = await _kb(api, t, await _agent(api, t))
    r = await _upload(api, t, kb["id"],
                      ("refunds.txt", b"Refunds are paid within five days. Every refund needs the receipt."),
                      ("shipping.md", b"# Shipping\n\nParcels ship within two days; refunds for lost parcels too."),
                      ("hours.csv", b"day,hours\nmonday,9-17\n"))
    assert r.status_code == 201, r.text
    docs = {d["file_name"]: d["document_id"] for d in r.json()["data"]["documents"]}

    found = await api.client.get(f"/v2/knowledge-bases/{kb['id']}/search?q=refunds%20receipt", headers=t.headers)
    assert found.status_code == 200
    data = found.json()["data"]
    assert data["query"] == "refunds receipt" and data["knowledge_base_id"] == kb["id"]
    results = data["results"]
    assert data["count"] == len(results) == 2
    assert [x["document_id"] for x in results] == [docs["refunds.txt"], docs["shipping.md"]]
    assert results[0]["score"] >= results[1]["score"] > 0
    assert set(results[0]) == {"document_id", "chunk_id", "text", "score"}
    assert "receipt" in results[0]["text"]

    one = (await api.client.get(f"/v2/knowledge-bases/{kb['id']}/search?q=refunds&limit=1",
                                headers=t.headers)).json()["data"]
    assert one["count"] == 1
    nothing = (await api.client.get(f"/v2/knowledge-bases/{kb['id']}/search?q=zebra", headers=t.headers)).json()
    assert nothing["data"]["results"] == []
    hostile = await api.client.get(f"/v2/knowledge-bases/{kb['id']}/search",
                                   params={"q": 'refund" OR 1=1; -- NEAR( *'}, headers=t.headers)
    assert hostile.status_code == 200 and hostile.json()["data"]["count"] >= 1
    for bad in ("", "q=", "q=%20%21%21", "q=x&limit=0", "q=x&limit=51"):
        r = await api.client.get(f"/v2/knowledge-bases/{kb['id']}/search?{bad}", headers=t.headers)
        assert r.status_code == 400, bad
