"""Helpers for the Twilio tests: an app whose public URL is https://parley.test, a Twilio emulator (a real HTTP
server on 127.0.0.1) as the provider's API, its callbacks routed to the app's test client, and a fake of the
media-stream tokens (the media endpoint is another feature's)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx

from adapters.memory.clock import ManualClock
from application.ports.media import MediaStreamTokens, StreamGrant
from entrypoints.features.carriers import CarrierSettings
from entrypoints.overrides import Pinned
from tests.http.calls_support import ApiWith, active_agent, unique_phone
from tests.support.apps import Api, Tenant
from tests.support.emulators.twilio import TwilioEmulator

PUBLIC = "https://parley.test"
REQUEST_TIMEOUT = 4.0
"""Parley's deadline for a request to the emulator (a loaded test machine answers well within it)."""
SHORT_TIMEOUT = 1.0
"""The deadline of the tests whose emulator hangs a request on purpose: each such request costs the test its
deadline in real time (the emulator, on 127.0.0.1, still answers the others well within it)."""
HANG = SHORT_TIMEOUT + 1.0
"""How long the emulator holds an answer it is told to hang (past the short deadline: an ambiguous request)."""
START = datetime(2026, 11, 27, 9, tzinfo=UTC)


class FakeStreamTokens:
    """Single-use tokens kept in memory (what the media feature's real ones promise)."""

    def __init__(self) -> None:
        self.issued: dict[str, tuple[str, int]] = {}
        self._n = itertools.count(1)

    async def issue(self, call_id: str, organization_id: int, now: datetime) -> str:
        token = f"tok-{next(self._n)}-{call_id[:8]}"
        self.issued[token] = (call_id, organization_id)
        return token

    async def redeem(self, token: str, now: datetime) -> StreamGrant | None:
        found = self.issued.pop(token, None)
        return StreamGrant(found[0], found[1], now) if found else None

    async def purge(self, before: datetime) -> int:
        return 0


@dataclass
class Line:
    """An app, a tenant with a default Twilio provider on the emulator, and a voice + SMS number there."""

    api: Api
    tenant: Tenant
    emulator: TwilioEmulator
    tokens: FakeStreamTokens
    provider: dict[str, Any]
    number: dict[str, Any] = field(default_factory=dict)

    @property
    def clock(self) -> ManualClock:
        assert isinstance(self.api.clock, ManualClock)
        return self.api.clock

    async def get(self, path: str) -> Any:
        response = await self.api.client.get(path, headers=self.tenant.headers)
        assert response.status_code == 200, response.text
        return response.json()["data"]


async def app(api_with: ApiWith, database_url: str, *, public: str | None = PUBLIC,
              request_timeout: float = REQUEST_TIMEOUT, **settings: Any) -> tuple[Api, FakeStreamTokens]:
    tokens = FakeStreamTokens()
    extra: dict[str, Any] = {"public_base_url": public} if public else {}
    api = await api_with(database_url, Pinned(MediaStreamTokens, tokens), clock=ManualClock(START),
                         sections=(CarrierSettings(request_timeout_seconds=request_timeout),), **extra, **settings)
    return api, tokens


def route_to(api: Api) -> Any:
    """Deliver the emulator's callbacks to the app's test client: the public URL's path and query, as sent."""

    async def deliver(url: str, params: dict[str, str], headers: dict[str, str]) -> httpx.Response:
        parts = urlsplit(url)
        assert url.startswith(PUBLIC), url
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        return await api.client.post(path, content=urlencode(params), headers={
            **headers, "Content-Type": "application/x-www-form-urlencoded"})

    return deliver


async def twilio_line(api: Api, tokens: FakeStreamTokens, emulator: TwilioEmulator, *, sms: bool = True,
                      **agent_fields: Any) -> tuple[Line, dict[str, Any]]:
    emulator.deliver = route_to(api)
    tenant = await api.tenant()
    created = await api.client.post("/v2/telephony/providers", headers=tenant.headers, json={
        "name": "Twilio", "type": "twilio", "credentials": emulator.credentials,
        "settings": {"api_base_url": emulator.url}, "is_default": True})
    assert created.status_code == 201, created.text
    line = Line(api, tenant, emulator, tokens, created.json()["data"])
    phone = unique_phone()
    emulator.own(phone)
    number = await api.client.post("/v2/telephony/phone-numbers", headers=tenant.headers, json={
        "phone_number": phone, "provider_id": line.provider["id"], "capabilities": {"voice": True, "sms": sms}})
    assert number.status_code == 201, number.text
    line.number = number.json()["data"]
    agent = await active_agent(api, tenant, **agent_fields)
    return line, agent
