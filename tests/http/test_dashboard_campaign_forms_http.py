"""Creating a campaign, importing its contacts from a CSV upload and cancelling it (only once confirmed) in the
dashboard, through HTTP on both databases: the API's use cases, errors beside their field, each rejected row of a
file shown with its line, field and why; the upload's CSRF token travels in the multipart form."""

from __future__ import annotations

import re
from typing import Any

from tests.http.calls_support import active_agent, unique_phone
from tests.http.dashboard_support import cookie, login, new_user
from tests.http.test_campaigns_http import new_campaign
from tests.support.apps import Api


async def _signed_in(api: Api) -> tuple[Any, dict[str, str], str]:
    user = await new_user(api)
    session, csrf = await login(api, user)
    return user, cookie(session), csrf


async def _post(api: Api, headers: dict[str, str], path: str, data: dict[str, str], **kwargs: Any) -> Any:
    return await api.client.post(f"/dashboard{path}", headers=headers, data=data, follow_redirects=False, **kwargs)


async def test_create_a_campaign_with_the_form(any_api: Api) -> None:
    user, headers, csrf = await _signed_in(any_api)
    empty = await any_api.client.get("/dashboard/campaigns", headers=headers)
    assert "Create an <a" in empty.text  # no agent yet: the form says to make one first
    agent = await active_agent(any_api, user.tenant, name="Caller")
    listed = await any_api.client.get("/dashboard/campaigns", headers=headers)
    assert 'id="create-campaign"' in listed.text and f'<option value="{agent["id"]}"' in listed.text
    fields = {"csrf_token": csrf, "name": "Autumn renewals", "agent_id": str(agent["id"]), "timezone": "UTC",
              "timezone_mode": "campaign", "calling_hours.start": "09:00", "calling_hours.end": "17:30",
              "max_concurrent_calls": "3", "completion": "manual"}
    for name, value, words in (("name", " ", "must not be blank"), ("timezone", "Mars/Base", "timezone"),
                               ("calling_hours.start", "9am", "calling_hours.start"),
                               ("max_concurrent_calls", "0", "max_concurrent_calls"),
                               ("agent_id", "999999", "agent_id")):
        bad = await _post(any_api, headers, "/campaigns", {**fields, name: value})
        assert bad.status_code in (400, 404, 422), (name, bad.status_code)
        assert words in bad.text and f'id="{name.replace(".", "-")}-error"' in bad.text, name
    assert (await any_api.client.get("/v2/campaigns", headers=user.tenant.headers)).json()["meta"]["total"] == 0
    created = await _post(any_api, headers, "/campaigns", fields)
    assert created.status_code == 303, created.text
    campaign_id = int(re.search(r"/campaigns/(\d+)\?", created.headers["location"]).group(1))  # type: ignore[union-attr]
    got = (await any_api.client.get(f"/v2/campaigns/{campaign_id}", headers=user.tenant.headers)).json()["data"]
    assert got["name"] == "Autumn renewals" and got["agent_id"] == agent["id"] and got["status"] == "draft"
    assert got["timezone_mode"] == "campaign" and got["calling_hours"] == {"start": "09:00", "end": "17:30"}
    assert got["max_concurrent_calls"] == 3 and got["completion"] == "manual"


async def test_import_contacts_from_a_csv_upload_with_per_row_errors(any_api: Api) -> None:
    user, headers, csrf = await _signed_in(any_api)
    campaign = await new_campaign(any_api, user.tenant)
    path = f"/campaigns/{campaign['id']}/import"
    form = await any_api.client.get(f"/dashboard{path}", headers=headers)
    assert form.status_code == 200 and 'enctype="multipart/form-data"' in form.text
    first, second = unique_phone(), unique_phone()
    content = (f"phone,name,timezone,crm_id\n{first},Ada,Europe/London,A-1\nnot a number,Bob,,B-2\n"
               f"{first},Ada again,,\n{second},Cy,Mars/Base,\n").encode()
    files = {"file": ("contacts.csv", content, "text/csv")}
    # the CSRF token is a field of the multipart form: without it (or with another) nothing is imported
    assert (await _post(any_api, headers, path, {}, files=files)).status_code == 403
    assert (await _post(any_api, headers, path, {"csrf_token": "forged"}, files=files)).status_code == 403
    done = await _post(any_api, headers, path, {"csrf_token": csrf}, files=files)
    assert done.status_code == 201, done.text
    assert re.search(r'id="accepted">1<', done.text) and re.search(r'id="duplicates">1<', done.text)
    assert re.search(r'id="rejected-count">2<', done.text)
    rows = re.findall(r'<td data-label="Line" class="num">(\d+)</td><td data-label="Field"><code>(\w+)</code>',
                      done.text)
    assert rows == [("3", "phone"), ("5", "timezone")]
    assert "must be an E.164 phone number" in done.text and "IANA time zone" in done.text
    contacts = (await any_api.client.get(f"/v2/campaigns/{campaign['id']}/contacts",
                                         headers=user.tenant.headers)).json()["data"]
    assert [c["phone"] for c in contacts] == [first] and contacts[0]["custom_data"] == {"crm_id": "A-1"}
    # a file with no valid row: 400, its rows shown, nothing added
    bad = await _post(any_api, headers, path, {"csrf_token": csrf},
                      files={"file": ("bad.csv", b"phone\nnope\n", "text/csv")})
    assert bad.status_code == 400 and "no valid contact" in bad.text and 'id="rejected"' in bad.text
    no_header = await _post(any_api, headers, path, {"csrf_token": csrf},
                            files={"file": ("x.csv", b"name\nAda\n", "text/csv")})
    assert no_header.status_code == 400 and 'id="file-error"' in no_header.text
    missing = await _post(any_api, headers, path, {"csrf_token": csrf})
    assert missing.status_code == 400 and "Choose a CSV file" in missing.text
    total = (await any_api.client.get(f"/v2/campaigns/{campaign['id']}/contacts",
                                      headers=user.tenant.headers)).json()["meta"]["total"]
    assert total == 1
    # another organization's campaign is a 404 page
    _, other, other_csrf = await _signed_in(any_api)
    assert (await _post(any_api, other, path, {"csrf_token": other_csrf}, files=files)).status_code == 404


async def test_cancel_asks_first(any_api: Api) -> None:
    user, headers, csrf = await _signed_in(any_api)
    campaign = await new_campaign(any_api, user.tenant, name="Winter")
    path = f"/campaigns/{campaign['id']}"
    html = (await any_api.client.get(f"/dashboard{path}", headers=headers)).text
    assert f'href="/dashboard{path}/cancel"' in html and f'action="/dashboard{path}/cancel"' not in html
    asked = await any_api.client.get(f"/dashboard{path}/cancel", headers=headers)
    assert asked.status_code == 200 and "cannot be undone" in asked.text
    assert 'name="confirm" value="cancel"' in asked.text
    unconfirmed = await _post(any_api, headers, f"{path}/cancel", {"csrf_token": csrf})
    assert unconfirmed.status_code == 200 and 'id="confirm-cancel"' in unconfirmed.text
    status = (await any_api.client.get(f"/v2/campaigns/{campaign['id']}", headers=user.tenant.headers)
              ).json()["data"]["status"]
    assert status == "draft"
    done = await _post(any_api, headers, f"{path}/cancel", {"csrf_token": csrf, "confirm": "cancel"})
    assert done.status_code == 303
    status = (await any_api.client.get(f"/v2/campaigns/{campaign['id']}", headers=user.tenant.headers)
              ).json()["data"]["status"]
    assert status == "cancelled"
