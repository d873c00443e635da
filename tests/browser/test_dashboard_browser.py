"""The dashboard in a real browser against a real `parley serve` (its in-process worker runs the telephony
simulator): sign in, create an agent, publish it, place a call from the page (a field for each placeholder of its
prompt), watch it finish, play its recording, create and rotate an API key (the new secret shown once) and revoke
one, each after a confirmation, sign out. Screenshots of the main pages, at a laptop's
and a phone's size, are kept in var/screenshots/dashboard-*.png."""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import PHONE, SCREENSHOTS
from tests.processes import PARLEY, Server, parley_json, sqlite_env

pytestmark = pytest.mark.slow

EMAIL = "owner@example.com"
PASSWORD = "browser-test-password"
FINAL = ("completed", "busy", "no_answer", "failed", "voicemail", "cancelled", "transferred")


async def _shot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / f"dashboard-{name}.png"), full_page=True)


async def test_the_dashboard_in_a_browser(page, browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    env = sqlite_env(tmp_path, PARLEY_SECRET_KEY="browser-secret", PARLEY_ALLOW_LOOPBACK_TARGETS="true")
    await asyncio.to_thread(subprocess.run, [*PARLEY, "migrate"], env=env, cwd=tmp_path, check=True,
                            capture_output=True, timeout=120)
    org = await asyncio.to_thread(parley_json, ["admin", "create-org", "--name", "Acme Voice", "--plan",
                                                "enterprise"], env, tmp_path)
    await asyncio.to_thread(parley_json, ["admin", "create-user", "--org", str(org["id"]), "--email", EMAIL,
                                          "--password", PASSWORD], env, tmp_path)
    server = Server(env, tmp_path)
    try:
        await server.ready()
        base = f"{server.base}/dashboard"

        # signing in: a page that needs a session sends to the form, and back after it
        await page.goto(f"{base}/agents")
        assert page.url.startswith(f"{base}/login")
        await _shot(page, "login")
        await page.fill("input[name=email]", EMAIL)
        await page.fill("input[name=password]", "not the password")
        await page.click("button[type=submit]")
        assert "Email or password is not correct" in await page.content()
        await page.fill("input[name=password]", PASSWORD)
        await page.click("button[type=submit]")
        await page.wait_for_url(f"{base}/agents")
        cookies = {c["name"]: c for c in await page.context.cookies()}
        assert cookies["parley_session"]["httpOnly"] and cookies["parley_session"]["sameSite"] == "Lax"

        # an agent: created, published
        await page.fill("#create-agent input[name=name]", "Front desk")
        await page.fill("#create-agent textarea[name=prompt]",
                        "You are the front desk of Acme, calling about order {{order_id}}. Be brief.")
        await page.fill("#create-agent input[name=first_message]", "Hello, this is Acme.")
        await page.click("#create-agent button[type=submit]")
        await page.wait_for_url(re.compile(r".*/dashboard/agents/\d+.*"))
        assert "Agent Front desk created" in await page.content()
        await page.click("#publish")
        await page.wait_for_selector("#place-call")
        assert "Published version 1" in await page.content()
        await _shot(page, "agent")

        # a call from the page, watched until it is over, its recording played; the prompt's placeholder has a
        # field of its own, which the browser asks for before the form is sent
        placeholder = "#place-call input[name='custom.order_id']"
        assert await page.is_visible(placeholder)
        await page.fill("#place-call input[name=destination_phone]", "+14155550123")
        await page.fill("#place-call input[name=contact_name]", "Ada")
        await page.click("#place-call button[type=submit]")
        assert "/dashboard/agents/" in page.url  # not sent: the placeholder's field is required
        assert await page.eval_on_selector(placeholder, "input => input.validity.valueMissing")
        await page.fill(placeholder, "A-1042")
        await page.click("#place-call button[type=submit]")
        await page.wait_for_url(re.compile(r".*/dashboard/calls/[^/?]+.*"))
        await page.wait_for_function(
            "finals => finals.includes(document.querySelector('#call-status')?.textContent.trim())",
            arg=list(FINAL), timeout=60_000)
        await page.wait_for_selector("#recording")
        await page.wait_for_function(
            "() => { const a = document.querySelector('#recording'); return a.readyState >= 1 && a.duration > 0; }",
            timeout=15_000)
        duration = await page.eval_on_selector("#recording", "a => a.duration")
        assert duration > 0
        played = await page.eval_on_selector(
            "#recording", "a => { a.muted = true; return a.play().then(() => true, e => String(e)); }")
        assert played is True, played
        assert "agent" in (await page.inner_text(".transcript")).lower()
        await _shot(page, "call")
        await page.goto(f"{base}/calls")
        await _shot(page, "calls")

        # API keys: created, then rotated; each secret shown once
        await page.goto(f"{base}/api-keys")
        await page.fill("#create-key input[name=name]", "CI pipeline")
        await page.select_option("#create-key select[name=preset]", "read_only")
        await page.click("#create-key button[type=submit]")
        first = (await page.inner_text("#new-secret code")).strip()
        assert first.startswith("parley_sk_")
        await page.click("[data-rotate]")  # asks first, on a page of its own
        await page.wait_for_selector("#confirm-rotate")
        assert "keeps working for" in await page.inner_text("#confirm-rotate")
        await _shot(page, "api-key-rotate")
        await page.click("button[data-confirm=rotate]")
        second = (await page.inner_text("#new-secret code")).strip()
        assert second.startswith("parley_sk_") and second != first
        assert "keeps working until" in await page.inner_text("#new-secret")
        await _shot(page, "api-keys")
        await page.goto(f"{base}/api-keys")
        assert second not in await page.content() and first not in await page.content()
        # revoking asks too: cancelled, nothing happens; confirmed, the key is revoked
        revoke = page.locator("[data-revoke]").first
        key_id = await revoke.get_attribute("data-revoke")
        await revoke.click()
        await page.wait_for_selector("#confirm-revoke")
        assert "cannot be undone" in await page.inner_text("#confirm-revoke")
        await page.click("#confirm-revoke a:has-text('Cancel')")
        await page.wait_for_url(f"{base}/api-keys")
        await page.click(f"[data-revoke='{key_id}']")
        await page.click("button[data-confirm=revoke]")
        await page.wait_for_url(re.compile(r".*/dashboard/api-keys\?flash=.*"))
        assert "Key revoked" in await page.content()
        assert await page.locator(f"[data-revoke='{key_id}']").count() == 0

        # the overview, on a laptop and on a phone (the menu folds)
        await page.goto(base)
        assert "Call minutes" in await page.content()
        await _shot(page, "overview")
        phone = await browser.new_context(viewport=PHONE, is_mobile=True)
        await phone.add_cookies([{**cookies["parley_session"]}])
        small = await phone.new_page()
        await small.goto(base)
        assert not await small.is_visible("nav.nav")
        await _shot(small, "overview-phone")
        await small.click("label.nav-toggle-label")
        assert await small.is_visible("nav.nav")
        await _shot(small, "overview-phone-menu")
        await phone.close()

        # signing out ends the session: the pages send to the form again
        await page.click("header .account button[type=submit]")
        await page.wait_for_url(re.compile(r".*/dashboard/login.*"))
        assert "Signed out" in await page.content()
        await page.goto(f"{base}/agents")
        assert page.url.startswith(f"{base}/login")
    finally:
        server.stop()
