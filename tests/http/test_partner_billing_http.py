"""Partner billing through the real HTTP API on SQLite and PostgreSQL: a partner signs up two clients, one billed on
the partner's invoice (billing_mode partner, the default) and one billed directly (set by the partner with
X-Sub-Org-Id; a client cannot set it itself); both use the service; the period closes: the partner's invoice carries
its partner-mode client's plan and usage as lines under the client's name, that client's own invoice says it is
billed through the partner, the direct client pays its own; GET /usage?rollup=children shows each client's plan and
usage; a partner key mints keys for a client whatever its plan; and a partner whose billing is on hold holds its
partner-mode clients too, not its direct ones. Each test closes a period, so it runs on a database of its own."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from application.ports.usage import CALL_SECONDS, SMS_SEGMENTS
from tests.http.test_billing_hold_http import agent, place_call
from tests.http.test_billing_http import FEB, JAN, add_card, billed_app, get
from tests.http.test_usage_http import record
from tests.support.apps import Api, ApiFactory, Tenant


@dataclass(frozen=True)
class Acting:
    """A partner's key acting in one of its clients (X-Sub-Org-Id)."""

    organization_id: int
    headers: dict[str, str]


def as_child(partner: Tenant, child_id: int) -> Any:
    return Acting(child_id, {**partner.headers, "X-Sub-Org-Id": str(child_id)})


async def client(api: Api, partner: Tenant, name: str, plan: str) -> dict[str, Any]:
    created = await api.client.post("/v2/organizations", json={"name": name, "plan": plan}, headers=partner.headers)
    assert created.status_code == 201, created.text
    return created.json()["data"]  # type: ignore[no-any-return]


async def test_a_partner_invoices_its_partner_mode_client_and_the_direct_client_pays_its_own(
        make_api: ApiFactory, private_sql_url: str) -> None:
    api, clock, _, worker = await billed_app(make_api, private_sql_url)
    try:
        partner = await api.tenant(plan="enterprise", org_type="partner")
        await add_card(api, partner)
        dental = await client(api, partner, "Acme Dental", "business")
        plumbing = await client(api, partner, "Bob's Plumbing", "starter")
        sub = (await get(api, as_child(partner, dental["id"]), "/billing/subscription"))["data"]
        assert sub["billing_mode"] == "partner"  # the default for a client
        assert (await get(api, partner, "/billing/subscription"))["data"]["billing_mode"] == "direct"

        own_key = await api.key_for(plumbing["id"], ("*",))
        refused = await api.client.patch("/v2/billing/subscription", json={"billing_mode": "direct"},
                                         headers=own_key.headers)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "sub_org_forbidden", refused.text
        direct = await api.client.patch("/v2/billing/subscription", json={"billing_mode": "direct"},
                                        headers=as_child(partner, plumbing["id"]).headers)
        assert direct.status_code == 200 and direct.json()["data"]["billing_mode"] == "direct", direct.text
        mine = await api.client.patch("/v2/billing/subscription", json={"billing_mode": "direct"},
                                      headers=partner.headers)
        assert mine.status_code == 400 and "billing_mode" in mine.text  # only a client has one
        await add_card(api, own_key)

        # a partner key mints keys for a client whatever the client's plan (starter has no key management)
        minted = await api.client.post("/v2/api-keys", json={"name": "ops", "scopes": ["calls:read"]},
                                       headers=as_child(partner, plumbing["id"]).headers)
        assert minted.status_code == 201, minted.text
        assert (await api.client.post("/v2/api-keys", json={"name": "self", "scopes": ["calls:read"]},
                                      headers=own_key.headers)).status_code == 403  # its own key: the plan rule

        # both use the service
        await record(api, dental["id"], CALL_SECONDS, 2_100 * 60, "call:dental-big", JAN)  # 100 minutes over
        await record(api, dental["id"], SMS_SEGMENTS, 40, "sms:dental", JAN)
        await record(api, plumbing["id"], CALL_SECONDS, 600, "call:plumbing", JAN)
        rollup = (await get(api, partner, "/usage?period=2026-01&rollup=children"))["data"]
        children = {c["organization_id"]: c for c in rollup["children"]}
        assert children[dental["id"]]["name"] == "Acme Dental" and children[dental["id"]]["plan"] == "business"
        assert children[dental["id"]]["usage"]["call_minutes"]["used"] == 2_100.0
        assert children[dental["id"]]["usage"]["sms_segments"]["used"] == 40
        assert children[plumbing["id"]]["usage"]["call_minutes"]["included"] == 100
        assert "children" not in (await get(api, partner, "/usage"))["data"]
        not_partner = await api.client.get("/v2/usage?rollup=children", headers=own_key.headers)
        assert not_partner.status_code == 400 and "rollup" in not_partner.text

        await worker.run_due()
        clock.set(FEB)
        await worker.run_due()
        [invoice] = (await get(api, partner, "/billing/invoices"))["data"]
        lines = [(x["description"], x["amount"]) for x in invoice["lines"]]
        assert lines == [
            ("Enterprise plan (2026-01)", 249_900),
            (f"Acme Dental (organization {dental['id']}): Business plan (2026-01)", 49_900),
            (f"Acme Dental (organization {dental['id']}): Call minutes over the included amount", 100 * 12)]
        assert invoice["total"] == 249_900 + 49_900 + 1_200 and invoice["status"] == "paid"
        [through] = (await get(api, as_child(partner, dental["id"]), "/billing/invoices"))["data"]
        assert through["total"] == 0 and through["status"] == "paid"
        assert through["lines"][0]["description"] == f"Billed on your partner's invoice ({invoice['number']})"
        [own] = (await get(api, own_key, "/billing/invoices"))["data"]
        assert [x["description"] for x in own["lines"]] == ["Starter plan (2026-01)"]
        assert own["status"] == "paid" and own["total"] == 4_900
    finally:
        await worker.close()


async def test_a_partner_on_hold_holds_its_partner_mode_clients_not_its_direct_ones(
        make_api: ApiFactory, private_sql_url: str) -> None:
    api, clock, _, worker = await billed_app(make_api, private_sql_url)
    try:
        partner = await api.tenant(plan="enterprise", org_type="partner")
        await add_card(api, partner, "pm_card_chargeDeclined")
        billed = await client(api, partner, "Acme Dental", "business")
        direct = await client(api, partner, "Bob's Plumbing", "business")
        await api.client.patch("/v2/billing/subscription", json={"billing_mode": "direct"},
                               headers=as_child(partner, direct["id"]).headers)
        billed_key, direct_key = await api.key_for(billed["id"], ("*",)), await api.key_for(direct["id"], ("*",))
        await add_card(api, direct_key)
        agents = {billed["id"]: await agent(api, billed_key), direct["id"]: await agent(api, direct_key)}
        await worker.run_due()
        clock.set(FEB)
        await worker.run_due()  # the partner's charge is declined: past_due
        clock.set(FEB + timedelta(days=8))
        refused = await place_call(api, billed_key, agents[billed["id"]])
        assert refused.status_code == 402, refused.text
        error = refused.json()["error"]
        assert error["code"] == "payment_required" and error["details"]["billed_through_partner"] == (
            partner.organization_id) and "partner" in error["message"]
        assert (await place_call(api, direct_key, agents[direct["id"]])).status_code == 201
    finally:
        await worker.close()


async def test_the_partners_plan_change_supersedes_a_downgrade_its_client_had_waiting(
        make_api: ApiFactory, private_sql_url: str) -> None:
    """A client's downgrade waits for the period's end; the partner setting the client's plan afterwards is the
    latest word, so the period's close does not undo it."""
    api, clock, _, worker = await billed_app(make_api, private_sql_url)
    try:
        partner = await api.tenant(plan="enterprise", org_type="partner")
        await add_card(api, partner)
        dental = await client(api, partner, "Acme Dental", "business")
        acting = as_child(partner, dental["id"])
        waiting = await api.client.patch("/v2/billing/subscription", json={"plan": "starter"}, headers=acting.headers)
        assert waiting.status_code == 200 and waiting.json()["data"]["pending_plan"] == "starter", waiting.text
        raised = await api.client.patch(f"/v2/organizations/{dental['id']}", json={"plan": "enterprise"},
                                        headers=partner.headers)
        assert raised.status_code == 200 and raised.json()["data"]["plan"] == "enterprise", raised.text
        assert (await get(api, acting, "/billing/subscription"))["data"]["pending_plan"] is None
        await worker.run_due()
        clock.set(FEB)
        await worker.run_due()
        after = await api.client.get(f"/v2/organizations/{dental['id']}", headers=partner.headers)
        assert after.json()["data"]["plan"] == "enterprise"
    finally:
        await worker.close()


async def test_a_partner_mode_client_upgrades_on_its_partners_invoice_without_a_card(
        make_api: ApiFactory, private_sql_url: str) -> None:
    """Its partner pays for it: an upgrade through the subscription is in force at once and charged nothing now,
    as the partner's PATCH /organizations/{id} is; a direct-mode client still pays at once with its own card."""
    api, _, gateway, worker = await billed_app(make_api, private_sql_url)
    try:
        partner = await api.tenant(plan="enterprise", org_type="partner")
        dental = await client(api, partner, "Acme Dental", "starter")
        upgraded = await api.client.patch("/v2/billing/subscription", json={"plan": "business"},
                                          headers=as_child(partner, dental["id"]).headers)
        assert upgraded.status_code == 200 and upgraded.json()["data"]["plan"] == "business", upgraded.text
        assert (await api.client.get(f"/v2/organizations/{dental['id']}", headers=partner.headers)).json()[
            "data"]["plan"] == "business"
        invoices = (await get(api, as_child(partner, dental["id"]), "/billing/invoices"))["data"]
        assert invoices == [] and gateway.charges == []  # nothing charged now: the partner's invoice carries it
        plumbing = await client(api, partner, "Bob's Plumbing", "starter")
        acting = as_child(partner, plumbing["id"])
        direct = await api.client.patch("/v2/billing/subscription", json={"billing_mode": "direct"},
                                        headers=acting.headers)
        assert direct.status_code == 200, direct.text
        refused = await api.client.patch("/v2/billing/subscription", json={"plan": "business"}, headers=acting.headers)
        assert refused.status_code == 402 and refused.json()["error"]["code"] == "payment_method_required"
    finally:
        await worker.close()
