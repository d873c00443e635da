"""Principals: every route answers to the authenticator its declared ``AuthMode`` names, a route without a
declared access stops the app from being built, and every route, public ones included, runs in the
request's unit of work."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import httpx
import pytest
from dishka import FromDishka
from litestar import get
from litestar.params import QueryParameter

from application.ports.accounts import OrganizationRepository
from application.ports.platform import PageRequest
from domain.errors import ValidationFailed
from domain.organizations import Organization
from entrypoints.asgi_app import http_container
from entrypoints.http.app import UndeclaredAccess, create_app, route_handlers
from entrypoints.http.envelope import Envelope
from entrypoints.http.routing import Access, AuthMode, endpoint
from entrypoints.settings import Settings
from tests.support.apps import Api, AppPool

TAGS = ["test"]
WRITTEN_NAME = "written by a public route"


@endpoint("POST", "/test/public-writes", operation_id="testPublicWrite", summary="A public route that writes",
          tags=TAGS, auth="public", status_code=201)
async def public_write(orgs: FromDishka[OrganizationRepository], parent: Annotated[int, QueryParameter()],
                       fail: Annotated[bool, QueryParameter()] = False) -> Envelope[dict[str, Any]]:
    now = datetime.now(UTC)
    org = await orgs.add(Organization(None, WRITTEN_NAME, "business", "standard", parent, now, now))
    if fail:
        raise ValidationFailed.field("fail", "the route was asked to fail after writing")
    return Envelope({"id": org.id})


@endpoint("GET", "/test/widget", operation_id="testWidget", summary="A widget route", tags=TAGS, auth="widget")
async def widget_route() -> Envelope[dict[str, Any]]:
    return Envelope({"reached": True})


@endpoint("GET", "/test/key-or-session", operation_id="testKeyOrSession", summary="A key-or-session route",
          tags=TAGS, scopes=("agents:read",), auth="key_or_session")
async def key_or_session_route() -> Envelope[dict[str, Any]]:
    return Envelope({"reached": True})


TEST_ROUTES = [public_write, widget_route, key_or_session_route]


def _settings(url: str, tmp_root: Path) -> Settings:
    return Settings(database_url=url, var_dir=tmp_root / "var", secret_key="test-secret-key",
                    allow_loopback_targets=True, auth_failures_per_minute=1_000_000)


@pytest.fixture
async def test_api(sql_url: str, tmp_root: Path, app_pool: AppPool) -> AsyncIterator[Api]:
    """The app with the test-only routes above, on each SQL database (lent by the run's pool)."""
    settings = _settings(sql_url, tmp_root)
    async with app_pool.serving(settings, http_container(settings), handlers=(*route_handlers(), *TEST_ROUTES)) as api:
        yield api


def _auth_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["success"] is False and body["error"]["code"] == code, body
    assert set(body["error"]) <= {"code", "message", "retry_after"}, body


def test_an_unknown_auth_mode_is_refused_where_the_route_is_declared() -> None:
    with pytest.raises(ValueError, match="unknown auth mode 'cookie'"):
        endpoint("GET", "/x", operation_id="x", summary="x", tags=TAGS, scopes=("agents:read",), auth="cookie")
    with pytest.raises(ValueError, match="unknown auth mode"):
        Access(scopes=("agents:read",), auth="sesion")  # type: ignore[arg-type]
    assert Access(auth="widget").auth is AuthMode.WIDGET  # type: ignore[arg-type]


def test_a_route_without_declared_access_stops_the_app(tmp_root: Path) -> None:
    @get("/undeclared")
    async def undeclared() -> dict[str, str]:
        return {"open": "to anyone"}

    settings = _settings("memory://", tmp_root)
    with pytest.raises(UndeclaredAccess, match=r"undeclared.*declares no access"):
        create_app(http_container(settings), settings, [*route_handlers(), undeclared])


async def test_a_widget_route_is_answered_by_the_widget_authenticator(test_api: Api) -> None:
    tenant = await test_api.tenant(scopes=("*",))
    missing = await test_api.client.get("/v2/test/widget")
    _auth_error(missing, 401, "MISSING_AUTH")
    assert missing.headers["www-authenticate"].startswith("Widget")  # the scheme a widget token is sent with
    # an API key is no widget token, whatever its scopes
    _auth_error(await test_api.client.get("/v2/test/widget", headers=tenant.headers), 401, "INVALID_WIDGET_TOKEN")
    _auth_error(await test_api.client.get("/v2/test/widget", headers={"Authorization": "Bearer wt_anything"}),
                401, "INVALID_WIDGET_TOKEN")
    _auth_error(await test_api.client.get("/v2/test/widget", headers={"Authorization": "Widget not-a-token"}),
                401, "INVALID_WIDGET_TOKEN")


async def test_a_key_or_session_route_takes_a_key_and_refuses_without_one(test_api: Api) -> None:
    tenant = await test_api.tenant(scopes=("agents:read",))
    response = await test_api.client.get("/v2/test/key-or-session", headers=tenant.headers)
    assert response.status_code == 200, response.text
    assert response.headers.get("x-ratelimit-limit")
    # no key: the session authenticator answers, and no session can be opened yet
    _auth_error(await test_api.client.get("/v2/test/key-or-session"), 401, "MISSING_AUTH")
    other = await test_api.key_for(tenant.organization_id, ("calls:read",))
    _auth_error(await test_api.client.get("/v2/test/key-or-session", headers=other.headers), 403,
                "INSUFFICIENT_SCOPE")


async def test_a_public_route_runs_in_the_unit_of_work(test_api: Api) -> None:
    parent = (await test_api.tenant(org_type="partner")).organization_id
    kept = await test_api.client.post("/v2/test/public-writes", params={"parent": parent})
    assert kept.status_code == 201, kept.text
    failed = await test_api.client.post("/v2/test/public-writes", params={"parent": parent, "fail": "true"})
    assert failed.status_code == 400, failed.text
    async with test_api._admin()() as request:
        children = await (await request.get(OrganizationRepository)).list_children(parent, PageRequest(10, 0))
    # the 201's write was committed, the 400's rolled back
    assert [(child.id, child.name) for child in children.items] == [(kept.json()["data"]["id"], WRITTEN_NAME)]
