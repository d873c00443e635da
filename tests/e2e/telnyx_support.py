"""The Telnyx end-to-end tests' harness: the app (on a manual clock, PARLEY_PUBLIC_BASE_URL set) with a Telnyx
provider whose ``api_base_url`` is the Telnyx emulator, whose webhooks the emulator delivers to the app's carrier
routes, signed as Telnyx signs them. Media streams are stood in for by plain tokens (the stream itself is the
media endpoint's business), so that a dial asks Telnyx for a stream URL as it does in production."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from dishka import Provider, Scope, provide

from adapters.memory.clock import ManualClock
from application.ports.media import MediaStreamTokens, StreamGrant
from tests.http.calls_support import active_agent, apps_with_providers, close_workers, drive, place, unique_phone
from tests.support.apps import CHEAP_HASHING, Api, AppPool, Tenant
from tests.support.emulators.telnyx import TelnyxEmulator

PUBLIC = "https://parley.example"
START = datetime(2026, 3, 2, 15, 0, tzinfo=UTC)
FINAL = {"completed", "busy", "no_answer", "failed", "voicemail", "cancelled", "transferred"}


class PlainTokens:
    """``MediaStreamTokens`` without the media endpoint: a token names its call."""

    async def issue(self, call_id: str, organization_id: int, now: datetime) -> str:
        return f"tok-{call_id}"

    async def redeem(self, token: str, now: datetime) -> StreamGrant | None:
        return None

    async def purge(self, before: datetime) -> int:
        return 0


class PlainTokensProvider(Provider):
    scope = Scope.APP
    tokens = provide(PlainTokens, provides=MediaStreamTokens)


@dataclass
class Telnyx:
    """A test's world: the app, a tenant, its Telnyx provider and number, the emulator."""

    api: Api
    clock: ManualClock
    tenant: Tenant
    emulator: TelnyxEmulator
    provider: dict[str, Any]
    number: str

    @property
    def headers(self) -> dict[str, str]:
        return self.tenant.headers

    async def get(self, path: str) -> Any:
        response = await self.api.client.get(path, headers=self.headers)
        assert response.status_code == 200, response.text
        return response.json()["data"]

    async def call(self, call_id: str) -> dict[str, Any]:
        return await self.get(f"/v2/calls/{call_id}")  # type: ignore[no-any-return]

    async def drive(self) -> None:
        """One pass of the worker's call progress (dials what is due, reconciles what is overdue)."""
        await drive(self.api, self.tenant.organization_id)

    async def agent(self, **fields: Any) -> dict[str, Any]:
        return await active_agent(self.api, self.tenant, **fields)

    async def place(self, agent: dict[str, Any], to_phone: str | None = None, **extra: Any) -> str:
        response = await place(self.api, self.tenant, agent, to_phone or unique_phone(), **extra)
        assert response.status_code in (200, 201), response.text
        return str(response.json()["data"]["id"])


async def deliver_to(api: Api, url: str, headers: dict[str, str], body: bytes) -> int:
    """A webhook the emulator sends to the public URL, delivered to the app under test."""
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}" == PUBLIC, url
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    response = await api.client.post(target, content=body, headers=headers)
    return response.status_code


async def telnyx_world(tmp_root: Path, app_pool: AppPool, sql_url: str, *, carrier_timeout: float = 4.0
                       ) -> AsyncIterator[Telnyx]:
    """The app, its worker and its operator's CLI share the overrides (the clock, the stand-in media tokens)."""
    clock = ManualClock(START)
    emulator = await TelnyxEmulator(now=clock.now).start(thread=True)
    apps = apps_with_providers(tmp_root, app_pool)
    make = await anext(apps)
    api = await make(sql_url, PlainTokensProvider(), clock=clock, public_base_url=PUBLIC,
                     auth_failures_per_minute=1_000_000, **CHEAP_HASHING,
                     environ={"PARLEY_CARRIER_REQUEST_TIMEOUT_SECONDS": str(carrier_timeout)})

    async def deliver(url: str, headers: dict[str, str], body: bytes) -> int:
        return await deliver_to(api, url, headers, body)

    emulator.deliver = deliver
    tenant = await api.tenant()
    created = await api.client.post("/v2/telephony/providers", headers=tenant.headers, json={
        "name": "Telnyx", "type": "telnyx", "credentials": emulator.credentials(),
        "settings": {"api_base_url": emulator.base_url}, "is_default": True})
    assert created.status_code == 201, created.text
    provider = created.json()["data"]
    number = unique_phone()
    bought = await api.client.post("/v2/telephony/phone-numbers", headers=tenant.headers, json={
        "provider_id": provider["id"], "phone_number": number, "purchase": True,
        "capabilities": {"voice": True, "sms": True}})
    assert bought.status_code == 201, (bought.text, [(r.method, r.path) for r in emulator.requests])
    try:
        yield Telnyx(api, clock, tenant, emulator, provider, number)
    finally:
        await close_workers()
        with contextlib.suppress(StopAsyncIteration):
            await anext(apps)
        await emulator.close()


@pytest.fixture
async def telnyx(tmp_root: Path, app_pool: AppPool, sql_url: str) -> AsyncIterator[Telnyx]:
    async for world in telnyx_world(tmp_root, app_pool, sql_url):
        yield world
