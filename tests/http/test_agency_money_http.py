"""The agency's month, end to end through the real HTTP API and the dashboard, on SQLite and PostgreSQL: a partner
signs up two clients, one billed on the partner's invoice and one billed directly; both place real calls (their
minutes reach the ledger when the calls end); the period closes; the partner's invoice shows its client's lines
(also on the partner's dashboard invoice page) and is paid; the direct client's own charge is declined, so it is
past due, and once the 7-day grace has passed (a fake clock) its calls are refused with 402 and a message saying
how to fix it, until it pays; then they are served again."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from application.accounts import CreateUser, CreateUserCommand
from application.ports.platform import UnitOfWork
from tests.http.calls_support import finish_calls
from tests.http.dashboard_support import PASSWORD, User, cookie, login
from tests.http.test_billing_hold_http import agent, held, place_call
from tests.http.test_billing_http import FEB, add_card, billed_app, get, post
from tests.http.test_partner_billing_http import as_child, client
from tests.support.apps import ApiFactory


@pytest.mark.slow
async def test_a_partner_bills_its_client_and_a_direct_client_past_due_is_refused_until_it_pays(
        make_api: ApiFactory, private_sql_url: str) -> None:
    api, clock, _, worker = await billed_app(make_api, private_sql_url)
    try:
        partner = await api.tenant(plan="enterprise", org_type="partner")
        email = f"u{uuid.uuid4().hex[:12]}@example.com"
        async with api._admin()() as request:
            await (await request.get(CreateUser)).execute(
                CreateUserCommand(partner.organization_id, email, PASSWORD))
            await (await request.get(UnitOfWork)).commit()
        await add_card(api, partner)

        # the partner signs up two clients: one on its invoice (the default), one billed directly
        dental = await client(api, partner, "Acme Dental", "business")
        plumbing = await client(api, partner, "Plumbing Co", "business")
        made_direct = await api.client.patch("/v2/billing/subscription", json={"billing_mode": "direct"},
                                             headers=as_child(partner, plumbing["id"]).headers)
        assert made_direct.status_code == 200, made_direct.text
        dental_key = await api.key_for(dental["id"], ("*",))
        plumbing_key = await api.key_for(plumbing["id"], ("*",))
        await add_card(api, plumbing_key, "pm_card_chargeDeclined")

        # both make calls, which end and are metered
        agents = {dental["id"]: await agent(api, dental_key), plumbing["id"]: await agent(api, plumbing_key)}
        for key, org in ((dental_key, dental["id"]), (plumbing_key, plumbing["id"])):
            for _ in range(2):
                assert (await place_call(api, key, agents[org])).status_code == 201
            await finish_calls(api, org)
        rollup = (await get(api, partner, "/usage?period=2026-01&rollup=children"))["data"]
        used = {c["organization_id"]: c["usage"]["calls"] for c in rollup["children"]}
        assert used == {dental["id"]: 2, plumbing["id"]: 2}

        # the period closes
        await worker.run_due()
        clock.set(FEB)
        await worker.run_due()

        [invoice] = (await get(api, partner, "/billing/invoices"))["data"]
        descriptions = [x["description"] for x in invoice["lines"]]
        assert f"Acme Dental (organization {dental['id']}): Business plan (2026-01)" in descriptions
        assert not any("Plumbing Co" in d for d in descriptions)  # the direct client pays its own
        assert invoice["status"] == "paid"
        [through] = (await get(api, dental_key, "/billing/invoices"))["data"]
        assert through["total"] == 0 and invoice["number"] in through["lines"][0]["description"]

        # the partner's dashboard invoice page shows the client's lines
        session, _ = await login(api, User(partner, email))
        page = await api.client.get(f"/dashboard/billing/invoices/{invoice['id']}", headers=cookie(session))
        assert page.status_code == 200, page.text
        assert f"Acme Dental (organization {dental['id']}): Business plan (2026-01)" in page.text

        # the direct client's own invoice is declined: past due, served through the grace, then refused
        [own] = (await get(api, plumbing_key, "/billing/invoices"))["data"]
        assert own["status"] == "open" and own["total"] > 0
        assert (await get(api, plumbing_key, "/billing/subscription"))["data"]["status"] == "past_due"
        clock.set(FEB + timedelta(days=7))
        assert (await place_call(api, plumbing_key, agents[plumbing["id"]])).status_code == 201
        clock.advance(seconds=10)
        error = held(await place_call(api, plumbing_key, agents[plumbing["id"]]), "past_due")
        assert "Pay the open invoice" in error["message"] and error["details"]["unpaid_invoice_ids"] == [own["id"]]
        assert (await place_call(api, dental_key, agents[dental["id"]])).status_code == 201  # the partner paid

        # until it pays
        visa = await add_card(api, plumbing_key)
        await post(api, plumbing_key, f"/billing/payment-methods/{visa['id']}/default")
        assert (await post(api, plumbing_key, f"/billing/invoices/{own['id']}/pay"))["data"]["status"] == "paid"
        assert (await place_call(api, plumbing_key, agents[plumbing["id"]])).status_code == 201
    finally:
        await worker.close()
