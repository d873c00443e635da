"""The dashboard's appointments, campaigns, webhooks and billing pages through HTTP, on both databases: each page
shows the organization's data, forms work through the API's use cases and need the CSRF token, and a session of
one organization reaches nothing of another's (its ids are 404 pages)."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from application.ports.billing import BillingRepository
from application.ports.platform import PageRequest, UnitOfWork
from application.ports.webhooks import DeliveryRepository
from domain.billing import build_invoice
from domain.usage import period_bounds
from domain.webhooks import Delivery, DeliveryAttempt
from tests.http.calls_support import unique_phone
from tests.http.dashboard_support import User, cookie, csrf_of, login, new_user
from tests.http.scheduling_support import make_calendar, slots
from tests.http.test_campaigns_http import new_campaign
from tests.support.apps import Api, Tenant

HOOK = "https://hooks.example.com/parley"


async def signed_in(api: Api) -> tuple[User, dict[str, str]]:
    user = await new_user(api)
    session, _ = await login(api, user)
    return user, cookie(session)


async def page(api: Api, headers: dict[str, str], path: str, status: int = 200) -> str:
    response = await api.client.get(f"/dashboard{path}", headers=headers)
    assert response.status_code == status, response.text
    assert "text/html" in response.headers["content-type"]
    return response.text


async def submit(api: Api, headers: dict[str, str], path: str, csrf: str | None, **fields: str) -> Any:
    data = dict(fields) if csrf is None else {"csrf_token": csrf, **fields}
    return await api.client.post(f"/dashboard{path}", headers=headers, data=data, follow_redirects=False)


async def campaign_with_contacts(api: Api, t: Tenant, name: str = "Spring follow-ups") -> dict[str, Any]:
    campaign = await new_campaign(api, t, name=name)
    added = await api.client.post(f"/v2/campaigns/{campaign['id']}/contacts", headers=t.headers,
                                  json={"contacts": [{"phone": unique_phone()}, {"phone": unique_phone()}]})
    assert added.status_code in (200, 201), added.text
    return campaign


async def webhook_with_a_failed_attempt(api: Api, t: Tenant) -> tuple[int, int]:
    created = await api.client.post("/v2/webhooks", json={"url": HOOK, "events": ["call.ended"], "name": "CRM"},
                                    headers=t.headers)
    assert created.status_code == 201, created.text
    hook = created.json()["data"]["id"]
    now = datetime.now(UTC)
    message = f"msg_{uuid.uuid4().hex}"
    async with api._admin()() as request:
        deliveries = await request.get(DeliveryRepository)
        delivery = await deliveries.add(Delivery(None, t.organization_id, hook, "call.ended", {"call_id": "c1"}, now,
                                                 message, status="failed", attempts=1, auto_retry=False,
                                                 created_at=now, updated_at=now))
        await deliveries.add_attempts([DeliveryAttempt(None, t.organization_id, hook, delivery.id or 0, "call.ended",
                                                       message, 1, "failed", 500, "oops", 42,
                                                       "HTTP 500", now)])
        await (await request.get(UnitOfWork)).commit()
    log = (await api.client.get(f"/v2/webhooks/{hook}/logs", headers=t.headers)).json()["data"]
    return hook, log[0]["id"]


async def open_invoice(api: Api, organization_id: int) -> int:
    start, end = period_bounds("2026-01")
    async with api._admin()() as request:
        billing = await request.get(BillingRepository)
        assert await billing.add_invoices([build_invoice(organization_id, "starter", "2026-01", start, end,
                                                         {"call_minutes": 1234}, end + timedelta(hours=1))]) == 1
        await (await request.get(UnitOfWork)).commit()
        found = await billing.invoices(organization_id, PageRequest())
    return found.items[0].id or 0


async def test_appointments_by_day(any_api: Api) -> None:
    user, headers = await signed_in(any_api)
    t = user.tenant
    calendar = await make_calendar(any_api, t, tz="America/New_York", name="Front desk")
    now = datetime.now(UTC)
    free = await slots(any_api, t, calendar["id"], (now + timedelta(days=2)).isoformat(),
                       (now + timedelta(days=4)).isoformat())
    booked = await any_api.client.post("/v2/scheduling/appointments", headers=t.headers, json={
        "calendar_id": calendar["id"], "slot_start": free[0], "attendee_name": "Ada Lovelace",
        "attendee_phone": "+14155550199"})
    assert booked.status_code == 201, booked.text
    start = datetime.fromisoformat(free[0].replace("Z", "+00:00"))
    local = start.astimezone(ZoneInfo("America/New_York"))
    html = await page(any_api, headers, f"/appointments?date={local.date().isoformat()}")
    assert "Ada Lovelace" in html and "Front desk" in html and local.strftime("%H:%M") in html
    assert "America/New_York" in html and "+14155550199" in html
    assert f"date={(local.date() - timedelta(days=1)).isoformat()}" in html
    assert f"date={(local.date() + timedelta(days=1)).isoformat()}" in html
    empty = await page(any_api, headers, f"/appointments?date={(local.date() + timedelta(days=30)).isoformat()}")
    assert "No appointments on this day" in empty and "Ada Lovelace" not in empty
    odd = await page(any_api, headers, "/appointments?date=not-a-day")
    assert "is not a date" in odd
    # another organization's session sees none of it
    _, other = await signed_in(any_api)
    assert "Ada Lovelace" not in await page(any_api, other, f"/appointments?date={local.date().isoformat()}")


async def test_campaigns_list_page_and_actions(any_api: Api) -> None:
    user, headers = await signed_in(any_api)
    t = user.tenant
    campaign = await campaign_with_contacts(any_api, t, "Spring follow-ups")
    listed = await page(any_api, headers, "/campaigns")
    assert "Spring follow-ups" in listed and "0 / 2 completed" in listed
    path = f"/campaigns/{campaign['id']}"
    html = await page(any_api, headers, path)
    assert "draft" in html and "0 / 2" in html and "live.js" in html
    assert f'data-live="/dashboard/live/campaigns/{campaign["id"]}"' in html
    token = csrf_of(html)
    # no token: an error page, nothing changed
    refused = await submit(any_api, headers, f"{path}/start", None)
    assert refused.status_code == 403 and "text/html" in refused.headers["content-type"]
    api_view = (await any_api.client.get(f"/v2/campaigns/{campaign['id']}", headers=t.headers)).json()["data"]
    assert api_view["status"] == "draft"
    started = await submit(any_api, headers, f"{path}/start", token)
    assert started.status_code == 303 and started.headers["location"].startswith(f"/dashboard{path}?flash=")
    assert (await any_api.client.get(f"/v2/campaigns/{campaign['id']}", headers=t.headers)
            ).json()["data"]["status"] == "running"
    paused = await submit(any_api, headers, f"{path}/pause", token)
    assert paused.status_code == 303
    again = await submit(any_api, headers, f"{path}/pause", token)  # paused already: the page with the error
    assert again.status_code == 409 and "Spring follow-ups" in again.text and 'role="alert"' in again.text
    cancelled = await submit(any_api, headers, f"{path}/cancel", token, confirm="cancel")
    assert cancelled.status_code == 303
    final = await page(any_api, headers, path)
    assert "cancelled" in final and "data-refresh" not in final


async def test_webhooks_log_and_redeliver(any_api: Api) -> None:
    user, headers = await signed_in(any_api)
    t = user.tenant
    hook, attempt = await webhook_with_a_failed_attempt(any_api, t)
    listed = await page(any_api, headers, "/webhooks")
    assert "CRM" in listed and HOOK in listed and "healthy" in listed
    html = await page(any_api, headers, f"/webhooks/{hook}")
    assert "msg_" in html and "HTTP 500" in html and "Redeliver" in html
    path = f"/webhooks/{hook}/logs/{attempt}/redeliver"
    refused = await submit(any_api, headers, path, "forged")
    assert refused.status_code == 403
    async with any_api._admin()() as request:
        before = await (await request.get(DeliveryRepository)).get_attempt(t.organization_id, hook, attempt)
        delivery = await (await request.get(DeliveryRepository)).get(t.organization_id, before.delivery_id if before
                                                                     else 0)
    assert delivery is not None and delivery.status == "failed"
    done = await submit(any_api, headers, path, csrf_of(html))
    assert done.status_code == 303 and "queued" in done.headers["location"]
    async with any_api._admin()() as request:
        delivery = await (await request.get(DeliveryRepository)).get(t.organization_id, delivery.id or 0)
    assert delivery is not None and delivery.status == "pending"
    missing = await submit(any_api, headers, f"/webhooks/{hook}/logs/999999/redeliver", csrf_of(html))
    assert missing.status_code == 404


async def test_billing_methods_invoices_and_pay(any_api: Api) -> None:
    user, headers = await signed_in(any_api)
    t = user.tenant
    html = await page(any_api, headers, "/billing")
    assert "Enterprise" in html and "Upcoming invoice" in html and "No payment method yet" in html
    token = csrf_of(html)
    assert (await submit(any_api, headers, "/billing/payment-methods", None, token="pm_card_visa")).status_code == 403
    assert (await any_api.client.get("/v2/billing/payment-methods", headers=t.headers)).json()["data"] == []
    bad = await submit(any_api, headers, "/billing/payment-methods", token, token="4242424242424242")
    assert bad.status_code == 400 and "Add a test card" in bad.text
    for card in ("pm_card_visa", "pm_card_mastercard"):
        added = await submit(any_api, headers, "/billing/payment-methods", token, token=card)
        assert added.status_code == 303, added.text
    methods = (await any_api.client.get("/v2/billing/payment-methods", headers=t.headers)).json()["data"]
    visa, master = sorted(methods, key=lambda m: m["id"])
    assert visa["is_default"] and not master["is_default"]
    html = await page(any_api, headers, "/billing")
    assert "•••• 4242" in html and "•••• 4444" in html and "Make default" in html
    assert (await submit(any_api, headers, f"/billing/payment-methods/{master['id']}/default", token)
            ).status_code == 303
    assert (await any_api.client.get("/v2/billing/subscription", headers=t.headers)
            ).json()["data"]["default_payment_method_id"] == master["id"]
    removal = f"/billing/payment-methods/{visa['id']}/remove"
    asking = await page(any_api, headers, removal)
    assert "Remove the Visa ending 4242?" in asking and 'name="confirm" value="remove"' in asking
    unconfirmed = await submit(any_api, headers, removal, token)  # asks again, removes nothing
    assert unconfirmed.status_code == 200 and "Remove the Visa ending 4242?" in unconfirmed.text
    assert len((await any_api.client.get("/v2/billing/payment-methods", headers=t.headers)).json()["data"]) == 2
    assert (await submit(any_api, headers, removal, token, confirm="remove")).status_code == 303
    assert [m["id"] for m in (await any_api.client.get("/v2/billing/payment-methods", headers=t.headers)
                              ).json()["data"]] == [master["id"]]
    invoice = await open_invoice(any_api, t.organization_id)
    api_invoice = (await any_api.client.get(f"/v2/billing/invoices/{invoice}", headers=t.headers)).json()["data"]
    listed = await page(any_api, headers, "/billing")
    assert api_invoice["number"] in listed and "Pay now" in listed
    shown = await page(any_api, headers, f"/billing/invoices/{invoice}")
    total = api_invoice["total"]
    assert f"${total // 100:,}.{total % 100:02d}" in shown and "Pay now" in shown
    assert re.search(r"\$\d[\d,]*\.\d\d", shown)
    assert (await submit(any_api, headers, f"/billing/invoices/{invoice}/pay", None)).status_code == 403
    assert (await any_api.client.get(f"/v2/billing/invoices/{invoice}", headers=t.headers)
            ).json()["data"]["status"] == "open"
    paid = await submit(any_api, headers, f"/billing/invoices/{invoice}/pay", token)
    assert paid.status_code == 303 and "paid" in paid.headers["location"]
    assert (await any_api.client.get(f"/v2/billing/invoices/{invoice}", headers=t.headers)
            ).json()["data"]["status"] == "paid"
    again = await submit(any_api, headers, f"/billing/invoices/{invoice}/pay", token)
    assert again.status_code == 409 and 'role="alert"' in again.text
    waiting = await any_api.client.patch("/v2/billing/subscription", json={"plan": "business"}, headers=t.headers)
    assert waiting.status_code == 200 and waiting.json()["data"]["pending_plan"] == "business"
    html = await page(any_api, headers, "/billing")
    assert "Plan change" in html and "Business from" in html  # a downgrade waits for the period's end


async def test_another_organizations_ids_are_404_pages(any_api: Api) -> None:
    owner, _ = await signed_in(any_api)
    t = owner.tenant
    campaign = await campaign_with_contacts(any_api, t, "Secret campaign")
    hook, attempt = await webhook_with_a_failed_attempt(any_api, t)
    invoice = await open_invoice(any_api, t.organization_id)
    method = (await any_api.client.post("/v2/billing/payment-methods", json={"token": "pm_card_visa"},
                                        headers=t.headers)).json()["data"]["id"]
    _, intruder = await signed_in(any_api)
    token = csrf_of(await page(any_api, intruder, "/billing"))
    for path in (f"/campaigns/{campaign['id']}", f"/campaigns/{campaign['id']}/progress", f"/webhooks/{hook}",
                 f"/billing/invoices/{invoice}", f"/billing/payment-methods/{method}/remove", f"/campaigns/{2**60}",
                 "/webhooks/0"):
        html = await page(any_api, intruder, path, 404)
        assert "Secret campaign" not in html and "msg_" not in html and "CRM" not in html
    for path in (f"/campaigns/{campaign['id']}/start", f"/campaigns/{campaign['id']}/cancel",
                 f"/webhooks/{hook}/logs/{attempt}/redeliver", f"/billing/invoices/{invoice}/pay",
                 f"/billing/payment-methods/{method}/default", f"/billing/payment-methods/{method}/remove"):
        response = await submit(any_api, intruder, path, token, confirm="remove")
        assert response.status_code == 404 and "text/html" in response.headers["content-type"], path
    for path in ("/campaigns", "/webhooks", "/billing"):
        html = await page(any_api, intruder, path)
        assert "Secret campaign" not in html and "CRM" not in html
    assert (await any_api.client.get(f"/v2/campaigns/{campaign['id']}", headers=t.headers)
            ).json()["data"]["status"] == "draft"
    assert (await any_api.client.get(f"/v2/billing/invoices/{invoice}", headers=t.headers)
            ).json()["data"]["status"] == "open"
    assert len((await any_api.client.get("/v2/billing/payment-methods", headers=t.headers)).json()["data"]) == 1
