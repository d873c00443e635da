"""Billing gates service, through the real HTTP API on SQLite and PostgreSQL: a subscription past_due for more than
7 days, or canceled when its period ended, has new calls, SMS, campaign starts, leads and widget contacts refused
with 402 payment_required (the reason and the fix in the message, ``details.reason``), while reads keep working; a
running campaign's dialer waits (``status_reason: payment_required``); paying the open invoice, or reactivating,
lifts the hold at once. The dashboard shows a banner with the reason and the fix on every page. Each test closes a
period, so it runs on a database of its own."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import httpx

from application.ports.billing import BillingRepository
from application.ports.platform import UnitOfWork
from tests.http.calls_support import unique_phone
from tests.http.dashboard_support import cookie, csrf_of, login, new_user
from tests.http.dialer_support import campaign as new_campaign
from tests.http.dialer_support import dial
from tests.http.test_billing_http import FEB, add_card, billed_app, get, post
from tests.http.test_sms_http import send, sms_number
from tests.support.apps import Api, ApiFactory, Tenant

SHOP = "https://shop.example.com"


async def agent(api: Api, t: Tenant) -> int:
    created = await api.client.post("/v2/agents", json={"name": "Riley", "prompt": "You call people back."},
                                    headers=t.headers)
    assert created.status_code == 201, created.text
    agent_id = int(created.json()["data"]["id"])
    assert (await api.client.post(f"/v2/agents/{agent_id}/publish", headers=t.headers)).status_code == 200
    return agent_id


async def place_call(api: Api, t: Tenant, agent_id: int) -> httpx.Response:
    return await api.client.post("/v2/calls", json={"bot_id": str(agent_id), "destination_phone": unique_phone()},
                                 headers=t.headers)


def held(response: httpx.Response, reason: str) -> dict[str, Any]:
    assert response.status_code == 402, response.text
    error = response.json()["error"]
    assert error["code"] == "payment_required" and error["details"]["reason"] == reason, error
    return error  # type: ignore[no-any-return]


class Setup:
    """A business organization with an agent, a draft campaign with a contact, a widget token on a running campaign
    and an SMS number, made while its billing is in good standing."""

    def __init__(self, api: Api, t: Tenant) -> None:
        self.api, self.t = api, t

    async def make(self) -> Setup:
        api, t = self.api, self.t
        self.agent = await agent(api, t)
        self.draft = (await new_campaign(api, t, [{"phone": unique_phone()}], start=False, agent_id=self.agent,
                                         timezone_mode="campaign"))["id"]
        self.running = (await new_campaign(api, t, [{"phone": unique_phone()}], agent_id=self.agent,
                                           timezone_mode="campaign", calling_hours={"start": "00:00", "end": "23:59"}
                                           ))["id"]
        await sms_number(api, t)
        return self

    async def everything_new(self) -> list[httpx.Response]:
        """Each kind of new work; a widget token is minted now (minting is not new work; tokens live an hour)."""
        api, t = self.api, self.t
        minted = await api.client.post("/v2/widget/tokens", headers=t.headers,
                                       json={"campaign_id": self.running, "allowed_origins": [SHOP]})
        assert minted.status_code == 201, minted.text
        widget = {"Authorization": f"Widget {minted.json()['data']['token']}", "Origin": SHOP}
        return [
            await place_call(api, t, self.agent),
            await send(api, t, unique_phone()),
            await api.client.post(f"/v2/campaigns/{self.draft}/start", headers=t.headers),
            await api.client.post("/v2/leads", json={"phone": unique_phone(), "agent_id": self.agent},
                                  headers=t.headers),
            await api.client.post("/v2/leads", json={"phone": unique_phone(), "campaign_id": self.running},
                                  headers=t.headers),
            await api.client.post(f"/v2/campaigns/{self.running}/dial", json={"phone": unique_phone()},
                                  headers=t.headers),
            await api.client.post("/v2/widget/contacts", json={"phone": unique_phone(), "name": "Ada"},
                                  headers=widget),
        ]


async def test_past_due_beyond_7_days_refuses_new_work_until_the_open_invoice_is_paid(
        make_api: ApiFactory, private_sql_url: str) -> None:
    api, clock, _, worker = await billed_app(make_api, private_sql_url)
    try:
        t = await api.tenant(plan="business")
        await add_card(api, t, "pm_card_chargeDeclined")
        setup = await Setup(api, t).make()
        await worker.run_due()
        clock.set(FEB)
        await worker.run_due()  # January is invoiced and its charge declined: past_due from now
        [invoice] = (await get(api, t, "/billing/invoices"))["data"]
        sub = (await get(api, t, "/billing/subscription"))["data"]
        assert sub["status"] == "past_due" and sub["past_due_since"] == "2026-02-01T00:00:05Z"
        assert sub["service_hold"] is None  # within the grace: full service

        clock.set(FEB + timedelta(days=7))  # exactly 7 days: still served
        assert (await place_call(api, t, setup.agent)).status_code == 201
        clock.advance(seconds=1)
        refusals = await setup.everything_new()
        for response in refusals:
            error = held(response, "past_due")
            assert error["details"]["unpaid_invoice_ids"] == [invoice["id"]]
            assert "Pay the open invoice" in error["message"] and "2026-02-01" in error["message"]
        assert (await api.client.get("/v2/leads", headers=t.headers)).json()["meta"]["total"] == 0  # none kept
        sub = (await get(api, t, "/billing/subscription"))["data"]
        assert sub["service_hold"]["reason"] == "past_due" and sub["service_hold"]["since"] == "2026-02-01T00:00:05Z"
        # reads keep working
        for path in ("/calls", "/campaigns", f"/campaigns/{setup.running}", "/usage", "/billing/invoices", "/sms"):
            assert (await api.client.get(f"/v2{path}", headers=t.headers)).status_code == 200, path

        # a running campaign's dialer waits, saying why
        await dial(api)
        campaign = (await get(api, t, f"/campaigns/{setup.running}"))["data"]
        assert campaign["status_reason"] == "payment_required"

        # paying lifts it at once
        visa = await add_card(api, t)
        await post(api, t, f"/billing/payment-methods/{visa['id']}/default")
        paid = (await post(api, t, f"/billing/invoices/{invoice['id']}/pay"))["data"]
        assert paid["status"] == "paid"
        sub = (await get(api, t, "/billing/subscription"))["data"]
        assert sub["status"] == "active" and sub["past_due_since"] is None and sub["service_hold"] is None
        assert (await place_call(api, t, setup.agent)).status_code == 201
        assert (await send(api, t, unique_phone())).status_code == 201
        assert (await api.client.post(f"/v2/campaigns/{setup.draft}/start", headers=t.headers)).status_code == 200
        await dial(api)
        campaign = (await get(api, t, f"/campaigns/{setup.running}"))["data"]
        assert campaign["status_reason"] != "payment_required"
    finally:
        await worker.close()


async def test_a_subscription_canceled_with_its_period_refuses_new_work_until_reactivated(
        make_api: ApiFactory, private_sql_url: str) -> None:
    api, clock, _, worker = await billed_app(make_api, private_sql_url)
    try:
        t = await api.tenant(plan="business")
        await add_card(api, t)
        setup = await Setup(api, t).make()
        response = await api.client.patch("/v2/billing/subscription", json={"cancel_at_period_end": True},
                                          headers=t.headers)
        assert response.status_code == 200
        await worker.run_due()
        assert (await place_call(api, t, setup.agent)).status_code == 201  # served until its period ends
        clock.set(FEB)
        await worker.run_due()
        assert (await get(api, t, "/billing/subscription"))["data"]["status"] == "canceled"
        for response in await setup.everything_new():
            error = held(response, "canceled")
            assert "Reactivate" in error["message"] and error["details"]["since"] is None
        assert (await api.client.get("/v2/calls", headers=t.headers)).status_code == 200

        back = await api.client.patch("/v2/billing/subscription", json={"plan": "business"}, headers=t.headers)
        assert back.status_code == 200 and back.json()["data"]["service_hold"] is None, back.text
        assert (await place_call(api, t, setup.agent)).status_code == 201
    finally:
        await worker.close()


async def test_the_dashboard_shows_the_hold_with_its_reason_and_fix_on_every_page(make_api: ApiFactory,
                                                                                 private_sql_url: str) -> None:
    api, clock, _, worker = await billed_app(make_api, private_sql_url)
    try:
        user = await new_user(api, plan="business")
        session, _ = await login(api, user)
        headers = cookie(session)
        overview = await api.client.get("/dashboard", headers=headers)
        assert overview.status_code == 200 and "billing-hold" not in overview.text

        async with api._admin()() as request:  # canceled by an earlier period close
            billing = await request.get(BillingRepository)
            account = await billing.account(user.tenant.organization_id)
            await billing.save_account(replace(account, status="canceled"))
            await (await request.get(UnitOfWork)).commit()
        for path in ("/dashboard", "/dashboard/calls", "/dashboard/billing"):
            page = await api.client.get(path, headers=headers)
            assert page.status_code == 200 and 'class="alert billing-hold"' in page.text, path
            assert "canceled when its period ended" in page.text and "Reactivate it with a plan" in page.text
        html = (await api.client.get("/dashboard/billing", headers=headers)).text
        assert "/billing/subscription/reactivate" in html

        # the banner's fix, from the dashboard: a card, then a plan
        await add_card(api, user.tenant)
        done = await api.client.post("/dashboard/billing/subscription/reactivate", headers=headers,
                                     data={"csrf_token": csrf_of(html), "plan": "business"}, follow_redirects=False)
        assert done.status_code == 303, done.text
        assert "billing-hold" not in (await api.client.get("/dashboard", headers=headers)).text
        assert (await get(api, user.tenant, "/billing/subscription"))["data"]["status"] == "active"

        async with api._admin()() as request:  # past_due for 8 days
            billing = await request.get(BillingRepository)
            account = await billing.account(user.tenant.organization_id)
            assert clock is not None
            await billing.save_account(replace(account, status="past_due",
                                               past_due_since=clock.now() - timedelta(days=8)))
            await (await request.get(UnitOfWork)).commit()
        page = (await api.client.get("/dashboard/calls", headers=headers)).text
        assert 'data-reason="past_due"' in page and "an invoice is unpaid since" in page
        assert "Pay the open invoice" in page
    finally:
        await worker.close()
