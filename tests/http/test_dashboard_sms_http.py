"""The SMS section of the dashboard through HTTP, on both databases: the messages listed with their direction,
status, numbers and body (filtered as GET /sms filters), a message sent by the form through the same use case as
POST /sms, and each of its gates refusing on the form with a clear message and nothing stored: a bad field, a
Do-Not-Call list, a STOP reply, the destination policy, the plan's quota and a billing hold."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from application.ports.billing import BillingRepository
from application.ports.platform import UnitOfWork
from domain.usage import SMS_SEGMENTS
from tests.http.calls_support import unique_phone
from tests.http.dashboard_support import cookie, login, new_user
from tests.http.test_sms_http import inbound, sms_number
from tests.http.test_usage_http import record
from tests.support.apps import Api


async def _signed_in(api: Api, plan: str = "enterprise") -> tuple[Any, dict[str, str], str]:
    user = await new_user(api, plan=plan)
    session, csrf = await login(api, user)
    return user, cookie(session), csrf


async def _send(api: Api, headers: dict[str, str], csrf: str, **fields: str) -> Any:
    return await api.client.post("/dashboard/sms", headers=headers, follow_redirects=False,
                                 data={"csrf_token": csrf, **fields})


async def _total(api: Api, user: Any) -> int:
    return int((await api.client.get("/v2/sms", headers=user.tenant.headers)).json()["meta"]["total"])


def _refused(response: Any, status: int, code: str) -> None:
    assert response.status_code == status, (response.status_code, response.text[-2000:])
    assert f'data-refusal="{code}"' in response.text and 'class="alert" role="alert"' in response.text


async def test_send_and_list(any_api: Api) -> None:
    user, headers, csrf = await _signed_in(any_api)
    page = await any_api.client.get("/dashboard/sms", headers=headers)
    assert page.status_code == 200 and 'id="send-sms"' in page.text and "No messages yet" in page.text
    number = await sms_number(any_api, user.tenant)
    page = await any_api.client.get("/dashboard/sms", headers=headers)
    assert f'value="{number["id"]}"' in page.text  # the organization's SMS numbers are the senders offered

    for fields, field in (({"to": "nobody", "body": "Hi"}, "to"), ({"to": "+14155550123", "body": ""}, "body"),
                          ({"to": "+14155550123", "body": "x" * 1601}, "body"),
                          ({"to": "+14155550123", "body": "Hi", "from_phone_number_id": "99999999"},
                           "from_phone_number_id")):
        refused = await _send(any_api, headers, csrf, **fields)
        assert refused.status_code in (400, 404) and f'id="{field}-error"' in refused.text, (fields, refused.text)
    assert await _total(any_api, user) == 0

    sent = await _send(any_api, headers, csrf, to="+1 415 555 0123", body="Your table is ready",
                       from_phone_number_id=str(number["id"]))
    assert sent.status_code == 303 and "Message%20to%20%2B14155550123" in sent.headers["location"], sent.text
    [message] = (await any_api.client.get("/v2/sms", headers=user.tenant.headers)).json()["data"]
    assert message["to"] == "+14155550123" and message["from"] == number["phone_number"]
    await inbound(any_api, user.tenant, "+14155550124", number["phone_number"], "See you soon")

    listed = await any_api.client.get("/dashboard/sms", headers=headers)
    assert 'id="sms-messages"' in listed.text and "Your table is ready" in listed.text
    assert "See you soon" in listed.text and "inbound" in listed.text and 'data-label="Status"' in listed.text
    inbound_only = await any_api.client.get("/dashboard/sms", params={"direction": "inbound"}, headers=headers)
    assert "See you soon" in inbound_only.text and "Your table is ready" not in inbound_only.text
    to_one = await any_api.client.get("/dashboard/sms", params={"to": "+14155550123"}, headers=headers)
    assert "Your table is ready" in to_one.text and "See you soon" not in to_one.text
    bad_filter = await any_api.client.get("/dashboard/sms", params={"to": "nope"}, headers=headers)
    assert bad_filter.status_code == 400 and 'id="filter-to-error"' in bad_filter.text


async def test_dnc_stop_and_the_destination_policy_refuse_on_the_form(any_api: Api) -> None:
    user, headers, csrf = await _signed_in(any_api)
    listed = await any_api.client.post("/v2/dnc/lists", json={"name": "Complaints"}, headers=user.tenant.headers)
    blocked = unique_phone()
    await any_api.client.post(f"/v2/dnc/lists/{listed.json()['data']['id']}/entries",
                              json={"phone_numbers": [blocked]}, headers=user.tenant.headers)
    refused = await _send(any_api, headers, csrf, to=blocked, body="Hi")
    _refused(refused, 422, "dnc_blocked")
    assert 'id="to-error"' in refused.text and "Do-Not-Call list" in refused.text
    assert f'value="{blocked}"' in refused.text  # the form keeps what was typed

    number = await sms_number(any_api, user.tenant)
    person = unique_phone()
    assert (await inbound(any_api, user.tenant, person, number["phone_number"], "STOP")).status_code == 201
    stopped = await _send(any_api, headers, csrf, to=person, body="Hi")
    _refused(stopped, 422, "recipient_opted_out")
    assert "replied STOP" in stopped.text

    premium = await _send(any_api, headers, csrf, to="+19005550123", body="Hi")
    _refused(premium, 422, "destination_not_allowed")
    assert 'id="to-error"' in premium.text
    assert [m["direction"] for m in (await any_api.client.get(
        "/v2/sms", headers=user.tenant.headers)).json()["data"]] == ["inbound"]  # only the STOP reply


async def test_the_quota_and_a_billing_hold_refuse_on_the_form(any_api: Api) -> None:
    user, headers, csrf = await _signed_in(any_api, plan="starter")
    await record(any_api, user.tenant.organization_id, SMS_SEGMENTS, 500, "sms:earlier", datetime.now(UTC))
    over = await _send(any_api, headers, csrf, to="+14155550123", body="Hi")
    _refused(over, 403, "quota_exceeded")
    assert "sms_segments" in over.text
    assert await _total(any_api, user) == 0

    user, headers, csrf = await _signed_in(any_api, plan="business")
    async with any_api._admin()() as request:
        billing = await request.get(BillingRepository)
        account = await billing.account(user.tenant.organization_id)
        await billing.save_account(replace(account, status="canceled"))
        await (await request.get(UnitOfWork)).commit()
    held = await _send(any_api, headers, csrf, to="+14155550123", body="Hi")
    _refused(held, 402, "payment_required")
    assert "Reactivate" in held.text
    assert await _total(any_api, user) == 0
