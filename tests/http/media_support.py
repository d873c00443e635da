"""Helpers for the media-stream tests: a call that is ringing with a stream token, and opening its stream."""

from __future__ import annotations

import asyncio
import contextlib
import math
import struct
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import httpx
from dishka import Provider, Scope

from application.ports.calls import CallRepository
from application.ports.media import ConversationOutcome, ConversationRuntime, MediaStreamTokens
from application.ports.platform import UnitOfWork
from domain.calls import Call
from entrypoints.asgi_app import http_container
from entrypoints.settings import Settings
from tests.support.apps import Api, AppPool, Tenant
from tests.support.emulators.media_client import AsgiWebSocket, MediaStreamCaller


@dataclass
class MediaApp:
    """An app whose requests and websockets run on the test's event loop (its database connections too), with an
    httpx client and the ASGI app the media streams connect to."""

    api: Api
    app: Any

    async def close(self) -> None:
        await self.api.close_worker()
        await self.api.close_admin()
        await self.api.client.aclose()  # type: ignore[attr-defined]


@contextlib.asynccontextmanager
async def media_app(app_pool: AppPool, tmp_root: Path, database_url: str, *providers: Provider,
                    **settings: Any) -> AsyncIterator[MediaApp]:
    base = Settings(database_url=database_url, var_dir=tmp_root / "var", secret_key="test-secret-key",
                    allow_loopback_targets=True, **settings)
    app, release = await app_pool.lend_app(base, http_container(base, *providers))
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://parley.test")
    served = MediaApp(Api(client, base, None, providers), app)  # type: ignore[arg-type]
    try:
        yield served
    finally:
        await served.close()
        await release()


@dataclass
class RingingCall:
    tenant: Tenant
    call_id: str
    token: str

    @property
    def path(self) -> str:
        return f"/v2/media-streams/{self.token}"


async def ringing_call(served: MediaApp, *, first_message: str | None = "Hello from Parley", status: str = "ringing",
                       token_at: datetime | None = None) -> RingingCall:
    """A call of a new organization, ringing at the carrier, and its stream's token (issued ``token_at``)."""
    api = served.api
    tenant = await api.tenant()
    agent = (await api.client.post("/v2/agents", json={"name": "Media", "prompt": "Be brief"},
                                   headers=tenant.headers)).json()["data"]
    now = datetime.now(UTC)
    call_id = str(uuid.uuid4())
    async with api.worker()() as unit:
        await (await unit.get(CallRepository)).add(Call(
            id=call_id, organization_id=tenant.organization_id, agent_id=int(agent["id"]),
            destination_phone="+15005550006", from_phone="+15005550001", status=status,
            first_message=first_message, max_duration_seconds=600, created_at=now, updated_at=now,
            started_at=now if status != "queued" else None, deadline_at=now + timedelta(minutes=12),
            telephony_ref="CAtest" if status != "queued" else None))
        token = await (await unit.get(MediaStreamTokens)).issue(call_id, tenant.organization_id, token_at or now)
        await (await unit.get(UnitOfWork)).commit()
    return RingingCall(tenant, call_id, token)


async def open_stream(served: MediaApp, path: str, carrier: Literal["twilio", "telnyx"] = "twilio",
                      **options: Any) -> MediaStreamCaller:
    socket = await AsgiWebSocket.connect(served.app, path)
    caller = MediaStreamCaller(socket, carrier, **options)
    await caller.start()
    return caller


def sine(milliseconds: int, frequency: float = 300.0, amplitude: int = 8000) -> bytes:
    count = 8 * milliseconds
    return struct.pack(f"<{count}h", *(int(amplitude * math.sin(2 * math.pi * frequency * i / 8000))
                                       for i in range(count)))


async def call_of(served: MediaApp, call: RingingCall) -> dict[str, Any]:
    response = await served.api.client.get(f"/v2/calls/{call.call_id}", headers=call.tenant.headers)
    assert response.status_code == 200, response.text
    return dict(response.json()["data"])


async def ended_call(served: MediaApp, call: RingingCall, within: float = 10.0) -> dict[str, Any]:
    """The call once it is final (the session finishes it just after the stream closes)."""
    loop = asyncio.get_running_loop()
    until = loop.time() + within
    while True:
        data = await call_of(served, call)
        if data["status"] not in ("queued", "ringing", "in_progress") or loop.time() > until:
            return data
        await asyncio.sleep(0.02)


class RuntimeOverride(Provider):
    """The app's conversation runtime replaced by a test's."""

    def __init__(self, runtime: Any) -> None:
        super().__init__()
        self.runtime = runtime
        self.provide(self._runtime, provides=ConversationRuntime, scope=Scope.APP)

    def _runtime(self) -> ConversationRuntime:
        return self.runtime  # type: ignore[no-any-return]


class ScriptRuntime:
    """A runtime that runs ``script(session)`` and keeps what it saw."""

    def __init__(self, script: Any) -> None:
        self.script = script
        self.sessions: list[Any] = []

    async def run(self, session: Any) -> ConversationOutcome:
        self.sessions.append(session)
        return await self.script(session)  # type: ignore[no-any-return]


async def recording_of(served: MediaApp, call: RingingCall, call_log_id: int) -> bytes:
    link = await served.api.client.get(f"/v2/call-logs/{call_log_id}/recording", headers=call.tenant.headers)
    assert link.status_code == 200, link.text
    url = link.json()["data"]["url"]
    download = await served.api.client.get(url.replace("http://parley.test", ""))
    assert download.status_code == 200, download.text
    return download.content


async def outbox_of(served: MediaApp, call: RingingCall, event_type: str) -> list[dict[str, Any]]:
    """The call's events of one type in the outbox."""
    import sqlalchemy as sa

    from adapters.sql.tables import outbox_events
    from adapters.sql.uow import SqlUnitOfWork

    async with served.api.worker()() as unit:
        conn = await (await unit.get(SqlUnitOfWork)).connection()
        rows = await conn.execute(sa.select(outbox_events.c.data).where(
            outbox_events.c.organization_id == call.tenant.organization_id, outbox_events.c.type == event_type))
        return [dict(row.data) for row in rows if dict(row.data).get("id") == call.call_id]
