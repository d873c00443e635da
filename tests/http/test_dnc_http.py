"""Do-Not-Call lists, entries, bulk add, CSV import and screening through the HTTP API."""

from __future__ import annotations

from adapters.memory.clock import ManualClock
from tests.support.apps import Api, ApiFactory


async def _list(api: Api, headers: dict[str, str], name: str = "Opt-outs") -> dict:
    created = await api.client.post("/v2/dnc/lists", json={"name": name, "description": "asked not to be called"},
                                    headers=headers)
    assert created.status_code == 201, created.text
    return created.json()["data"]


async def test_lists_entries_bulk_add_remove_and_check(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    opt_outs, legal = await _list(api, t.headers), await _list(api, t.headers, "Legal")
    assert opt_outs["entry_count"] == 0 and opt_outs["name"] == "Opt-outs"
    added = await api.client.post(f"/v2/dnc/lists/{opt_outs['id']}/entries", json={
        "phone_numbers": ["+1 (415) 555-0100", "+14155550101", "+14155550100", "0044 20 7946 0958"],
        "reason": "asked"}, headers=t.headers)
    assert added.status_code == 201
    # the first number twice: listed by its first line, already listed at its second (the counts add up)
    assert added.json()["data"] == {"list_id": opt_outs["id"], "received": 4, "added": 3, "already_listed": 1,
                                    "invalid": []}
    again = await api.client.post(f"/v2/dnc/lists/{opt_outs['id']}/entries",
                                  json={"phone_numbers": ["4155550101", "4155550102"], "default_region": "US"},
                                  headers=t.headers)
    assert (again.json()["data"]["added"], again.json()["data"]["already_listed"]) == (1, 1)
    await api.client.post(f"/v2/dnc/lists/{legal['id']}/entries", json={"phone_numbers": ["+14155550100"]},
                          headers=t.headers)
    entries = (await api.client.get(f"/v2/dnc/lists/{opt_outs['id']}/entries?limit=2", headers=t.headers)).json()
    assert entries["meta"] == {"total": 4, "limit": 2, "offset": 0}
    assert entries["data"][0] == {"phone_number": "+14155550100", "reason": "asked",
                                  "created_at": entries["data"][0]["created_at"]}
    got = (await api.client.get(f"/v2/dnc/lists/{opt_outs['id']}", headers=t.headers)).json()["data"]
    assert got["entry_count"] == 4
    lists = (await api.client.get("/v2/dnc/lists", headers=t.headers)).json()
    assert [x["name"] for x in lists["data"]] == ["Opt-outs", "Legal"] and lists["meta"]["total"] == 2

    check = await api.client.post("/v2/dnc/check", json={"phone_numbers": [
        "+14155550100", "+1 415 555 0102", "+14155550199"]}, headers=t.headers)
    assert check.status_code == 200
    assert check.json()["data"] == [
        {"phone_number": "+14155550100", "blocked": True, "list_ids": sorted([opt_outs["id"], legal["id"]])},
        {"phone_number": "+14155550102", "blocked": True, "list_ids": [opt_outs["id"]]},
        {"phone_number": "+14155550199", "blocked": False, "list_ids": []},
    ]
    removed = await api.client.delete(f"/v2/dnc/lists/{opt_outs['id']}/entries/%2B14155550102", headers=t.headers)
    assert removed.status_code == 204
    gone = await api.client.delete(f"/v2/dnc/lists/{opt_outs['id']}/entries/%2B14155550102", headers=t.headers)
    assert gone.status_code == 404
    assert (await api.client.delete(f"/v2/dnc/lists/{legal['id']}", headers=t.headers)).status_code == 204
    after = await api.client.post("/v2/dnc/check", json={"phone_numbers": ["+14155550100", "+14155550102"]},
                                  headers=t.headers)
    assert [(x["blocked"], x["list_ids"]) for x in after.json()["data"]] == [(True, [opt_outs["id"]]), (False, [])]


async def test_invalid_numbers_are_refused_and_nothing_is_added(api: Api) -> None:
    t = await api.tenant()
    dnc = await _list(api, t.headers)
    bad = await api.client.post(f"/v2/dnc/lists/{dnc['id']}/entries",
                                json={"phone_numbers": ["+14155550100", "12", "nope"]}, headers=t.headers)
    assert bad.status_code == 400
    error = bad.json()["error"]
    assert error["details"]["invalid_phone_numbers"] == ["12", "nope"]
    assert "phone_numbers" in error["details"]["validation_errors"]
    assert (await api.client.get(f"/v2/dnc/lists/{dnc['id']}", headers=t.headers)).json()["data"]["entry_count"] == 0
    empty = await api.client.post(f"/v2/dnc/lists/{dnc['id']}/entries", json={"phone_numbers": []},
                                  headers=t.headers)
    assert empty.status_code == 400
    check = await api.client.post("/v2/dnc/check", json={"phone_numbers": ["x"]}, headers=t.headers)
    assert check.status_code == 400


async def test_csv_import_as_text_and_as_multipart(api: Api) -> None:
    t = await api.tenant()
    dnc = await _list(api, t.headers)
    csv_text = "name,phone,reason\nAda,+1 415 555 0100,asked\nBob,not-a-number,\nCid,,\nDee,+14155550100,dup\n"
    imported = await api.client.post(f"/v2/dnc/lists/{dnc['id']}/entries/import", content=csv_text.encode(),
                                     headers={**t.headers, "Content-Type": "text/csv"})
    assert imported.status_code == 201, imported.text
    data = imported.json()["data"]
    assert (data["received"], data["added"], data["already_listed"]) == (4, 1, 1)  # Dee repeats Ada's number
    assert data["invalid"] == [{"line": 3, "value": "not-a-number", "error": "not a phone number in E.164 form"},
                               {"line": 4, "value": "", "error": "no phone number in this row"}]
    upload = await api.client.post(f"/v2/dnc/lists/{dnc['id']}/entries/import?default_region=GB",
                                    files={"file": ("dnc.csv", b"020 7946 0958\n+14155550100\n", "text/csv")},
                                    headers=t.headers)
    assert upload.status_code == 201, upload.text
    assert (upload.json()["data"]["added"], upload.json()["data"]["already_listed"]) == (1, 1)
    entries = (await api.client.get(f"/v2/dnc/lists/{dnc['id']}/entries", headers=t.headers)).json()["data"]
    assert [(e["phone_number"], e["reason"]) for e in entries] == [("+14155550100", "asked"), ("+442079460958", None)]
    wrong_type = await api.client.post(f"/v2/dnc/lists/{dnc['id']}/entries/import", content=b"{}",
                                       headers={**t.headers, "Content-Type": "application/json"})
    assert wrong_type.status_code == 415 and wrong_type.json()["error"]["code"] == "unsupported_media_type"
    nothing = await api.client.post(f"/v2/dnc/lists/{dnc['id']}/entries/import", content=b"junk\n",
                                    headers={**t.headers, "Content-Type": "text/csv"})
    assert nothing.status_code == 400 and nothing.json()["error"]["details"]["rows"][0]["line"] == 1


async def test_lists_belong_to_their_organization_and_need_dnc_scopes(api: Api) -> None:
    a, b = await api.tenant(), await api.tenant()
    dnc = await _list(api, a.headers)
    await api.client.post(f"/v2/dnc/lists/{dnc['id']}/entries", json={"phone_numbers": ["+14155550100"]},
                          headers=a.headers)
    for method, path in [("GET", f"/v2/dnc/lists/{dnc['id']}"), ("DELETE", f"/v2/dnc/lists/{dnc['id']}"),
                         ("GET", f"/v2/dnc/lists/{dnc['id']}/entries")]:
        assert (await api.client.request(method, path, headers=b.headers)).status_code == 404, path
    theirs = await api.client.post("/v2/dnc/check", json={"phone_numbers": ["+14155550100"]}, headers=b.headers)
    assert theirs.json()["data"][0]["blocked"] is False
    reader = await api.key_for(a.organization_id, ("dnc:read",))
    assert (await api.client.get("/v2/dnc/lists", headers=reader.headers)).status_code == 200
    assert (await api.client.post("/v2/dnc/check", json={"phone_numbers": ["+14155550100"]},
                                  headers=reader.headers)).status_code == 200
    denied = await api.client.post("/v2/dnc/lists", json={"name": "x"}, headers=reader.headers)
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "INSUFFICIENT_SCOPE"
    writer = await api.key_for(a.organization_id, ("dnc:write",))
    assert (await api.client.get("/v2/dnc/lists", headers=writer.headers)).status_code == 403


async def test_adding_and_removing_entries_moves_the_lists_updated_at(make_api: ApiFactory, sql_url: str) -> None:
    clock = ManualClock()
    api = await make_api(sql_url, clock=clock)
    t = await api.tenant()
    dnc = await _list(api, t.headers)

    async def updated_at() -> str:
        return (await api.client.get(f"/v2/dnc/lists/{dnc['id']}", headers=t.headers)).json()["data"]["updated_at"]

    created_at = await updated_at()
    clock.advance(minutes=1)
    added = await api.client.post(f"/v2/dnc/lists/{dnc['id']}/entries", json={"phone_numbers": ["+14155550100"]},
                                  headers=t.headers)
    assert added.status_code == 201
    after_add = await updated_at()
    assert after_add > created_at
    clock.advance(minutes=1)
    nothing_new = await api.client.post(f"/v2/dnc/lists/{dnc['id']}/entries",
                                        json={"phone_numbers": ["+14155550100"]}, headers=t.headers)
    assert nothing_new.json()["data"]["added"] == 0
    assert await updated_at() == after_add  # nothing changed
    clock.advance(minutes=1)
    imported = await api.client.post(f"/v2/dnc/lists/{dnc['id']}/entries/import", content=b"+14155550101\n",
                                     headers={**t.headers, "Content-Type": "text/csv"})
    assert imported.status_code == 201, imported.text
    after_import = await updated_at()
    assert after_import > after_add
    clock.advance(minutes=1)
    removed = await api.client.delete(f"/v2/dnc/lists/{dnc['id']}/entries/+14155550100", headers=t.headers)
    assert removed.status_code == 204
    after_remove = await updated_at()
    assert after_remove > after_import
    listed = (await api.client.get("/v2/dnc/lists", headers=t.headers)).json()["data"]
    assert [x["updated_at"] for x in listed] == [after_remove]


async def test_a_default_region_the_phone_library_does_not_know_is_400_naming_it(any_api: Api) -> None:
    """Not a refusal of the numbers it was meant for: the client's mistake is the region (in the body and in the
    import's query alike)."""
    t = await any_api.tenant()
    dnc = await _list(any_api, t.headers)
    path = f"/v2/dnc/lists/{dnc['id']}/entries"
    for region in ("XX", "zz"):
        added = await any_api.client.post(path, json={"phone_numbers": ["4155550125"], "default_region": region},
                                          headers=t.headers)
        assert added.status_code == 400, added.text
        assert list(added.json()["error"]["details"]["validation_errors"]) == ["default_region"]
        imported = await any_api.client.post(f"{path}/import?default_region={region}", content=b"4155550140\n",
                                             headers={**t.headers, "Content-Type": "text/csv"})
        assert imported.status_code == 400, imported.text
        assert list(imported.json()["error"]["details"]["validation_errors"]) == ["default_region"]
    lower = await any_api.client.post(path, json={"phone_numbers": ["4155550125"], "default_region": "us"},
                                      headers=t.headers)
    assert lower.status_code == 201 and lower.json()["data"]["added"] == 1
    entries = (await any_api.client.get(path, headers=t.headers)).json()["data"]
    assert [e["phone_number"] for e in entries] == ["+14155550125"]
