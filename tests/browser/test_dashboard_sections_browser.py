"""Each dashboard section's main task done by hand in chromium, over a real `parley serve` (its worker, the
telephony simulator sped up), in one partner organization and one signed-in session:

create a knowledge base, upload a .txt document and find its passage with the search box; create a Do-Not-Call
list, add a number and find it; send an SMS and see it listed; add a lead that is called at once; see a number
added through the API on the phone numbers page (numbers are bought only from a carrier there); create a trigger
from its JSON fields, see it listed and disable it; create a calendar and add its hours; create a schedule;
subscribe a webhook (its secret shown once); create a client. Each outcome is checked on the page and through the
API. Each section's page is kept at 1280 and 390 px in var/screenshots/dashboard-<section>-<width>.png."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.conftest import LAPTOP, PHONE, SCREENSHOTS
from tests.processes import Server, free_port, parley_json, sqlite_env

pytestmark = pytest.mark.slow

OWNER = "owner@example.com"
PASSWORD = "owner's long password"


async def shots(page: Any, section: str) -> None:
    """The page at a laptop's and a phone's width (dashboard-<section>-<width>.png), then back at the laptop's."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for viewport in (LAPTOP, PHONE):
        await page.set_viewport_size(viewport)
        await page.screenshot(path=str(SCREENSHOTS / f"dashboard-{section}-{viewport['width']}.png"),
                              full_page=True)
    await page.set_viewport_size(LAPTOP)


async def flash(page: Any) -> str:
    await page.wait_for_selector(".flash")
    return str(await page.inner_text(".flash"))


async def data(client: httpx.AsyncClient, path: str, **params: Any) -> Any:
    answer = await client.get(path, params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]


async def test_each_sections_main_task_by_hand(page: Any, tmp_path: Path) -> None:
    env = sqlite_env(tmp_path, PARLEY_SIMULATOR_SPEED="2", PARLEY_ALLOW_LOOPBACK_TARGETS="true",
                     PARLEY_SECRET_KEY="browser-secret", PARLEY_RATE_LIMIT_PER_MINUTE="10000",
                     PARLEY_RATE_LIMIT_PER_HOUR="100000")
    org = await asyncio.to_thread(parley_json, ["admin", "create-org", "--name", "Northwind Agency", "--plan",
                                                "enterprise", "--type", "partner"], env, tmp_path)
    assert org["org_type"] == "partner"
    await asyncio.to_thread(parley_json, ["admin", "create-user", "--org", str(org["id"]), "--email", OWNER,
                                          "--password", PASSWORD, "--role", "owner"], env, tmp_path)
    key = await asyncio.to_thread(parley_json, ["admin", "create-key", "--org", str(org["id"]), "--scopes", "*"],
                                  env, tmp_path)
    server = Server(env, tmp_path, log=tmp_path / "server.log")
    try:
        await server.ready()
        base = f"{server.base}/dashboard"
        async with httpx.AsyncClient(base_url=f"{server.base}/v2", timeout=15,
                                     headers={"Authorization": f"Bearer {key['key']}"}) as api:
            # the agent the knowledge base belongs to and the lead is called by (published: it may call)
            agent = (await api.post("/agents", json={"name": "Front desk"})).json()["data"]
            assert (await api.post(f"/agents/{agent['id']}/publish")).status_code == 200

            await page.goto(f"{base}/login")
            await page.fill("input[name=email]", OWNER)
            await page.fill("input[name=password]", PASSWORD)
            await page.click("button[type=submit]:has-text('Sign in')")
            await page.wait_for_url(base)

            # knowledge bases: create one, upload a .txt document, the search box shows its passage
            await page.click("nav >> text=Knowledge bases")
            await page.fill("#create-kb input[name=name]", "Policies")
            await page.select_option("#create-kb select[name=agent_id]", str(agent["id"]))
            await page.click("#create-kb button[type=submit]")
            await page.wait_for_url(re.compile(r".*/dashboard/knowledge-bases/\d+.*"))
            assert "Knowledge base Policies created" in await flash(page)
            kb_id = int(page.url.split("?")[0].rsplit("/", 1)[1])
            document = tmp_path / "refunds.txt"
            document.write_text("Refunds are paid within five days when the customer shows the receipt.\n")
            await page.set_input_files("#upload-documents input[name=files]", str(document))
            await page.click("#upload-documents button[type=submit]")
            await page.wait_for_selector("#upload-results")
            assert "added" in (await page.inner_text("#upload-results")).lower()
            assert "ready" in (await page.inner_text("#documents")).lower()
            await page.fill("#kb-search input[name=q]", "receipt refunds")
            await page.click("#kb-search button[type=submit]")
            await page.wait_for_selector("#passages")
            passages = await page.inner_text("#passages")
            assert "Refunds are paid within five days" in passages and "refunds.txt" in passages
            [doc] = (await data(api, f"/knowledge-bases/{kb_id}/documents"))["documents"]
            assert doc["file_name"] == "refunds.txt" and doc["status"] == "ready"
            hits = await data(api, f"/knowledge-bases/{kb_id}/search", q="receipt")
            assert "five days" in hits["results"][0]["text"], hits
            await shots(page, "knowledge-bases")

            # Do-Not-Call: create a list, add a number, find it by searching every list
            await page.click("nav >> text=Do-Not-Call")
            await page.fill("#create-dnc-list input[name=name]", "Complaints")
            await page.click("#create-dnc-list button[type=submit]")
            await page.wait_for_url(re.compile(r".*/dashboard/dnc/\d+.*"))
            assert "List Complaints created" in await flash(page)
            await page.fill("#add-dnc-entry input[name=phone_number]", "+14155550188")
            await page.fill("#add-dnc-entry input[name=reason]", "asked on a call")
            await page.click("#add-dnc-entry button[type=submit]")
            await page.wait_for_selector("#dnc-entries")
            assert "+14155550188" in await page.inner_text("#dnc-entries")
            await page.click("text=← Do-Not-Call")
            await page.fill("#dnc-search input[name=phone]", "+14155550188")
            await page.click("#dnc-search button[type=submit]")
            await page.wait_for_selector("#dnc-found")
            found = await page.inner_text("#dnc-found")
            assert "is on 1 list" in found and "Complaints" in found
            [checked] = (await api.post("/dnc/check", json={"phone_numbers": ["+14155550188"]})).json()["data"]
            assert checked["blocked"] is True
            await shots(page, "dnc")

            # SMS: send one; it is listed
            await page.click("nav >> text=SMS")
            await page.fill("#send-sms input[name=to]", "+14155550199")
            await page.fill("#send-sms textarea[name=body]", "Your table is ready")
            await page.click("#send-sms button[type=submit]")
            assert "Message to +14155550199" in await flash(page)
            assert "Your table is ready" in await page.inner_text("#sms-messages")
            sent = await data(api, "/sms")
            assert [(m["to"], m["body"]) for m in sent] == [("+14155550199", "Your table is ready")]
            await shots(page, "sms")

            # leads: a lead called at once by the agent
            await page.click("nav >> text=Leads")
            await page.fill("#create-lead input[name=phone]", "+14155550177")
            await page.select_option("#create-lead select[name=target]", f"agent:{agent['id']}")
            await page.fill("#create-lead input[name=name]", "Ada Lovelace")
            await page.fill("#create-lead textarea[name=custom_data]", '{"plan": "gold"}')
            await page.click("#create-lead button[type=submit]")
            await page.wait_for_url(re.compile(r".*/dashboard/leads/\d+.*"))
            assert "Lead received" in await flash(page)
            lead_id = int(page.url.split("?")[0].rsplit("/", 1)[1])
            lead = await data(api, f"/leads/{lead_id}")
            assert lead["name"] == "Ada Lovelace" and lead["call_id"], lead
            assert str(lead["call_id"]) in await page.inner_text("#lead")
            call = await data(api, f"/calls/{lead['call_id']}")
            assert call["destination_phone"] == "+14155550177"
            await page.click("text=← Leads")
            assert "Ada Lovelace" in await page.inner_text("#leads")
            await shots(page, "leads")

            # phone numbers: bought only from a carrier on the page; one added through the API is listed
            added = await api.post("/telephony/phone-numbers", json={
                "phone_number": "+14155550123", "label": "Reception", "inbound_agent_id": agent["id"],
                "capabilities": {"voice": True, "sms": True}})
            assert added.status_code == 201, added.text
            await page.click("nav >> text=Phone numbers")
            numbers = await page.inner_text("#phone-numbers")
            assert "+14155550123" in numbers and "Reception" in numbers and "Front desk" in numbers
            await shots(page, "phone-numbers")

            # triggers: create one from its JSON fields, see it listed, disable it
            await page.click("nav >> text=Triggers")
            form = "#create-trigger"
            await page.fill(f"{form} input[name=name]", "Bookings to chat")
            await page.select_option(f"{form} select[name=event]", "appointment.booked")
            await page.fill(f"{form} textarea[name=conditions]", json.dumps(
                {"all": [{"field": "data.status", "op": "eq", "value": "confirmed"}]}))
            await page.fill(f"{form} textarea[name=actions]", json.dumps([{"type": "chat_message", "config": {
                "url": f"http://127.0.0.1:{free_port()}/chat", "text": "Booked {{data.attendee_name}}"}}]))
            await page.click(f"{form} button[type=submit]")
            await page.wait_for_selector("#new-secret")
            await page.click("a:has-text('Bookings to chat')")
            await page.wait_for_url(re.compile(r".*/dashboard/triggers/\d+$"))
            trigger_id = int(page.url.rsplit("/", 1)[1])
            await page.click("#switch-trigger button:has-text('Disable')")
            assert "Trigger Bookings to chat disabled" in await flash(page)
            assert await page.locator("#switch-trigger button:has-text('Enable')").count() == 1
            trigger = await data(api, f"/triggers/{trigger_id}")
            assert trigger["event"] == "appointment.booked" and trigger["enabled"] is False
            assert trigger["actions"][0]["type"] == "chat_message"
            await page.click("text=← Triggers")
            await shots(page, "triggers")

            # calendars: create one, add its hours
            await page.click("nav >> text=Calendars")
            form = "#create-calendar"
            await page.fill(f"{form} input[name=name]", "Front desk")
            await page.fill(f"{form} input[name=timezone]", "America/New_York")
            await page.fill(f"{form} input[name=slot_duration_minutes]", "45")
            await page.click(f"{form} button[type=submit]")
            await page.wait_for_url(re.compile(r".*/dashboard/calendars/\d+.*"))
            assert "Calendar created" in await flash(page)
            calendar_id = int(page.url.split("?")[0].rsplit("/", 1)[1])
            await page.select_option("#add-rule select[name=weekday]", "1")  # Tuesday
            await page.fill("#add-rule input[name=start_time]", "10:00")
            await page.fill("#add-rule input[name=end_time]", "16:30")
            await page.click("#add-rule button[type=submit]")
            assert "Tuesday 10:00 to 16:30 added" in await flash(page)
            assert "10:00\u201316:30" in await page.inner_text("#availability")  # an en dash
            calendar = await data(api, f"/scheduling/calendars/{calendar_id}")
            assert calendar["timezone"] == "America/New_York" and calendar["slot_duration_minutes"] == 45
            rules = await data(api, f"/scheduling/calendars/{calendar_id}/rules")
            assert [(r["weekday"], r["start_time"], r["end_time"]) for r in rules] == [(1, "10:00", "16:30")]
            await shots(page, "calendars")

            # schedules: create one with its weekly hours, an exception and public holidays
            await page.click("nav >> text=Schedules")
            form = "#create-schedule"
            await page.fill(f"{form} input[name=name]", "Support")
            await page.fill(f"{form} input[name=timezone]", "Europe/Berlin")
            await page.fill(f"{form} input[name='weekly.5']", "10:00-14:00")
            await page.fill(f"{form} textarea[name=exceptions]", "2026-12-24 closed")
            await page.fill(f"{form} input[name='holidays.country']", "DE")
            await page.click(f"{form} button[type=submit]")
            await page.wait_for_url(re.compile(r".*/dashboard/schedules/\d+.*"))
            assert "Schedule created" in await flash(page)
            [schedule] = await data(api, "/schedules")
            assert schedule["name"] == "Support" and schedule["timezone"] == "Europe/Berlin"
            assert schedule["holidays"]["country"] == "DE" and len(schedule["exceptions"]) == 1
            assert {"day": 5, "start": "10:00", "end": "14:00"} in schedule["weekly"]
            await page.click("text=← Schedules")
            assert "Support" in await page.inner_text("main")
            await shots(page, "schedules")

            # webhooks: subscribe an endpoint; the signing secret is shown once
            await page.click("nav >> text=Webhooks")
            hook_url = f"http://127.0.0.1:{free_port()}/hook"
            await page.fill("#create-webhook input[name=name]", "Archive")
            await page.fill("#create-webhook input[name=url]", hook_url)
            await page.check("#create-webhook input[name=events][value='knowledge_base.deleted']")
            await page.click("#create-webhook button[type=submit]")
            await page.wait_for_selector("#new-secret")
            secret = (await page.inner_text("#new-secret code")).strip()
            assert len(secret) >= 20
            [hook] = await data(api, "/webhooks")
            assert hook["name"] == "Archive" and hook["url"] == hook_url
            assert hook["events"] == ["knowledge_base.deleted"] and secret not in json.dumps(hook)
            await shots(page, "webhooks")
            await page.goto(f"{base}/webhooks")  # shown once: not on the list page again
            assert await page.locator("#new-secret").count() == 0
            assert "Archive" in await page.inner_text("main")
            assert secret not in await page.content()

            # clients (a partner organization's): create one
            await page.click("nav >> text=Clients")
            await page.fill("#create-client input[name=name]", "Bistro Verde")
            await page.select_option("#create-client select[name=plan]", "business")
            await page.click("#create-client button[type=submit]")
            assert "Client Bistro Verde created" in await flash(page)
            assert "Bistro Verde" in await page.inner_text("#clients")
            children = await data(api, "/organizations")
            assert any(c["name"] == "Bistro Verde" and c.get("parent_id") == org["id"] for c in children), children
            await shots(page, "clients")
    finally:
        server.stop()
