"""Errors a client can act on: every error names the client's own field (or header, or parameter) and
says in words what is expected; no internal path, no regular expression, no library type names."""

from __future__ import annotations

from typing import Any

import pytest
from litestar import Litestar

from entrypoints.http.patterns import PATTERN_WORDS
from tests.http.route_table import served_operations
from tests.http.scheduling_support import book, make_calendar, scheduling_api
from tests.support.apps import Api, ApiFactory


def _errors(response: Any) -> dict[str, str]:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["success"] is False and body["error"]["code"] == "bad_request"
    return body["error"]["details"]["validation_errors"]  # type: ignore[no-any-return]


def _readable(message: str) -> bool:
    return not any(mark in message for mark in ("`", "regex", "^", "$'", "\\\\", "/api/v2", "Expected"))


@pytest.mark.parametrize("prefix", ["/v2", "/api/v2"])
async def test_a_missing_query_parameter_is_named_as_such(any_api: Api, prefix: str) -> None:
    t = await any_api.tenant()
    r = await any_api.client.get(f"{prefix}/scheduling/availability", headers=t.headers)
    errors = _errors(r)
    assert errors == {"calendar_id": "is required"}
    assert "/api/v2" not in r.text


@pytest.mark.parametrize(("path", "body", "field", "words"), [
    ("/v2/agents", {"name": "A", "language": "english!"}, "language", "language tag"),
    ("/v2/scheduling/appointments", {"calendar_id": 1, "slot_start": "2026-03-09T09:00:00Z",
                                     "attendee_name": "Ada", "attendee_email": "not-an-email"},
     "attendee_email", "email address"),
])
async def test_pattern_errors_say_what_is_expected_in_words(any_api: Api, path: str, body: dict[str, Any],
                                                            field: str, words: str) -> None:
    t = await any_api.tenant()
    errors = _errors(await any_api.client.post(path, json=body, headers=t.headers))
    assert words in errors[field] and _readable(errors[field]), errors


async def test_pattern_errors_in_query_parameters_and_wall_times(any_api: Api) -> None:
    t = await any_api.tenant()
    c = any_api.client
    dnc = (await c.post("/v2/dnc/lists", json={"name": "L"}, headers=t.headers)).json()["data"]
    errors = _errors(await c.post(f"/v2/dnc/lists/{dnc['id']}/entries/import", params={"default_region": "abc"},
                                  headers={**t.headers, "content-type": "text/csv"}, content=b"+14155550100\n"))
    assert "country code" in errors["default_region"] and _readable(errors["default_region"])
    cal = (await c.post("/v2/scheduling/calendars", json={"name": "C", "timezone": "UTC"},
                        headers=t.headers)).json()["data"]
    errors = _errors(await c.post(f"/v2/scheduling/calendars/{cal['id']}/rules", headers=t.headers,
                                  json={"weekday": 0, "start_time": "9:00", "end_time": "10:00"}))
    assert "HH:MM" in errors["start_time"] and _readable(errors["start_time"])


@pytest.mark.parametrize(("method", "path", "kwargs", "field", "words"), [
    ("GET", "/v2/agents", {"params": {"limit": "x"}}, "limit", "must be an integer"),
    ("GET", "/v2/agents", {"params": {"limit": "0"}}, "limit", "must be at least 1"),
    ("GET", "/v2/agents", {"params": {"limit": "101"}}, "limit", "must be at most 100"),
    ("GET", "/v2/calls", {"params": {"status": "nope"}}, "status", "must be one of: queued"),
    ("POST", "/v2/agents", {"json": {"name": ""}}, "name", "must not be empty"),
    ("POST", "/v2/agents", {"json": {"name": 5}}, "name", "must be a string"),
    ("POST", "/v2/agents", {"json": {"name": None}}, "name", "must be a string (null is not accepted)"),
    ("POST", "/v2/webhooks", {"json": {"url": None, "events": ["call.ended"]}}, "url", "null is not accepted"),
    ("POST", "/v2/agents", {"json": {"name": "A", "max_call_duration_seconds": None}}, "max_call_duration_seconds",
     "must be an integer (null is not accepted)"),
    ("POST", "/v2/agents", {"json": {"name": "x" * 300}}, "name", "must have at most 200 characters"),
    ("POST", "/v2/agents", {"json": [1]}, "body", "must be a JSON object"),
    ("POST", "/v2/api-keys", {"json": {"name": "k", "scopes": []}}, "scopes", "must not be empty"),
    ("POST", "/v2/api-keys", {"json": {"name": "k", "scopes": ["agents:read"], "expires_at": "soon"}},
     "expires_at", "RFC 3339"),
    ("POST", "/v2/api-keys", {"json": {"name": "k", "scopes": ["agents:read"], "expires_at": "2030-01-01T00:00:00"}},
     "expires_at", "offset"),
])
async def test_validation_messages_are_words(any_api: Api, method: str, path: str, kwargs: dict[str, Any],
                                             field: str, words: str) -> None:
    t = await any_api.tenant()
    errors = _errors(await any_api.client.request(method, path, headers=t.headers, **kwargs))
    assert words in errors[field] and _readable(errors[field]), errors


async def test_every_pattern_in_the_document_has_words(any_api: Api) -> None:
    document = (await any_api.client.get("/v2/openapi.json")).json()
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                found.add(node["pattern"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(document)
    assert found and found <= set(PATTERN_WORDS), f"patterns without words: {found - set(PATTERN_WORDS)}"


async def test_rescheduling_a_cancelled_appointment_says_why(make_api: ApiFactory, sql_url: str) -> None:
    sched = await scheduling_api(make_api, sql_url)
    t = await sched.tenant()
    cal = await make_calendar(sched, t)
    booked = (await book(sched, t, cal["id"], "2026-03-09T09:00:00-04:00")).json()["data"]
    assert (await sched.client.delete(f"/v2/scheduling/appointments/{booked['id']}",
                                      headers=t.headers)).status_code == 200
    r = await sched.client.patch(f"/v2/scheduling/appointments/{booked['id']}", headers=t.headers,
                                 json={"slot_start": "2026-03-09T10:00:00-04:00"})
    assert r.status_code == 409
    error = r.json()["error"]
    assert error["code"] == "invalid_transition"
    assert "cancelled to cancelled" not in error["message"]
    assert error["message"] == "appointment is cancelled: reschedule is only possible while it is confirmed or pending"


async def test_an_unavailable_slot_is_echoed_as_sent(make_api: ApiFactory, sql_url: str) -> None:
    sched = await scheduling_api(make_api, sql_url)
    t = await sched.tenant()
    cal = await make_calendar(sched, t)
    assert (await book(sched, t, cal["id"], "2026-03-09T09:00:00-04:00")).status_code == 201
    sent = "2026-03-09T13:00:00Z"  # the same instant, written another way
    taken = await book(sched, t, cal["id"], sent)
    assert taken.status_code == 409 and taken.json()["error"]["code"] == "slot_unavailable"
    assert taken.json()["error"]["details"]["slot_start"] == sent
    other = (await book(sched, t, cal["id"], "2026-03-09T10:00:00-04:00")).json()["data"]
    moved = await sched.client.patch(f"/v2/scheduling/appointments/{other['id']}", headers=t.headers,
                                     json={"slot_start": sent})
    assert moved.status_code == 409 and moved.json()["error"]["details"]["slot_start"] == sent


def _methods_by_path(app: Litestar) -> tuple[dict[str, set[str]], dict[str, str]]:
    """The documented methods of each served path, and a URL that reaches it."""
    by_path: dict[str, set[str]] = {}
    urls: dict[str, str] = {}
    for op in served_operations(app):
        by_path.setdefault(op.documented_path, set()).add(op.method)
        urls[op.documented_path] = op.url()
    return by_path, urls


async def test_405_lists_the_allowed_methods(any_api: Api) -> None:
    t = await any_api.tenant()
    app: Litestar = any_api.client.app
    by_path, urls = _methods_by_path(app)
    for path, methods in by_path.items():
        unsupported = next(m for m in ("PUT", "PATCH", "DELETE", "POST") if m not in methods)
        r = await any_api.client.request(unsupported, urls[path], headers=t.headers)
        assert r.status_code == 405, (path, r.status_code)
        assert r.json()["error"]["code"] == "method_not_allowed"
        allow = [m.strip() for m in r.headers["allow"].split(",")]
        assert allow == sorted(allow) and set(allow) == _served(methods), (path, allow)


def _served(methods: set[str]) -> set[str]:
    """What ``Allow`` says a path with these documented methods serves: HEAD beside GET, and OPTIONS."""
    return methods | {"OPTIONS"} | ({"HEAD"} if "GET" in methods else set())


async def test_options_lists_every_method_of_the_path(any_api: Api) -> None:
    app: Litestar = any_api.client.app
    by_path, urls = _methods_by_path(app)
    assert any(len(methods) > 1 for methods in by_path.values())
    for path, methods in by_path.items():
        for url in (urls[path], urls[path].replace("/v2/", "/api/v2/", 1)):
            r = await any_api.client.options(url)  # no credential needed to ask
            if path.startswith("/widget/") and r.status_code == 204 and "allow" not in r.headers:
                continue  # a CORS preflight, answered before routing (widget.md)
            assert r.status_code == 204 and r.content == b"", (url, r.status_code, r.text)
            allow = [m.strip() for m in r.headers["allow"].split(",")]
            assert allow == sorted(allow) and set(allow) == _served(methods), (url, allow)


@pytest.mark.slow
async def test_head_answers_like_get_without_a_body(any_api: Api) -> None:
    t = await any_api.tenant()
    app: Litestar = any_api.client.app
    gets = [op for op in served_operations(app) if op.method == "GET"]
    assert len(gets) > 20
    for op in gets:
        url = op.url()
        key = await any_api.key_for(t.organization_id, ("*",))  # a key (and a rate limit) per route
        got = await any_api.client.get(url, headers=key.headers)
        head = await any_api.client.head(url, headers=key.headers)
        assert head.status_code == got.status_code, (url, head.status_code, got.status_code)
        assert head.content == b"", url
        assert head.headers.get("content-type") == got.headers.get("content-type"), url
        # the length the GET's body would have (some bodies, such as timestamps or measured latencies, vary)
        assert int(head.headers["content-length"]) > 0, url
        assert head.headers.get("x-ratelimit-limit") == got.headers.get("x-ratelimit-limit"), url
    script, script_head = await any_api.client.get("/widget.js"), await any_api.client.head("/widget.js")
    assert script_head.status_code == 200 and script_head.content == b""
    assert script_head.headers["content-length"] == script.headers["content-length"] == str(len(script.content))
    key = await any_api.key_for(t.organization_id, ("*",))
    refused = await any_api.client.head("/v2/agents")
    assert refused.status_code == 401 and refused.content == b""
    not_allowed = await any_api.client.head("/v2/api-keys/1/rotate", headers=key.headers)
    assert not_allowed.status_code == 405 and "HEAD" not in not_allowed.headers["allow"]


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/v2/knowledge-bases", {"name": "kb", "agent_id": 999999}, "agent_id"),
    ("/v2/scheduling/calendars", {"name": "Desk", "timezone": "UTC", "agent_id": 999999}, "agent_id"),
    ("/v2/scheduling/appointments", {"calendar_id": 999999, "slot_start": "2030-01-07T15:00:00Z",
                                     "attendee_name": "Ada"}, "calendar_id"),
    ("/v2/calls", {"bot_id": "999999", "destination_phone": "+14155550123"}, "bot_id"),
    ("/v2/agents/{agent}/knowledge-bases", {"knowledge_base_id": 999999}, "knowledge_base_id"),
])
async def test_an_unknown_id_in_a_body_is_404_naming_its_field(any_api: Api, path: str, body: dict[str, Any],
                                                              field: str) -> None:
    """As for agents, campaigns and leads: the client learns which of the ids it sent is unknown."""
    t = await any_api.tenant()
    if "{agent}" in path:
        agent = await any_api.client.post("/v2/agents", json={"name": "A"}, headers=t.headers)
        path = path.format(agent=agent.json()["data"]["id"])
    r = await any_api.client.post(path, json=body, headers=t.headers)
    assert r.status_code == 404, r.text
    assert r.json()["error"]["details"]["field"] == field


@pytest.mark.parametrize("path", ["/v2/calls", "/v2/leads", "/v2/sms", "/v2/audit-events"])
async def test_a_created_window_that_ends_before_it_starts_is_400(any_api: Api, path: str) -> None:
    """Every list with a created_after / created_before window reads it alike: an empty window is the client's
    mistake, named, not an empty page."""
    t = await any_api.tenant()
    window = {"created_after": "2027-01-01T00:00:00Z", "created_before": "2026-01-01T00:00:00Z"}
    refused = await any_api.client.get(path, params=window, headers=t.headers)
    assert refused.status_code == 400, refused.text
    assert _errors(refused) == {"created_before": "must not be before created_after"}
    for before in ("2027-01-01T00:00:00Z", "2026-01-01T00:00:00Z"):  # equal bounds: an empty page, not an error
        fine = await any_api.client.get(path, params={"created_after": "2026-01-01T00:00:00Z",
                                                      "created_before": before}, headers=t.headers)
        assert fine.status_code == 200, fine.text


async def test_a_body_reads_numbers_and_booleans_sent_as_strings_and_nothing_looser(any_api: Api) -> None:
    """docs/api.md, "Envelopes and errors": the one leniency of a JSON body, pinned."""
    t = await any_api.tenant()
    for sent in ("600", "6e2", 600.0):
        made = await any_api.client.post("/v2/agents", json={"name": "A", "max_call_duration_seconds": sent},
                                         headers=t.headers)
        assert made.status_code == 201 and made.json()["data"]["max_call_duration_seconds"] == 600, made.text
    for sent in (True, "six hundred", 600.5):
        refused = await any_api.client.post("/v2/agents", json={"name": "A", "max_call_duration_seconds": sent},
                                            headers=t.headers)
        assert list(_errors(refused)) == ["max_call_duration_seconds"], sent
    rule = {"name": "T", "event": "lead.created",
            "actions": [{"type": "webhook", "config": {"url": "https://hooks.example.com/x"}}]}
    made = (await any_api.client.post("/v2/triggers", json=rule, headers=t.headers)).json()["data"]
    for sent, read in (("false", False), (1, True), ("false", False), ("true", True), (0, False)):
        changed = await any_api.client.patch(f"/v2/triggers/{made['id']}", json={"enabled": sent}, headers=t.headers)
        assert changed.status_code == 200 and changed.json()["data"]["enabled"] is read, (sent, changed.text)
    assert list(_errors(await any_api.client.patch(f"/v2/triggers/{made['id']}", json={"enabled": "yes"},
                                                   headers=t.headers))) == ["enabled"]
