"""Every authenticated route, read from the route table: 401 without a key, 403 INSUFFICIENT_SCOPE
with a key lacking its scopes, and authorized (not 401/403) with each alternative its scopes list
(the scope itself, its family wildcard and ``*``)."""

from __future__ import annotations

import httpx
import pytest

from domain.scopes import ALL_SCOPES, alternatives_for
from tests.http.route_table import ServedOperation, served_operations
from tests.support.apps import Api, ApiFactory, Tenant

BEARER_AUTH = ("key", "key_or_session")  # routes a Bearer key opens (widget routes take a widget token)


@pytest.fixture
async def open_api(make_api: ApiFactory, sqlite_url: str) -> Api:
    """Many requests per key: lift the rate limits so a 429 cannot mask an authorization answer."""
    return await make_api(sqlite_url, rate_limit_per_minute=100_000, rate_limit_per_hour=1_000_000)


def _authenticated(api: Api) -> list[ServedOperation]:
    operations = [op for op in served_operations(api.client.app)
                  if op.access is not None and not op.access.public and op.access.auth in BEARER_AUTH]
    assert len(operations) >= 20, "fewer authenticated routes than the foundation serves"
    return operations


def _unrelated_scope(op: ServedOperation) -> str:
    """A real scope of another family than any the route accepts."""
    assert op.access is not None
    families = {scope.split(":", 1)[0] for scope in op.access.scopes}
    return next(s for s in sorted(ALL_SCOPES) if s.split(":", 1)[0] not in families)


def _assert_auth_envelope(op: ServedOperation, response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, f"{op.label}: {response.status_code} {response.text}"
    body = response.json()
    assert body["success"] is False and body["error"]["code"] == code, f"{op.label}: {body}"
    assert isinstance(body["error"]["message"], str) and body["error"]["message"], op.label
    assert set(body["error"]) <= {"code", "message", "retry_after"}, f"{op.label}: auth envelope {body}"
    assert response.headers.get("x-request-id"), f"{op.label}: X-Request-ID"


async def test_every_authenticated_route_answers_401_without_a_key(api: Api) -> None:
    for op in _authenticated(api):
        response = await api.client.request(op.method, op.url())
        _assert_auth_envelope(op, response, 401, "MISSING_AUTH")
        assert response.headers.get("www-authenticate", "").startswith("Bearer"), op.label


async def test_every_authenticated_route_answers_401_for_a_non_bearer_scheme(api: Api) -> None:
    for op in _authenticated(api):
        response = await api.client.request(op.method, op.url(), headers={"Authorization": "Basic dXNlcjpwYXNz"})
        _assert_auth_envelope(op, response, 401, "MISSING_AUTH")


async def test_every_authenticated_route_answers_403_to_a_key_lacking_its_scopes(open_api: Api) -> None:
    tenant = await open_api.tenant(plan="enterprise", org_type="partner")
    keys: dict[str, Tenant] = {}
    for op in _authenticated(open_api):
        unrelated = _unrelated_scope(op)
        if unrelated not in keys:
            keys[unrelated] = await open_api.key_for(tenant.organization_id, (unrelated,))
        response = await open_api.client.request(op.method, op.url(), headers=keys[unrelated].headers)
        _assert_auth_envelope(op, response, 403, "INSUFFICIENT_SCOPE")
        assert response.headers.get("x-ratelimit-limit"), f"{op.label}: rate-limit headers on a 403"


def _assert_documented_headers(op: ServedOperation, response: httpx.Response, document: dict) -> None:  # type: ignore[type-arg]
    """The response's status is documented for the operation and carries every header documented as
    required for it, integers where the document says integer."""
    documented = document["paths"][op.documented_path][op.method.lower()]["responses"].get(
        str(response.status_code))
    assert documented is not None, f"{op.label}: {response.status_code} is not documented"
    for name, header in documented.get("headers", {}).items():
        value = response.headers.get(name)
        if header.get("required"):
            assert value is not None, f"{op.label} {response.status_code}: {name} missing"
        if value is not None and header.get("schema", {}).get("type") == "integer":
            assert value.isdigit(), f"{op.label}: {name}: {value!r}"


@pytest.mark.slow
async def test_every_listed_scope_alternative_authorizes_its_route(open_api: Api) -> None:
    tenant = await open_api.tenant(plan="enterprise", org_type="partner")
    document = (await open_api.client.get("/v2/openapi.json")).json()
    keys: dict[str, Tenant] = {}
    checked = 0
    for op in _authenticated(open_api):
        assert op.access is not None and op.access.scopes, f"{op.label}: declares no scope"
        alternatives = {alt for scope in op.access.scopes for alt in alternatives_for(scope)}
        for alternative in sorted(alternatives):
            if alternative not in keys:
                keys[alternative] = await open_api.key_for(tenant.organization_id, (alternative,))
            response = await open_api.client.request(op.method, op.url(), headers=keys[alternative].headers)
            assert response.status_code not in (401, 403), (
                f"{op.label} with {alternative!r}: {response.status_code} {response.text}")
            assert response.status_code < 500, f"{op.label} with {alternative!r}: {response.text}"
            _assert_documented_headers(op, response, document)
            checked += 1
    assert checked >= 60


async def test_scopes_are_declared_with_catalogued_names(api: Api) -> None:
    for op in _authenticated(api):
        assert op.access is not None
        unknown = [s for s in op.access.scopes if s not in ALL_SCOPES]
        assert not unknown, f"{op.label}: scopes outside the catalogue {unknown}"
