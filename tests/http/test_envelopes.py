"""Envelopes, request ids and the edge of the HTTP layer, through the real app: unknown routes and
methods, malformed and invalid bodies, unexpected errors, X-Request-ID, the two path prefixes,
/docs and /health."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import httpx
from dishka import Provider, Scope, provide

from adapters.memory.clock import ManualClock
from application.agents import CreateAgent, CreateAgentCommand, ListAgents
from application.ports.platform import UnitOfWork
from domain.events import EventType
from entrypoints.overrides import ClockProvider
from tests.support.apps import Api, ApiFactory

REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
SECRET_DETAIL = "connection string postgresql://admin:hunter2@db"


def _router_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["success"] is False, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert set(body["error"]) <= {"message", "code", "details"}, body
    assert REQUEST_ID.match(response.headers.get("x-request-id", "")), "every response carries X-Request-ID"
    return body["error"]  # type: ignore[no-any-return]


def _field_errors(response: httpx.Response) -> dict[str, str]:
    error = _router_error(response, 400, "bad_request")
    return error["details"]["validation_errors"]  # type: ignore[no-any-return]


# -- routing ---------------------------------------------------------------------------------

async def test_unknown_route_answers_404_in_the_router_envelope(api: Api) -> None:
    t = await api.tenant()
    for path in ("/v2/nope", "/api/v2/nope", "/nope", "/v2", "/v2/agents/1/unknown"):
        for headers in ({}, t.headers):
            _router_error(await api.client.get(path, headers=headers), 404, "not_found")
    for headers in ({}, t.headers):  # the route exists, its parameter is invalid
        _router_error(await api.client.get("/v2/agents/not-a-number", headers=headers), 400, "bad_request")


async def test_wrong_method_answers_405_in_the_router_envelope(api: Api) -> None:
    t = await api.tenant()
    for method, path in [("PUT", "/v2/agents"), ("DELETE", "/v2/agents"), ("POST", "/v2/health"),
                         ("PUT", "/api/v2/agents/1")]:
        response = await api.client.request(method, path, headers=t.headers)
        _router_error(response, 405, "method_not_allowed")
        assert "GET" in response.headers.get("allow", ""), (method, path)


async def test_both_prefixes_serve_the_same_handlers(api: Api) -> None:
    t = await api.tenant()
    created = await api.client.post("/v2/agents", json={"name": "Both"}, headers=t.headers)
    agent = created.json()["data"]
    primary = await api.client.get(f"/v2/agents/{agent['id']}", headers=t.headers)
    dashboard = await api.client.get(f"/api/v2/agents/{agent['id']}", headers=t.headers)
    assert primary.status_code == dashboard.status_code == 200
    assert primary.json() == dashboard.json() == {"success": True, "data": agent}
    via_dashboard = await api.client.post("/api/v2/agents", json={"name": "Other"}, headers=t.headers)
    listed = (await api.client.get("/v2/agents", headers=t.headers)).json()
    assert via_dashboard.json()["data"]["id"] in [a["id"] for a in listed["data"]]
    for path in ("/health", "/openapi.json"):
        primary, dashboard = await api.client.get(f"/v2{path}"), await api.client.get(f"/api/v2{path}")
        assert primary.status_code == dashboard.status_code == 200
        assert primary.json().keys() == dashboard.json().keys()


async def test_docs_redirects_to_the_openapi_document_of_the_same_prefix(api: Api) -> None:
    for prefix in ("/v2", "/api/v2"):
        response = await api.client.get(f"{prefix}/docs", follow_redirects=False)
        assert response.status_code == 302
        assert response.headers["location"] == f"{prefix}/openapi.json"
        assert REQUEST_ID.match(response.headers["x-request-id"])
        document = await api.client.get(response.headers["location"])
        assert document.status_code == 200 and document.json()["info"]["version"] == "2.0.0"


async def test_health_reports_status_version_and_the_clocks_time(make_api: ApiFactory, sqlite_url: str) -> None:
    clock = ManualClock()
    api = await make_api(sqlite_url, clock=clock)
    response = await api.client.get("/v2/health")
    assert response.status_code == 200
    body = response.json()
    assert body["success"] is True
    assert body["data"]["status"] == "ok" and body["data"]["version"] == "2.0.0"
    assert datetime.fromisoformat(body["data"]["timestamp"]) == clock.now()
    clock.advance(hours=1)
    later = (await api.client.get("/api/v2/health")).json()["data"]["timestamp"]
    assert datetime.fromisoformat(later) == clock.now()


# -- bodies and parameters -----------------------------------------------------------------------

async def test_malformed_json_answers_400_bad_request(api: Api) -> None:
    t = await api.tenant()
    headers = {**t.headers, "Content-Type": "application/json"}
    for raw in (b"{not json", b'{"name": "x"', b'{"name": "x"} trailing', b"\xff\xfe"):
        errors = _field_errors(await api.client.post("/v2/agents", content=raw, headers=headers))
        assert "body" in errors, raw


INVALID_BODIES: list[tuple[Any, str]] = [
    ({"name": ""}, "name"),
    ({"name": 5}, "name"),
    ({}, "name"),
    ({"name": "A", "unknown": 1}, "unknown"),
    ({"name": "A", "voice": {"provider": ""}}, "voice.provider"),
    ({"name": "A", "voice": {"color": "blue"}}, "voice.color"),
    ({"name": "A", "llm": {"temperature": 9}}, "llm.temperature"),
    ({"name": "A", "agent_mode": "sideways"}, "agent_mode"),
    ({"name": "A", "transfer_phone": "12"}, "transfer_phone"),
    ({"name": "A", "timezone": "Mars/Base"}, "timezone"),
    ([], "body"),
]


async def test_invalid_body_answers_400_naming_the_field(api: Api) -> None:
    t = await api.tenant()
    for body, field in INVALID_BODIES:
        errors = _field_errors(await api.client.post("/v2/agents", json=body, headers=t.headers))
        assert field in errors, (body, errors)
        assert all(isinstance(message, str) and message for message in errors.values())
    assert (await api.client.get("/v2/agents", headers=t.headers)).json()["meta"]["total"] == 0


async def test_missing_body_answers_400_naming_the_body(api: Api) -> None:
    t = await api.tenant()
    errors = _field_errors(await api.client.post("/v2/agents", headers=t.headers))
    assert errors == {"body": "a JSON request body is required"}


async def test_invalid_parameter_answers_400_naming_it(api: Api) -> None:
    t = await api.tenant()
    for url, field in [
        ("/v2/agents?limit=0", "limit"), ("/v2/agents?limit=101", "limit"), ("/v2/agents?limit=abc", "limit"),
        ("/v2/agents?offset=-1", "offset"), ("/v2/agents?offset=99999999999999999999", "offset"),
        ("/v2/agents?status=gone", "status"), ("/v2/agents/0", "id"), ("/v2/agents/9007199254740993", "id"),
    ]:
        assert field in _field_errors(await api.client.get(url, headers=t.headers)), url


async def test_nul_characters_answer_400_on_every_database(any_api: Api) -> None:
    """PostgreSQL text and JSONB cannot hold U+0000; the edge refuses it instead of failing with a 500."""
    t = await any_api.tenant()
    c = any_api.client
    assert "name" in _field_errors(await c.post("/v2/agents", json={"name": "a\u0000b"}, headers=t.headers))
    nested = {"name": "ok", "metadata": {"tags": ["fine", "bad\u0000"]}}
    assert "metadata.tags[1]" in _field_errors(await c.post("/v2/agents", json=nested, headers=t.headers))
    key = {"name": "ok", "metadata": {"bad\u0000key": 1}}
    assert "metadata" in _field_errors(await c.post("/v2/agents", json=key, headers=t.headers))
    assert "query" in _field_errors(await c.get("/v2/agents?search=a%00b", headers=t.headers))
    assert "path" in _field_errors(await c.get("/v2/agents/1%00", headers=t.headers))
    fine = await c.post("/v2/agents", json={"name": "back\\u0000slash"}, headers=t.headers)
    assert fine.status_code == 201 and fine.json()["data"]["name"] == "back\\u0000slash"
    assert (await c.get("/v2/agents", headers=t.headers)).json()["meta"]["total"] == 1


async def test_json_bodies_need_a_json_media_type(api: Api) -> None:
    t = await api.tenant()
    body = b'{"name": "Typed"}'
    for media_type in ("text/plain", "application/x-www-form-urlencoded", "application/xml"):
        response = await api.client.post("/v2/agents", content=body, headers={**t.headers, "Content-Type": media_type})
        _router_error(response, 415, "unsupported_media_type")
    for media_type in ("application/json", "application/json; charset=utf-8", "application/merge-patch+json"):
        response = await api.client.post("/v2/agents", content=body, headers={**t.headers, "Content-Type": media_type})
        assert response.status_code == 201, (media_type, response.text)
    assert (await api.client.get("/v2/agents", headers=t.headers)).json()["meta"]["total"] == 3


async def test_a_body_over_one_megabyte_answers_413(api: Api) -> None:
    t = await api.tenant()
    huge = b'{"name": "' + b"x" * (1024 * 1024) + b'"}'
    headers = {**t.headers, "Content-Type": "application/json"}
    _router_error(await api.client.post("/v2/agents", content=huge, headers=headers), 413, "payload_too_large")
    keyed = {**headers, "Idempotency-Key": "huge-1"}
    _router_error(await api.client.post("/v2/agents", content=huge, headers=keyed), 413, "payload_too_large")


# -- unexpected errors ---------------------------------------------------------------------------

class _ExplodingListAgents(ListAgents):
    def __init__(self) -> None:
        pass

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(SECRET_DETAIL)


class _ExplodingCreateAgent(CreateAgent):
    """Records an event (which must not be kept), then fails."""

    def __init__(self, uow: UnitOfWork) -> None:
        self.uow = uow

    async def execute(self, command: CreateAgentCommand) -> Any:
        self.uow.record(EventType.CALL_STARTED(command.actor.organization_id, {"id": 0}))
        raise KeyError(SECRET_DETAIL)


class _ExplodingClock:
    def now(self) -> datetime:
        raise ZeroDivisionError(SECRET_DETAIL)


class _FailingUseCases(Provider):
    list_agents = provide(_ExplodingListAgents, provides=ListAgents, scope=Scope.REQUEST)
    create_agent = provide(_ExplodingCreateAgent, provides=CreateAgent, scope=Scope.REQUEST)


def _assert_opaque_500(response: httpx.Response) -> None:
    error = _router_error(response, 500, "internal_error")
    assert error["message"] == "Internal server error"
    assert response.headers.get("x-content-type-options") == "nosniff"
    for leak in ("hunter2", "Traceback", "RuntimeError", "KeyError", "ZeroDivisionError", ".py"):
        assert leak not in response.text


async def test_an_unexpected_error_answers_an_opaque_500(make_api: ApiFactory, sqlite_url: str) -> None:
    api = await make_api(sqlite_url, overrides=(_FailingUseCases(),))
    t = await api.tenant()
    response = await api.client.get("/v2/agents", headers={**t.headers, "X-Request-ID": "trace-500"})
    _assert_opaque_500(response)
    assert response.headers["x-request-id"] == "trace-500"
    _assert_opaque_500(await api.client.post("/v2/agents", json={"name": "A"}, headers=t.headers))
    assert (await api.client.get("/v2/api-keys", headers=t.headers)).status_code == 200, "the app keeps serving"


async def test_a_failed_idempotent_request_keeps_nothing_and_releases_its_key(make_api: ApiFactory,
                                                                             sqlite_url: str) -> None:
    api = await make_api(sqlite_url, overrides=(_FailingUseCases(),))
    t = await api.tenant()
    headers = {**t.headers, "Idempotency-Key": "fails-twice"}
    _assert_opaque_500(await api.client.post("/v2/agents", json={"name": "A"}, headers=headers))
    retry = await api.client.post("/v2/agents", json={"name": "A"}, headers=headers)
    _assert_opaque_500(retry)
    assert "idempotency-replayed" not in retry.headers, "a 5xx is never stored"


async def test_an_unexpected_error_on_a_public_route_answers_an_opaque_500(make_api: ApiFactory,
                                                                          sqlite_url: str) -> None:
    api = await make_api(sqlite_url, overrides=(ClockProvider(_ExplodingClock()),))
    _assert_opaque_500(await api.client.get("/v2/health"))


# -- request ids ---------------------------------------------------------------------------------

async def test_a_sane_request_id_is_echoed(api: Api) -> None:
    for incoming in ("abc-123", "A.b_C-9", "x" * 128, "0"):
        response = await api.client.get("/v2/health", headers={"X-Request-ID": incoming})
        assert response.headers["x-request-id"] == incoming


async def test_an_insane_request_id_is_replaced(api: Api) -> None:
    for incoming in ("has spaces", "x" * 129, "x" * 200, "semi;colon", "slash/y", "", "é"):
        response = await api.client.get("/v2/health", headers={"X-Request-ID": incoming.encode("utf-8")})
        replaced = response.headers["x-request-id"]
        assert replaced != incoming and REQUEST_ID.match(replaced), incoming


async def test_requests_without_an_id_get_distinct_ones(api: Api) -> None:
    ids = {(await api.client.get("/v2/health")).headers["x-request-id"] for _ in range(5)}
    assert len(ids) == 5 and all(REQUEST_ID.match(i) for i in ids)


async def test_every_kind_of_response_carries_the_request_id(make_api: ApiFactory, sqlite_url: str) -> None:
    api = await make_api(sqlite_url, rate_limit_per_minute=3)
    t = await api.tenant()
    c = api.client
    created = (await c.post("/v2/agents", json={"name": "A"}, headers=t.headers)).json()["data"]
    sent: list[tuple[int, httpx.Response]] = []

    async def check(expected: int, method: str, url: str, **kwargs: Any) -> httpx.Response:
        rid = f"rid-{expected}-{len(sent)}"
        headers = {**kwargs.pop("headers", {}), "X-Request-ID": rid}
        response = await c.request(method, url, headers=headers, follow_redirects=False, **kwargs)
        assert response.status_code == expected, (method, url, response.text)
        assert response.headers.get("x-request-id") == rid, (expected, method, url)
        sent.append((expected, response))
        return response

    await check(200, "GET", "/v2/health")
    await check(302, "GET", "/v2/docs")
    await check(404, "GET", "/v2/nowhere")
    await check(405, "PATCH", "/v2/health")
    await check(401, "GET", "/v2/agents")
    await check(401, "GET", "/v2/agents", headers={"Authorization": "Bearer parley_sk_bogus"})
    await check(400, "GET", "/v2/agents?search=%00")
    await check(204, "DELETE", f"/v2/agents/{created['id']}", headers=t.headers)
    await check(404, "GET", f"/v2/agents/{created['id']}", headers=t.headers)
    limited = await check(429, "GET", "/v2/agents", headers=t.headers)
    assert int(limited.headers["retry-after"]) >= 1
    assert limited.json()["error"]["code"] == "RATE_LIMIT_EXCEEDED"


def test_generated_request_ids_are_distinct_uuid4_hex() -> None:
    import uuid

    from entrypoints.http.asgi import _RequestIds

    ids = _RequestIds()
    made = [ids.next() for _ in range(2000)]
    assert len(set(made)) == len(made)
    for value in made:
        parsed = uuid.UUID(value)
        assert parsed.hex == value and parsed.version == 4 and parsed.variant == uuid.RFC_4122
    assert _RequestIds().next() not in made  # every process (and forked child) seeds its own
