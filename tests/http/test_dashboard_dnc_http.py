"""The Do-Not-Call section of the dashboard through HTTP, on both databases: a list created, a number added
(normalised as the API does; a bad one shown beside its field with nothing added), found by the search on every
list, removed only once confirmed; a CSV imported with its rejected rows; each form an audit event; another
organization's list a 404 page."""

from __future__ import annotations

from typing import Any

from tests.http.dashboard_support import cookie, login, new_user
from tests.support.apps import Api


async def _signed_in(api: Api) -> tuple[Any, dict[str, str], str]:
    user = await new_user(api)
    session, csrf = await login(api, user)
    return user, cookie(session), csrf


async def _post(api: Api, headers: dict[str, str], path: str, data: Any, **kwargs: Any) -> Any:
    return await api.client.post(f"/dashboard{path}", headers=headers, data=data, follow_redirects=False, **kwargs)


async def _entries(api: Api, user: Any, list_id: int) -> list[str]:
    found = await api.client.get(f"/v2/dnc/lists/{list_id}/entries?limit=100", headers=user.tenant.headers)
    assert found.status_code == 200, found.text
    return sorted(e["phone_number"] for e in found.json()["data"])


async def test_create_add_search_and_remove(any_api: Api) -> None:
    user, headers, csrf = await _signed_in(any_api)
    empty = await any_api.client.get("/dashboard/dnc", headers=headers)
    assert empty.status_code == 200 and 'id="create-dnc-list"' in empty.text and "No Do-Not-Call lists" in empty.text
    blank = await _post(any_api, headers, "/dnc", {"csrf_token": csrf, "name": " "})
    assert blank.status_code == 400 and 'id="name-error"' in blank.text
    made = await _post(any_api, headers, "/dnc", {"csrf_token": csrf, "name": "Complaints"})
    assert made.status_code == 303, made.text
    [listed] = (await any_api.client.get("/v2/dnc/lists", headers=user.tenant.headers)).json()["data"]
    list_id = listed["id"]
    assert made.headers["location"].startswith(f"/dashboard/dnc/{list_id}?")

    # a number as people write it, normalised as the API normalises it; a bad one is shown beside its field
    bad = await _post(any_api, headers, f"/dnc/{list_id}/entries", {"csrf_token": csrf, "phone_number": "call me"})
    assert bad.status_code == 400 and 'id="phone_number-error"' in bad.text
    bad_region = await _post(any_api, headers, f"/dnc/{list_id}/entries",
                             {"csrf_token": csrf, "phone_number": "4155550100", "default_region": "USA"})
    assert bad_region.status_code == 400 and 'id="default_region-error"' in bad_region.text
    assert await _entries(any_api, user, list_id) == []
    added = await _post(any_api, headers, f"/dnc/{list_id}/entries",
                        {"csrf_token": csrf, "phone_number": "(415) 555-0100", "default_region": "us",
                         "reason": "asked on a call"})
    assert added.status_code == 303 and "added" in added.headers["location"], added.text
    again = await _post(any_api, headers, f"/dnc/{list_id}/entries", {"csrf_token": csrf,
                                                                      "phone_number": "+1 415 555 0100"})
    assert again.status_code == 303 and "already" in again.headers["location"]
    assert await _entries(any_api, user, list_id) == ["+14155550100"]
    page = await any_api.client.get(f"/dashboard/dnc/{list_id}", headers=headers)
    assert "+14155550100" in page.text and "asked on a call" in page.text and 'table class="stack"' in page.text

    # the search looks at every list
    found = await any_api.client.get("/dashboard/dnc", params={"phone": "+14155550100"}, headers=headers)
    assert found.status_code == 200 and 'id="dnc-found"' in found.text and "is on 1 list" in found.text
    assert f"/dnc/{list_id}/entries/%2B14155550100/remove" in found.text
    missing = await any_api.client.get("/dashboard/dnc", params={"phone": "+14155550199"}, headers=headers)
    assert "is on none of the lists" in missing.text
    nonsense = await any_api.client.get("/dashboard/dnc", params={"phone": "nope"}, headers=headers)
    assert nonsense.status_code == 400 and 'id="phone-error"' in nonsense.text

    # removing asks first
    remove = f"/dnc/{list_id}/entries/%2B14155550100/remove"
    asked = await any_api.client.get(f"/dashboard{remove}", headers=headers)
    assert asked.status_code == 200 and 'id="confirm-remove"' in asked.text and "+14155550100" in asked.text
    unconfirmed = await _post(any_api, headers, remove, {"csrf_token": csrf})
    assert unconfirmed.status_code == 200 and 'id="confirm-remove"' in unconfirmed.text
    assert await _entries(any_api, user, list_id) == ["+14155550100"]
    removed = await _post(any_api, headers, remove, {"csrf_token": csrf, "confirm": "remove"})
    assert removed.status_code == 303 and "removed" in removed.headers["location"]
    assert await _entries(any_api, user, list_id) == []
    gone = await any_api.client.get(f"/dashboard{remove}", headers=headers)
    assert gone.status_code == 404

    # each form left its audit event, named as the API's operation
    events = (await any_api.client.get("/v2/audit-events?limit=50", headers=user.tenant.headers)).json()["data"]
    actions = {e["action"] for e in events if e["actor"]["type"] == "user"}
    assert {"dnc_list.created", "dnc_entries.added", "dnc_entry.removed"} <= actions, actions


async def test_csv_import_shows_each_rejected_row(any_api: Api) -> None:
    user, headers, csrf = await _signed_in(any_api)
    created = await any_api.client.post("/v2/dnc/lists", json={"name": "Imported"}, headers=user.tenant.headers)
    list_id = created.json()["data"]["id"]
    form = await any_api.client.get(f"/dashboard/dnc/{list_id}/import", headers=headers)
    assert form.status_code == 200 and 'enctype="multipart/form-data"' in form.text
    csv = b"phone_number,reason\n+14155550101,complaint\nnot a number,\n4155550102,\n+14155550101,twice\n"
    done = await _post(any_api, headers, f"/dnc/{list_id}/import", {"csrf_token": csrf, "default_region": "US"},
                       files={"file": ("numbers.csv", csv, "text/csv")})
    assert done.status_code == 201, done.text
    assert 'id="added">2<' in done.text and 'id="rejected-count">1<' in done.text
    assert 'id="rejected"' in done.text and "not a number" in done.text
    assert await _entries(any_api, user, list_id) == ["+14155550101", "+14155550102"]
    # a file without a valid number changes nothing and lists its rows; no file is a clear error
    useless = await _post(any_api, headers, f"/dnc/{list_id}/import", {"csrf_token": csrf},
                          files={"file": ("bad.csv", b"phone\nnope\n", "text/csv")})
    assert useless.status_code == 400 and 'id="file-error"' in useless.text and "nope" in useless.text
    none = await _post(any_api, headers, f"/dnc/{list_id}/import", {"csrf_token": csrf},
                       files={"other": ("x.csv", b"", "text/csv")})
    assert none.status_code == 400 and 'id="file-error"' in none.text
    # the multipart form needs its CSRF field
    forged = await _post(any_api, headers, f"/dnc/{list_id}/import", {},
                         files={"file": ("numbers.csv", b"+14155550109\n", "text/csv")})
    assert forged.status_code == 403
    assert await _entries(any_api, user, list_id) == ["+14155550101", "+14155550102"]


async def test_another_organizations_list_is_a_404_page(any_api: Api) -> None:
    owner, _, _ = await _signed_in(any_api)
    created = await any_api.client.post("/v2/dnc/lists", json={"name": "Theirs"}, headers=owner.tenant.headers)
    list_id = created.json()["data"]["id"]
    await any_api.client.post(f"/v2/dnc/lists/{list_id}/entries", json={"phone_numbers": ["+14155550111"]},
                              headers=owner.tenant.headers)
    _, headers, csrf = await _signed_in(any_api)
    for path in (f"/dnc/{list_id}", f"/dnc/{list_id}/import", f"/dnc/{list_id}/entries/%2B14155550111/remove"):
        assert (await any_api.client.get(f"/dashboard{path}", headers=headers)).status_code == 404, path
    for path, data in ((f"/dnc/{list_id}/entries", {"phone_number": "+14155550112"}),
                       (f"/dnc/{list_id}/entries/%2B14155550111/remove", {"confirm": "remove"})):
        assert (await _post(any_api, headers, path, {"csrf_token": csrf, **data})).status_code == 404, path
    assert await _entries(any_api, owner, list_id) == ["+14155550111"]
    theirs = await any_api.client.get("/dashboard/dnc", params={"phone": "+14155550111"}, headers=headers)
    assert "is on none of the lists" in theirs.text and "Theirs" not in theirs.text
