"""The Leads section of the dashboard through HTTP, on both databases: a lead received by the form through the same
use case as POST /leads (called at once by an agent, or added to a campaign; a listed number kept as blocked_dnc;
a known external_id answered with its lead), each broken rule shown beside its field with nothing kept, the list
with its status filter, a lead's page, and another organization's lead a 404 page."""

from __future__ import annotations

from typing import Any

from tests.http.calls_support import active_agent, unique_phone
from tests.http.dashboard_support import cookie, login, new_user
from tests.http.dialer_support import campaign
from tests.support.apps import Api


async def _signed_in(api: Api) -> tuple[Any, dict[str, str], str]:
    user = await new_user(api)
    session, csrf = await login(api, user)
    return user, cookie(session), csrf


async def _create(api: Api, headers: dict[str, str], csrf: str, **fields: str) -> Any:
    return await api.client.post("/dashboard/leads", headers=headers, follow_redirects=False,
                                 data={"csrf_token": csrf, **fields})


async def _leads(api: Api, user: Any) -> list[dict[str, Any]]:
    return list((await api.client.get("/v2/leads?limit=100", headers=user.tenant.headers)).json()["data"])


async def test_receive_leads_through_the_form(any_api: Api) -> None:
    user, headers, csrf = await _signed_in(any_api)
    empty = await any_api.client.get("/dashboard/leads", headers=headers)
    assert empty.status_code == 200 and "No leads yet" in empty.text and 'id="create-lead"' not in empty.text
    agent = await active_agent(any_api, user.tenant)
    draft = (await any_api.client.post("/v2/agents", json={"name": "Draft", "prompt": "Hi"},
                                       headers=user.tenant.headers)).json()["data"]
    running = await campaign(any_api, user.tenant, [{"phone": unique_phone()}], start=False, agent_id=agent["id"])
    form = await any_api.client.get("/dashboard/leads", headers=headers)
    assert f'value="agent:{agent["id"]}"' in form.text and f'value="campaign:{running["id"]}"' in form.text

    call_now = f"agent:{agent['id']}"
    for fields, field in (({"phone": "nope", "target": call_now, "name": "Ada"}, "phone"),
                          ({"phone": unique_phone(), "target": call_now, "name": "Ada", "email": "not-an-email"},
                           "email"),
                          ({"phone": unique_phone(), "target": call_now, "name": "Ada", "custom_data": "{oops"},
                           "custom_data"),
                          ({"phone": unique_phone(), "target": call_now, "name": "Ada", "custom_data": "[1]"},
                           "custom_data"),
                          ({"phone": unique_phone(), "name": "Ada"}, "target"),
                          ({"phone": unique_phone(), "target": "agent:99999999", "name": "Ada"}, "target")):
        refused = await _create(any_api, headers, csrf, **fields)
        assert refused.status_code in (400, 404), (fields, refused.status_code)
        assert f'id="{field}-error"' in refused.text, (fields, refused.text[-3000:])
    missing = await _create(any_api, headers, csrf, phone=unique_phone(), target=call_now)
    assert missing.status_code == 400 and "contact_name" in missing.text  # the agent's {{contact_name}}
    not_live = await _create(any_api, headers, csrf, phone=unique_phone(), target=f"agent:{draft['id']}", name="Ada")
    assert not_live.status_code == 409 and 'role="alert"' in not_live.text
    assert await _leads(any_api, user) == []

    called = await _create(any_api, headers, csrf, phone="+1 415 555 0140", target=call_now, name="Ada",
                           email="ada@example.com", source="web form", external_id="crm-1",
                           custom_data='{"plan": "gold"}')
    assert called.status_code == 303, called.text
    [lead] = await _leads(any_api, user)
    assert called.headers["location"].startswith(f"/dashboard/leads/{lead['id']}?")
    assert lead["phone"] == "+14155550140" and lead["call_id"] and lead["custom_data"] == {"plan": "gold"}
    page = await any_api.client.get(f"/dashboard/leads/{lead['id']}", headers=headers)
    assert page.status_code == 200 and f"/dashboard/calls/{lead['call_id']}" in page.text and "gold" in page.text

    same = await _create(any_api, headers, csrf, phone=unique_phone(), target=call_now, name="Ada",
                         external_id="crm-1")
    assert same.status_code == 303 and "exists%20already" in same.headers["location"]
    assert same.headers["location"].startswith(f"/dashboard/leads/{lead['id']}?")

    joined = await _create(any_api, headers, csrf, phone=unique_phone(), target=f"campaign:{running['id']}",
                           name="Grace")
    assert joined.status_code == 303, joined.text
    listed = await any_api.client.post("/v2/dnc/lists", json={"name": "Complaints"}, headers=user.tenant.headers)
    blocked = unique_phone()
    await any_api.client.post(f"/v2/dnc/lists/{listed.json()['data']['id']}/entries",
                              json={"phone_numbers": [blocked]}, headers=user.tenant.headers)
    kept = await _create(any_api, headers, csrf, phone=blocked, target=call_now, name="Bob")
    assert kept.status_code == 303 and "Do-Not-Call" in kept.headers["location"].replace("%20", " ")
    by_phone = {x["phone"]: x for x in await _leads(any_api, user)}
    assert len(by_phone) == 3 and by_phone[blocked]["status"] == "blocked_dnc"
    assert any(x["contact_id"] for x in by_phone.values())

    listing = await any_api.client.get("/dashboard/leads", headers=headers)
    assert 'id="leads"' in listing.text and "Grace" in listing.text and ">blocked dnc<" in listing.text
    only_blocked = await any_api.client.get("/dashboard/leads", params={"status": "blocked_dnc"}, headers=headers)
    assert "Bob" in only_blocked.text and "Grace" not in only_blocked.text


async def test_another_organizations_lead_is_a_404_page(any_api: Api) -> None:
    owner, _, _ = await _signed_in(any_api)
    agent = await active_agent(any_api, owner.tenant)
    made = await any_api.client.post("/v2/leads", headers=owner.tenant.headers,
                                     json={"phone": unique_phone(), "agent_id": agent["id"], "name": "Theirs"})
    assert made.status_code == 201, made.text
    _, headers, csrf = await _signed_in(any_api)
    assert (await any_api.client.get(f"/dashboard/leads/{made.json()['data']['id']}", headers=headers)
            ).status_code == 404
    assert "Theirs" not in (await any_api.client.get("/dashboard/leads", headers=headers)).text
    theirs = await _create(any_api, headers, csrf, phone=unique_phone(), target=f"agent:{agent['id']}", name="Ada")
    assert theirs.status_code == 404 and 'role="alert"' in theirs.text
