"""The widget in a real browser: a partner page on another origin embeds /widget.js from a real `parley serve`
with a token minted for that page's origin; a visitor types a simulator number and asks for a call, and the call
appears in the campaign. A visitor with a microphone (chromium's fake one) presses "Talk now": a web call with the
campaign's agent, which greets them, until they hang up."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.conftest import SCREENSHOTS
from tests.browser.microphone import launch_arguments, script_wav
from tests.processes import Server, free_port, parley_json, sqlite_env, until

pytestmark = pytest.mark.slow

PHONE = "+1555010000"


def _partner_page(api_base: str, token: str) -> bytes:
    """A partner's page: some content and the widget embedded in three lines of HTML."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Acme Solar</title>
<style>body{{font-family:Georgia,serif;background:#f4f1ea;margin:0;padding:40px}}
main{{display:flex;gap:48px;align-items:flex-start}} article{{max-width:420px}}</style></head>
<body><main><article><h1>Acme Solar</h1><p>Panels for every roof. Questions? Ask for a call.</p></article>
<div id="parley-widget"></div>
<script src="{api_base}/widget.js" data-token="{token}" data-target="#parley-widget" async></script>
</main></body></html>""".encode()


@pytest.fixture
def partner_site() -> Iterator[tuple[str, dict[str, bytes]]]:
    """A tiny web server on another loopback port: another origin than the API's."""
    pages: dict[str, bytes] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path)
            if self.path == "/favicon.ico":  # the page has none: no 404 in the console
                self.send_response(204)
                self.end_headers()
                return
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.end_headers()
            self.wfile.write(body or b"not found")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", pages
    finally:
        server.shutdown()
        server.server_close()


async def _json(client: httpx.AsyncClient, method: str, path: str, expected: int, **kwargs: Any) -> Any:
    response = await client.request(method, path, **kwargs)
    assert response.status_code == expected, response.text
    return response.json()["data"]


async def test_a_visitor_asks_for_a_call_from_a_partner_page(page, partner_site, tmp_path: Path  # type: ignore[no-untyped-def]
                                                             ) -> None:
    site, pages = partner_site
    env = sqlite_env(tmp_path)
    server = Server(env, tmp_path, log=tmp_path / "server.log")
    try:
        await server.ready(120)  # migrating a new database takes a while on a busy machine
        demo = await asyncio.to_thread(parley_json, ["admin", "demo-key"], env, tmp_path)
        headers = {"Authorization": f"Bearer {demo['key']}"}
        async with httpx.AsyncClient(base_url=f"{server.base}/v2", headers=headers, timeout=10) as api:
            agent = await _json(api, "POST", "/agents", 201, json={"name": "Riley", "prompt": "You call back."})
            await _json(api, "POST", f"/agents/{agent['id']}/publish", 200)
            campaign = await _json(api, "POST", "/campaigns", 201, json={
                "name": "Call me back", "agent_id": agent["id"], "timezone_mode": "campaign",
                "calling_hours": {"start": "00:00", "end": "24:00"}})
            await _json(api, "POST", f"/campaigns/{campaign['id']}/contacts", 201,
                        json={"contacts": [{"phone": "+1555010002"}]})
            await _json(api, "POST", f"/campaigns/{campaign['id']}/start", 200)
            minted = await _json(api, "POST", "/widget/tokens", 201,
                                 json={"campaign_id": campaign["id"], "allowed_origins": [site]})
            pages["/"] = _partner_page(server.base, minted["token"])

            problems: list[str] = []
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            await page.goto(f"{site}/")
            widget = page.locator("#parley-widget form")
            await widget.wait_for()
            await page.get_by_text("Talk to Riley").wait_for()  # the campaign's face, read with the token
            await page.fill("#pw-phone", PHONE)
            await page.fill("#pw-name", "Ada Lovelace")
            await page.click("#parley-widget button")
            await page.get_by_text("We are calling you now").wait_for()
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            await page.locator("#parley-widget").screenshot(path=str(SCREENSHOTS / "widget.png"))
            assert problems == [], problems
            # a page's own script may send a retry's key and its request id, and read when to retry
            seen = await page.evaluate("""async ([base, token]) => {
                const r = await fetch(base + "/v2/widget/campaign", {headers: {"Authorization": "Widget " + token,
                    "Idempotency-Key": "retry-1", "X-Request-ID": "from-the-page"}});
                return [r.status, r.headers.get("X-Request-ID"), r.headers.get("X-RateLimit-Remaining")];
            }""", [server.base, minted["token"]])
            assert seen[0] == 200 and seen[1] == "from-the-page" and seen[2] is not None, seen

            calls = await _json(api, "GET", f"/calls?campaign_id={campaign['id']}", 200)
            contacts = await _json(api, "GET", f"/campaigns/{campaign['id']}/contacts", 200)
            [visitor] = [c for c in contacts if c["phone"] == PHONE]
            assert visitor["name"] == "Ada Lovelace"
            assert [c for c in calls if c["contact_id"] == visitor["id"]], calls
    finally:
        server.stop()


GREETING = "Hello, this is Acme Solar. How can I help?"


async def test_a_visitor_talks_to_the_agent_with_talk_now(partner_site, tmp_path: Path  # type: ignore[no-untyped-def]
                                                          ) -> None:
    site, pages = partner_site
    wav = script_wav(tmp_path / "visitor.wav", 30.0)  # a visitor who listens
    # the test asks the API every 0.2 s: budgets that polling cannot spend
    env = sqlite_env(tmp_path, PARLEY_RATE_LIMIT_PER_MINUTE="10000", PARLEY_RATE_LIMIT_PER_HOUR="100000",
                     PARLEY_ORG_RATE_LIMIT_PER_MINUTE="10000", PARLEY_ORG_RATE_LIMIT_PER_HOUR="100000")
    server = Server(env, tmp_path, log=tmp_path / "server.log")
    try:
        await server.ready(120)
        demo = await asyncio.to_thread(parley_json, ["admin", "demo-key"], env, tmp_path)
        headers = {"Authorization": f"Bearer {demo['key']}"}
        async with httpx.AsyncClient(base_url=f"{server.base}/v2", headers=headers, timeout=30) as api:
            agent = await _json(api, "POST", "/agents", 201, json={
                "name": "Riley", "prompt": "You answer questions about solar panels.", "first_message": GREETING})
            await _json(api, "POST", f"/agents/{agent['id']}/publish", 200)
            campaign = await _json(api, "POST", "/campaigns", 201, json={
                "name": "Talk to us", "agent_id": agent["id"], "completion": "manual"})
            minted = await _json(api, "POST", "/widget/tokens", 201,
                                 json={"campaign_id": campaign["id"], "allowed_origins": [site]})
            pages["/"] = _partner_page(server.base, minted["token"])

            from playwright.async_api import async_playwright

            async with async_playwright() as playwright:
                browser = await playwright.chromium.launch(**launch_arguments(wav))  # type: ignore[arg-type]
                context = await browser.new_context()
                context.set_default_timeout(30_000)
                page = await context.new_page()
                problems: list[str] = []
                page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
                try:
                    await page.goto(f"{site}/")
                    await page.get_by_text("Talk to Riley").wait_for()
                    await page.click("#parley-widget button.talk")
                    await page.get_by_text("You are talking to the agent").wait_for()
                    await asyncio.sleep(5)  # the greeting
                    await page.get_by_role("button", name="Hang up").click()
                    await page.get_by_text("Call ended").wait_for()
                    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                    await page.locator("#parley-widget").screenshot(path=str(SCREENSHOTS / "widget-talk.png"))
                    assert problems == [], problems
                finally:
                    await context.close()
                    await browser.close()

            async def finished() -> dict[str, Any] | None:
                calls = await _json(api, "GET", f"/calls?agent_id={agent['id']}", 200)
                done = [c for c in calls if c["direction"] == "web" and c["call_log_id"]]
                return done[0] if done else None

            call = await until(finished, 30, "the web call to be finished")
            log = await _json(api, "GET", f"/call-logs/{call['call_log_id']}", 200)
        assert call["status"] == "completed", call
        assert log["transcript"][0] == {**log["transcript"][0], "role": "agent", "text": GREETING}, log
    finally:
        server.stop()
