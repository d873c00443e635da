"""The dashboard's appointments, campaigns, webhooks and billing pages in a real browser, over a real `parley serve`
(with its worker and the telephony simulator sped up): sign in, open each page, add a payment method, press
redeliver, watch a running campaign's progress move and a new call appear without reloading the page. Each page
is kept as a screenshot at a laptop's and a phone's size in var/screenshots/."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest

from application.ports.billing import BillingRepository
from application.ports.platform import UnitOfWork
from domain.billing import build_invoice
from domain.usage import period_bounds
from entrypoints.ioc import build_container
from entrypoints.settings import Settings
from tests.browser.conftest import LAPTOP, PHONE, SCREENSHOTS
from tests.processes import Server, free_port, parley_json, sqlite_env, until

pytestmark = pytest.mark.slow

PASSWORD = "correct horse battery"


async def shots(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for size, viewport in (("laptop", LAPTOP), ("phone", PHONE)):
        await page.set_viewport_size(viewport)
        await page.screenshot(path=str(SCREENSHOTS / f"dashboard-{name}-{size}.png"), full_page=True)
    await page.set_viewport_size(LAPTOP)


async def seed(client: httpx.AsyncClient) -> dict[str, Any]:
    """A calendar with an appointment, a campaign of ten contacts (one call at a time), and a webhook whose
    test event fails (nothing listens on its port)."""
    calendar = (await client.post("/v2/scheduling/calendars", json={
        "name": "Front desk", "timezone": "America/New_York", "horizon_days": 30})).json()["data"]
    for weekday in range(7):
        await client.post(f"/v2/scheduling/calendars/{calendar['id']}/rules",
                          json={"weekday": weekday, "start_time": "09:00", "end_time": "17:00"})
    now = datetime.now(UTC)
    free = (await client.get("/v2/scheduling/availability", params={
        "calendar_id": calendar["id"], "start": (now + timedelta(days=1)).isoformat(),
        "end": (now + timedelta(days=3)).isoformat()})).json()["data"]["slots"]
    booked = await client.post("/v2/scheduling/appointments", json={
        "calendar_id": calendar["id"], "slot_start": free[0]["start"], "attendee_name": "Ada Lovelace",
        "attendee_phone": "+14155550199"})
    assert booked.status_code == 201, booked.text
    agent = (await client.post("/v2/agents", json={"name": "Caller"})).json()["data"]
    assert (await client.post(f"/v2/agents/{agent['id']}/publish")).status_code == 200
    campaign = (await client.post("/v2/campaigns", json={
        "name": "Spring follow-ups", "agent_id": agent["id"], "max_concurrent_calls": 1,
        "timezone_mode": "campaign", "calling_hours": {"start": "00:00", "end": "24:00"}})).json()["data"]
    added = await client.post(f"/v2/campaigns/{campaign['id']}/contacts", json={
        "contacts": [{"phone": f"+1415555{n:04d}", "name": f"Contact {n}"} for n in range(1200, 1210)]})
    assert added.status_code in (200, 201), added.text
    hook = (await client.post("/v2/webhooks", json={
        "url": f"http://127.0.0.1:{free_port()}/hook", "events": ["call.ended"], "name": "CRM"})).json()["data"]
    assert (await client.post(f"/v2/webhooks/{hook['id']}/test")).status_code in (200, 201, 202)

    async def logged() -> Any:
        return (await client.get(f"/v2/webhooks/{hook['id']}/logs")).json()["data"]

    await until(logged, 30, "the test event's failed attempt")
    local = datetime.fromisoformat(free[0]["start"].replace("Z", "+00:00")).astimezone(ZoneInfo("America/New_York"))
    return {"campaign": campaign, "hook": hook, "day": local.date().isoformat()}


async def closed_invoice(tmp_path: Path, organization_id: int) -> None:
    """An open invoice for an earlier period, as the period close makes it (written on the server's database)."""
    settings = Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'parley.db'}", var_dir=tmp_path / "var",
                        secret_key="browser-secret")
    container = build_container(settings)
    try:
        start, end = period_bounds("2026-01")
        async with container() as request:
            await (await request.get(BillingRepository)).add_invoices([build_invoice(
                organization_id, "business", "2026-01", start, end, {"call_minutes": 2750, "sms_segments": 120},
                end + timedelta(hours=1))])
            await (await request.get(UnitOfWork)).commit()
    finally:
        await container.close()


async def test_the_dashboard_pages_in_a_browser(page: Any, tmp_path: Path) -> None:
    env = sqlite_env(tmp_path, PARLEY_SIMULATOR_SPEED="2", PARLEY_ALLOW_LOOPBACK_TARGETS="true",
                     PARLEY_SECRET_KEY="browser-secret", PARLEY_RATE_LIMIT_PER_MINUTE="10000",
                     PARLEY_RATE_LIMIT_PER_HOUR="100000")
    demo = await asyncio.to_thread(parley_json, ["admin", "demo-key"], env, tmp_path)
    await asyncio.to_thread(parley_json, ["admin", "create-user", "--org", str(demo["organization_id"]),
                                          "--email", "ops@example.com", "--password", PASSWORD], env, tmp_path)
    server = Server(env, tmp_path, log=tmp_path / "server.log")
    try:
        await server.ready()
        async with httpx.AsyncClient(base_url=server.base, timeout=15,
                                     headers={"Authorization": f"Bearer {demo['key']}"}) as client:
            seeded = await seed(client)
            await closed_invoice(tmp_path, demo["organization_id"])
            base = f"{server.base}/dashboard"
            await page.goto(f"{base}/appointments")
            await page.fill("input[name=email]", "ops@example.com")
            await page.fill("input[name=password]", PASSWORD)
            await page.click("button[type=submit]")
            await page.wait_for_url(f"{base}/appointments")

            # appointments: the day of the booking, then the day after it (empty)
            await page.goto(f"{base}/appointments?date={seeded['day']}")
            assert await page.locator("text=Ada Lovelace").count() == 1
            await shots(page, "appointments")
            await page.click("a[rel=next]")
            assert await page.locator("text=No appointments on this day").count() == 1

            # webhooks: the list, the log, redeliver
            await page.goto(f"{base}/webhooks")
            await page.click("text=CRM")
            await page.wait_for_url(f"{base}/webhooks/{seeded['hook']['id']}")
            assert await page.locator("text=webhook.test").count() >= 1
            await shots(page, "webhook")
            await page.click("button:has-text('Redeliver')")
            await page.wait_for_selector(".flash")
            assert "queued to be sent again" in await page.inner_text(".flash")

            # billing: add a card from the select
            await page.goto(f"{base}/billing")
            assert await page.locator("text=No payment method yet").count() == 1
            await page.select_option("select[name=token]", "pm_card_mastercard")
            await page.click("button:has-text('Add card')")
            await page.wait_for_selector(".flash")
            assert await page.locator("text=•••• 4444").count() == 1
            await shots(page, "billing")
            await page.click("table a:has-text('2026')")
            assert await page.locator("text=Pay now").count() == 1
            await shots(page, "invoice")
            await page.click("button:has-text('Pay now')")
            await page.wait_for_selector(".flash")
            assert "paid" in await page.inner_text(".flash")
            assert await page.locator(".pill.paid").count() == 1

            # campaigns: start it from its page, and watch the progress move without a reload
            campaign_id = seeded["campaign"]["id"]
            await page.goto(f"{base}/campaigns")
            await shots(page, "campaigns-list")
            await page.click("text=Spring follow-ups")
            await page.click("button:has-text('Start')")
            await page.wait_for_url(f"{base}/campaigns/{campaign_id}?**")
            marker = await page.evaluate("() => { window.__same_page = true; return true; }")
            assert marker
            first = await page.get_attribute("[data-progress]", "data-progress")

            async def moved() -> bool:
                now = await page.get_attribute("[data-progress]", "data-progress")
                return bool(now and now != first and int(now.split("/")[0]) > 0)

            await until(moved, 60, "the campaign's progress to move on the page")
            assert await page.evaluate("() => window.__same_page === true"), "the page was reloaded"
            await shots(page, "campaign")
            api_campaign = (await client.get(f"/v2/campaigns/{campaign_id}")).json()["data"]
            assert api_campaign["status"] in ("running", "completed")
            await page.goto(f"{base}/campaigns")
            await shots(page, "campaigns-list")

            # calls: a call placed meanwhile appears on the open list without a reload (Server-Sent Events)
            await page.goto(f"{base}/calls")
            await page.evaluate("() => { window.__same_page = true; }")
            placed = await client.post("/v2/calls", json={"bot_id": str(seeded["campaign"]["agent_id"]),
                                                          "destination_phone": "+14155550777"})
            assert placed.status_code in (200, 201), placed.text
            await page.wait_for_selector("#live >> text=+14155550777", timeout=5000)
            assert await page.evaluate("() => window.__same_page === true"), "the page was reloaded"
    finally:
        server.stop()
