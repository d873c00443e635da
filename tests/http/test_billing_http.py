"""Billing through the real HTTP API on SQLite and PostgreSQL: the subscription (its plan changes are in
test_plan_changes_http.py), payment methods from gateway tokens, invoices built from the plan price and the usage
ledger, the period close and collection run as worker jobs with a manual clock (a decline → past_due → retried →
paid; four declines → uncollectible; POST .../pay at once), a dashboard session accepted like a key, and one
organization never seeing another's methods or invoices. Tests that close periods run on a database of their own."""

from __future__ import annotations

import asyncio
import io
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from pypdf import PdfReader

from adapters.memory.clock import ManualClock
from adapters.payments.simulator import SimulatedPaymentGateway
from application.accounts import CreateUser, CreateUserCommand
from application.billing import close_period, collect_due
from application.jobs import JobRunner
from application.ports.accounts import OrganizationRepository
from application.ports.billing import PaymentGateway
from application.ports.usage import CALL_SECONDS, SMS_SEGMENTS
from application.principals import Principal, PrincipalKind
from domain.scopes import ScopeSet
from entrypoints.features.billing import close_job, collect_job
from entrypoints.http.authentication import SessionAuthenticator
from entrypoints.ioc import build_container
from entrypoints.overrides import Pinned
from entrypoints.units import ScopedUnits
from entrypoints.worker import jobs, make_runner
from tests.http.test_cloud_status_http import COOKIE, SessionsForTests, as_header, in_admin
from tests.http.test_usage_http import record
from tests.support.apps import Api, ApiFactory, Tenant

JAN = datetime(2026, 1, 20, 9, tzinfo=UTC)
FEB = datetime(2026, 2, 1, 0, 0, 5, tzinfo=UTC)



async def get(api: Api, t: Tenant, path: str, status: int = 200) -> Any:
    response = await api.client.get(f"/v2{path}", headers=t.headers)
    assert response.status_code == status, response.text
    return response.json()


async def post(api: Api, t: Tenant, path: str, body: Any = None, status: int = 200) -> Any:
    response = await api.client.post(f"/v2{path}", json=body, headers=t.headers)
    assert response.status_code == status, response.text
    return response.json()


async def add_card(api: Api, t: Tenant, token: str = "pm_card_visa") -> dict[str, Any]:
    return (await post(api, t, "/billing/payment-methods", {"token": token}, 201))["data"]  # type: ignore[no-any-return]


class Worker:
    """The worker's billing jobs on a runner of their own, over the test's database, clock and gateway."""

    def __init__(self, api: Api, gateway: SimulatedPaymentGateway) -> None:
        self.container = build_container(api.settings, *api.overrides, Pinned(PaymentGateway, gateway))
        self.settings = api.settings
        self.runner: JobRunner | None = None

    async def run_due(self) -> int:
        if self.runner is None:
            kinds = [close_job(self.container, self.settings), collect_job(self.container, self.settings)]
            self.runner = await make_runner(self.container, self.settings, kinds=kinds)
            await self.runner.start()
        return await self.runner.run_due()

    async def close(self) -> None:
        await self.container.close()


async def billed_app(make_api: ApiFactory, url: str) -> tuple[Api, ManualClock, SimulatedPaymentGateway, Worker]:
    clock = ManualClock(JAN)
    gateway = SimulatedPaymentGateway()
    api = await make_api(url, clock=clock, overrides=(Pinned(PaymentGateway, gateway),))
    return api, clock, gateway, Worker(api, gateway)


# ---------------------------------------------------------------------------------------------- subscription


async def test_the_subscription_shows_the_plan_and_period_and_refuses_bad_changes(any_api: Api) -> None:
    t = await any_api.tenant(plan="business")
    sub = (await get(any_api, t, "/billing/subscription"))["data"]
    assert sub["plan"] == "business" and sub["status"] == "active" and sub["cancel_at_period_end"] is False
    assert sub["default_payment_method_id"] is None and sub["pending_plan"] is None
    assert sub["current_period_start"].endswith("-01T00:00:00Z")

    response = await any_api.client.patch("/v2/billing/subscription", json={"cancel_at_period_end": True},
                                          headers=t.headers)
    assert response.status_code == 200 and response.json()["data"]["cancel_at_period_end"] is True

    for bad in ({"plan": "platinum"}, {"plan": None}, {"unknown": 1}, {"cancel_at_period_end": "yes"}):
        refused = await any_api.client.patch("/v2/billing/subscription", json=bad, headers=t.headers)
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "bad_request", (bad, refused.text)


async def test_billing_needs_its_scopes(any_api: Api) -> None:
    t = await any_api.tenant(scopes=("billing:read",))
    assert (await any_api.client.get("/v2/billing/subscription", headers=t.headers)).status_code == 200
    refused = await any_api.client.post("/v2/billing/payment-methods", json={"token": "pm_card_visa"},
                                        headers=t.headers)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "INSUFFICIENT_SCOPE"
    other = await any_api.key_for(t.organization_id, ("usage:read",))
    refused = await any_api.client.get("/v2/billing/invoices", headers=other.headers)
    assert refused.status_code == 403
    assert (await any_api.client.get("/v2/billing/invoices")).status_code == 401


# ---------------------------------------------------------------------------------------------- payment methods


async def test_payment_methods_come_from_gateway_tokens(any_api: Api) -> None:
    t = await any_api.tenant()
    response = await any_api.client.post("/v2/billing/payment-methods", json={"token": "pm_card_visa"},
                                         headers=t.headers)
    assert response.status_code == 201, response.text
    visa = response.json()["data"]
    assert response.headers["location"].endswith(f"/billing/payment-methods/{visa['id']}")
    assert {k: visa[k] for k in ("brand", "last4", "is_default")} == {"brand": "visa", "last4": "4242",
                                                                     "is_default": True}
    assert isinstance(visa["exp_month"], int) and isinstance(visa["exp_year"], int)
    master = await add_card(any_api, t, "pm_card_mastercard")
    assert master["brand"] == "mastercard" and master["last4"] == "4444" and master["is_default"] is False

    listed = await get(any_api, t, "/billing/payment-methods")
    assert [m["id"] for m in listed["data"]] == [visa["id"], master["id"]] and listed["meta"]["total"] == 2
    made = (await post(any_api, t, f"/billing/payment-methods/{master['id']}/default"))["data"]
    assert made["is_default"] is True
    assert (await get(any_api, t, "/billing/subscription"))["data"]["default_payment_method_id"] == master["id"]
    assert (await get(any_api, t, f"/billing/payment-methods/{visa['id']}"))["data"]["is_default"] is False

    gone = await any_api.client.delete(f"/v2/billing/payment-methods/{master['id']}", headers=t.headers)
    assert gone.status_code == 204
    assert (await get(any_api, t, "/billing/subscription"))["data"]["default_payment_method_id"] == visa["id"]
    await get(any_api, t, f"/billing/payment-methods/{master['id']}", status=404)

    refused = await any_api.client.post("/v2/billing/payment-methods", json={"token": "4242424242424242"},
                                        headers=t.headers)
    assert refused.status_code == 400 and "token" in refused.json()["error"]["details"]["validation_errors"]
    empty = await any_api.client.post("/v2/billing/payment-methods", json={"token": ""}, headers=t.headers)
    assert empty.status_code == 400


async def test_one_organization_never_sees_anothers_methods_or_invoices(
        make_api: ApiFactory, private_sql_url: str) -> None:
    api, clock, _gateway, worker = await billed_app(make_api, private_sql_url)
    try:
        a, b = await api.tenant(name="A"), await api.tenant(name="B")
        card = await add_card(api, a)
        clock.set(FEB)
        await worker.run_due()
        invoice = (await get(api, a, "/billing/invoices"))["data"][0]
        assert invoice["status"] == "paid"

        for path in (f"/billing/payment-methods/{card['id']}", f"/billing/invoices/{invoice['id']}"):
            refused = await api.client.get(f"/v2{path}", headers=b.headers)
            assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found"
        for path in (f"/billing/payment-methods/{card['id']}/default", f"/billing/invoices/{invoice['id']}/pay"):
            refused = await api.client.post(f"/v2{path}", headers=b.headers)
            assert refused.status_code == 404, refused.text
        refused = await api.client.delete(f"/v2/billing/payment-methods/{card['id']}", headers=b.headers)
        assert refused.status_code == 404
        assert [m["id"] for m in (await get(api, b, "/billing/payment-methods"))["data"]] == []
        assert invoice["id"] not in [i["id"] for i in (await get(api, b, "/billing/invoices"))["data"]]
        assert (await get(api, a, f"/billing/payment-methods/{card['id']}"))["data"]["id"] == card["id"]
    finally:
        await worker.close()


# ---------------------------------------------------------------------------------------------- invoices


async def test_the_upcoming_invoice_bills_the_plan_and_overage_in_cents(
        make_api: ApiFactory, private_sql_url: str) -> None:
    api, _clock, _gateway, worker = await billed_app(make_api, private_sql_url)
    try:
        business = await api.tenant(plan="business")
        starter = await api.tenant(plan="starter")
        for t in (business, starter):
            await record(api, t.organization_id, CALL_SECONDS, 2_000 * 60 + 61, f"call:{uuid.uuid4()}", JAN)
            await record(api, t.organization_id, SMS_SEGMENTS, 10_005, "sms:bulk", JAN)
        upcoming = (await get(api, business, "/billing/invoices/upcoming"))["data"]
        assert upcoming["id"] is None and upcoming["status"] == "draft" and upcoming["period"] == "2026-01"
        assert [(x["quantity"], x["unit_amount"], x["amount"]) for x in upcoming["lines"]] == [
            (1, 49_900, 49_900), (2, 12, 24), (5, 2, 10)]  # 61 s past the included minutes bill 2 minutes
        assert upcoming["subtotal"] == upcoming["total"] == 49_934 and upcoming["currency"] == "usd"
        flat = (await get(api, starter, "/billing/invoices/upcoming"))["data"]
        assert [x["amount"] for x in flat["lines"]] == [4_900] and flat["total"] == 4_900  # no overage on starter
    finally:
        await worker.close()


async def test_a_declined_charge_makes_the_subscription_past_due_until_a_retry_pays(make_api: ApiFactory,
                                                                                   private_sql_url: str) -> None:
    api, clock, gateway, worker = await billed_app(make_api, private_sql_url)
    try:
        t = await api.tenant(plan="business")
        await record(api, t.organization_id, SMS_SEGMENTS, 10_100, "sms:bulk", JAN)
        declined = await add_card(api, t, "pm_card_chargeDeclined")
        await worker.run_due()  # the runner starts in January: December has nobody to invoice
        assert (await get(api, t, "/billing/invoices"))["data"] == []

        clock.set(FEB)
        await worker.run_due()
        [invoice] = (await get(api, t, "/billing/invoices"))["data"]
        assert invoice["period"] == "2026-01" and invoice["status"] == "open"
        assert invoice["total"] == 49_900 + 100 * 2
        assert invoice["last_payment_error"] == "card_declined" and invoice["attempt_count"] == 1
        assert invoice["next_payment_attempt"] == "2026-02-02T00:00:05Z"  # retried a day later
        assert (await get(api, t, "/billing/subscription"))["data"]["status"] == "past_due"

        visa = await add_card(api, t)
        await post(api, t, f"/billing/payment-methods/{visa['id']}/default")
        clock.advance(hours=23)
        await worker.run_due()  # not due yet
        assert (await get(api, t, f"/billing/invoices/{invoice['id']}"))["data"]["status"] == "open"
        clock.advance(hours=1)
        await worker.run_due()
        paid = (await get(api, t, f"/billing/invoices/{invoice['id']}"))["data"]
        assert paid["status"] == "paid" and paid["paid_at"] == "2026-02-02T00:00:05Z" and paid["attempt_count"] == 2
        assert paid["next_payment_attempt"] is None and paid["last_payment_error"] is None
        assert (await get(api, t, "/billing/subscription"))["data"]["status"] == "active"
        mine = [c for c in gateway.charges if c.idempotency_key.startswith(f"invoice_{invoice['id']}_")]
        assert [(c.idempotency_key, c.amount_cents, c.result.status) for c in mine] == [
            (f"invoice_{invoice['id']}_attempt_1", 50_100, "declined"),
            (f"invoice_{invoice['id']}_attempt_2", 50_100, "succeeded")]
        assert declined["id"] != visa["id"]
        refused = await api.client.post(f"/v2/billing/invoices/{invoice['id']}/pay", headers=t.headers)
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "invalid_transition"
    finally:
        await worker.close()


async def test_declines_are_retried_after_1_3_and_5_days_then_uncollectible_and_pay_retries_at_once(
        make_api: ApiFactory, private_sql_url: str) -> None:
    api, clock, gateway, worker = await billed_app(make_api, private_sql_url)
    try:
        t = await api.tenant(plan="starter")
        await add_card(api, t, "pm_card_insufficientFunds")
        await worker.run_due()
        clock.set(FEB)
        await worker.run_due()
        [invoice] = (await get(api, t, "/billing/invoices"))["data"]
        attempts = []
        for days in (1, 3, 5):
            attempts.append(invoice["next_payment_attempt"])
            clock.advance(days=days)
            await worker.run_due()
            invoice = (await get(api, t, f"/billing/invoices/{invoice['id']}"))["data"]
        assert attempts == ["2026-02-02T00:00:05Z", "2026-02-05T00:00:05Z", "2026-02-10T00:00:05Z"]
        assert invoice["status"] == "uncollectible" and invoice["attempt_count"] == 4
        assert invoice["next_payment_attempt"] is None and invoice["last_payment_error"] == "insufficient_funds"
        assert (await get(api, t, "/billing/subscription"))["data"]["status"] == "past_due"
        clock.advance(days=10)
        await worker.run_due()  # nothing retries an uncollectible invoice by itself
        assert len([c for c in gateway.charges if c.idempotency_key.startswith(f"invoice_{invoice['id']}_")]) == 4

        visa = await add_card(api, t)
        await post(api, t, f"/billing/payment-methods/{visa['id']}/default")
        paid = (await post(api, t, f"/billing/invoices/{invoice['id']}/pay"))["data"]
        assert paid["status"] == "paid" and paid["attempt_count"] == 5 and paid["total"] == 4_900
        assert (await get(api, t, "/billing/subscription"))["data"]["status"] == "active"
    finally:
        await worker.close()


async def test_a_repeated_pay_with_one_idempotency_key_charges_once(make_api: ApiFactory, private_sql_url: str) -> None:
    api, clock, gateway, worker = await billed_app(make_api, private_sql_url)
    try:
        t = await api.tenant(plan="business")
        clock.set(FEB)
        await worker.run_due()  # no method yet: declined with no_payment_method
        [invoice] = (await get(api, t, "/billing/invoices"))["data"]
        await add_card(api, t)
        headers = {**t.headers, "Idempotency-Key": "pay-january"}
        first = await api.client.post(f"/v2/billing/invoices/{invoice['id']}/pay", headers=headers)
        again = await api.client.post(f"/v2/billing/invoices/{invoice['id']}/pay", headers=headers)
        assert first.status_code == again.status_code == 200, (first.text, again.text)
        assert again.headers.get("idempotency-replayed") == "true" and again.content == first.content
        assert first.json()["data"]["status"] == "paid"
        assert [c.idempotency_key for c in gateway.charges] == [f"invoice_{invoice['id']}_attempt_2"]
    finally:
        await worker.close()


async def test_pay_without_a_method_keeps_the_invoice_open_and_says_why(
        make_api: ApiFactory, private_sql_url: str) -> None:
    api, clock, _gateway, worker = await billed_app(make_api, private_sql_url)
    try:
        t = await api.tenant(plan="enterprise")
        clock.set(FEB)
        await worker.run_due()
        [invoice] = (await get(api, t, "/billing/invoices"))["data"]
        assert invoice["total"] == 249_900 and invoice["last_payment_error"] == "no_payment_method"
        again = (await post(api, t, f"/billing/invoices/{invoice['id']}/pay"))["data"]
        assert again["status"] == "open" and again["attempt_count"] == 2
        assert again["next_payment_attempt"] == invoice["next_payment_attempt"]  # the schedule is unchanged
        await get(api, t, "/billing/invoices/999999999", status=404)
    finally:
        await worker.close()


async def test_cancel_at_period_end_cancels_when_the_period_closes(make_api: ApiFactory, private_sql_url: str) -> None:
    api, clock, _gateway, worker = await billed_app(make_api, private_sql_url)
    try:
        t = await api.tenant(plan="business")
        await add_card(api, t)
        response = await api.client.patch("/v2/billing/subscription", json={"cancel_at_period_end": True},
                                          headers=t.headers)
        assert response.status_code == 200
        await worker.run_due()
        clock.set(FEB)
        await worker.run_due()
        assert (await get(api, t, "/billing/subscription"))["data"]["status"] == "canceled"
        assert [i["status"] for i in (await get(api, t, "/billing/invoices"))["data"]] == ["paid"]
        refused = await api.client.patch("/v2/billing/subscription", json={"cancel_at_period_end": False},
                                         headers=t.headers)  # only a plan reactivates it (test_plan_changes_http)
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "invalid_transition"
        clock.advance(days=31)
        await worker.run_due()  # March: a canceled subscription is not invoiced again
        assert len((await get(api, t, "/billing/invoices"))["data"]) == 1
    finally:
        await worker.close()


# ---------------------------------------------------------------------------------------------- sessions


async def test_a_dashboard_session_reaches_billing(make_api: ApiFactory, sql_url: str) -> None:
    sessions = SessionsForTests()
    api = await make_api(sql_url, overrides=(Pinned(SessionAuthenticator, sessions),))
    tenant = await api.tenant()

    async def sign_in(request: Any) -> Principal:
        user_id = await (await request.get(CreateUser)).execute(
            CreateUserCommand(tenant.organization_id, f"{uuid.uuid4().hex}@example.com", "correct horse battery"))
        organization = await (await request.get(OrganizationRepository)).get(tenant.organization_id)
        return Principal(PrincipalKind.SESSION, organization, ScopeSet.of(["billing:*"]), user_id=user_id)
    principal = await in_admin(api, sign_in)
    cookie = as_header({COOKIE: sessions.open(principal)})

    answered = await api.client.get("/v2/billing/subscription", headers=cookie)
    assert answered.status_code == 200, answered.text
    added = await api.client.post("/v2/billing/payment-methods", json={"token": "pm_card_visa"}, headers=cookie)
    assert added.status_code == 201, added.text
    listed = await api.client.get("/v2/billing/payment-methods", headers=cookie)
    assert [m["id"] for m in listed.json()["data"]] == [added.json()["data"]["id"]]
    assert (await api.client.get("/v2/billing/invoices/upcoming", headers=cookie)).status_code == 200
    narrow = as_header({COOKIE: sessions.open(Principal(PrincipalKind.SESSION, principal.organization,
                                                        ScopeSet.of(["cloud:read"]), user_id=principal.user_id))})
    refused = await api.client.get("/v2/billing/invoices", headers=narrow)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "INSUFFICIENT_SCOPE"
    assert (await api.client.get("/v2/billing/invoices", headers=as_header({COOKIE: "forged"}))).status_code == 401



# ---------------------------------------------------------------------------------------------- two workers



ORGS = 40


@pytest.mark.postgres
async def test_two_workers_close_a_month_once_per_organization_and_charge_each_invoice_once(
        make_api: ApiFactory, private_pg_url: str) -> None:
    """Two job runners (as two worker processes have) over one PostgreSQL database, with a manual clock crossing
    January into February: each organization gets one January invoice and is charged once; a close or a
    collection run again at once by both (as when a lease is taken over) changes nothing."""
    assert close_job in jobs() and collect_job in jobs()  # every `parley worker` runs them
    api, clock, gateway, first = await billed_app(make_api, private_pg_url)
    second = Worker(api, gateway)
    try:
        clock.set(datetime(2026, 1, 31, 23, 59, 59, tzinfo=UTC))
        tenants = [await api.tenant(plan=("starter", "business", "enterprise")[i % 3], name=f"O{i}")
                   for i in range(ORGS)]
        for t in tenants[::2]:
            await add_card(api, t)
        for t in tenants[1::4]:
            await add_card(api, t, "pm_card_chargeDeclined")
        await asyncio.gather(first.run_due(), second.run_due())
        assert (await get(api, tenants[0], "/billing/invoices"))["data"] == []  # still January

        clock.set(FEB)
        await asyncio.gather(first.run_due(), second.run_due())
        units = ScopedUnits(first.container), ScopedUnits(second.container)
        await asyncio.gather(close_period(units[0], "2026-01", 7), close_period(units[1], "2026-01", 7),
                             collect_due(units[0], 3), collect_due(units[1], 3))

        invoices = [(await get(api, t, "/billing/invoices"))["data"] for t in tenants]
        assert [len(i) for i in invoices] == [1] * ORGS
        assert {i[0]["period"] for i in invoices} == {"2026-01"}
        by_plan = {"starter": 4_900, "business": 49_900, "enterprise": 249_900}
        plans = [("starter", "business", "enterprise")[n % 3] for n in range(ORGS)]
        assert [i[0]["total"] for i in invoices] == [by_plan[p] for p in plans]
        keys = [c.idempotency_key for c in gateway.charges]
        assert len(keys) == len(set(keys))  # no charge was made twice
        ids = {i[0]["id"] for i in invoices}
        charged = {int(k.split("_")[1]) for k in keys}
        with_card = {i[0]["id"] for n, i in enumerate(invoices) if n % 2 == 0 or n % 4 == 1}
        assert charged == with_card <= ids
        assert [i[0]["status"] for i in invoices] == [
            "paid" if n % 2 == 0 else "open" for n in range(ORGS)]
        assert all(i[0]["attempt_count"] == 1 for i in invoices)
    finally:
        await first.close()
        await second.close()


async def test_an_invoice_renders_as_a_pdf_with_its_lines(make_api: ApiFactory, private_sql_url: str) -> None:
    api, clock, _, worker = await billed_app(make_api, private_sql_url)
    try:
        t = await api.tenant(plan="business")
        await record(api, t.organization_id, SMS_SEGMENTS, 10_100, "sms:bulk", JAN)
        await add_card(api, t)
        await worker.run_due()
        clock.set(FEB)
        await worker.run_due()
        [invoice] = (await get(api, t, "/billing/invoices"))["data"]
        response = await api.client.get(f"/v2/billing/invoices/{invoice['id']}/pdf", headers=t.headers)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/pdf"
        assert response.headers["content-disposition"] == f'inline; filename="{invoice["number"]}.pdf"'
        assert response.content.startswith(b"%PDF-")
        text = " ".join(page.extract_text() for page in PdfReader(io.BytesIO(response.content)).pages)
        for expected in (invoice["number"], "Business plan (2026-01)", "SMS segments over the included amount",
                         "499.00 USD", "2.00 USD", "501.00 USD", "paid", "2026-01", "Total"):
            assert expected in text, (expected, text)
        other = await api.tenant()
        missing = await api.client.get(f"/v2/billing/invoices/{invoice['id']}/pdf", headers=other.headers)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
        no_scope = await api.key_for(t.organization_id, ("usage:read",))
        assert (await api.client.get(f"/v2/billing/invoices/{invoice['id']}/pdf",
                                     headers=no_scope.headers)).status_code == 403
    finally:
        await worker.close()


async def test_simultaneous_first_cards_make_one_default(concurrent_api: Api) -> None:
    """An organization's first card becomes its default: four added at the same moment (on PostgreSQL really side
    by side) make exactly one, the one the subscription names."""
    api = concurrent_api
    for _ in range(2):
        t = await api.tenant(plan="business")
        added = await asyncio.gather(*(api.client.post("/v2/billing/payment-methods", json={"token": "pm_card_visa"},
                                                       headers=t.headers) for _ in range(4)))
        assert [a.status_code for a in added] == [201] * 4, [a.text for a in added]
        defaults = [a.json()["data"]["id"] for a in added if a.json()["data"]["is_default"]]
        assert len(defaults) == 1, [a.json()["data"] for a in added]
        subscription = (await get(api, t, "/billing/subscription"))["data"]
        assert subscription["default_payment_method_id"] == defaults[0]
