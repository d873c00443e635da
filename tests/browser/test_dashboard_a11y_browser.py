"""Every dashboard page on a phone and for assistive technology, in chromium over a real `parley serve`:

- at a phone's width (390 px) no page scrolls sideways, nor does any table in it (tables become labelled cards
  below 760 px: `table.stack` and `data-label`, CSS only);
- axe-core (vendored, `tests/browser/vendor/axe-core`, injected into the page: nothing fetched at run time) finds
  no serious or critical violation on any page, at a laptop's and a phone's width;
- the forms work with the keyboard alone (creating an agent by Tab and Enter), and a destructive action (revoking
  a key) asks first.

The pages: the sign-in form, every section the navigation lists, and the detail, edit and confirmation pages."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from entrypoints.http.dashboard.navigation import SECTIONS
from tests.browser.test_dashboard_pages_browser import LAPTOP, PASSWORD, PHONE, closed_invoice, seed
from tests.processes import Server, free_port, parley_json, sqlite_env, until

pytestmark = pytest.mark.slow

AXE = (Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js").read_text(encoding="utf-8")
SERIOUS = ("serious", "critical")
OVERFLOW = """() => {
  const page = document.documentElement;
  const wide = [...document.querySelectorAll('.table-wrap, table, pre')]
    .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.className || e.tagName);
  return {page: page.scrollWidth - page.clientWidth, wide};
}"""


async def violations(page: Any) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page (the script evaluated in the page, so the page's
    Content-Security-Policy, which allows only its own scripts, stays as it is)."""
    if not await page.evaluate("() => typeof window.axe !== 'undefined'"):
        await page.evaluate(AXE)
    found = await page.evaluate("async () => (await axe.run(document, {resultTypes: ['violations']})).violations")
    return [{"id": v["id"], "impact": v["impact"], "help": v["help"],
             "nodes": [n["target"] for n in v["nodes"]][:5]} for v in found if v["impact"] in SERIOUS]


async def check(page: Any, url: str, problems: list[str]) -> None:
    """The page at a laptop's width, then narrowed to a phone's without loading it again (its layout is CSS alone:
    no script reads the width), so axe-core is injected once a page."""
    await page.set_viewport_size(LAPTOP)
    await page.goto(url)
    for size, viewport in (("laptop", LAPTOP), ("phone", PHONE)):
        await page.set_viewport_size(viewport)
        for found in await violations(page):
            problems.append(f"{url} ({size}): {json.dumps(found)}")
        if size == "phone":
            overflow = await page.evaluate(OVERFLOW)
            if overflow["page"] > 0 or overflow["wide"]:
                problems.append(f"{url} (phone): scrolls sideways {overflow}")
    await page.set_viewport_size(LAPTOP)


async def test_every_page_on_a_phone_and_for_assistive_technology(page: Any, tmp_path: Path) -> None:
    env = sqlite_env(tmp_path, PARLEY_SIMULATOR_SPEED="2", PARLEY_ALLOW_LOOPBACK_TARGETS="true",
                     PARLEY_SECRET_KEY="browser-secret", PARLEY_RATE_LIMIT_PER_MINUTE="10000",
                     PARLEY_RATE_LIMIT_PER_HOUR="100000")
    demo = await asyncio.to_thread(parley_json, ["admin", "demo-key"], env, tmp_path)
    await asyncio.to_thread(parley_json, ["admin", "create-user", "--org", str(demo["organization_id"]),
                                          "--email", "ops@example.com", "--password", PASSWORD], env, tmp_path)
    server = Server(env, tmp_path, log=tmp_path / "server.log")
    problems: list[str] = []
    try:
        await server.ready()
        async with httpx.AsyncClient(base_url=server.base, timeout=15,
                                     headers={"Authorization": f"Bearer {demo['key']}"}) as client:
            seeded = await seed(client)
            await closed_invoice(tmp_path, demo["organization_id"])
            agent_id = seeded["campaign"]["agent_id"]
            call = (await client.post("/v2/calls", json={"bot_id": str(agent_id),
                                                         "destination_phone": "+14155550777"})).json()["data"]
            invoices = (await client.get("/v2/billing/invoices")).json()["data"]
            # a draft that differs from version 1 (the diff table has changed lines), and a knowledge base
            assert (await client.patch(f"/v2/agents/{agent_id}", json={
                "prompt": "Greet the caller.\nAsk how to help.", "voice": {"speed": 1.2}})).status_code == 200
            kb = (await client.post("/v2/knowledge-bases", json={"name": "Policies", "agent_id": agent_id}
                                    )).json()["data"]
            await client.post(f"/v2/knowledge-bases/{kb['id']}/documents", files=[
                ("files", ("refunds.txt", b"Refunds are paid within five days with the receipt."))])
            # day-to-day records of the SMS, leads, Do-Not-Call and phone numbers sections
            dnc = (await client.post("/v2/dnc/lists", json={"name": "Complaints"})).json()["data"]
            await client.post(f"/v2/dnc/lists/{dnc['id']}/entries", json={"phone_numbers": ["+14155550188"],
                                                                        "reason": "asked on a call"})
            number = (await client.post("/v2/telephony/phone-numbers", json={
                "phone_number": "+14155550123", "label": "Front desk", "inbound_agent_id": agent_id,
                "capabilities": {"voice": True, "sms": True}})).json()["data"]
            await client.post("/v2/sms", json={"to": "+14155550199", "body": "Your table is ready"})
            lead = (await client.post("/v2/leads", json={"phone": "+14155550177", "agent_id": agent_id,
                                                         "name": "Ada", "custom_data": {"plan": "gold"}})
                    ).json()["data"]
            # a trigger with a run (matched: its trace and its action's result), a calendar, a schedule
            calendar = (await client.get("/v2/scheduling/calendars")).json()["data"][0]
            trigger = (await client.post("/v2/triggers", json={
                "name": "Bookings", "event": "appointment.booked",
                "conditions": {"all": [{"field": "data.status", "op": "eq", "value": "confirmed"}]},
                "actions": [{"type": "chat_message", "config": {"url": f"http://127.0.0.1:{free_port()}/chat",
                                                                 "text": "Booked {{data.attendee_name}}"}}]}
                                        )).json()["data"]
            slots = (await client.get("/v2/scheduling/availability", params={
                "calendar_id": calendar["id"], "start": seeded["day"]})).json()["data"]["slots"]
            booked = (await client.post("/v2/scheduling/appointments", json={
                "calendar_id": calendar["id"], "slot_start": slots[-1]["start"], "attendee_name": "Grace"}
                                        )).json()["data"]

            async def ran() -> Any:
                return (await client.get(f"/v2/triggers/{trigger['id']}/runs")).json()["data"]

            await until(ran, 30, "the trigger's run")
            schedule = (await client.post("/v2/schedules", json={
                "name": "Support", "timezone": "Europe/Berlin",
                "weekly": [{"day": d, "start": "09:00", "end": "17:00"} for d in range(5)],
                "exceptions": [{"date": "2026-12-24", "closed": True}], "holidays": {"country": "DE"}}
                                         )).json()["data"]
            base = f"{server.base}/dashboard"

            await check(page, f"{base}/login", problems)
            await page.fill("input[name=email]", "ops@example.com")
            await page.fill("input[name=password]", PASSWORD)
            await page.click("button[type=submit]")
            await page.wait_for_url(f"{base}")

            # a form with the keyboard alone: the new agent form, field to field by Tab, sent by Enter
            await page.goto(f"{base}/agents")
            await page.focus("#create-agent input[name=name]")
            await page.keyboard.type("Keyboard agent")
            await page.keyboard.press("Tab")
            await page.keyboard.type("You answer briefly.")
            await page.focus("#create-agent button[type=submit]")
            await page.keyboard.press("Enter")
            await page.wait_for_selector(".flash")
            assert await page.locator("h1:has-text('Keyboard agent')").count() == 1

            # a destructive action asks first: Revoke opens a page that says what happens, and Cancel leaves it
            await page.goto(f"{base}/api-keys")
            await page.click("a[data-revoke]")
            assert "/revoke" in page.url and await page.locator("text=cannot be undone").count() >= 1
            confirm_page = page.url

            urls = [section.url for section in SECTIONS if section.built] + [
                f"{base}/agents/{agent_id}", f"{base}/calls/{call['id']}",
                f"{base}/appointments?date={seeded['day']}", f"{base}/campaigns/{seeded['campaign']['id']}",
                f"{base}/webhooks/{seeded['hook']['id']}", confirm_page,
                # editing and the confirmation pages of day-to-day work
                f"{base}/agents/{agent_id}/edit", f"{base}/agents/{agent_id}/versions",
                f"{base}/agents/{agent_id}/versions/1", f"{base}/agents/{agent_id}/versions/1/restore",
                f"{base}/campaigns/{seeded['campaign']['id']}/import",
                f"{base}/campaigns/{seeded['campaign']['id']}/cancel",
                f"{base}/webhooks/{seeded['hook']['id']}/edit", f"{base}/webhooks/{seeded['hook']['id']}/delete",
                f"{base}/knowledge-bases/{kb['id']}", f"{base}/knowledge-bases/{kb['id']}?q=refund",
                f"{base}/dnc/{dnc['id']}", f"{base}/dnc/{dnc['id']}/import", f"{base}/dnc?phone=%2B14155550188",
                f"{base}/dnc/{dnc['id']}/entries/%2B14155550188/remove", f"{base}/leads/{lead['id']}",
                f"{base}/phone-numbers/{number['id']}/delete", f"{base}/sms?direction=outbound",
                f"{base}/triggers/{trigger['id']}", f"{base}/triggers/{trigger['id']}/edit",
                f"{base}/triggers/{trigger['id']}/delete", f"{base}/calendars/{calendar['id']}",
                f"{base}/appointments/{booked['id']}/reschedule", f"{base}/appointments/{booked['id']}/cancel",
                f"{base}/schedules/{schedule['id']}", f"{base}/schedules/{schedule['id']}/edit",
                f"{base}/schedules/{schedule['id']}/delete",
                # the user's own pages, asking for the password again, a reset's request, and the API reference
                f"{base}/account", f"{base}/account/mfa", f"{base}/verify", f"{base}/password-reset",
                f"{server.base}/v2/reference"]
            urls += [f"{base}/billing/invoices/{invoice['id']}" for invoice in invoices[:1]]
            for url in urls:
                await check(page, url if url.startswith("http") else f"{server.base}{url}", problems)
    finally:
        server.stop()
    assert not problems, "\n".join(problems)
