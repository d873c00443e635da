"""The agency's month in the dashboard, form posts with a session cookie, on SQLite and PostgreSQL: a partner's
owner signs in, creates two clients in the Clients section, bills one directly, sees each client's plan, billing
mode and usage of the period; switches into the direct client (an "acting as" bar, the pages act in the client),
whose charge is declined at the period's close; once the 7-day grace has passed (a fake clock) the client's pages
show the hold's banner and the agent's call form is refused with the 402 message; paying the open invoice from the
client's billing page lifts the hold at once. A non-partner has no Clients section. And the invoice's pay form
turns a 3-D Secure decline (Stripe's ``requires_action``) into a link where the holder confirms the payment.
Each test closes a period, so it runs on a database of its own."""

from __future__ import annotations

import re
from datetime import timedelta

import httpx
import pytest

from entrypoints.features.billing import close_job, collect_job
from entrypoints.ioc import build_container
from entrypoints.worker import make_runner
from tests.http.calls_support import finish_calls, unique_phone
from tests.http.dashboard_support import PASSWORD, add_user, cookie, login, new_user
from tests.http.test_billing_hold_http import agent, place_call
from tests.http.test_billing_http import FEB, billed_app
from tests.http.test_stripe_billing_http import emulator, stripe_app
from tests.support.apps import Api, ApiFactory
from tests.support.stripe_emulator import StripeEmulator

__all__ = ["emulator"]


class Browser:
    """A signed-in user's dashboard: pages read and forms sent with the session's cookie and CSRF token."""

    def __init__(self, api: Api, session: str, csrf: str) -> None:
        self.api, self.headers, self.csrf = api, cookie(session), csrf

    async def page(self, path: str, status: int = 200) -> str:
        response = await self.api.client.get(f"/dashboard{path}", headers=self.headers)
        assert response.status_code == status, (path, response.status_code, response.text[:2000])
        return response.text

    async def send(self, path: str, status: int = 303, **fields: str) -> httpx.Response:
        response = await self.api.client.post(f"/dashboard{path}", headers=self.headers, follow_redirects=False,
                                              data={"csrf_token": self.csrf, **fields})
        assert response.status_code == status, (path, response.status_code, response.text[:2000])
        assert not response.headers.get("location", "").startswith("/dashboard/verify"), path
        return response

    async def verify(self) -> None:
        """Give the password again (billing changes ask for it when it was given more than 5 minutes ago)."""
        await self.send("/verify", password=PASSWORD, next="/dashboard")


def _client_ids(html: str) -> dict[str, int]:
    rows = re.findall(r'<tr id="client-(\d+)"[^>]*>\s*<td data-label="Client">([^<]+?) <', html)
    return {name: int(found) for found, name in rows}


def _row(html: str, client_id: int) -> str:
    start = html.index(f'id="client-{client_id}"')
    return html[start:html.index("</tr>", start)]


@pytest.mark.slow
async def test_an_agency_runs_its_month_from_the_dashboard(make_api: ApiFactory, private_sql_url: str) -> None:
    api, clock, _, worker = await billed_app(make_api, private_sql_url)
    try:
        partner = await api.tenant(plan="enterprise", org_type="partner", name="Bright Agency")
        owner = await add_user(api, partner)
        me = Browser(api, *await login(api, owner))
        assert 'href="/dashboard/sub-organizations"' in await me.page("")
        await me.send("/billing/payment-methods", token="pm_card_visa")

        # two clients, one billed directly
        await me.send("/sub-organizations", name="Acme Dental", plan="business")
        await me.send("/sub-organizations", name="Plumbing Co", plan="business")
        refused = await me.send("/sub-organizations", status=400, name=" ", plan="business")
        assert "must not be blank" in refused.text  # beside the name field
        ids = _client_ids(await me.page("/sub-organizations"))
        dental, plumbing = ids["Acme Dental"], ids["Plumbing Co"]
        done = await me.send(f"/sub-organizations/{plumbing}/billing-mode", billing_mode="direct")
        assert "flash=" in done.headers["location"]
        page = await me.page("/sub-organizations")
        assert 'data-billing-mode="partner"' in _row(page, dental)
        assert 'data-billing-mode="direct"' in _row(page, plumbing)

        # both make calls (through the API with their own keys); the clients page shows the period's usage
        keys = {dental: await api.key_for(dental, ("*",)), plumbing: await api.key_for(plumbing, ("*",))}
        agents = {org: await agent(api, key) for org, key in keys.items()}
        for org, count in ((dental, 2), (plumbing, 1)):
            for _ in range(count):
                assert (await place_call(api, keys[org], agents[org])).status_code == 201
            await finish_calls(api, org)
        page = await me.page("/sub-organizations")
        assert re.search(r'data-label="Calls" class="right num">2<', _row(page, dental))
        assert re.search(r'data-label="Calls" class="right num">1<', _row(page, plumbing))
        assert "/ 2000</td>" in _row(page, dental)  # call minutes used of the business plan's 2,000

        # the partner works in the direct client: its card (declined at the period's close) is the client's own
        await me.send(f"/sub-organizations/{plumbing}/switch")
        await me.verify()  # the calls took minutes of the fake clock
        overview = await me.page("")
        assert "Acting as <strong>Plumbing Co</strong>" in overview and "Back to Bright Agency" in overview
        await me.send("/billing/payment-methods", token="pm_card_chargeDeclined")
        assert (await api.client.get("/v2/billing/payment-methods", headers=keys[plumbing].headers)
                ).json()["meta"]["total"] == 1
        assert (await api.client.get("/v2/billing/payment-methods", headers=partner.headers)
                ).json()["meta"]["total"] == 1  # the partner's own visa only

        # the period closes: the client's charge is declined; after the 7-day grace its new calls are refused
        await worker.run_due()
        clock.set(FEB)
        await worker.run_due()
        clock.set(FEB + timedelta(days=7, seconds=10))
        me = Browser(api, *await login(api, owner))  # the earlier session ended with the days gone by
        assert "Acting as" not in await me.page("")
        await me.send(f"/sub-organizations/{plumbing}/switch")
        calls = await me.page("/calls")
        assert 'class="alert billing-hold"' in calls and 'data-reason="past_due"' in calls
        assert "Pay the open invoice" in calls
        form = await me.send("/calls", status=402, agent_id=str(agents[plumbing]),
                             destination_phone=unique_phone())
        assert "payment_required" in form.text and "Pay the open invoice" in form.text
        assert 'name="destination_phone"' in form.text  # the call form again, with the refusal
        assert "billing-hold" not in await me.page("/sub-organizations")  # the partner's own page: it paid

        # the client pays from its billing page (a working card, made the default) and is served again at once
        await me.send("/billing/payment-methods", token="pm_card_visa")
        billing = await me.page("/billing")
        visa = re.findall(r'/billing/payment-methods/(\d+)/default"', billing)[-1]
        await me.send(f"/billing/payment-methods/{visa}/default")
        [invoice] = re.findall(r'href="/dashboard/billing/invoices/(\d+)"', billing)
        pdf = await api.client.get(f"/dashboard/billing/invoices/{invoice}/pdf", headers=me.headers)
        assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF")  # the client's, not the partner's
        paid = await me.send(f"/billing/invoices/{invoice}/pay")
        assert "paid" in paid.headers["location"]
        assert "billing-hold" not in await me.page("/calls")
        placed = await me.send("/calls", agent_id=str(agents[plumbing]), destination_phone=unique_phone())
        assert placed.headers["location"].startswith("/dashboard/calls/")

        # back to the agency's own organization
        await me.send("/sub-organizations/back")
        assert "Acting as" not in await me.page("")
    finally:
        await worker.close()


async def test_a_organization_that_is_not_a_partner_has_no_clients(any_api: Api) -> None:
    user = await new_user(any_api, plan="business")
    me = Browser(any_api, *await login(any_api, user))
    home = await me.page("")
    assert "/dashboard/sub-organizations" not in home
    assert "is not a partner organization" in await me.page("/sub-organizations")
    await me.send("/sub-organizations", status=404, name="Acme", plan="business")
    other = await any_api.tenant(org_type="partner")
    child = (await any_api.client.post("/v2/organizations", json={"name": "Theirs"}, headers=other.headers)
             ).json()["data"]["id"]
    await me.send(f"/sub-organizations/{child}/switch", status=404)


async def test_a_partner_cannot_switch_into_another_partners_client(any_api: Api) -> None:
    mine, theirs = await any_api.tenant(org_type="partner"), await any_api.tenant(org_type="partner")
    child = (await any_api.client.post("/v2/organizations", json={"name": "Theirs"}, headers=theirs.headers)
             ).json()["data"]["id"]
    me = Browser(any_api, *await login(any_api, await add_user(any_api, mine)))
    await me.send(f"/sub-organizations/{child}/switch", status=404)
    await me.send(f"/sub-organizations/{child}/billing-mode", status=404, billing_mode="direct")
    assert "Acting as" not in await me.page("")


async def test_a_3d_secure_decline_on_the_pay_form_links_to_the_banks_page(
        make_api: ApiFactory, private_sql_url: str, emulator: StripeEmulator) -> None:
    api, clock = await stripe_app(make_api, private_sql_url, emulator)
    container = build_container(api.settings, *api.overrides)
    try:
        user = await new_user(api, plan="business")
        me = Browser(api, *await login(api, user))
        await me.send("/billing/payment-methods", token="pm_card_authenticationRequired")
        runner = await make_runner(container, api.settings, kinds=[close_job(container, api.settings),
                                                                   collect_job(container, api.settings)])
        await runner.start()
        await runner.run_due()
        clock.set(FEB)
        await runner.run_due()  # January's invoice: its charge waits for the holder's authentication
    finally:
        await container.close()
    me = Browser(api, *await login(api, user))
    [invoice] = re.findall(r'href="/dashboard/billing/invoices/(\d+)"', await me.page("/billing"))
    answer = await me.send(f"/billing/invoices/{invoice}/pay", status=200)
    notice = answer.text.split('id="authentication-required"')[1].split("</div>")[0]
    assert "confirm this payment (3-D Secure)" in notice and "declined" not in notice
    [link] = re.findall(r'<a href="([^"]+)" rel="noopener noreferrer">Complete the authentication', notice)
    assert emulator.intents[link.rsplit("/", 1)[-1]]["status"] == "requires_action"
    assert 'class="pill open"' in answer.text  # still open, with the attempt recorded
