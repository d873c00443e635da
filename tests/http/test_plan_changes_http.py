"""Plan changes through the real HTTP API on SQLite and PostgreSQL, with a manual clock and the payment gateway
simulator: a downgrade on the month's last day no longer escapes the plan's price and overage (the attack), an
upgrade needs a default payment method and is charged at once (prorated to the day; a decline changes nothing), a
downgrade waits for the period's end and can be called off, a canceled subscription is reactivated by a plan, and
a partner cannot drop below a child's plan. Each test runs on a database of its own (periods are closed)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

from application.ports.usage import CALL_SECONDS, SMS_SEGMENTS
from tests.http.test_billing_http import FEB, add_card, billed_app, get, post
from tests.http.test_usage_http import record
from tests.support.apps import Api, ApiFactory, Tenant

JAN_10 = datetime(2026, 1, 10, 9, tzinfo=UTC)
JAN_31 = datetime(2026, 1, 31, 20, tzinfo=UTC)


async def patch(api: Api, t: Tenant, body: dict[str, Any], status: int = 200) -> dict[str, Any]:
    response = await api.client.patch("/v2/billing/subscription", json=body, headers=t.headers)
    assert response.status_code == status, response.text
    return response.json()  # type: ignore[no-any-return]


async def test_a_downgrade_on_the_last_day_still_bills_the_enterprise_plan_and_its_overage(
        make_api: ApiFactory, private_sql_url: str) -> None:
    api, clock, _gateway, worker = await billed_app(make_api, private_sql_url)
    try:
        t = await api.tenant(plan="enterprise")
        await add_card(api, t)
        await worker.run_due()
        await record(api, t.organization_id, CALL_SECONDS, 20_100 * 60, f"call:{uuid.uuid4()}", JAN_10)
        await record(api, t.organization_id, SMS_SEGMENTS, 100_050, "sms:bulk", JAN_10)

        clock.set(JAN_31)
        waiting = (await patch(api, t, {"plan": "starter"}))["data"]
        assert (waiting["plan"], waiting["pending_plan"]) == ("enterprise", "starter")
        usage = (await get(api, t, "/usage"))["data"]
        assert usage["plan"] == "enterprise" and usage["metrics"]["call_minutes"]["included"] == 20_000
        assert usage["metrics"]["knowledge_bases"]["limit"] == 100  # the plan in force keeps its limits

        clock.set(FEB)
        await worker.run_due()
        [january] = (await get(api, t, "/billing/invoices"))["data"]
        assert [(x["description"], x["quantity"], x["amount"]) for x in january["lines"]] == [
            ("Enterprise plan (2026-01)", 1, 249_900),
            ("Call minutes over the included amount", 100, 1_200),
            ("SMS segments over the included amount", 50, 100)]
        assert january["total"] == 251_200 and january["status"] == "paid"
        after = (await get(api, t, "/billing/subscription"))["data"]
        assert (after["plan"], after["pending_plan"]) == ("starter", None)  # from February on
        assert (await get(api, t, "/usage"))["data"]["metrics"]["call_minutes"]["included"] == 100
    finally:
        await worker.close()


async def test_an_upgrade_needs_a_default_payment_method_and_is_charged_at_once_prorated_to_the_day(
        make_api: ApiFactory, private_sql_url: str) -> None:
    api, clock, gateway, worker = await billed_app(make_api, private_sql_url)  # January 20th: 12 of 31 days left
    try:
        t = await api.tenant(plan="business")
        refused = (await patch(api, t, {"plan": "enterprise"}, 402))["error"]
        assert refused["code"] == "payment_method_required" and "payment method" in refused["message"]
        assert (await get(api, t, "/billing/subscription"))["data"]["plan"] == "business"

        await add_card(api, t)
        upgraded = (await patch(api, t, {"plan": "enterprise"}))["data"]
        assert (upgraded["plan"], upgraded["pending_plan"]) == ("enterprise", None)
        assert (await get(api, t, "/usage"))["data"]["metrics"]["call_minutes"]["included"] == 20_000  # at once
        [upgrade] = (await get(api, t, "/billing/invoices"))["data"]
        assert upgrade["status"] == "paid" and upgrade["period"] == "2026-01"
        assert [(x["description"], x["amount"]) for x in upgrade["lines"]] == [
            ("Enterprise plan from 2026-01-20 to 2026-01-31 (12 of 31 days), less the Business plan", 77_419)]
        assert upgrade["total"] == 200_000 * 12 // 31 and upgrade["number"].endswith("-U1")
        assert [c.amount_cents for c in gateway.charges] == [77_419]

        clock.set(FEB)
        await worker.run_due()
        invoices = (await get(api, t, "/billing/invoices"))["data"]
        closed = next(i for i in invoices if i["id"] != upgrade["id"])
        assert [x["description"] for x in closed["lines"]] == ["Business plan (2026-01)"]  # the plan of Jan 1st
        assert closed["total"] == 49_900 and len(invoices) == 2
    finally:
        await worker.close()


async def test_a_declined_upgrade_is_402_and_changes_nothing(make_api: ApiFactory, private_sql_url: str) -> None:
    api, _clock, _gateway, worker = await billed_app(make_api, private_sql_url)
    try:
        t = await api.tenant(plan="starter")
        await add_card(api, t, "pm_card_chargeDeclined")
        error = (await patch(api, t, {"plan": "business"}, 402))["error"]
        assert error["code"] == "card_declined" and error["details"]["decline_code"] == "card_declined"
        assert error["details"]["amount"] == 45_000 * 12 // 31
        sub = (await get(api, t, "/billing/subscription"))["data"]
        assert (sub["plan"], sub["status"]) == ("starter", "active")
        assert (await get(api, t, "/billing/invoices"))["data"] == []
        assert (await get(api, t, "/usage"))["data"]["metrics"]["call_minutes"]["included"] == 100
    finally:
        await worker.close()


async def test_a_downgrade_waits_for_the_periods_end_and_is_called_off_by_the_plan_in_force(
        make_api: ApiFactory, private_sql_url: str) -> None:
    api, clock, _gateway, worker = await billed_app(make_api, private_sql_url)
    try:
        t = await api.tenant(plan="enterprise")
        assert (await patch(api, t, {"plan": "business"}))["data"]["pending_plan"] == "business"
        assert (await get(api, t, "/billing/subscription"))["data"]["pending_plan"] == "business"
        assert (await patch(api, t, {"plan": "enterprise"}))["data"]["pending_plan"] is None
        await worker.run_due()
        clock.set(FEB)
        await worker.run_due()
        assert (await get(api, t, "/billing/subscription"))["data"]["plan"] == "enterprise"
    finally:
        await worker.close()


async def test_a_canceled_subscription_is_reactivated_by_a_plan_with_a_working_payment_method(
        make_api: ApiFactory, private_sql_url: str) -> None:
    api, clock, _gateway, worker = await billed_app(make_api, private_sql_url)
    try:
        t = await api.tenant(plan="business")
        card = await add_card(api, t)
        await patch(api, t, {"cancel_at_period_end": True})
        await worker.run_due()
        clock.set(FEB)
        await worker.run_due()
        assert (await get(api, t, "/billing/subscription"))["data"]["status"] == "canceled"
        error = (await patch(api, t, {"cancel_at_period_end": False}, 409))["error"]
        assert error["code"] == "invalid_transition" and "plan" in error["message"]

        gone = await api.client.delete(f"/v2/billing/payment-methods/{card['id']}", headers=t.headers)
        assert gone.status_code == 204
        assert (await patch(api, t, {"plan": "business"}, 402))["error"]["code"] == "payment_method_required"
        await add_card(api, t)
        back = (await patch(api, t, {"plan": "business"}))["data"]
        assert (back["status"], back["plan"], back["cancel_at_period_end"]) == ("active", "business", False)
        reactivation = (await get(api, t, "/billing/invoices"))["data"][0]
        assert reactivation["period"] == "2026-02" and reactivation["status"] == "paid"
        assert reactivation["total"] == 49_900 * 28 // 28  # from the first day of February
    finally:
        await worker.close()


async def test_a_partner_cannot_drop_below_a_childs_plan(make_api: ApiFactory, private_sql_url: str) -> None:
    api, _clock, _gateway, worker = await billed_app(make_api, private_sql_url)
    try:
        partner = await api.tenant(plan="enterprise", org_type="partner")
        child = (await post(api, partner, "/organizations", {"name": "Client", "plan": "business"}, 201))["data"]
        error = (await patch(api, partner, {"plan": "starter"}, 409))["error"]
        assert error["code"] == "children_above_plan"
        assert [(c["organization_id"], c["plan"]) for c in error["details"]["children"]] == [(child["id"],
                                                                                            "business")]
        assert (await get(api, partner, "/billing/subscription"))["data"]["pending_plan"] is None
        assert (await patch(api, partner, {"plan": "business"}))["data"]["pending_plan"] == "business"
    finally:
        await worker.close()


async def test_two_upgrades_at_once_charge_and_invoice_once(make_api: ApiFactory, private_sql_url: str) -> None:
    api, _clock, gateway, worker = await billed_app(make_api, private_sql_url)
    try:
        t = await api.tenant(plan="starter")
        await add_card(api, t)
        answers = await asyncio.gather(*(api.client.patch("/v2/billing/subscription", json={"plan": "enterprise"},
                                                          headers=t.headers) for _ in range(4)))
        assert [a.status_code for a in answers] == [200] * 4, [a.text for a in answers]
        assert {a.json()["data"]["plan"] for a in answers} == {"enterprise"}
        [upgrade] = (await get(api, t, "/billing/invoices"))["data"]
        assert upgrade["total"] == 245_000 * 12 // 31
        assert [c.amount_cents for c in gateway.charges] == [upgrade["total"]]
    finally:
        await worker.close()


async def test_usage_is_billed_at_the_plan_in_force_when_used_against_included_amounts_prorated_by_day(
        make_api: ApiFactory, private_sql_url: str) -> None:
    """Starter from the 1st (its 100 minutes used, no overage on starter), business from the 20th (3,000 minutes):
    the month includes (19 x 100 + 12 x 2,000) minutes / 31 = 50,129 seconds, and what is past them is billed
    at business's 12 ¢ a minute."""
    api, clock, _gateway, worker = await billed_app(make_api, private_sql_url)
    try:
        t = await api.tenant(plan="starter")
        await add_card(api, t)
        await worker.run_due()
        await record(api, t.organization_id, CALL_SECONDS, 100 * 60, f"call:{uuid.uuid4()}", JAN_10)
        await patch(api, t, {"plan": "business"})  # January 20th
        await record(api, t.organization_id, CALL_SECONDS, 3_000 * 60, f"call:{uuid.uuid4()}",
                     datetime(2026, 1, 25, tzinfo=UTC))
        upcoming = (await get(api, t, "/billing/invoices/upcoming"))["data"]
        clock.set(FEB)
        await worker.run_due()
        invoices = (await get(api, t, "/billing/invoices"))["data"]
        [upgrade] = [i for i in invoices if i["number"].endswith("-U1")]
        [january] = [i for i in invoices if i["id"] != upgrade["id"]]
        assert upgrade["total"] == 45_000 * 12 // 31 == 17_419
        over_seconds = 100 * 60 + 3_000 * 60 - 50_129
        assert [(x["description"], x["quantity"], x["amount"]) for x in january["lines"]] == [
            ("Starter plan (2026-01)", 1, 4_900),
            ("Call minutes over the included amount", -(-over_seconds // 60), -(-over_seconds // 60) * 12)]
        assert january["total"] == 4_900 + 2_265 * 12 == upcoming["total"]
    finally:
        await worker.close()
