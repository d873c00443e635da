"""Hostile client input is a 4xx in the router envelope, never a 500: bodies that do not decode, ids and
instants the databases cannot hold, and digits that only Python reads as numbers."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.apps import Api

JSON = {"content-type": "application/json"}


def _refused(response: Any, status: int, field: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["success"] is False and body["error"]["code"] == ("bad_request" if status == 400 else
                                                                  body["error"]["code"])
    if field is not None:
        assert field in body["error"]["details"]["validation_errors"], body
    return body  # type: ignore[no-any-return]


@pytest.mark.parametrize(("content", "content_type"), [
    (b"[" * 1200 + b"]" * 1200, "application/json"),                   # RecursionError in the decoder
    (b'{"name": "\xff\xfe"}', "application/json"),                      # not UTF-8
    ('{"name": "Zoé"}'.encode("latin-1"), "application/json; charset=latin-1"),  # another charset
    (b'{"name": ' + b"[" * 1200 + b"]" * 1200 + b"}", "application/json"),
])
async def test_bodies_that_do_not_decode_are_400(any_api: Api, content: bytes, content_type: str) -> None:
    t = await any_api.tenant()
    r = await any_api.client.post("/v2/agents", content=content, headers={**t.headers, "content-type": content_type})
    _refused(r, 400, "body")


@pytest.mark.parametrize("value", ["²", "١٢", "12345678901234567890123456", "0", "-1", "1 2", ""])
async def test_sub_org_header_must_be_an_ascii_id(any_api: Api, value: str) -> None:
    partner = await any_api.tenant(org_type="partner")
    r = await any_api.client.get("/v2/agents", headers={**partner.headers, "X-Sub-Org-Id": value.encode()})
    _refused(r, 400, "X-Sub-Org-Id")


async def test_sub_org_header_latin1_byte_is_400(any_api: Api) -> None:
    partner = await any_api.tenant(org_type="partner")
    r = await any_api.client.get("/v2/agents", headers={**partner.headers, "X-Sub-Org-Id": b"\xb2"})
    _refused(r, 400, "X-Sub-Org-Id")


async def test_repeated_sub_org_header_is_400(any_api: Api) -> None:
    partner = await any_api.tenant(org_type="partner")
    c = any_api.client
    child = (await c.post("/v2/organizations", json={"name": "C"}, headers=partner.headers)).json()["data"]["id"]
    headers = [*partner.headers.items(), ("X-Sub-Org-Id", str(child)), ("X-Sub-Org-Id", str(partner.organization_id))]
    r = await c.get("/v2/agents", headers=headers)
    body = _refused(r, 400, "X-Sub-Org-Id")
    assert "once" in body["error"]["details"]["validation_errors"]["X-Sub-Org-Id"]
    assert (await c.get("/v2/agents", headers={**partner.headers, "X-Sub-Org-Id": str(child)})).status_code == 200


@pytest.mark.parametrize("bot_id", ["²", "١٢", "12345678901234567890123456"])
async def test_bot_id_must_be_an_ascii_id(any_api: Api, bot_id: str) -> None:
    t = await any_api.tenant()
    r = await any_api.client.post("/v2/calls", json={"bot_id": bot_id, "destination_phone": "+14155550100"},
                                  headers=t.headers)
    _refused(r, 400, "bot_id")


@pytest.mark.parametrize("expires_at", ["2030-01-01T00:00:00", "0001-01-01T00:00:00+14:00"])
async def test_key_expiry_needs_an_offset_and_a_real_instant(any_api: Api, expires_at: str) -> None:
    t = await any_api.tenant()
    r = await any_api.client.post("/v2/api-keys", json={"name": "x", "scopes": ["agents:read"],
                                                        "expires_at": expires_at}, headers=t.headers)
    _refused(r, 400, "expires_at")


@pytest.mark.parametrize(("path", "field", "value"), [
    ("/v2/calls", "created_after", "0001-01-01T00:00:00+14:00"),
    ("/v2/calls", "created_before", "9999-12-31T23:59:59-14:00"),
    ("/v2/call-logs", "start", "0001-01-01T00:00:00+14:00"),
    ("/v2/call-logs", "end", "9999-12-31T23:59:59-14:00"),
    ("/v2/calls", "created_after", "2026-01-05T09:00:00+24:00"),
])
async def test_instants_outside_the_representable_range_are_400(any_api: Api, path: str, field: str,
                                                                value: str) -> None:
    t = await any_api.tenant()
    r = await any_api.client.get(path, params={field: value}, headers=t.headers)
    _refused(r, 400, field)


@pytest.mark.parametrize("name", ["%C2%B2.wav", "12345678901234567890123456.wav", "%D9%A1%D9%A2.wav",
                                  "1%E2%82%AC.wav", "%E2%82%AC.wav"])
async def test_recording_names_that_are_no_id_are_refused(any_api: Api, name: str) -> None:
    r = await any_api.client.get(f"/v2/recordings/{name}", params={"expires": 1, "signature": "x"})
    assert r.status_code in (400, 403, 404), r.text  # 400: non-ASCII digits are no path id
    assert r.json()["success"] is False


@pytest.mark.parametrize("path", ["/v2/agents/%D9%A1%D9%A2", "/api/v2/agents/%DB%B1"])
async def test_non_ascii_digits_are_no_path_id(any_api: Api, path: str) -> None:
    t = await any_api.tenant()
    agent = (await any_api.client.post("/v2/agents", json={"name": "A"}, headers=t.headers)).json()["data"]
    assert agent["id"] >= 1
    r = await any_api.client.get(path, headers=t.headers)
    _refused(r, 400, "path")


@pytest.mark.parametrize(("path", "field"), [
    ("/v2/agents/abc", "id"), ("/v2/agents/1.5", "id"), ("/v2/agents/%2B1", "id"), ("/v2/agents/1_0", "id"),
    ("/v2/agents/%201", "id"), ("/api/v2/campaigns/1/contacts/x", "contactId"),
    ("/v2/knowledge-bases/kb/documents/1", "id"),
])
async def test_a_path_parameter_that_does_not_parse_is_400_naming_it(any_api: Api, path: str, field: str) -> None:
    """Never 404 (the route exists) and never read loosely (``+1``, `` 1`` and ``1_0`` are no id)."""
    t = await any_api.tenant()
    agent = await any_api.client.post("/v2/agents", json={"name": "A"}, headers=t.headers)
    assert agent.status_code == 201
    r = await any_api.client.get(path, headers=t.headers)
    body = _refused(r, 400, field)
    assert "ASCII digits" in body["error"]["details"]["validation_errors"][field]


@pytest.mark.parametrize("call_id", ["not-a-uuid", "1", "00000000000040008000000000000000",
                                     "{00000000-0000-4000-8000-000000000000}", "00000000-0000-4000-8000-00000000000g",
                                     "00000000-0000-4000-8000-000000000000%0A"])
@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_a_call_id_that_is_no_uuid_is_400_naming_it(any_api: Api, call_id: str, method: str) -> None:
    """Single calls are keyed by a UUID in its hyphenated form: anything else is no call id (400), not an unknown one
    (404); the reading and the cancel route alike."""
    t = await any_api.tenant()
    path = f"/v2/calls/{call_id}" + ("/cancel" if method == "POST" else "")
    body = _refused(await any_api.client.request(method, path, headers=t.headers), 400, "id")
    assert "UUID" in body["error"]["details"]["validation_errors"]["id"]


async def test_a_call_id_in_upper_case_is_the_same_call(any_api: Api) -> None:
    t = await any_api.tenant()
    agent = (await any_api.client.post("/v2/agents", json={"name": "A", "prompt": "Hello"},
                                       headers=t.headers)).json()["data"]
    assert (await any_api.client.post(f"/v2/agents/{agent['id']}/publish", headers=t.headers)).status_code == 200
    placed = await any_api.client.post("/v2/calls", json={"bot_id": str(agent["id"]),
                                                          "destination_phone": "+14155550123"}, headers=t.headers)
    assert placed.status_code == 201, placed.text
    call_id = placed.json()["data"]["id"]
    read = await any_api.client.get(f"/v2/calls/{call_id.upper()}", headers=t.headers)
    assert read.status_code == 200 and read.json()["data"]["id"] == call_id
    unknown = await any_api.client.get("/v2/calls/00000000-0000-4000-8000-000000000000", headers=t.headers)
    _refused(unknown, 404)


async def test_an_unknown_route_is_still_404(any_api: Api) -> None:
    t = await any_api.tenant()
    _refused(await any_api.client.get("/v2/agents/1/nothing-here", headers=t.headers), 404)
    _refused(await any_api.client.get("/v2/agents/999999", headers=t.headers), 404)


@pytest.mark.parametrize("query", [{"limit": "1e2"}, {"limit": "10.0"}, {"offset": "0.0"}, {"limit": "1E1"},
                                   {"agent_id": "1e0"}])
async def test_query_integers_are_plain_digits(any_api: Api, query: dict[str, str]) -> None:
    t = await any_api.tenant()
    path = "/v2/calls" if "agent_id" in query else "/v2/agents"
    body = _refused(await any_api.client.get(path, params=query, headers=t.headers), 400, next(iter(query)))
    assert "ASCII digits" in body["error"]["details"]["validation_errors"][next(iter(query))]
    assert (await any_api.client.get("/v2/agents", params={"limit": "10", "offset": "0"},
                                     headers=t.headers)).status_code == 200


@pytest.mark.parametrize("query", [{"limit": "²"}, {"offset": "١٢"}, {"limit": "1" * 30}, {"offset": "9" * 30}])
async def test_non_ascii_and_huge_query_integers_are_400(any_api: Api, query: dict[str, str]) -> None:
    t = await any_api.tenant()
    r = await any_api.client.get("/v2/agents", params=query, headers=t.headers)
    _refused(r, 400, next(iter(query)))


@pytest.mark.parametrize("length", [b"abc", b"-1", b"\xb2"])
async def test_unusable_content_length_is_400_in_the_envelope(any_api: Api, length: bytes) -> None:
    """What Parley's own ASGI layer sees: a server in front may refuse such a request before the app."""
    t = await any_api.tenant()
    r = await any_api.client.get("/v2/agents", headers={**t.headers, "content-length": length})
    _refused(r, 400, "Content-Length")


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/v2/agents", {"name": "A", "calendar_id": 2**63}, "calendar_id"),
    ("/v2/agents", {"name": "A", "calendar_id": 2**70}, "calendar_id"),
    ("/v2/telephony/phone-numbers", {"phone_number": "+14155550100", "provider_id": 2**63}, "provider_id"),
    ("/v2/telephony/phone-numbers", {"phone_number": "+14155550100", "inbound_agent_id": -(2**63) - 1},
     "inbound_agent_id"),
    ("/v2/agents", {"name": "A", "metadata": {"n": [1, 10**30]}}, "metadata.n[1]"),
])
async def test_body_integers_beyond_bigint_are_400(any_api: Api, path: str, body: dict[str, Any], field: str) -> None:
    t = await any_api.tenant()
    r = await any_api.client.post(path, json=body, headers=t.headers)
    _refused(r, 400, field)
