"""The dashboard's live views through HTTP (Server-Sent Events, ``entrypoints/http/dashboard/live.py``): a change
produces an update on the open stream, the stream is one request of the user's live budget however many
updates it sends (never the request budget), it needs the session, and it ends when the session ends."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from adapters.memory.clock import ManualClock
from entrypoints.http.dashboard import live
from entrypoints.http.dashboard.gate import LIVE_WINDOWS
from tests.http.dashboard_support import COOKIE, cookie, login, new_user
from tests.http.test_campaigns_http import new_campaign
from tests.support.apps import Api, ApiFactory

WAIT = 5.0


def quick_ticks(monkeypatch: pytest.MonkeyPatch) -> threading.Semaphore:
    """Streams read their view every 50 ms rather than every half second (for what does not depend on how often);
    the semaphore returned is released once for each render of a view (a stream's first, then one a tick)."""
    renders, render_block = threading.Semaphore(0), live.render_block

    def counted(*args: Any) -> str:
        html = render_block(*args)
        renders.release()
        return html

    monkeypatch.setattr(live, "TICK_SECONDS", 0.05)
    monkeypatch.setattr(live, "render_block", counted)
    return renders


@dataclass
class Stream:
    """An open event stream, read as the browser's ``EventSource`` would (the app runs on the test's event loop)."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    events: asyncio.Queue[tuple[str, str]] = field(default_factory=asyncio.Queue)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    buffer: str = ""

    def feed(self, chunk: str) -> None:
        self.buffer += chunk.replace("\r\n", "\n")
        while "\n\n" in self.buffer:
            block, self.buffer = self.buffer.split("\n\n", 1)
            name, data = "message", []
            for line in block.split("\n"):
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    data.append(line[6:])
            if data:
                self.events.put_nowait((name, "\n".join(data)))

    async def next(self, name: str = "update") -> str:
        while True:
            got, data = await asyncio.wait_for(self.events.get(), WAIT)
            if got == name:
                return data


@asynccontextmanager
async def opened(api: Api, path: str, session: str) -> AsyncIterator[Stream]:
    """``GET path`` on the app itself (ASGI, on the test's loop), its body read as it comes; the client goes away
    at the end."""
    stream, gone = Stream(), asyncio.Event()
    raw = path.encode()
    scope: dict[str, Any] = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
        "path": path.split("?")[0], "raw_path": raw.split(b"?")[0], "root_path": "",
        "query_string": raw.split(b"?", 1)[1] if b"?" in raw else b"",
        "headers": [(b"host", b"testserver"), (b"accept", b"text/event-stream"),
                    (b"cookie", f"{COOKIE}={session}".encode())],
        "client": ("127.0.0.1", 50000), "server": ("testserver", 80), "state": {}}

    async def receive() -> dict[str, Any]:
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            stream.status = message["status"]
            stream.headers = {k.decode().lower(): v.decode() for k, v in message.get("headers", [])}
            stream.started.set()
        elif message["type"] == "http.response.body":
            stream.feed(message.get("body", b"").decode())

    task = asyncio.create_task(api.client.app(scope, receive, send))  # type: ignore[arg-type]
    try:
        await asyncio.wait_for(stream.started.wait(), WAIT)
        yield stream
    finally:
        gone.set()
        await asyncio.wait_for(task, WAIT)


async def test_a_new_campaign_appears_on_the_open_campaigns_stream(any_api: Api) -> None:
    user = await new_user(any_api)
    session, _ = await login(any_api, user)
    page = await any_api.client.get("/dashboard/campaigns", headers=cookie(session))
    assert page.status_code == 200 and 'data-live="/dashboard/live/campaigns"' in page.text and "live.js" in page.text
    async with opened(any_api, "/dashboard/live/campaigns", session) as stream:
        assert stream.status == 200 and stream.headers["content-type"].startswith("text/event-stream")
        assert stream.headers["cache-control"] == "no-store"
        first = await stream.next()
        assert "No campaigns yet" in first and "<html" not in first
        await new_campaign(any_api, user.tenant, name="Autumn renewals")
        loop = asyncio.get_running_loop()
        began = loop.time()
        changed = await stream.next()
        assert "Autumn renewals" in changed and "No campaigns yet" not in changed
        assert loop.time() - began < 1.0  # within a second of the change (a tick is half a second)


async def test_a_stream_is_one_live_request_and_never_the_request_budget(
        make_api: ApiFactory, sql_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    renders = quick_ticks(monkeypatch)
    clock = ManualClock(datetime(2026, 5, 4, 10, 0, 10, tzinfo=UTC))
    api = await make_api(sql_url, clock=clock, rate_limit_per_minute=3, rate_limit_per_hour=100)
    user = await new_user(api)
    campaign = await new_campaign(api, user.tenant)
    session, _ = await login(api, user)
    page = await api.client.get(f"/dashboard/campaigns/{campaign['id']}", headers=cookie(session))  # 1 of 3
    assert page.status_code == 200 and f'data-live="/dashboard/live/campaigns/{campaign["id"]}"' in page.text
    path = f"/dashboard/live/campaigns/{campaign['id']}"
    async with opened(api, path, session) as stream:
        assert "Progress" in await stream.next()
        for _ in range(4):  # the first render, then three ticks: it reads the campaign again each, nothing is counted
            assert await asyncio.to_thread(renders.acquire, True, WAIT)
    # the connection counted once in the live budget: the rest of it opens as many streams
    for _ in range(LIVE_WINDOWS[0].limit - 1):
        async with opened(api, path, session) as again:
            assert again.status == 200
    async with opened(api, path, session) as over:
        assert over.status == 429 and over.headers["retry-after"]
    # the user's request budget is untouched by the streams: two more pages (2 and 3 of 3), then the limit
    for target in ("/dashboard", "/dashboard/agents"):
        assert (await api.client.get(target, headers=cookie(session))).status_code == 200, target
    assert (await api.client.get("/dashboard/calls", headers=cookie(session))).status_code == 429
    # and a stream needs the session like every page
    signed_out = await api.client.get(path, follow_redirects=False)
    assert signed_out.status_code == 303 and signed_out.headers["location"].startswith("/dashboard/login")


async def test_the_stream_ends_when_the_session_ends(make_api: ApiFactory, sql_url: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    quick_ticks(monkeypatch)  # the end is found at the next tick
    clock = ManualClock(datetime(2026, 5, 4, 10, 0, 10, tzinfo=UTC))
    api = await make_api(sql_url, clock=clock)
    user = await new_user(api)
    session, csrf = await login(api, user)
    async with opened(api, "/dashboard/live/calls", session) as stream:
        assert "No calls yet" in await stream.next()
        clock.advance(seconds=31 * 60)  # idle expiry: the open stream does not keep the session alive
        assert await stream.next("end") == "expired"
    session, csrf = await login(api, user)
    async with opened(api, "/dashboard/live/appointments?date=2026-05-04", session) as stream:
        assert "No appointments on this day" in await stream.next()
        out = await api.client.post("/v2/auth/logout", headers={**cookie(session), "X-CSRF-Token": csrf})
        assert out.status_code == 204
        assert await stream.next("end") == "expired"


async def test_a_stream_of_another_organizations_campaign_or_call_is_a_404_page(any_api: Api) -> None:
    owner, other = await new_user(any_api), await new_user(any_api)
    campaign = await new_campaign(any_api, owner.tenant)
    session, _ = await login(any_api, other)
    for path in (f"/dashboard/live/campaigns/{campaign['id']}", "/dashboard/live/calls/no-such-call"):
        response = await any_api.client.get(path, headers=cookie(session))
        assert response.status_code == 404 and "text/html" in response.headers["content-type"], path
        assert campaign["name"] not in response.text
