"""Triggers in the dashboard through HTTP, on both databases: creating one with its conditions and actions as JSON
text (the API's rules; an error shown beside its field, a member of the JSON named), the signing secret shown once,
editing, disabling and enabling, deleting only once confirmed, a trigger's run log with the condition trace and
the actions' results, and another organization's trigger a 404 page."""

from __future__ import annotations

import html
import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from domain.events import EventType
from entrypoints.http.dashboard.pages.triggers import state
from tests.http.dashboard_support import cookie, login, new_user
from tests.http.test_triggers_http import BOOKED, record
from tests.http.triggers_support import evaluate, run_jobs
from tests.support.apps import Api
from tests.support.receiver import Receiver, Reply

CONFIRMED = json.dumps({"all": [{"field": "data.status", "op": "eq", "value": "confirmed"}]})


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = await Receiver().start()
    yield r
    await r.close()


async def _signed_in(api: Api) -> tuple[Any, dict[str, str], str]:
    user = await new_user(api)
    session, csrf = await login(api, user)
    return user, cookie(session), csrf


async def _post(api: Api, headers: dict[str, str], path: str, data: Any) -> Any:
    return await api.client.post(f"/dashboard{path}", headers=headers, data=data, follow_redirects=False)


async def _triggers(api: Api, user: Any) -> list[dict[str, Any]]:
    return list((await api.client.get("/v2/triggers", headers=user.tenant.headers)).json()["data"])


def _chat(url: str) -> str:
    return json.dumps([{"type": "chat_message", "config": {"url": url, "text": "Booked {{data.attendee_name}}"}}])


async def test_create_edit_switch_and_delete(any_api: Api) -> None:
    user, headers, csrf = await _signed_in(any_api)
    listed = await any_api.client.get("/dashboard/triggers", headers=headers)
    assert listed.status_code == 200 and 'id="create-trigger"' in listed.text
    assert 'value="appointment.booked"' in listed.text
    good = {"csrf_token": csrf, "name": "Bookings", "event": "appointment.booked", "conditions": CONFIRMED,
            "actions": _chat("https://hooks.example.com/slack"), "enabled": "on"}
    for changed, field, words in (
            ({"conditions": "{not json"}, "conditions", "is not valid JSON"),
            ({"conditions": json.dumps({"all": [{"field": "data.colour", "op": "eq", "value": "red"}]})},
             "conditions", "conditions.all[0].field"),
            ({"actions": ""}, "actions", "is required"),
            ({"actions": _chat("ftp://example.com/x")}, "actions", "actions[0].config.url"),
            ({"actions": json.dumps([{"type": "teleport", "config": {}}])}, "actions", ""),
            ({"event": "call.nope"}, "event", ""),
            ({"name": ""}, "name", "")):
        refused = await _post(any_api, headers, "/triggers", {**good, **changed})
        assert refused.status_code == 400, (changed, refused.status_code)
        shown = re.search(rf'id="{field}-error">([^<]*)<', refused.text)
        assert shown, (changed, refused.text[-2000:])
        assert words in html.unescape(shown.group(1)), (changed, shown.group(1))
        assert 'aria-invalid="true"' in refused.text
    assert await _triggers(any_api, user) == []
    made = await _post(any_api, headers, "/triggers", good)
    assert made.status_code == 201 and 'id="new-secret"' in made.text, made.text[-2000:]
    secret = re.search(r'id="new-secret">.*?<code>([^<]+)</code>', made.text, re.S)
    assert secret and len(secret.group(1)) >= 20
    [trigger] = await _triggers(any_api, user)
    assert trigger["name"] == "Bookings" and trigger["enabled"] is True
    assert trigger["conditions"] == json.loads(CONFIRMED)
    assert trigger["actions"] == json.loads(good["actions"])

    # edit: the form shows the trigger; a bad member is shown beside its field and changes nothing
    path = f"/triggers/{trigger['id']}/edit"
    form = await any_api.client.get(f"/dashboard{path}", headers=headers)
    assert 'value="Bookings"' in form.text and 'value="appointment.booked" selected' in form.text
    assert "data.status" in html.unescape(form.text)
    edit = {k: v for k, v in good.items() if k != "enabled"}
    bad = await _post(any_api, headers, path, {**edit, "conditions": json.dumps(
        {"all": [{"field": "data.status", "op": "gt", "value": 3}]})})
    assert bad.status_code == 400 and "conditions.all[0].op" in html.unescape(bad.text)
    assert (await _triggers(any_api, user))[0]["name"] == "Bookings"
    saved = await _post(any_api, headers, path, {**edit, "name": "All bookings", "conditions": ""})
    assert saved.status_code == 303, saved.text
    [trigger] = await _triggers(any_api, user)
    assert trigger["name"] == "All bookings" and trigger["conditions"] is None

    # disable, enable
    off = await _post(any_api, headers, f"/triggers/{trigger['id']}/disable", {"csrf_token": csrf})
    assert off.status_code == 303
    assert (await _triggers(any_api, user))[0]["enabled"] is False
    page = await any_api.client.get(f"/dashboard/triggers/{trigger['id']}", headers=headers)
    assert re.search(r'id="trigger-state">disabled<', page.text) and ">Enable</button>" in page.text
    on = await _post(any_api, headers, f"/triggers/{trigger['id']}/enable", {"csrf_token": csrf})
    assert on.status_code == 303 and (await _triggers(any_api, user))[0]["enabled"] is True

    # delete asks first
    asked = await any_api.client.get(f"/dashboard/triggers/{trigger['id']}/delete", headers=headers)
    assert asked.status_code == 200 and "cannot be" in asked.text
    unconfirmed = await _post(any_api, headers, f"/triggers/{trigger['id']}/delete", {"csrf_token": csrf})
    assert unconfirmed.status_code == 200 and 'id="confirm-delete"' in unconfirmed.text
    assert len(await _triggers(any_api, user)) == 1
    deleted = await _post(any_api, headers, f"/triggers/{trigger['id']}/delete",
                          {"csrf_token": csrf, "confirm": "delete"})
    assert deleted.status_code == 303 and "deleted" in deleted.headers["location"]
    assert await _triggers(any_api, user) == []


@pytest.mark.slow
async def test_the_run_log_shows_why_each_run_matched_and_what_each_action_did(any_api: Api,
                                                                               receiver: Receiver) -> None:
    api = any_api
    user, headers, _ = await _signed_in(api)
    t = user.tenant
    receiver.script("/down", *[Reply(500, b"down")] * 3)
    made = (await api.client.post("/v2/triggers", headers=t.headers, json={
        "name": "Bookings", "event": "appointment.booked", "conditions": json.loads(CONFIRMED),
        "actions": [{"type": "chat_message", "config": {"url": receiver.url("/ok"), "text": "hi"}},
                    {"type": "chat_message", "config": {"url": receiver.url("/down"), "text": "hi"}}]})).json()["data"]
    await evaluate(api)
    await record(api, EventType.APPOINTMENT_BOOKED(t.organization_id, {**BOOKED, "status": "pending"}),
                 EventType.APPOINTMENT_BOOKED(t.organization_id, BOOKED))
    await evaluate(api)
    await run_jobs(api)
    page = await api.client.get(f"/dashboard/triggers/{made['id']}", headers=headers)
    assert page.status_code == 200
    text = html.unescape(page.text)
    assert "2 runs" in text
    missed, hit = (text.index(f'id="run-{r["id"]}"') for r in sorted(
        (await api.client.get(f"/v2/triggers/{made['id']}/runs", headers=t.headers)).json()["data"],
        key=lambda r: r["matched"]))
    assert hit < missed  # newest first
    miss_row = text[missed:text.index("</tr>", missed)]
    assert "not matched" in miss_row and "✗ failed" in miss_row
    assert 'data.status eq "confirmed"' in miss_row and 'the event had "pending"' in miss_row
    hit_row = text[hit:text.index("</tr>", hit)]
    assert "✓ held" in hit_row and 'the event had "confirmed"' in hit_row
    assert hit_row.count('class="pill succeeded"') == 1 and 'class="pill retrying"' in hit_row
    assert "HTTP 500" in hit_row
    only = await api.client.get(f"/dashboard/triggers/{made['id']}?status=not_matched", headers=headers)
    assert only.text.count('<tr id="run-') == 1 and "not matched" in only.text


def test_a_trigger_parley_disabled_says_why() -> None:
    from domain.triggers import Trigger

    now = datetime(2026, 3, 2, tzinfo=UTC)
    trigger = Trigger(1, 1, "x", "call.ended", None, (), False, "", now, now, disabled_reason="run_rate")
    assert state(trigger) == ("disabled", "disabled by Parley: it ran more than 100 times in a minute (run_rate)")
    assert state(Trigger(1, 1, "x", "call.ended", None, (), False, "", now, now)) == ("paused", "disabled")


async def test_another_organizations_trigger_is_a_404_page(any_api: Api) -> None:
    owner, _, _ = await _signed_in(any_api)
    created = await any_api.client.post("/v2/triggers", headers=owner.tenant.headers, json={
        "name": "Theirs", "event": "appointment.booked",
        "actions": json.loads(_chat("https://hooks.example.com/x"))})
    trigger = created.json()["data"]["id"]
    _, headers, csrf = await _signed_in(any_api)
    for path in (f"/triggers/{trigger}", f"/triggers/{trigger}/edit", f"/triggers/{trigger}/delete"):
        assert (await any_api.client.get(f"/dashboard{path}", headers=headers)).status_code == 404, path
    for path, data in ((f"/triggers/{trigger}/delete", {"confirm": "delete"}), (f"/triggers/{trigger}/disable", {}),
                       (f"/triggers/{trigger}/edit", {"name": "Mine", "event": "appointment.booked",
                                                      "actions": _chat("https://hooks.example.com/y")})):
        assert (await _post(any_api, headers, path, {"csrf_token": csrf, **data})).status_code == 404, path
    [kept] = (await any_api.client.get("/v2/triggers", headers=owner.tenant.headers)).json()["data"]
    assert kept["name"] == "Theirs" and kept["enabled"] is True
