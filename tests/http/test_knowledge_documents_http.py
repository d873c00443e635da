"""Document upload through the real HTTP API: every supported type, per-file results, the
10 MB request limit (enforced while streaming), filters and deletion."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from domain.knowledge import MAX_UPLOAD_BYTES
from tests.knowledge_samples import (
    CSV,
    HTML_PAGE,
    MARKDOWN,
    TEXT,
    make_blank_pdf,
    make_docx,
    make_docx_bomb,
    make_pdf,
    running_app,
)
from tests.support.apps import Api, AppPool, Tenant


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def module_db(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture(scope="module")
async def api(module_db: str, tmp_root: Path, app_pool: AppPool) -> AsyncIterator[Api]:
    # in-memory rate limits (lifted anyway); the streaming test drives the ASGI app directly, on the test's loop,
    # where the client runs it too and the pool's connections live
    async with running_app(app_pool, module_db, tmp_root / "var", rate_limit_backend="memory") as app:
        yield app


async def _setup(api: Api) -> tuple[Tenant, int]:
    t = await api.tenant()
    agent = (await api.client.post("/v2/agents", json={"name": "A"}, headers=t.headers)).json()["data"]["id"]
    kb = await api.client.post("/v2/knowledge-bases", json={"name": "Docs", "agent_id": agent}, headers=t.headers)
    return t, kb.json()["data"]["id"]


async def _upload(api: Api, t: Tenant, kb_id: int, *files: tuple[str, bytes], field: str = "files") -> Any:
    return await api.client.post(f"/v2/knowledge-bases/{kb_id}/documents", headers=t.headers,
                                 files=[(field, (name, data, "application/octet-stream")) for name, data in files])


SAMPLES = {
    "notes.txt": (TEXT.encode(), "txt", "delivery tracking"),
    "hours.md": (MARKDOWN.encode(), "md", "clinic opens"),
    "faq.csv": (CSV.encode(), "csv", "parking free"),
    "refunds.html": (HTML_PAGE.encode(), "html", "thirty days"),
    "manual.pdf": (make_pdf([["Warranty covers two years."], ["Batteries last six months."]]), "pdf", "Batteries"),
    "staff.docx": (make_docx(["Reception is staffed by Anna."], [["Role", "Name"], ["Nurse", "Ben"]]), "docx",
                   "Nurse | Ben"),
}


async def test_every_supported_type_is_ingested_and_searchable(api: Api) -> None:
    t, kb = await _setup(api)
    r = await _upload(api, t, kb, *((name, data) for name, (data, _, _) in SAMPLES.items()))
    assert r.status_code == 201, r.text
    body = r.json()["data"]
    assert body["summary"] == {"total": 6, "success": 6, "failed": 0}
    assert [d["file_name"] for d in body["documents"]] == list(SAMPLES)
    assert all(d["success"] and d["document_id"] and d["error"] is None for d in body["documents"])

    for result in body["documents"]:
        data, file_type, phrase = SAMPLES[result["file_name"]]
        doc = (await api.client.get(f"/v2/knowledge-bases/{kb}/documents/{result['document_id']}",
                                    headers=t.headers)).json()["data"]
        assert (doc["file_type"], doc["source"], doc["status"], doc["source_url"]) == (file_type, "upload", "ready",
                                                                                       None)
        assert doc["size_bytes"] == len(data) and doc["chunk_count"] >= 1 and len(doc["content_hash"]) == 64
        found = (await api.client.get(f"/v2/knowledge-bases/{kb}/search", params={"q": phrase},
                                      headers=t.headers)).json()["data"]["results"]
        assert found and found[0]["document_id"] == result["document_id"], result["file_name"]
        assert phrase.lower() in found[0]["text"].lower()

    listed = (await api.client.get(f"/v2/knowledge-bases/{kb}/documents", headers=t.headers)).json()
    assert listed["data"]["count"] == 6 and listed["meta"] == {"total": 6, "limit": 25, "offset": 0}
    pdfs = (await api.client.get(f"/v2/knowledge-bases/{kb}/documents?file_type=pdf", headers=t.headers)).json()
    assert [d["file_name"] for d in pdfs["data"]["documents"]] == ["manual.pdf"]
    ready = (await api.client.get(f"/v2/knowledge-bases/{kb}/documents?status=ready&limit=2&offset=4",
                                  headers=t.headers)).json()
    assert ready["meta"] == {"total": 6, "limit": 2, "offset": 4} and ready["data"]["count"] == 2
    for status in ("processing", "failed"):
        none = (await api.client.get(f"/v2/knowledge-bases/{kb}/documents?status={status}", headers=t.headers)).json()
        assert none["data"] == {"documents": [], "count": 0}
    for bad in ("status=done", "file_type=exe", "limit=0", "offset=-1"):
        assert (await api.client.get(f"/v2/knowledge-bases/{kb}/documents?{bad}",
                                     headers=t.headers)).status_code == 400, bad


async def test_a_single_file_field_works_and_names_are_cleaned(api: Api) -> None:
    t, kb = await _setup(api)
    r = await _upload(api, t, kb, ("../../secret/plans.txt", b"Plans start at ten dollars."), field="file")
    assert r.status_code == 201
    assert r.json()["data"]["documents"][0]["file_name"] == "plans.txt"


async def test_some_files_fail_on_their_own(api: Api) -> None:
    t, kb = await _setup(api)
    junk = random.Random(3).randbytes(2048)
    r = await _upload(api, t, kb, ("good.txt", b"Good content here."), ("photo.png", b"\x89PNG\r\n\x1a\n" + junk),
                      ("copy.md", b"Good content here."), ("bomb.docx", make_docx_bomb()),
                      ("huge.pdf", make_blank_pdf(501)), ("empty.txt", b""))
    assert r.status_code == 201
    body = r.json()["data"]
    assert body["summary"] == {"total": 6, "success": 1, "failed": 5}
    outcome = {d["file_name"]: (d["success"], d["error_code"]) for d in body["documents"]}
    assert outcome == {
        "good.txt": (True, None),
        "photo.png": (False, "unsupported_file_type"),
        "copy.md": (False, "duplicate_document"),
        "bomb.docx": (False, "unreadable_file"),
        "huge.pdf": (False, "unreadable_file"),
        "empty.txt": (False, "empty_file"),
    }
    assert all(d["document_id"] is None and d["error"] for d in body["documents"] if not d["success"])
    assert junk.hex()[:16] not in r.text


async def test_all_failed_or_none_sent_is_400_with_reasons(api: Api) -> None:
    t, kb = await _setup(api)
    assert (await _upload(api, t, kb, ("first.txt", b"Original text."))).status_code == 201
    r = await _upload(api, t, kb, ("again.txt", b"Original text."), ("bin.txt", b"\x00\x01\x02"))
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["code"] == "bad_request"
    assert error["details"]["summary"] == {"total": 2, "success": 0, "failed": 2}
    assert [d["error_code"] for d in error["details"]["documents"]] == ["duplicate_document", "unsupported_file_type"]
    listed = (await api.client.get(f"/v2/knowledge-bases/{kb}/documents", headers=t.headers)).json()
    assert listed["meta"]["total"] == 1

    empty = await api.client.post(f"/v2/knowledge-bases/{kb}/documents", content=b"--xyz--\r\n",
                                  headers={**t.headers, "Content-Type": "multipart/form-data; boundary=xyz"})
    assert empty.status_code == 400
    assert empty.json()["error"]["details"]["summary"] == {"total": 0, "success": 0, "failed": 0}
    no_body = await api.client.post(f"/v2/knowledge-bases/{kb}/documents", headers=t.headers)
    assert no_body.status_code == 400
    wrong_field = await _upload(api, t, kb, ("a.txt", b"text"), field="attachment")
    assert wrong_field.status_code == 400
    too_many = await _upload(api, t, kb, *((f"f{i}.txt", f"file number {i}".encode()) for i in range(21)))
    assert too_many.status_code == 400
    assert "files" in too_many.json()["error"]["details"]["validation_errors"]


async def _stream_to_app(api: Api, path: str, headers: dict[str, str], chunks: AsyncIterator[bytes]
                         ) -> tuple[int, bytes]:
    """Drive the ASGI app directly with a chunked body (the test client would buffer it whole)."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()] + [(b"host", b"testserver")],
        "client": ("127.0.0.1", 50000), "server": ("testserver", 80), "state": {},
    }
    messages: list[dict[str, Any]] = []
    done = False

    async def receive() -> dict[str, Any]:
        nonlocal done
        if done:
            return {"type": "http.disconnect"}
        try:
            return {"type": "http.request", "body": await anext(chunks), "more_body": True}
        except StopAsyncIteration:
            done = True
            return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    await api.client.app(scope, receive, send)  # type: ignore[arg-type]
    status = next(m["status"] for m in messages if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")


async def test_requests_over_10_mb_are_refused_while_streaming(api: Api) -> None:
    t, kb = await _setup(api)
    url = f"/v2/knowledge-bases/{kb}/documents"
    boundary = "limit-test"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"big.txt\"\r\n"
            "Content-Type: text/plain\r\n\r\n").encode()
    sent = 0
    chunk = b"a" * 65536

    async def endless() -> AsyncIterator[bytes]:
        nonlocal sent
        yield head
        while sent < 60 * 1024 * 1024:
            sent += len(chunk)
            yield chunk

    headers = {**t.headers, "Content-Type": f"multipart/form-data; boundary={boundary}"}
    status, body = await _stream_to_app(api, url, headers, endless())  # chunked: no Content-Length
    assert status == 413
    assert json.loads(body)["error"]["code"] == "payload_too_large"
    assert sent <= MAX_UPLOAD_BYTES + 2 * len(chunk)  # stopped reading at the limit, never buffered 60 MB

    announced = await api.client.post(url, content=b"x" * 100, headers={
        **headers, "Content-Length": str(MAX_UPLOAD_BYTES + 1)})
    assert announced.status_code == 413
    assert announced.json()["success"] is False and announced.json()["error"]["code"] == "payload_too_large"
    assert announced.headers.get("x-request-id")

    # just under the limit is accepted (the big file itself fails: its text is too long)
    big = b"word " * ((MAX_UPLOAD_BYTES - 4096) // 5)
    ok = await _upload(api, t, kb, ("small.txt", b"Small and fine."), ("big.txt", big))
    assert ok.status_code == 201
    assert ok.json()["data"]["summary"] == {"total": 2, "success": 1, "failed": 1}
    too_long = ok.json()["data"]["documents"][1]
    assert too_long["error_code"] == "text_too_long" and too_long["field"] == "files[1]", too_long
    # the refusal names the limit it broke, and why a file the request limit let in is still too long
    assert "5,000,000 characters" in too_long["error"] and "10 MB" in too_long["error"], too_long


async def test_a_long_text_is_chunked(api: Api) -> None:
    t, kb = await _setup(api)
    paragraphs = "\n\n".join(f"Paragraph {i} talks about topic number {i} in some detail. " * 4 for i in range(120))
    r = await _upload(api, t, kb, ("long.txt", paragraphs.encode()))
    doc_id = r.json()["data"]["documents"][0]["document_id"]
    doc = (await api.client.get(f"/v2/knowledge-bases/{kb}/documents/{doc_id}", headers=t.headers)).json()["data"]
    assert doc["chunk_count"] >= len(paragraphs) // 1000
    hits = (await api.client.get(f"/v2/knowledge-bases/{kb}/search?q=paragraph&limit=50",
                                 headers=t.headers)).json()["data"]["results"]
    assert len(hits) == doc["chunk_count"] and all(len(h["text"]) <= 1000 for h in hits)


async def test_deleting_a_document(api: Api) -> None:
    t, kb = await _setup(api)
    r = await _upload(api, t, kb, ("a.txt", b"Alpha unique words."), ("b.txt", b"Beta other words."))
    a_id, b_id = (d["document_id"] for d in r.json()["data"]["documents"])
    gone = await api.client.delete(f"/v2/knowledge-bases/{kb}/documents/{a_id}", headers=t.headers)
    assert gone.status_code == 204 and gone.content == b""
    assert (await api.client.get(f"/v2/knowledge-bases/{kb}/documents/{a_id}", headers=t.headers)).status_code == 404
    assert (await api.client.delete(f"/v2/knowledge-bases/{kb}/documents/{a_id}",
                                    headers=t.headers)).status_code == 404
    search = (await api.client.get(f"/v2/knowledge-bases/{kb}/search?q=alpha", headers=t.headers)).json()
    assert search["data"]["results"] == []
    shown = (await api.client.get(f"/v2/knowledge-bases/{kb}", headers=t.headers)).json()["data"]
    assert shown["document_count"] == 1
    # the same content may come back once the old document is gone
    again = await _upload(api, t, kb, ("a2.txt", b"Alpha unique words."))
    assert again.status_code == 201
    _, other_kb = await _setup(api)
    assert (await api.client.delete(f"/v2/knowledge-bases/{other_kb}/documents/{b_id}",
                                    headers=t.headers)).status_code == 404
