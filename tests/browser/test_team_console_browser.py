"""A team runs its business from the dashboard, in chromium over a real `parley serve` (its worker, the telephony
simulator sped up, a real SMTP server: aiosmtpd on 127.0.0.1):

a new owner invites a colleague as a member; the invitation email arrives and its link is followed; the colleague
chooses a password, turns on two-factor sign-in (the code computed in the test with pyotp) and signs in again with
it; edits an agent's draft and publishes it; creates a campaign and imports its contacts from a CSV file; starts
it and watches it on a phone-sized screen (390 px) as its progress moves without a reload; and the owner reads in
the audit log what the member did. Screenshots at 1280 and 390 px in var/screenshots/team-*.png."""

from __future__ import annotations

import asyncio
import email.message
import re
from pathlib import Path
from typing import Any

import pyotp
import pytest

from tests.browser.conftest import LAPTOP, PHONE, SCREENSHOTS
from tests.http.triggers_support import SmtpServer
from tests.processes import Server, parley_json, sqlite_env, until

pytestmark = pytest.mark.slow

OWNER = "owner@example.com"
MEMBER = "colleague@example.com"
OWNER_PASSWORD = "owner's long password"
MEMBER_PASSWORD = "colleague's long password"
LINK = re.compile(r"https?://\S+/dashboard/invitations/\S+")
CONTACTS = 6


async def shots(page: Any, name: str) -> None:
    """The page at a laptop's and a phone's width, then back at the laptop's."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for size, viewport in (("1280", LAPTOP), ("390", PHONE)):
        await page.set_viewport_size(viewport)
        await page.screenshot(path=str(SCREENSHOTS / f"team-{name}-{size}.png"), full_page=True)
    await page.set_viewport_size(LAPTOP)


def invitation_link(message: email.message.Message) -> str:
    body = message.get_payload(decode=True)
    assert isinstance(body, bytes)
    found = LINK.search(body.decode())
    assert found, body
    return found.group(0)


async def sign_in(page: Any, base: str, who: str, password: str, code: str | None = None) -> None:
    await page.goto(f"{base}/login")
    await page.fill("input[name=email]", who)
    await page.fill("input[name=password]", password)
    if code is not None:
        await page.fill("input[name=code]", code)
    await page.click("button[type=submit]:has-text('Sign in')")


async def test_a_team_runs_its_business_from_the_dashboard(browser, page, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with SmtpServer() as smtp:
        env = sqlite_env(tmp_path, PARLEY_SIMULATOR_SPEED="2", PARLEY_SECRET_KEY="browser-secret",
                         PARLEY_SMTP_URL=smtp.url, PARLEY_RATE_LIMIT_PER_MINUTE="10000",
                         PARLEY_RATE_LIMIT_PER_HOUR="100000")
        org = await asyncio.to_thread(parley_json, ["admin", "create-org", "--name", "Acme Voice", "--plan",
                                                    "enterprise"], env, tmp_path)
        await asyncio.to_thread(parley_json, ["admin", "create-user", "--org", str(org["id"]), "--email", OWNER,
                                              "--password", OWNER_PASSWORD, "--role", "owner"], env, tmp_path)
        server = Server(env, tmp_path, log=tmp_path / "server.log")
        colleague = await browser.new_context(viewport=LAPTOP)
        colleague.set_default_timeout(15_000)
        try:
            await server.ready()
            base = f"{server.base}/dashboard"

            # the owner signs in, makes the agent the team will work on, and invites a colleague as a member
            await sign_in(page, base, OWNER, OWNER_PASSWORD)
            await page.wait_for_url(f"{base}")
            await page.goto(f"{base}/agents")
            await page.fill("#create-agent input[name=name]", "Front desk")
            await page.fill("#create-agent textarea[name=prompt]", "You answer the phone for Acme Voice.")
            await page.click("#create-agent button[type=submit]")
            await page.wait_for_url(re.compile(r".*/dashboard/agents/\d+.*"))
            agent_path = page.url.split("?")[0]
            await page.goto(f"{base}/users")
            await page.fill("#invite input[name=email]", MEMBER)
            await page.select_option("#invite select[name=role]", "member")
            await page.click("#invite button[type=submit]")
            await page.wait_for_selector(".flash")
            assert f"Invitation sent to {MEMBER}" in await page.inner_text(".flash")
            assert await page.locator(f"text={MEMBER}").count() >= 1  # waiting
            await shots(page, "users")

            # the email arrives; the colleague follows its link and chooses a password
            [message] = await smtp.mailbox.wait_for(1, timeout=15)
            assert message["To"] == MEMBER
            member = await colleague.new_page()
            await member.goto(invitation_link(message))
            assert "member" in await member.content()
            await member.fill("input[name=password]", MEMBER_PASSWORD)
            await member.fill("input[name=password_again]", MEMBER_PASSWORD)
            await member.click("button[type=submit]")
            await member.wait_for_selector("text=Your account is ready")

            # signs in, turns on two-factor sign-in, signs out and in again with a code
            await sign_in(member, base, MEMBER, MEMBER_PASSWORD)
            await member.wait_for_url(f"{base}")
            await member.goto(f"{base}/account/mfa")
            totp = pyotp.TOTP((await member.inner_text("#otp-key")).strip())
            await member.fill("#confirm-mfa input[name=code]", totp.now())
            await member.click("#confirm-mfa button[type=submit]")
            await member.wait_for_selector(".flash")
            assert "Two-factor sign-in is on" in await member.inner_text(".flash")
            await member.click("header .account button[type=submit]")
            await member.wait_for_url(re.compile(r".*/dashboard/login.*"))
            await sign_in(member, base, MEMBER, MEMBER_PASSWORD)
            await member.wait_for_selector("input[name=code][required]")  # the password alone is not enough
            assert member.url.startswith(f"{base}/login")
            await shots(member, "mfa-code")
            await member.fill("input[name=password]", MEMBER_PASSWORD)
            await member.fill("input[name=code]", totp.now())
            await member.click("button[type=submit]:has-text('Sign in')")
            await member.wait_for_url(f"{base}")

            # edits the agent's draft and publishes it
            await member.goto(agent_path)
            await member.click("#edit-draft")
            await member.fill("#edit-agent input[name=first_message]", "Hello, Acme Voice, how can I help?")
            await member.click("#edit-agent button[type=submit]:has-text('Save the draft')")
            await member.wait_for_url(re.compile(r".*/dashboard/agents/\d+\?.*"))
            await shots(member, "agent-draft")
            await member.click("#publish")
            await member.wait_for_selector(".flash")
            assert "unpublished" not in await member.inner_text("#draft-state")

            # creates a campaign and imports its contacts from a CSV file (one row rejected, shown)
            await member.goto(f"{base}/campaigns")
            form = "#create-campaign"
            await member.fill(f"{form} input[name=name]", "Spring follow-ups")
            await member.fill(f"{form} input[name=timezone]", "UTC")
            await member.select_option(f"{form} select[name=timezone_mode]", "campaign")
            await member.fill(f"{form} input[name='calling_hours.start']", "00:00")
            await member.fill(f"{form} input[name='calling_hours.end']", "23:59")
            await member.fill(f"{form} input[name=max_concurrent_calls]", "1")
            await member.click(f"{form} button[type=submit]")
            await member.wait_for_url(re.compile(r".*/dashboard/campaigns/\d+.*"))
            campaign_path = member.url.split("?")[0]
            await member.click("#import-contacts")
            csv = tmp_path / "contacts.csv"
            csv.write_text("phone,name\n" + "".join(f"+1415555{1300 + n:04d},Contact {n}\n" for n in range(CONTACTS))
                           + "not a phone,Nobody\n")
            await member.set_input_files("#import-form input[name=file]", str(csv))
            await member.click("#import-form button[type=submit]")
            await member.wait_for_selector("#import-result")
            assert (await member.inner_text("#accepted")).strip() == str(CONTACTS)
            assert (await member.inner_text("#rejected-count")).strip() == "1"
            await shots(member, "campaign-import")

            # starts it on a phone, and watches its progress move on the open page (Server-Sent Events)
            await member.set_viewport_size(PHONE)
            await member.goto(campaign_path)
            await member.click("button:has-text('Start')")
            await member.wait_for_url(f"{campaign_path}?**")
            await member.evaluate("() => { window.__same_page = true; }")
            first = await member.get_attribute("[data-progress]", "data-progress")
            assert first is not None and first.endswith(f"/{CONTACTS}")

            async def moved() -> bool:
                now = await member.get_attribute("[data-progress]", "data-progress")
                return bool(now and int(now.split("/")[0]) > 0)

            await until(moved, 60, "the campaign's progress to move on the open page")
            assert await member.evaluate("() => window.__same_page === true"), "the page was reloaded"
            sideways = await member.evaluate("() => document.documentElement.scrollWidth - "
                                             "document.documentElement.clientWidth")
            assert sideways <= 0, "the campaign page scrolls sideways on a phone"
            await shots(member, "campaign-live")

            # the owner reads what the member did in the audit log
            await page.goto(f"{base}/audit")
            table = await page.inner_text("main")
            assert MEMBER in table
            for action in ("mfa.enabled", "agent.updated", "agent.published", "campaign.created",
                           "campaign_contacts.imported", "campaign.started"):
                assert action in table, action
            await page.click(f"a:has-text('{MEMBER}')")  # the member's events alone
            await page.wait_for_url(re.compile(r".*/dashboard/audit\?actor_type=user.*"))
            who = await page.locator("td[data-label=Who]").all_inner_texts()
            assert who and all(MEMBER in each for each in who), who
            assert "campaign.started" in await page.inner_text("main")
            await shots(page, "audit")
        finally:
            await colleague.close()
            server.stop()
