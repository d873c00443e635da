"""The dashboard's agents, calls and API-key pages through HTTP on both databases: the same use cases as the API
(creating, publishing, placing a call, creating, rotating and revoking a key; a secret shown once), form errors
shown on the page, and a session of one organization never reaching another's data through the pages (BOLA: an id
of another organization is a 404 page, like an id that does not exist)."""

from __future__ import annotations

import re

from tests.http.calls_support import active_agent, place, unique_phone
from tests.http.dashboard_support import cookie, login, new_user
from tests.support.apps import Api

_SECRET = re.compile(r"parley_sk_[A-Za-z0-9]+")


async def _signed_in(api: Api, plan: str = "enterprise") -> tuple[object, dict[str, str], str]:
    user = await new_user(api, plan=plan)
    session, csrf = await login(api, user)
    return user, cookie(session), csrf


async def test_create_an_agent_publish_it_and_place_a_call(any_api: Api) -> None:
    _, headers, csrf = await _signed_in(any_api)
    blank = await any_api.client.post("/dashboard/agents", headers=headers, data={"csrf_token": csrf, "name": " "})
    assert blank.status_code == 400 and "must not be blank" in blank.text
    created = await any_api.client.post("/dashboard/agents", headers=headers, follow_redirects=False,
                                        data={"csrf_token": csrf, "name": "Front desk", "prompt": "Be brief."})
    assert created.status_code == 303, created.text
    location = created.headers["location"]
    assert re.fullmatch(r"/dashboard/agents/\d+\?flash=.+", location)
    agent_path = location.split("?")[0]
    agent_id = int(agent_path.rsplit("/", 1)[1])
    listing = await any_api.client.get("/dashboard/agents", headers=headers)
    assert "Front desk" in listing.text
    draft = await any_api.client.get(agent_path, headers=headers)
    assert "draft" in draft.text and "Publish the agent to place calls" in draft.text
    published = await any_api.client.post(f"{agent_path}/publish", headers=headers, data={"csrf_token": csrf},
                                          follow_redirects=False)
    assert published.status_code == 303
    active = await any_api.client.get(agent_path, headers=headers)
    assert ">active<" in active.text and 'id="place-call"' in active.text
    bad_phone = await any_api.client.post("/dashboard/calls", headers=headers, data={
        "csrf_token": csrf, "agent_id": str(agent_id), "destination_phone": "not a phone"})
    assert bad_phone.status_code == 400 and "destination_phone" in bad_phone.text
    placed = await any_api.client.post("/dashboard/calls", headers=headers, follow_redirects=False, data={
        "csrf_token": csrf, "agent_id": str(agent_id), "destination_phone": unique_phone(), "contact_name": "Ada"})
    assert placed.status_code == 303, placed.text
    call_path = placed.headers["location"].split("?")[0]
    call = await any_api.client.get(call_path, headers=headers)
    assert call.status_code == 200 and "queued" in call.text
    assert 'data-live="/dashboard/live/calls/' in call.text  # updates itself until the call is over
    calls = await any_api.client.get("/dashboard/calls", headers=headers)
    assert call_path.rsplit("/", 1)[1][:8] in calls.text


async def test_place_a_call_has_a_field_for_each_placeholder_of_the_agent(any_api: Api) -> None:
    user, headers, csrf = await _signed_in(any_api)
    agent = await active_agent(any_api, user.tenant,  # type: ignore[attr-defined]
                               prompt="Call {{contact_name}} about order {{ order_id }} on {{destination_phone}}.",
                               first_message="Hi {{first_name}}!",
                               voicemail={"action": "leave_message", "message": "Call back about {{order_id}}"})
    page = await any_api.client.get(f"/dashboard/agents/{agent['id']}", headers=headers)
    fields = re.findall(r'<input type="text" name="custom\.(\w+)"', page.text)
    assert fields == ["first_name", "order_id"]  # the built-ins (contact_name, destination_phone) fill themselves
    assert 'id="call-placeholders"' in page.text
    assert re.search(r'name="contact_name" value=""\s*required', page.text)  # the prompt says {{contact_name}}
    phone = unique_phone()
    missing = await any_api.client.post("/dashboard/calls", headers=headers, data={
        "csrf_token": csrf, "agent_id": str(agent["id"]), "destination_phone": phone, "custom.first_name": "Ada",
        "custom.order_id": " ", "contact_name": "Ada Lovelace"})
    assert missing.status_code == 400 and "missing values for: order_id" in missing.text
    assert 'value="Ada"' in missing.text  # the form comes back with what was typed, fields and all
    assert re.findall(r'<input type="text" name="custom\.(\w+)"', missing.text) == ["first_name", "order_id"]
    placed = await any_api.client.post("/dashboard/calls", headers=headers, follow_redirects=False, data={
        "csrf_token": csrf, "agent_id": str(agent["id"]), "destination_phone": phone, "contact_name": "Ada Lovelace",
        "custom.first_name": "Ada", "custom.order_id": "A-1042"})
    assert placed.status_code == 303, placed.text
    call_id = placed.headers["location"].split("?")[0].rsplit("/", 1)[1]
    call = (await any_api.client.get(f"/v2/calls/{call_id}", headers=user.tenant.headers)  # type: ignore[attr-defined]
            ).json()["data"]
    assert call["custom_data"] == {"first_name": "Ada", "order_id": "A-1042"}
    assert call["contact_name"] == "Ada Lovelace"
    plain = await active_agent(any_api, user.tenant, prompt="Be brief.", first_message="Hello.")  # type: ignore[attr-defined]
    assert 'id="call-placeholders"' not in (await any_api.client.get(f"/dashboard/agents/{plain['id']}",
                                                                      headers=headers)).text


async def test_the_placeholder_fields_follow_the_published_version_not_the_draft(any_api: Api) -> None:
    user, headers, csrf = await _signed_in(any_api)
    tenant = user.tenant  # type: ignore[attr-defined]
    agent = await active_agent(any_api, tenant, prompt="Ask about order {{order_id}}.", first_message="Hello.")
    edited = await any_api.client.patch(f"/v2/agents/{agent['id']}", headers=tenant.headers,
                                        json={"prompt": "Ask {{first_name}} about the weather."})
    assert edited.status_code == 200 and edited.json()["data"]["has_unpublished_changes"] is True
    page = await any_api.client.get(f"/dashboard/agents/{agent['id']}", headers=headers)
    # a call runs the published version, so its placeholders are the ones the form asks for
    assert re.findall(r'<input type="text" name="custom\.(\w+)"', page.text) == ["order_id"]
    placed = await any_api.client.post("/dashboard/calls", headers=headers, follow_redirects=False, data={
        "csrf_token": csrf, "agent_id": str(agent["id"]), "destination_phone": unique_phone(),
        "custom.order_id": "A-7"})
    assert placed.status_code == 303, placed.text


async def test_api_keys_create_rotate_revoke_with_the_secret_shown_once(any_api: Api) -> None:
    user, headers, csrf = await _signed_in(any_api)
    created = await any_api.client.post("/dashboard/api-keys", headers=headers,
                                        data={"csrf_token": csrf, "name": "CI", "preset": "read_only"})
    assert created.status_code == 201, created.text
    assert created.headers["cache-control"] == "no-store"
    secret = _SECRET.search(created.text)
    assert secret is not None and "shown only once" in created.text
    works = await any_api.client.get("/v2/agents", headers={"Authorization": f"Bearer {secret.group(0)}"})
    assert works.status_code == 200
    listing = await any_api.client.get("/dashboard/api-keys", headers=headers)
    assert secret.group(0) not in listing.text and "CI" in listing.text
    key_id = int(re.findall(r'data-rotate="(\d+)"', listing.text)[-1])
    assert f'href="/dashboard/api-keys/{key_id}/rotate"' in listing.text  # opens the confirmation, does nothing

    asked = await any_api.client.get(f"/dashboard/api-keys/{key_id}/rotate", headers=headers)
    assert asked.status_code == 200 and "Rotate the key “CI”?" in asked.text
    assert "keeps working for\n  24 hours" in asked.text and 'name="confirm" value="rotate"' in asked.text
    unconfirmed = await any_api.client.post(f"/dashboard/api-keys/{key_id}/rotate", headers=headers,
                                            data={"csrf_token": csrf})
    assert unconfirmed.status_code == 200 and 'id="confirm-rotate"' in unconfirmed.text
    assert 'id="new-secret"' not in unconfirmed.text  # nothing rotated: the page asks again
    rotated = await any_api.client.post(f"/dashboard/api-keys/{key_id}/rotate", headers=headers,
                                        data={"csrf_token": csrf, "confirm": "rotate"})
    assert rotated.status_code == 200, rotated.text
    new_secret = _SECRET.search(rotated.text)
    assert new_secret is not None and new_secret.group(0) != secret.group(0)
    assert "keeps working until" in rotated.text
    assert (await any_api.client.get("/v2/agents", headers={"Authorization": f"Bearer {new_secret.group(0)}"})
            ).status_code == 200
    again = await any_api.client.post(f"/dashboard/api-keys/{key_id}/rotate", headers=headers,
                                      data={"csrf_token": csrf, "confirm": "rotate"})
    assert again.status_code == 409 and "already rotated" in again.text

    new_id = int(re.findall(r'data-revoke="(\d+)"', rotated.text)[-1])
    asked = await any_api.client.get(f"/dashboard/api-keys/{new_id}/revoke", headers=headers)
    assert asked.status_code == 200 and "Revoke the key “CI”?" in asked.text and "cannot be undone" in asked.text
    for confirm in ({}, {"confirm": "rotate"}):  # not confirmed, or confirmed for something else: asks again
        unconfirmed = await any_api.client.post(f"/dashboard/api-keys/{new_id}/revoke", headers=headers,
                                                data={"csrf_token": csrf, **confirm}, follow_redirects=False)
        assert unconfirmed.status_code == 200 and 'id="confirm-revoke"' in unconfirmed.text
    assert (await any_api.client.get("/v2/agents", headers={"Authorization": f"Bearer {new_secret.group(0)}"})
            ).status_code == 200
    revoked = await any_api.client.post(f"/dashboard/api-keys/{new_id}/revoke", headers=headers,
                                        data={"csrf_token": csrf, "confirm": "revoke"}, follow_redirects=False)
    assert revoked.status_code == 303
    assert (await any_api.client.get("/v2/agents", headers={"Authorization": f"Bearer {new_secret.group(0)}"})
            ).status_code == 401
    assert user is not None


async def test_a_plan_without_key_management_says_so_on_the_page(any_api: Api) -> None:
    _, headers, _ = await _signed_in(any_api, plan="starter")
    page = await any_api.client.get("/dashboard/api-keys", headers=headers)
    assert page.status_code == 200 and "enterprise" in page.text


async def test_a_session_never_reaches_another_organizations_data(any_api: Api) -> None:
    _, headers, csrf = await _signed_in(any_api)
    other = await any_api.tenant(plan="enterprise")
    agent = await active_agent(any_api, other, name="Their secret agent")
    call = (await place(any_api, other, agent, unique_phone())).json()["data"]
    listing = await any_api.client.get("/dashboard/agents", headers=headers)
    assert "Their secret agent" not in listing.text
    for path in (f"/dashboard/agents/{agent['id']}", f"/dashboard/calls/{call['id']}"):
        page = await any_api.client.get(path, headers=headers)
        assert page.status_code == 404, path
        assert "text/html" in page.headers["content-type"] and "Their secret agent" not in page.text
    for path in (f"/dashboard/agents/{agent['id']}/publish", f"/dashboard/api-keys/{other.key_id}/rotate",
                 f"/dashboard/api-keys/{other.key_id}/revoke"):
        answer = await any_api.client.post(path, headers=headers, data={"csrf_token": csrf})
        assert answer.status_code == 404, (path, answer.status_code)
        action = path.rsplit("/", 1)[1]
        confirmed = await any_api.client.post(path, headers=headers, data={"csrf_token": csrf, "confirm": action})
        assert confirmed.status_code == 404, (path, confirmed.status_code)
    for action in ("rotate", "revoke"):  # the confirmation page of another organization's key does not exist
        asked = await any_api.client.get(f"/dashboard/api-keys/{other.key_id}/{action}", headers=headers)
        assert asked.status_code == 404 and "text/html" in asked.headers["content-type"]
    placed = await any_api.client.post("/dashboard/calls", headers=headers, data={
        "csrf_token": csrf, "agent_id": str(agent["id"]), "destination_phone": unique_phone()})
    assert placed.status_code == 404
    # the other organization's key still works: nothing was rotated or revoked
    assert (await any_api.client.get("/v2/agents", headers=other.headers)).status_code == 200
    for path in ("/dashboard/agents/99999999999999999999", "/dashboard/agents/abc", "/dashboard/calls/" + "x" * 80):
        assert (await any_api.client.get(path, headers=headers)).status_code == 404, path
