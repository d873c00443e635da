"""Knowledge bases in the dashboard through HTTP, on both databases: creating one for an agent, uploading files
(a result per file, the CSRF token in the multipart form), the documents with their status, adding a web page by
URL (a private address refused beside the field), and the search box showing the passages found; another
organization's knowledge base is a 404 page."""

from __future__ import annotations

import re
from typing import Any

from tests.http.calls_support import active_agent
from tests.http.dashboard_support import cookie, login, new_user
from tests.support.apps import Api


async def _signed_in(api: Api) -> tuple[Any, dict[str, str], str]:
    user = await new_user(api)
    session, csrf = await login(api, user)
    return user, cookie(session), csrf


async def _post(api: Api, headers: dict[str, str], path: str, data: Any, **kwargs: Any) -> Any:
    return await api.client.post(f"/dashboard{path}", headers=headers, data=data, follow_redirects=False, **kwargs)


async def test_create_upload_scrape_and_search(any_api: Api) -> None:
    user, headers, csrf = await _signed_in(any_api)
    agent = await active_agent(any_api, user.tenant, name="Support")
    listed = await any_api.client.get("/dashboard/knowledge-bases", headers=headers)
    assert listed.status_code == 200 and "No knowledge bases yet" in listed.text
    assert 'href="/dashboard/knowledge-bases"' in listed.text  # in the navigation
    blank = await _post(any_api, headers, "/knowledge-bases", {"csrf_token": csrf, "name": " ",
                                                               "agent_id": str(agent["id"])})
    assert blank.status_code == 400 and 'id="name-error"' in blank.text
    made = await _post(any_api, headers, "/knowledge-bases", {"csrf_token": csrf, "name": "Policies",
                                                              "agent_id": str(agent["id"])})
    assert made.status_code == 303, made.text
    path = made.headers["location"].split("?")[0].removeprefix("/dashboard")
    kb_id = int(path.rsplit("/", 1)[1])
    listed = await any_api.client.get("/dashboard/knowledge-bases", headers=headers)
    assert "Policies" in listed.text and "Support" in listed.text

    files = [("files", ("refunds.txt", b"Refunds are paid within five days. Every refund needs the receipt.")),
             ("files", ("shipping.md", b"# Shipping\n\nParcels ship within two days.")),
             ("files", ("empty.txt", b""))]
    assert (await _post(any_api, headers, f"{path}/documents", {}, files=files)).status_code == 403
    uploaded = await _post(any_api, headers, f"{path}/documents", {"csrf_token": csrf}, files=files)
    assert uploaded.status_code == 201, uploaded.text
    assert "2 of 3 files added" in uploaded.text and 'id="upload-results"' in uploaded.text
    assert uploaded.text.count(">added<") == 2 and uploaded.text.count(">failed<") == 1
    docs = (await any_api.client.get(f"/v2/knowledge-bases/{kb_id}/documents",
                                     headers=user.tenant.headers)).json()["data"]["documents"]
    assert sorted(d["file_name"] for d in docs) == ["refunds.txt", "shipping.md"]
    html = (await any_api.client.get(f"/dashboard{path}", headers=headers)).text
    assert "refunds.txt" in html and ">ready<" in html
    nothing = await _post(any_api, headers, f"{path}/documents", {"csrf_token": csrf})
    assert nothing.status_code == 400 and 'id="files-error"' in nothing.text

    refused = await _post(any_api, headers, f"{path}/scrape", {"csrf_token": csrf, "url": "http://10.0.0.1/page"})
    assert refused.status_code == 400 and 'id="url-error"' in refused.text
    malformed = await _post(any_api, headers, f"{path}/scrape", {"csrf_token": csrf, "url": "ftp://x"})
    assert malformed.status_code == 400 and 'id="url-error"' in malformed.text

    found = await any_api.client.get(f"/dashboard{path}", params={"q": "refund receipt"}, headers=headers)
    assert found.status_code == 200
    passages = re.search(r'<ol class="passages" id="passages">(.*?)</ol>', found.text, re.S)
    assert passages and "Every refund needs the receipt" in passages.group(1) and "refunds.txt" in passages.group(1)
    none = await any_api.client.get(f"/dashboard{path}", params={"q": "zebra"}, headers=headers)
    assert "No passage matches" in none.text

    _, other, other_csrf = await _signed_in(any_api)
    assert (await any_api.client.get(f"/dashboard{path}", headers=other)).status_code == 404
    assert (await _post(any_api, other, f"{path}/documents", {"csrf_token": other_csrf},
                        files=files)).status_code == 404
    assert (await _post(any_api, other, f"{path}/scrape",
                        {"csrf_token": other_csrf, "url": "https://example.com/"})).status_code == 404
