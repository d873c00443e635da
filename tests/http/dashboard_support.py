"""Dashboard users and signed-in clients for the session and dashboard tests."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

import httpx

from application.accounts import CreateUser, CreateUserCommand
from application.ports.platform import UnitOfWork
from tests.support.apps import Api, Tenant

PASSWORD = "correct horse battery"
COOKIE = "parley_session"
_CSRF_FIELD = re.compile(r'name="csrf_token" value="([^"]+)"')


@dataclass
class User:
    tenant: Tenant
    email: str
    password: str = PASSWORD


async def new_user(api: Api, *, plan: str = "enterprise", role: str = "owner") -> User:
    tenant = await api.tenant(plan=plan)
    return await add_user(api, tenant, role=role)


async def add_user(api: Api, tenant: Tenant, *, role: str = "owner") -> User:
    """A user of ``role`` in the tenant's organization (as ``parley admin create-user`` makes one)."""
    email = f"u{uuid.uuid4().hex[:12]}@example.com"
    async with api._admin()() as request:
        await (await request.get(CreateUser)).execute(CreateUserCommand(tenant.organization_id, email, PASSWORD,
                                                                        role))
        await (await request.get(UnitOfWork)).commit()
    return User(tenant, email)


def set_cookie_header(response: httpx.Response) -> str:
    return next(v for k, v in response.headers.multi_items() if k.lower() == "set-cookie")


def session_id(response: httpx.Response) -> str:
    header = set_cookie_header(response)
    return header.split(";", 1)[0].split("=", 1)[1]


async def login(api: Api, user: User, *, headers: dict[str, str] | None = None) -> tuple[str, str]:
    """(session id, csrf token), through POST /auth/login."""
    response = await api.client.post("/v2/auth/login", json={"email": user.email, "password": user.password},
                                     headers=headers or {})
    assert response.status_code == 200, response.text
    api.client.cookies.clear()
    return session_id(response), response.json()["data"]["csrf_token"]


def cookie(session: str) -> dict[str, str]:
    return {"Cookie": f"{COOKIE}={session}"}


def csrf_of(html: str) -> str:
    found = _CSRF_FIELD.search(html)
    assert found, "no csrf_token field on the page"
    return found.group(1)
