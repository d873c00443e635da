"""Editing an agent's draft in the dashboard through HTTP, on both databases: every field through the API's PATCH
rules with errors beside their field, the versions list, a version compared with the draft (a diff table), and
restoring a version only once confirmed; another organization's agent is a 404 page."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.http.dashboard_support import cookie, login, new_user
from tests.support.apps import Api


async def _signed_in(api: Api) -> tuple[Any, dict[str, str], str]:
    user = await new_user(api)
    session, csrf = await login(api, user)
    return user, cookie(session), csrf


async def _post(api: Api, headers: dict[str, str], path: str, data: dict[str, str]) -> Any:
    return await api.client.post(f"/dashboard{path}", headers=headers, data=data, follow_redirects=False)


def _form_of(html: str) -> dict[str, str]:
    """The edit form's fields as the page fills them (inputs, selected options, textareas)."""
    form = {m.group(1): m.group(2) for m in re.finditer(r'<input type="[a-z]+" name="([\w.]+)" value="([^"]*)"', html)}
    form.update({m.group(1): m.group(2) for m in re.finditer(r'<textarea name="([\w.]+)"[^>]*>([^<]*)</textarea>',
                                                             html)})
    for select in re.finditer(r'<select name="([\w.]+)"[^>]*>(.*?)</select>', html, re.S):
        chosen = re.search(r'<option value="([^"]*)" selected>', select.group(2))
        form[select.group(1)] = chosen.group(1) if chosen else ""
    return {k: v.replace("&#34;", '"').replace("&quot;", '"').replace("&#39;", "'").replace("&amp;", "&")
            for k, v in form.items() if k != "csrf_token"}


async def _agent(api: Api, user: Any) -> dict[str, Any]:
    created = await api.client.post("/v2/agents", headers=user.tenant.headers,
                                    json={"name": "Front desk", "prompt": "Greet the caller.\nBe brief."})
    assert created.status_code == 201, created.text
    return dict(created.json()["data"])


async def test_edit_every_field_of_the_draft(any_api: Api) -> None:
    user, headers, csrf = await _signed_in(any_api)
    agent = await _agent(any_api, user)
    calendar = await any_api.client.post("/v2/scheduling/calendars", headers=user.tenant.headers,
                                         json={"name": "Visits", "timezone": "Europe/Paris"})
    assert calendar.status_code == 201, calendar.text
    calendar_id = calendar.json()["data"]["id"]
    path = f"/agents/{agent['id']}/edit"
    html = (await any_api.client.get(f"/dashboard{path}", headers=headers)).text
    form = _form_of(html)
    assert form["name"] == "Front desk" and form["prompt"] == "Greet the caller.\nBe brief."
    assert form["voice.provider"] == "simulator" and form["tools"] == "[]" and "Visits (Europe/Paris)" in html
    tools = [{"name": "lookup_order", "url": "https://crm.example.com/orders", "description": "Find an order"}]
    schema = {"type": "object", "properties": {"interested": {"type": "boolean"}}}
    form.update({"csrf_token": csrf, "name": "Front desk 2", "prompt": "Greet {{contact_name}}.",
                 "first_message": "Hello!", "description": "Answers the phone", "agent_mode": "inbound",
                 "language": "fr-FR", "timezone": "Europe/Paris", "calendar_id": str(calendar_id),
                 "voice.provider": "simulator", "voice.voice_id": "alto", "voice.speed": "1.2",
                 "llm.model": "parley-sim-1", "llm.temperature": "0.2", "transcriber.language": "fr-FR",
                 "max_call_duration_seconds": "300", "end_of_turn_silence_ms": "900",
                 "voicemail.action": "leave_message", "voicemail.message": "Call us back",
                 "tools": json.dumps(tools), "analysis_schema": json.dumps(schema), "metadata": '{"team": "sales"}'})
    saved = await _post(any_api, headers, path, form)
    assert saved.status_code == 303, saved.text
    assert saved.headers["location"].startswith(f"/dashboard/agents/{agent['id']}?flash=")
    got = (await any_api.client.get(f"/v2/agents/{agent['id']}", headers=user.tenant.headers)).json()["data"]
    assert got["name"] == "Front desk 2" and got["prompt"] == "Greet {{contact_name}}."
    assert got["first_message"] == "Hello!" and got["description"] == "Answers the phone"
    assert got["agent_mode"] == "inbound" and got["language"] == "fr-FR" and got["timezone"] == "Europe/Paris"
    assert got["calendar_id"] == calendar_id
    assert got["voice"]["voice_id"] == "alto" and got["voice"]["speed"] == 1.2
    assert got["llm"]["temperature"] == 0.2 and got["transcriber"]["language"] == "fr-FR"
    assert got["max_call_duration_seconds"] == 300 and got["end_of_turn_silence_ms"] == 900
    assert got["voicemail"] == {"action": "leave_message", "message": "Call us back"}
    assert [t["name"] for t in got["tools"]] == ["lookup_order"] and got["analysis_schema"] == schema
    assert got["metadata"] == {"team": "sales"}
    # the form shows what was saved; clearing optional fields clears them, metadata is replaced whole
    again = _form_of((await any_api.client.get(f"/dashboard{path}", headers=headers)).text)
    assert again["voicemail.message"] == "Call us back" and json.loads(again["tools"])[0]["name"] == "lookup_order"
    again.update({"csrf_token": csrf, "first_message": "", "calendar_id": "", "analysis_schema": "", "tools": "[]",
                  "metadata": "{}"})
    assert (await _post(any_api, headers, path, again)).status_code == 303
    got = (await any_api.client.get(f"/v2/agents/{agent['id']}", headers=user.tenant.headers)).json()["data"]
    assert got["first_message"] is None and got["calendar_id"] is None and got["analysis_schema"] is None
    assert got["tools"] == [] and got["metadata"] == {}


async def test_field_errors_are_shown_beside_their_field_and_change_nothing(any_api: Api) -> None:
    user, headers, csrf = await _signed_in(any_api)
    agent = await _agent(any_api, user)
    path = f"/agents/{agent['id']}/edit"
    form = _form_of((await any_api.client.get(f"/dashboard{path}", headers=headers)).text)
    cases = [("name", " ", "must not be blank"), ("voice.speed", "9", "voice.speed"),
             ("max_call_duration_seconds", "many", "max_call_duration_seconds"),
             ("tools", "[{", "is not valid JSON"), ("analysis_schema", '{"type": "string"}', "analysis_schema"),
             ("timezone", "Mars/Olympus", "timezone"), ("calendar_id", "999999", "calendar_id")]
    for name, value, words in cases:
        sent = await _post(any_api, headers, path, {**form, "csrf_token": csrf, name: value})
        assert sent.status_code in (400, 404, 422), (name, sent.status_code)
        assert words in sent.text, (name, sent.text[-2000:])
        error_id = name.replace(".", "-") + "-error"
        assert f'id="{error_id}"' in sent.text, name  # beside its field, and the field points at it
        assert f'aria-describedby="{error_id}"' in sent.text, name
        assert f'value="{value}"' in sent.text or ">" + value.replace('"', "&#34;") in sent.text or name == "tools"
    got = (await any_api.client.get(f"/v2/agents/{agent['id']}", headers=user.tenant.headers)).json()["data"]
    assert got["name"] == "Front desk" and got["voice"]["speed"] == 1.0 and got["timezone"] == "UTC"
    assert (await _post(any_api, headers, path, {**form, "name": "No token"})).status_code == 403


async def test_versions_diff_and_restore_with_confirmation(any_api: Api) -> None:
    user, headers, csrf = await _signed_in(any_api)
    agent = await _agent(any_api, user)
    base = f"/agents/{agent['id']}"
    empty = await any_api.client.get(f"/dashboard{base}/versions", headers=headers)
    assert empty.status_code == 200 and "Not published yet" in empty.text
    assert (await _post(any_api, headers, f"{base}/publish", {"csrf_token": csrf})).status_code == 303
    form = _form_of((await any_api.client.get(f"/dashboard{base}/edit", headers=headers)).text)
    form.update({"csrf_token": csrf, "prompt": "Greet the caller.\nBe very brief.", "voice.speed": "1.5"})
    assert (await _post(any_api, headers, f"{base}/edit", form)).status_code == 303
    listed = await any_api.client.get(f"/dashboard{base}/versions", headers=headers)
    assert 'data-label="Version">1<' in listed.text and f"{base}/versions/1/restore" in listed.text
    diff = await any_api.client.get(f"/dashboard{base}/versions/1", headers=headers)
    assert diff.status_code == 200
    rows = re.findall(r'<tr class="diff-(\w+)" data-kind="\w+">(.*?)</tr>', diff.text, re.S)
    changed = [body for kind, body in rows if kind != "same"]
    assert any("Be brief." in body and "Be very brief." in body for body in changed)
    assert any("voice.speed: 1.0" in body and "voice.speed: 1.5" in body for body in changed)
    assert any("name: Front desk" in body for kind, body in rows if kind == "same")
    assert "2 lines differ" in diff.text
    # restore asks first: the page, then a post without confirm changes nothing
    asked = await any_api.client.get(f"/dashboard{base}/versions/1/restore", headers=headers)
    assert asked.status_code == 200 and 'name="confirm" value="restore"' in asked.text
    unconfirmed = await _post(any_api, headers, f"{base}/versions/1/restore", {"csrf_token": csrf})
    assert unconfirmed.status_code == 200 and 'id="confirm-restore"' in unconfirmed.text
    got = (await any_api.client.get(f"/v2/agents/{agent['id']}", headers=user.tenant.headers)).json()["data"]
    assert got["voice"]["speed"] == 1.5 and got["has_unpublished_changes"]
    restored = await _post(any_api, headers, f"{base}/versions/1/restore", {"csrf_token": csrf, "confirm": "restore"})
    assert restored.status_code == 303 and "restored" in restored.headers["location"]
    got = (await any_api.client.get(f"/v2/agents/{agent['id']}", headers=user.tenant.headers)).json()["data"]
    assert got["voice"]["speed"] == 1.0 and got["prompt"] == "Greet the caller.\nBe brief."
    same = await any_api.client.get(f"/dashboard{base}/versions/1", headers=headers)
    assert "The draft is the same as this version" in same.text
    assert (await any_api.client.get(f"/dashboard{base}/versions/7", headers=headers)).status_code == 404
    assert (await _post(any_api, headers, f"{base}/versions/7/restore",
                        {"csrf_token": csrf, "confirm": "restore"})).status_code == 404


async def test_another_organizations_agent_is_a_404_page(any_api: Api) -> None:
    owner, _, _ = await _signed_in(any_api)
    agent = await _agent(any_api, owner)
    _, headers, csrf = await _signed_in(any_api)
    for path in (f"/agents/{agent['id']}/edit", f"/agents/{agent['id']}/versions"):
        assert (await any_api.client.get(f"/dashboard{path}", headers=headers)).status_code == 404
    sent = await _post(any_api, headers, f"/agents/{agent['id']}/edit", {"csrf_token": csrf, "name": "Mine now"})
    assert sent.status_code == 404
    got = (await any_api.client.get(f"/v2/agents/{agent['id']}", headers=owner.tenant.headers)).json()["data"]
    assert got["name"] == "Front desk"
