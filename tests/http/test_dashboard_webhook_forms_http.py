"""Subscribing, editing and deleting webhooks in the dashboard through HTTP, on both databases: the API's rules
(errors beside their field; a private address refused), the signing secret shown once, deleting only once
confirmed, and another organization's subscription a 404 page."""

from __future__ import annotations

import re
from typing import Any

from tests.http.dashboard_support import cookie, login, new_user
from tests.support.apps import Api

HOOK = "https://hooks.example.com/parley"


async def _signed_in(api: Api) -> tuple[Any, dict[str, str], str]:
    user = await new_user(api)
    session, csrf = await login(api, user)
    return user, cookie(session), csrf


async def _post(api: Api, headers: dict[str, str], path: str, data: Any) -> Any:
    return await api.client.post(f"/dashboard{path}", headers=headers, data=data, follow_redirects=False)


async def _hooks(api: Api, user: Any) -> list[dict[str, Any]]:
    return list((await api.client.get("/v2/webhooks", headers=user.tenant.headers)).json()["data"])


async def test_subscribe_edit_and_delete(any_api: Api) -> None:
    user, headers, csrf = await _signed_in(any_api)
    listed = await any_api.client.get("/dashboard/webhooks", headers=headers)
    assert 'id="create-webhook"' in listed.text and 'value="call.ended"' in listed.text
    for data, field in (({"url": HOOK}, "events"), ({"url": "not a url", "events": ["call.ended"]}, "url"),
                        ({"url": "http://10.0.0.1/hook", "events": ["call.ended"]}, "url"),
                        ({"url": HOOK, "events": ["call.nope"]}, "events")):
        refused = await _post(any_api, headers, "/webhooks", {"csrf_token": csrf, "name": "CRM", **data})
        assert refused.status_code == 400, (data, refused.status_code)
        assert f'id="{field}-error"' in refused.text or 'role="alert"' in refused.text, data
    assert await _hooks(any_api, user) == []
    made = await _post(any_api, headers, "/webhooks", {"csrf_token": csrf, "name": "CRM", "url": HOOK,
                                                       "events": ["call.ended", "call.started"]})
    assert made.status_code == 201 and 'id="new-secret"' in made.text , made.text[-3000:]
    secret = re.search(r'id="new-secret">.*?<code>([^<]+)</code>', made.text, re.S)
    assert secret and len(secret.group(1)) >= 20
    [hook] = await _hooks(any_api, user)
    assert hook["name"] == "CRM" and sorted(hook["events"]) == ["call.ended", "call.started"]
    # edit: the form shows the subscription; a bad field is shown beside it and changes nothing
    path = f"/webhooks/{hook['id']}/edit"
    form = await any_api.client.get(f"/dashboard{path}", headers=headers)
    assert f'value="{HOOK}"' in form.text and 'value="call.ended" checked' in form.text
    blank = await _post(any_api, headers, path, {"csrf_token": csrf, "name": " ", "url": HOOK,
                                                 "events": ["call.ended"], "status": "active"})
    assert blank.status_code == 400 and 'id="name-error"' in blank.text
    saved = await _post(any_api, headers, path, {"csrf_token": csrf, "name": "CRM v2",
                                                 "url": "https://hooks.example.com/v2", "events": ["call.ended"],
                                                 "status": "paused"})
    assert saved.status_code == 303, saved.text
    [hook] = await _hooks(any_api, user)
    assert hook["name"] == "CRM v2" and hook["url"] == "https://hooks.example.com/v2"
    assert hook["events"] == ["call.ended"] and hook["status"] == "paused"
    # delete asks first
    asked = await any_api.client.get(f"/dashboard/webhooks/{hook['id']}/delete", headers=headers)
    assert asked.status_code == 200 and "cannot be undone" in asked.text
    unconfirmed = await _post(any_api, headers, f"/webhooks/{hook['id']}/delete", {"csrf_token": csrf})
    assert unconfirmed.status_code == 200 and 'id="confirm-delete"' in unconfirmed.text
    assert len(await _hooks(any_api, user)) == 1
    deleted = await _post(any_api, headers, f"/webhooks/{hook['id']}/delete",
                          {"csrf_token": csrf, "confirm": "delete"})
    assert deleted.status_code == 303 and "deleted" in deleted.headers["location"]
    assert await _hooks(any_api, user) == []


async def test_another_organizations_subscription_is_a_404_page(any_api: Api) -> None:
    owner, _, _ = await _signed_in(any_api)
    created = await any_api.client.post("/v2/webhooks", headers=owner.tenant.headers,
                                        json={"url": HOOK, "events": ["call.ended"], "name": "Theirs"})
    hook = created.json()["data"]["id"]
    _, headers, csrf = await _signed_in(any_api)
    assert (await any_api.client.get(f"/dashboard/webhooks/{hook}/edit", headers=headers)).status_code == 404
    assert (await _post(any_api, headers, f"/webhooks/{hook}/delete",
                        {"csrf_token": csrf, "confirm": "delete"})).status_code == 404
    assert (await _post(any_api, headers, f"/webhooks/{hook}/edit",
                        {"csrf_token": csrf, "name": "Mine", "url": HOOK, "events": ["call.ended"]})
            ).status_code == 404
    assert len(await _hooks(any_api, owner)) == 1
