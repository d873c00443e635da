"""Multipart bodies: every route that reads one (found in the served OpenAPI document and the dashboard's route
table) answers hostile bodies with a 4xx in its envelope, never a 5xx and never an error in the log; a text
part that is not UTF-8 is 400 naming the field; a file field given text, twice, or under another name says
so in words."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Coroutine
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.http.route_table import DASHBOARD_PREFIX, dashboard_routes
from tests.support.apps import Api, ApiFactory, Tenant

Part = tuple[bytes, bytes | None, bytes, list[bytes]]  # name, filename, content, extra header lines
BOUNDARY = "parley-test-boundary"
EXAMPLES = int(os.environ.get("PARLEY_MULTIPART_EXAMPLES", "300"))


def multipart(parts: list[Part], boundary: str = BOUNDARY, *, close: bool = True) -> bytes:
    body = b""
    for name, filename, content, extra in parts:
        disposition = b'form-data; name="' + name + b'"' + (b'; filename="' + filename + b'"'
                                                             if filename is not None else b"")
        body += b"--" + boundary.encode() + b"\r\nContent-Disposition: " + disposition + b"\r\n"
        body += b"".join(line + b"\r\n" for line in extra) + b"\r\n" + content + b"\r\n"
    return body + (b"--" + boundary.encode() + b"--\r\n" if close else b"")


def form_type(boundary: str = BOUNDARY) -> dict[str, str]:
    return {"content-type": f"multipart/form-data; boundary={boundary}"}


async def _targets(api: Api, t: Tenant) -> dict[str, str]:
    """A real knowledge base, campaign and DNC list, by the URL of their multipart route."""
    c = api.client
    agent = (await c.post("/v2/agents", json={"name": "Uploader"}, headers=t.headers)).json()["data"]
    assert (await c.post(f"/v2/agents/{agent['id']}/publish", headers=t.headers)).status_code == 200
    kb = (await c.post("/v2/knowledge-bases", json={"name": "K", "agent_id": agent["id"]}, headers=t.headers))
    campaign = await c.post("/v2/campaigns", json={"name": "C", "agent_id": agent["id"]}, headers=t.headers)
    dnc = await c.post("/v2/dnc/lists", json={"name": "D"}, headers=t.headers)
    return {
        "documents": f"/v2/knowledge-bases/{kb.json()['data']['id']}/documents",
        "contacts": f"/v2/campaigns/{campaign.json()['data']['id']}/contacts/import",
        "dnc": f"/v2/dnc/lists/{dnc.json()['data']['id']}/entries/import",
    }


def _refused(response: httpx.Response, field: str) -> str:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "bad_request"
    message: str = error["details"]["validation_errors"][field]
    assert "<class" not in message and "Unsupported type" not in message, message
    return message


@pytest.mark.parametrize("route", ["documents", "contacts", "dnc"])
async def test_a_text_part_that_is_not_utf8_is_400_naming_the_field(any_api: Api, route: str,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    t = await any_api.tenant()
    url = (await _targets(any_api, t))[route]
    caplog.set_level(logging.ERROR)
    for name in (b"file", b"files", b"notes"):
        response = await any_api.client.post(url, content=multipart([(name, None, b"\xff\xfe\xfa", [])]),
                                             headers={**t.headers, **form_type()})
        assert "UTF-8" in _refused(response, name.decode())
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "nothing is logged as an error"


async def test_the_dashboard_sign_in_refuses_a_field_that_is_not_utf8(api: Api,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)
    body = multipart([(b"email", None, b"\xff@example.com", []), (b"password", None, b"x", [])])
    response = await api.client.post(f"{DASHBOARD_PREFIX}/login", content=body, headers=form_type())
    assert response.status_code == 400, response.text
    assert "email" in response.text and "UTF-8" in response.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_file_fields_say_what_they_expect_in_words(api: Api) -> None:
    t = await api.tenant()
    urls = await _targets(api, t)
    c, headers = api.client, {**t.headers, **form_type()}
    twice = multipart([(b"file", b"a.txt", b"hello", []), (b"file", b"b.txt", b"world", [])])
    assert "send several as `files`" in _refused(await c.post(urls["documents"], content=twice, headers=headers),
                                                 "file")
    assert "one file" in _refused(await c.post(urls["contacts"], content=twice, headers=headers), "file")
    text = multipart([(b"file", None, b"phone\n+14155550100\n", [])])
    for url in urls.values():
        assert "must be a file" in _refused(await c.post(url, content=text, headers=headers), "file")
    other = multipart([(b"upload", b"a.csv", b"phone\n", [])])
    assert "not an accepted field" in _refused(await c.post(urls["dnc"], content=other, headers=headers), "upload")
    missing = multipart([])
    assert "`file`" in _refused(await c.post(urls["contacts"], content=missing, headers=headers), "file")


@pytest.mark.parametrize(("body", "content_type", "field"), [
    (multipart([(b"file", b"a.csv", b"phone\n", [])], close=False)[:-4], form_type(), "body"),  # truncated
    (multipart([(b"file", b"a.csv", b"phone\n", [])]), {"content-type": "multipart/form-data"}, "Content-Type"),
    (multipart([(b"file", b"a.csv", b"x", [b"X-Long: " + b"a" * 10_000])]), form_type(), "body"),
    (multipart([(b"file", b"a.csv", b"x", [b"X-%d: 1" % n for n in range(20)])]), form_type(), "body"),
    (multipart([(b"fi\xffle", b"a.csv", b"x", [])]), form_type(), "body"),  # a header that is not UTF-8
    (b"--" + BOUNDARY.encode() + b"\r\nContent-Type: text/plain\r\n\r\nx\r\n--" + BOUNDARY.encode() + b"--\r\n",
     form_type(), "body"),  # no Content-Disposition
])
async def test_malformed_bodies_are_400_in_the_envelope(api: Api, body: bytes, content_type: dict[str, str],
                                                        field: str) -> None:
    t = await api.tenant()
    urls = await _targets(api, t)
    for url in urls.values():
        _refused(await api.client.post(url, content=body, headers={**t.headers, **content_type}), field)


# -- the fuzz test -------------------------------------------------------------------------------


def _multipart_operations(document: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    """(method, path, field names) of every operation whose documented body is multipart/form-data."""
    found = []
    for path, item in sorted(document["paths"].items()):
        for method, operation in sorted(item.items()):
            content = operation.get("requestBody", {}).get("content", {}) if isinstance(operation, dict) else {}
            if "multipart/form-data" in content:
                schema = content["multipart/form-data"]["schema"]
                if "$ref" in schema:
                    schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
                found.append((method.upper(), path, list(schema.get("properties", {}))))
    return found


_bytes = st.one_of(st.binary(max_size=40), st.sampled_from([b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"phone\n+1"]))
_name = st.one_of(st.sampled_from([b"file", b"files", b"email", b"password", b"csrf_token", b"", b"file[]"]),
                  st.binary(max_size=12).filter(lambda b: b'"' not in b and b"\r" not in b and b"\n" not in b))
_filename = st.one_of(st.none(), st.just(b""), st.sampled_from([b"a.csv", b"b.txt", b"\xff.txt", b"x" * 300]))
_extra = st.lists(st.sampled_from([
    b"Content-Type: text/plain; charset=latin-1", b"Content-Type: text/csv; charset=utf-16",
    b"Content-Type: text/plain; charset=rot13", b"Content-Type: text/plain; charset=idna",
    b"Content-Length: 3", b"Content-Length: -1", b"X-Long: " + b"h" * 5000, b"Bogus", b"\xff: \xfe",
]), max_size=3)
_part = st.tuples(_name, _filename, _bytes, _extra)


@st.composite
def hostile_multipart(draw: st.DrawFn, names: list[str]) -> tuple[bytes, str]:
    """A body and its Content-Type: parts under the route's names and others, repeated, with and without
    filenames, text that is not UTF-8, odd charsets and headers, cut short or with the wrong boundary."""
    names_st = st.one_of(st.sampled_from([n.encode() for n in names] or [b"file"]), _name)
    parts = draw(st.lists(st.tuples(names_st, _filename, _bytes, _extra), max_size=6))
    if parts and draw(st.booleans()):
        parts += [parts[0]] * draw(st.integers(1, 3))  # the same part again
    boundary = draw(st.sampled_from([BOUNDARY, "b", "x" * 71, "with space", "é"]))
    body = multipart(parts, boundary, close=draw(st.booleans()))
    if draw(st.booleans()):
        body = body[:draw(st.integers(0, len(body)))]
    content_type = draw(st.sampled_from([
        f"multipart/form-data; boundary={boundary}", f'multipart/form-data; boundary="{boundary}"',
        "multipart/form-data", f"multipart/form-data; boundary={BOUNDARY}-other",
        f"multipart/form-data; boundary={boundary}; charset=latin-1", "multipart/form-data; boundary=",
    ]))
    return body, content_type


@pytest.mark.slow
async def test_hostile_multipart_bodies_never_cause_a_server_error(make_api: ApiFactory, sql_url: str,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    api: Api = await make_api(sql_url, rate_limit_per_minute=10_000_000, rate_limit_per_hour=100_000_000)
    t = await api.tenant()
    urls = await _targets(api, t)
    document = (await api.client.get("/v2/openapi.json")).json()
    operations = _multipart_operations(document)
    assert {path.split("/")[-1] for _, path, _ in operations} >= {"documents", "import"}, operations
    assert len(operations) >= 3
    real = {path: url for path, url in zip(["/knowledge-bases/{id}/documents", "/campaigns/{id}/contacts/import",
                                            "/dnc/lists/{id}/entries/import"], urls.values(), strict=True)}
    # the dashboard's forms: every POST page, signed out (the sign-in is public; the rest refuse a stranger)
    pages = [route.path for route in api.client.app.routes if route.path in dashboard_routes(api.client.app)
             and any("POST" in handler.http_methods for handler in route.route_handlers)]
    assert f"{DASHBOARD_PREFIX}/login" in pages
    targets = [(method, real.get(path, "/v2" + path.replace("{id}", "999999")), names, True)
               for method, path, names in operations]
    targets += [("POST", page.replace("{id:int}", "1").replace("{id:str}", "x"), ["email", "password", "name"],
                 False) for page in pages if "{" not in page.replace("{id:int}", "").replace("{id:str}", "")]
    loop = asyncio.get_running_loop()
    failures: list[str] = []
    share = 1.0 if sql_url.startswith("sqlite") else 0.5
    per_target = max(20, int(EXAMPLES * share) // len(targets))
    caplog.set_level(logging.ERROR)

    def wait(coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(timeout=60)

    def fuzz(method: str, url: str, names: list[str], api_route: bool) -> None:
        @given(case=hostile_multipart(names))
        @settings(max_examples=per_target, deadline=None, database=None, derandomize=True,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck),
                  print_blob=False)
        def run(case: tuple[bytes, str]) -> None:
            body, content_type = case
            headers = {**(t.headers if api_route else {}), "content-type": content_type.encode()}
            response: httpx.Response = wait(api.client.request(method, url, content=body, headers=headers))
            label = f"{method} {url} {content_type!r} {body[:120]!r}"
            if response.status_code >= 500:
                failures.append(f"{label}: {response.status_code} {response.text[:200]}")
            elif api_route and response.status_code >= 400:
                error = response.json().get("error") or {}
                if response.json().get("success") is not False or not error.get("code"):
                    failures.append(f"{label}: outside the envelope: {response.text[:200]}")
                elif "<class" in response.text or "Unsupported type" in response.text:
                    failures.append(f"{label}: Python internals in the message: {response.text[:200]}")

        run()

    def run_all() -> None:
        for target in targets:
            fuzz(*target)

    await asyncio.to_thread(run_all)
    assert not failures, "\n".join(failures[:20])
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
