"""Every POST honours Idempotency-Key (none ignores it): a repeat with the same key and request is the
stored response, marked Idempotency-Replayed, and acts once. A body too large to fingerprint (a big
multipart upload) is refused with 400 idempotency_unsupported when the header is sent."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from domain.idempotency import MAX_BODY_BYTES
from tests.http.calls_support import active_agent, unique_phone
from tests.http.route_table import served_operations
from tests.support.apps import Api, Tenant

Request = dict[str, Any]  # path and the keyword arguments of client.post
Setup = Callable[[Api, Tenant], Awaitable[Request]]
BOUNDARY = "parley-test-boundary"
HOOK = "https://hooks.example.com/parley"


async def _post(api: Api, tenant: Tenant, path: str, body: Any = None) -> dict[str, Any]:
    response = await api.client.post(path, json=body, headers=tenant.headers)
    assert response.status_code < 300, response.text
    return response.json()["data"]  # type: ignore[no-any-return]


async def _agent(api: Api, t: Tenant) -> int:
    return int((await _post(api, t, "/v2/agents", {"name": "Front desk", "prompt": "Answer calls."}))["id"])


async def _published_agent(api: Api, t: Tenant) -> int:
    agent = await _agent(api, t)
    await _post(api, t, f"/v2/agents/{agent}/publish", None)
    return agent


async def _kb(api: Api, t: Tenant) -> int:
    return int((await _post(api, t, "/v2/knowledge-bases", {"name": "KB", "agent_id": await _agent(api, t)}))["id"])


async def _calendar(api: Api, t: Tenant) -> int:
    calendar = await _post(api, t, "/v2/scheduling/calendars", {"name": "Desk", "timezone": "UTC"})
    for weekday in range(7):
        await _post(api, t, f"/v2/scheduling/calendars/{calendar['id']}/rules",
                    {"weekday": weekday, "start_time": "00:00", "end_time": "23:30"})
    return int(calendar["id"])


async def _appointment_request(api: Api, t: Tenant, **fields: Any) -> Request:
    calendar = await _calendar(api, t)
    start = datetime.now(UTC) + timedelta(days=1)
    found = await api.client.get("/v2/scheduling/availability", headers=t.headers, params={
        "calendar_id": calendar, "start": start.isoformat(), "end": (start + timedelta(days=1)).isoformat()})
    assert found.status_code == 200, found.text
    slot = found.json()["data"]["slots"][0]["start"]
    return {"path": "/v2/scheduling/appointments", "json": {"calendar_id": calendar, "slot_start": slot, **fields}}


async def _appointment(api: Api, t: Tenant, **fields: Any) -> int:
    request = await _appointment_request(api, t, **fields)
    return int((await _post(api, t, request["path"], request["json"]))["id"])


async def _webhook(api: Api, t: Tenant) -> int:
    return int((await _post(api, t, "/v2/webhooks", {"url": HOOK, "events": ["call.ended"]}))["id"])


_TRIGGER = {"name": "Once", "event": "call.ended", "actions": [{"type": "webhook", "config": {"url": HOOK}}]}


async def _trigger(api: Api, t: Tenant) -> int:
    return int((await _post(api, t, "/v2/triggers", _TRIGGER))["id"])


async def _dnc_list(api: Api, t: Tenant) -> int:
    return int((await _post(api, t, "/v2/dnc/lists", {"name": "Opt-outs"}))["id"])


async def _card(api: Api, t: Tenant) -> int:
    return int((await _post(api, t, "/v2/billing/payment-methods", {"token": "pm_card_visa"}))["id"])


def _multipart(name: str, data: bytes) -> Request:
    """A multipart body with a fixed boundary: a retry sends the very same bytes."""
    body = (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"{name}\"\r\n"
            f"Content-Type: text/plain\r\n\r\n").encode() + data + f"\r\n--{BOUNDARY}--\r\n".encode()
    return {"content": body, "headers": {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}}


async def _upload(api: Api, t: Tenant) -> Request:
    return {"path": f"/v2/knowledge-bases/{await _kb(api, t)}/documents",
            **_multipart("notes.txt", b"Deliveries arrive on Tuesdays.")}


async def _call(api: Api, t: Tenant) -> Request:
    agent = await active_agent(api, t)
    return {"path": "/v2/calls", "json": {"bot_id": str(agent["id"]), "destination_phone": "+14155550100",
                                          "contact_name": "Ada"}}


async def _web_call(api: Api, t: Tenant) -> Request:
    return {"path": "/v2/calls/web", "json": {"agent_id": (await active_agent(api, t))["id"],
                                              "custom_data": {"contact_name": "Ada"}}}


async def _widget_web_call(api: Api, t: Tenant) -> Request:
    token = await _widget_token(api, t, await _campaign(api, t))
    return {"path": "/v2/widget/web-calls", "json": {"custom_data": {"contact_name": "Ada"}},
            "headers": {"Authorization": f"Widget {token}", "Origin": "https://shop.example"}}


async def _lead(api: Api, t: Tenant) -> Request:
    agent = await active_agent(api, t)
    return {"path": "/v2/leads", "json": {"phone": "+14155550100", "name": "Ada", "agent_id": agent["id"]}}


async def _sms_inbound(api: Api, t: Tenant) -> Request:
    number = await _post(api, t, "/v2/telephony/phone-numbers",
                         {"phone_number": unique_phone(), "capabilities": {"sms": True}})
    return {"path": "/v2/telephony/simulator/inbound-sms",
            "json": {"from": "+14155550100", "to": number["phone_number"], "body": "STOP"}}


async def _placed_call(api: Api, t: Tenant) -> str:
    request = await _call(api, t)
    return str((await _post(api, t, request["path"], request["json"]))["id"])


async def _kb_request(api: Api, t: Tenant) -> Request:
    return {"path": "/v2/knowledge-bases", "json": {"name": "KB", "agent_id": await _agent(api, t)}}


async def _csv_import(api: Api, t: Tenant) -> Request:
    return {"path": f"/v2/dnc/lists/{await _dnc_list(api, t)}/entries/import",
            "content": b"phone\n+14155550103\n", "headers": {"Content-Type": "text/csv"}}


async def _attach(api: Api, t: Tenant) -> Request:
    return {"path": f"/v2/agents/{await _agent(api, t)}/knowledge-bases",
            "json": {"knowledge_base_id": await _kb(api, t)}}


async def _key_to_rotate(api: Api, t: Tenant) -> Request:
    other = await api.key_for(t.organization_id, ("agents:read",))
    return {"path": f"/v2/api-keys/{other.key_id}/rotate", "json": {"grace_period_hours": 1}}


async def _unique_number(api: Api, t: Tenant) -> Request:
    # a number belongs to one organization in the whole database, which every test of a run shares
    return {"path": "/v2/telephony/phone-numbers",
            "json": {"phone_number": unique_phone()}}


async def _campaign(api: Api, t: Tenant, *, contacts: bool = False, running: bool = False) -> int:
    agent = await active_agent(api, t)
    campaign = int((await _post(api, t, "/v2/campaigns", {"name": "Spring", "agent_id": agent["id"]}))["id"])
    if contacts or running:
        await _post(api, t, f"/v2/campaigns/{campaign}/contacts", {"contacts": [{"phone": "+14155550100"}]})
    if running:
        await _post(api, t, f"/v2/campaigns/{campaign}/start")
    return campaign


async def _campaign_request(api: Api, t: Tenant) -> Request:
    return {"path": "/v2/campaigns", "json": {"name": "Spring", "agent_id": (await active_agent(api, t))["id"]}}


async def _contacts_import(api: Api, t: Tenant) -> Request:
    return {"path": f"/v2/campaigns/{await _campaign(api, t)}/contacts/import",
            "content": b"phone,name\n+14155550104,Ada\n", "headers": {"Content-Type": "text/csv"}}


async def _widget_token(api: Api, t: Tenant, campaign: int) -> str:
    minted = await _post(api, t, "/v2/widget/tokens", {"campaign_id": campaign,
                                                       "allowed_origins": ["https://shop.example"]})
    return str(minted["token"])


async def _widget_token_request(api: Api, t: Tenant) -> Request:
    return {"path": "/v2/widget/tokens", "json": {"campaign_id": await _campaign(api, t),
                                                  "allowed_origins": ["https://shop.example"]}}


async def _widget_contact(api: Api, t: Tenant) -> Request:
    token = await _widget_token(api, t, await _campaign(api, t, running=True))
    return {"path": "/v2/widget/contacts", "json": {"phone": "+14155550107", "name": "Ada"},
            "headers": {"Authorization": f"Widget {token}", "Origin": "https://shop.example"}}


def _fixed(path: str, body: Any = None) -> Setup:
    async def setup(api: Api, t: Tenant) -> Request:
        return {"path": path, "json": body}
    return setup


def _on(make: Callable[[Api, Tenant], Awaitable[int | str]], path: str, body: Any = None) -> Setup:
    """A request on a resource made first: ``path`` has ``{id}``."""
    async def setup(api: Api, t: Tenant) -> Request:
        return {"path": path.format(id=await make(api, t)), "json": body}
    return setup


# operationId -> how to make a request that succeeds once
CASES: dict[str, Setup] = {
    "createAgent": _fixed("/v2/agents", {"name": "Once"}),
    "publishAgent": _on(_agent, "/v2/agents/{id}/publish"),
    "duplicateAgent": _on(_agent, "/v2/agents/{id}/duplicate", {"name": "Copy"}),
    "restoreAgentVersion": _on(_published_agent, "/v2/agents/{id}/versions/1/restore"),
    "attachKnowledgeBase": _attach,
    "createKnowledgeBase": _kb_request,
    "uploadDocuments": _upload,
    "createCalendar": _fixed("/v2/scheduling/calendars", {"name": "Desk", "timezone": "UTC"}),
    "createSchedule": _fixed("/v2/schedules", {"name": "Hours", "timezone": "UTC",
                                               "weekly": [{"day": 0, "start": "09:00", "end": "17:00"}]}),
    "createAvailabilityRule": _on(_calendar, "/v2/scheduling/calendars/{id}/rules",
                                  {"weekday": 0, "start_time": "06:00", "end_time": "07:00"}),
    "createBlackout": _on(_calendar, "/v2/scheduling/calendars/{id}/blackouts",
                          {"start": "2030-01-01T00:00:00Z", "end": "2030-01-02T00:00:00Z"}),
    "createAppointment": _appointment_request,
    "approveAppointment": _on(lambda api, t: _appointment(api, t, require_approval=True),
                              "/v2/scheduling/appointments/{id}/approve"),
    "declineAppointment": _on(lambda api, t: _appointment(api, t, require_approval=True),
                              "/v2/scheduling/appointments/{id}/decline"),
    "createCalendarFeedToken": _on(_calendar, "/v2/scheduling/calendars/{id}/feed-token"),
    "createCall": _call,
    "createWebCall": _web_call,
    "createLead": _lead,
    "createSms": _fixed("/v2/sms", {"to": "+14155550100", "body": "Hello"}),
    "simulateInboundSms": _sms_inbound,
    "cancelCall": _on(_placed_call, "/v2/calls/{id}/cancel"),
    "createDncList": _fixed("/v2/dnc/lists", {"name": "Opt-outs"}),
    "addDncEntries": _on(_dnc_list, "/v2/dnc/lists/{id}/entries", {"phone_numbers": ["+14155550101"]}),
    "importDncEntries": _csv_import,
    "checkDnc": _fixed("/v2/dnc/check", {"phone_numbers": ["+14155550102"]}),
    "createTelephonyProvider": _fixed("/v2/telephony/providers", {"name": "SIP trunk", "type": "sip"}),
    "createAiProvider": _fixed("/v2/ai-providers", {"name": "OpenAI", "type": "openai_compatible",
                                                    "base_url": "https://api.openai.com/v1", "api_key": "sk-1"}),
    "createPhoneNumber": _unique_number,
    "createWebhook": _fixed("/v2/webhooks", {"url": HOOK, "events": ["call.ended"]}),
    "testWebhook": _on(_webhook, "/v2/webhooks/{id}/test"),
    "rotateWebhookSecret": _on(_webhook, "/v2/webhooks/{id}/rotate-secret", {"grace_period_hours": 1}),
    "createTrigger": _fixed("/v2/triggers", _TRIGGER),
    "testTrigger": _on(_trigger, "/v2/triggers/{id}/test", {"data": {"status": "completed"}}),
    "createApiKey": _fixed("/v2/api-keys", {"name": "crm", "scopes": ["agents:read"]}),
    "rotateApiKey": _key_to_rotate,
    "createOrganization": _fixed("/v2/organizations", {"name": "Client"}),
    "createCampaign": _campaign_request,
    "addCampaignContacts": _on(_campaign, "/v2/campaigns/{id}/contacts", {"contacts": [{"phone": "+14155550100"}]}),
    "importCampaignContacts": _contacts_import,
    "startCampaign": _on(lambda api, t: _campaign(api, t, contacts=True), "/v2/campaigns/{id}/start"),
    "pauseCampaign": _on(lambda api, t: _campaign(api, t, running=True), "/v2/campaigns/{id}/pause"),
    "cancelCampaign": _on(_campaign, "/v2/campaigns/{id}/cancel"),
    "createWidgetToken": _widget_token_request,
    "createWidgetContact": _widget_contact,
    "createWidgetWebCall": _widget_web_call,
    "createPaymentMethod": _fixed("/v2/billing/payment-methods", {"token": "pm_card_mastercard"}),
    "setDefaultPaymentMethod": _on(_card, "/v2/billing/payment-methods/{id}/default"),
}
# honoured, and replayed in their own tests: scraping needs a page server, redelivery a delivery log
COVERED_ELSEWHERE = {"scrapeDocument", "redeliverWebhook", "recordAppointmentOutcome",
                     "dialCampaignContact",  # tests/http/test_dialer_http.py replays a dial
                     "payInvoice"}  # tests/http/test_billing_http.py replays a payment (it needs a closed period)
# signing in and out create nothing a client would replay: a replayed sign-in would hand one session id out twice;
# a carrier's webhooks are no client's: they are idempotent by themselves (forward-only, a repeated inbound text or
# call is recognised by the carrier's id; tests/http/test_twilio_http.py)
NOT_IDEMPOTENT = {"login", "logout", "carrierInboundCall", "carrierSms", "carrierVoiceStatus", "verifySession",
                  # Stripe's (public, signed): a redelivered event settles nothing twice by itself
                  "receiveStripeWebhook"}


def _post_operations(api: Api) -> dict[str, Any]:
    return {op.handler.operation_id: op for op in served_operations(api.client.app) if op.method == "POST"}


async def test_every_post_route_honours_idempotency_key(api: Api) -> None:
    operations = _post_operations(api)
    ignoring = sorted(name for name, op in operations.items()
                      if (op.access is None or not op.access.idempotent) and name not in NOT_IDEMPOTENT)
    assert not ignoring, f"POST routes that ignore Idempotency-Key: {ignoring}"
    untested = set(operations) - set(CASES) - COVERED_ELSEWHERE - NOT_IDEMPOTENT
    assert not untested, f"POST routes without a replay case here: {sorted(untested)}"


@pytest.mark.parametrize("operation", sorted(CASES))
async def test_a_repeated_post_is_replayed_and_acts_once(any_api: Api, operation: str) -> None:
    t = await any_api.tenant(plan="enterprise", org_type="partner")
    request = await CASES[operation](any_api, t)
    path = request.pop("path")
    headers = {**t.headers, **request.pop("headers", {}), "Idempotency-Key": f"once-{operation}"}
    first = await any_api.client.post(path, headers=headers, **request)
    assert 200 <= first.status_code < 300, first.text
    assert "idempotency-replayed" not in first.headers
    again = await any_api.client.post(path, headers=headers, **request)
    assert again.status_code == first.status_code, again.text
    assert again.headers.get("idempotency-replayed") == "true"
    assert again.content == first.content


async def test_publish_and_duplicate_act_once_under_one_key(any_api: Api) -> None:
    t = await any_api.tenant()
    agent = await _agent(any_api, t)
    for _ in range(2):
        published = await any_api.client.post(f"/v2/agents/{agent}/publish",
                                              headers={**t.headers, "Idempotency-Key": "publish"})
        assert published.status_code == 200, published.text
        copied = await any_api.client.post(f"/v2/agents/{agent}/duplicate", json={"name": "Copy"},
                                           headers={**t.headers, "Idempotency-Key": "duplicate"})
        assert copied.status_code == 201, copied.text
    versions = await any_api.client.get(f"/v2/agents/{agent}/versions", headers=t.headers)
    assert [v["version"] for v in versions.json()["data"]] == [1]
    agents = await any_api.client.get("/v2/agents", headers=t.headers)
    assert agents.json()["meta"]["total"] == 2


async def test_an_upload_too_large_to_fingerprint_is_refused_with_the_header(any_api: Api) -> None:
    t = await any_api.tenant()
    request = await _upload(any_api, t)
    path = request["path"]
    large = _multipart("big.txt", b"Deliveries arrive on Tuesdays.\n" * (MAX_BODY_BYTES // 30))
    assert len(large["content"]) > MAX_BODY_BYTES
    keyed = await any_api.client.post(path, content=large["content"],
                                      headers={**t.headers, **large["headers"], "Idempotency-Key": "big"})
    assert keyed.status_code == 400, keyed.text
    assert keyed.json()["error"]["code"] == "idempotency_unsupported"
    listed = await any_api.client.get(path, headers=t.headers)
    assert listed.json()["meta"]["total"] == 0, "nothing was uploaded"
    small = await any_api.client.post(path, content=request["content"],
                                      headers={**t.headers, **request["headers"], "Idempotency-Key": "small"})
    assert small.status_code == 201, small.text


async def test_the_document_says_where_a_large_body_cannot_be_keyed(api: Api) -> None:
    document = (await api.client.get("/v2/openapi.json")).json()
    upload = document["paths"]["/knowledge-bases/{id}/documents"]["post"]
    keyed = next(p for p in upload["parameters"] if p["name"] == "Idempotency-Key")
    assert "idempotency_unsupported" in keyed["description"]
    assert "idempotency_unsupported" in upload["responses"]["400"]["description"]
    create = document["paths"]["/agents"]["post"]
    assert "idempotency_unsupported" not in next(
        p for p in create["parameters"] if p["name"] == "Idempotency-Key")["description"]


def _multipart_with(boundary: str, parts: list[tuple[str, str, str, bytes]]) -> Request:
    body = b"".join(f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\n"
                    f"Content-Type: {media}\r\n\r\n".encode() + data + b"\r\n"
                    for name, filename, media, data in parts) + f"--{boundary}--\r\n".encode()
    return {"content": body, "headers": {"Content-Type": f"multipart/form-data; boundary={boundary}"}}


async def test_a_retried_upload_with_a_new_boundary_is_the_same_request(any_api: Api) -> None:
    """A client retrying an upload picks a new multipart boundary: the same parts are the same request (replayed,
    uploaded once); other parts under the same key are another request (422)."""
    t = await any_api.tenant()
    path = (await _upload(any_api, t))["path"]
    parts = [("files", "notes.txt", "text/plain", b"Deliveries arrive on Tuesdays.")]
    headers = {**t.headers, "Idempotency-Key": "upload-once"}
    first = _multipart_with("boundary-one-1a2b3c", parts)
    retry = _multipart_with("a-different-boundary-9z8y", parts)
    assert first["content"] != retry["content"]
    created = await any_api.client.post(path, content=first["content"], headers={**headers, **first["headers"]})
    assert created.status_code == 201, created.text
    replayed = await any_api.client.post(path, content=retry["content"], headers={**headers, **retry["headers"]})
    assert replayed.status_code == 201, replayed.text
    assert replayed.headers.get("idempotency-replayed") == "true"
    assert replayed.content == created.content
    listed = await any_api.client.get(path, headers=t.headers)
    assert listed.json()["meta"]["total"] == 1, "uploaded once"
    for changed in ([("files", "notes.txt", "text/plain", b"Deliveries arrive on Fridays.")],
                    [("files", "other.txt", "text/plain", b"Deliveries arrive on Tuesdays.")],
                    [("files", "notes.txt", "text/markdown", b"Deliveries arrive on Tuesdays.")]):
        other = _multipart_with("boundary-one-1a2b3c", changed)
        refused = await any_api.client.post(path, content=other["content"], headers={**headers, **other["headers"]})
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["code"] == "idempotency_key_mismatch"
