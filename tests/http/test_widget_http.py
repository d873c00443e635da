"""The embeddable widget over HTTP on SQLite and PostgreSQL, with a manual clock: minting tokens, what a token
opens (its campaign's face and contacts, dialled at once when they can be) and every way it is refused (expiry at
the Clock's time, audience, algorithm, signature, origin, scheme, rate limit), and CORS on /widget/* only."""

from __future__ import annotations

import base64
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import jwt
import pytest
from jwt.warnings import InsecureKeyLengthWarning

from adapters.crypto.fernet_box import derive_key
from adapters.crypto.jwt_widget_tokens import PURPOSE
from adapters.memory.clock import ManualClock
from tests.http.calls_support import unique_phone
from tests.support.apps import Api, ApiFactory, Tenant

MONDAY_NOON = datetime(2026, 1, 5, 12, tzinfo=UTC)
SHOP = "https://shop.example"
PHONE = "+1555010000"


@dataclass
class Widget:
    api: Api
    tenant: Tenant
    campaign_id: int
    token: str

    def headers(self, origin: str | None = SHOP, token: str | None = None) -> dict[str, str]:
        headers = {"Authorization": f"Widget {token or self.token}"}
        if origin is not None:
            headers["Origin"] = origin
        return headers

    async def campaign(self, **kwargs: Any) -> httpx.Response:
        return await self.api.client.get("/v2/widget/campaign", headers=self.headers(**kwargs))

    async def submit(self, body: dict[str, Any] | None = None, **kwargs: Any) -> httpx.Response:
        return await self.api.client.post("/v2/widget/contacts", json=body or {"phone": PHONE, "name": "Ada"},
                                          headers=self.headers(**kwargs))


async def _created(api: Api, t: Tenant, path: str, body: dict[str, Any]) -> int:
    response = await api.client.post(path, json=body, headers=t.headers)
    assert response.status_code == 201, response.text
    return int(response.json()["data"]["id"])


async def _campaign(api: Api, t: Tenant, *, start: bool = True, **fields: Any) -> int:
    agent = await _created(api, t, "/v2/agents", {"name": "Riley", "prompt": "You call people back."})
    assert (await api.client.post(f"/v2/agents/{agent}/publish", headers=t.headers)).status_code == 200
    campaign = await _created(api, t, "/v2/campaigns", {"name": "Call me back", "agent_id": agent,
                                                        "timezone_mode": "campaign", **fields})
    if start:  # a campaign starts with a contact; the widget adds more while it runs
        added = await api.client.post(f"/v2/campaigns/{campaign}/contacts", headers=t.headers,
                                      json={"contacts": [{"phone": "+1555010002"}]})
        assert added.status_code == 201, added.text
        started = await api.client.post(f"/v2/campaigns/{campaign}/start", headers=t.headers)
        assert started.status_code == 200, started.text
    return campaign


async def _mint(api: Api, t: Tenant, campaign_id: int, origins: list[str] | None = None,
                **fields: Any) -> httpx.Response:
    return await api.client.post("/v2/widget/tokens", headers=t.headers,
                                 json={"campaign_id": campaign_id, "allowed_origins": origins or [SHOP], **fields})


async def _widget(api: Api, *, start: bool = True, **fields: Any) -> Widget:
    t = await api.tenant()
    campaign = await _campaign(api, t, start=start, **fields)
    minted = await _mint(api, t, campaign)
    assert minted.status_code == 201, minted.text
    return Widget(api, t, campaign, minted.json()["data"]["token"])


@pytest.fixture
async def clocked(make_api: ApiFactory, sql_url: str) -> Api:
    return await make_api(sql_url, clock=ManualClock(MONDAY_NOON))


def _auth_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["success"] is False and body["error"]["code"] == code, body


def _forged(w: Widget, *, key: bytes | str | None = None, algorithm: str = "HS256", **changes: Any) -> str:
    """A token with the claims a real one has (``changes`` replacing some), signed as asked."""
    claims = jwt.decode(w.token, options={"verify_signature": False})
    claims.update(changes)
    if key is None:
        key = base64.urlsafe_b64decode(derive_key(w.api.settings.secret_key, PURPOSE))
    with warnings.catch_warnings():  # PyJWT warns that 32 bytes are short for HS512: a forgery may be weak
        warnings.simplefilter("ignore", InsecureKeyLengthWarning)
        return jwt.encode(claims, key, algorithm=algorithm)


# --------------------------------------------------------------------------------------------- minting


async def test_a_minted_token_says_its_campaign_origins_and_expiry(clocked: Api) -> None:
    t = await clocked.tenant()
    campaign = await _campaign(clocked, t, start=False)
    minted = await _mint(clocked, t, campaign, ["HTTPS://Shop.Example:443", "http://localhost:8080"],
                         ttl_seconds=120)
    assert minted.status_code == 201, minted.text
    assert minted.headers["cache-control"] == "no-store"
    data = minted.json()["data"]
    assert data["campaign_id"] == campaign
    assert data["allowed_origins"] == [SHOP, "http://localhost:8080"]  # as browsers write them
    assert data["expires_at"] == "2026-01-05T12:02:00Z"
    claims = jwt.decode(data["token"], options={"verify_signature": False})
    assert jwt.get_unverified_header(data["token"])["alg"] == "HS256"
    assert claims["aud"] == "parley-widget" and claims["campaign"] == campaign
    assert claims["organization"] == t.organization_id and claims["exp"] == int((MONDAY_NOON + timedelta(
        seconds=120)).timestamp()) and len(claims["jti"]) >= 16
    default = await _mint(clocked, t, campaign)
    assert default.json()["data"]["expires_at"] == "2026-01-05T12:15:00Z"  # 900 s by default


@pytest.mark.parametrize(("body", "field"), [
    ({"allowed_origins": []}, "allowed_origins"),
    ({"allowed_origins": [f"https://s{i}.example" for i in range(11)]}, "allowed_origins"),
    ({"allowed_origins": ["https://shop.example/"]}, "allowed_origins[0]"),
    ({"allowed_origins": [SHOP, "https://shop.example/cart"]}, "allowed_origins[1]"),
    ({"allowed_origins": ["shop.example"]}, "allowed_origins[0]"),
    ({"allowed_origins": ["ftp://shop.example"]}, "allowed_origins[0]"),
    ({"allowed_origins": ["https://user@shop.example"]}, "allowed_origins[0]"),
    ({"allowed_origins": ["https://shop.example?x=1"]}, "allowed_origins[0]"),
    ({"allowed_origins": ["null"]}, "allowed_origins[0]"),
    ({"ttl_seconds": 59}, "ttl_seconds"),
    ({"ttl_seconds": 3601}, "ttl_seconds"),
])
async def test_minting_refuses_bad_origins_and_lifetimes(api: Api, body: dict[str, Any], field: str) -> None:
    t = await api.tenant()
    campaign = await _campaign(api, t, start=False)
    refused = await api.client.post("/v2/widget/tokens", headers=t.headers,
                                    json={"campaign_id": campaign, "allowed_origins": [SHOP], **body})
    assert refused.status_code == 400, refused.text
    assert field in str(refused.json()["error"]["details"]["validation_errors"]), refused.text


async def test_minting_needs_its_scope_and_a_campaign_of_the_organization(any_api: Api) -> None:
    t = await any_api.tenant()
    other = await any_api.tenant(name="Other")
    campaign = await _campaign(any_api, other, start=False)
    missing = await _mint(any_api, t, campaign)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found", missing.text
    reader = await any_api.key_for(other.organization_id, ("campaigns:read", "campaigns:write"))
    _auth_error(await _mint(any_api, reader, campaign), 403, "INSUFFICIENT_SCOPE")
    writer = await any_api.key_for(other.organization_id, ("widget:write",))
    assert (await _mint(any_api, writer, campaign)).status_code == 201


# ------------------------------------------------------------------------------------ what a token opens


async def test_a_visitor_is_added_and_dialled_at_once_while_the_campaign_runs(clocked: Api) -> None:
    w = await _widget(clocked)
    face = await w.campaign()
    assert face.status_code == 200, face.text
    assert face.json()["data"] == {"name": "Call me back", "agent_name": "Riley", "status": "running",
                                   "open_now": True, "next_open_at": None}
    assert face.headers["access-control-allow-origin"] == SHOP
    assert "Origin" in face.headers["vary"]
    assert "access-control-allow-credentials" not in face.headers
    assert face.headers["x-ratelimit-limit"] == "20"

    submitted = await w.submit({"phone": PHONE, "name": "Ada", "custom_data": {"page": "pricing"}})
    assert submitted.status_code == 201, submitted.text
    data = submitted.json()["data"]
    assert data["status"] == "dialing" and data["call_id"], data
    calls = (await clocked.client.get(f"/v2/calls?campaign_id={w.campaign_id}",
                                      headers=w.tenant.headers)).json()["data"]
    [call] = [c for c in calls if c["id"] == data["call_id"]]
    assert call["contact_id"] == data["contact_id"] and call["campaign_id"] == w.campaign_id
    contact = (await clocked.client.get(f"/v2/campaigns/{w.campaign_id}/contacts/{data['contact_id']}",
                                        headers=w.tenant.headers)).json()["data"]
    assert contact["phone"] == PHONE and contact["name"] == "Ada" and contact["status"] == "dialing"
    assert contact["custom_data"] == {"page": "pricing"}

    again = await w.submit()  # the same number gives back its contact, dialled once
    assert again.status_code == 201, again.text
    assert again.json()["data"] == {"contact_id": data["contact_id"], "status": "dialing", "call_id": None}


async def test_outside_calling_hours_the_visitor_waits_in_the_queue(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(datetime(2026, 1, 5, 3, tzinfo=UTC)))
    w = await _widget(api)
    face = (await w.campaign()).json()["data"]
    assert face["open_now"] is False and face["next_open_at"] == "2026-01-05T08:00:00Z"
    submitted = await w.submit()
    assert submitted.status_code == 201, submitted.text
    data = submitted.json()["data"]
    assert data["status"] == "pending" and data["call_id"] is None
    calls = (await api.client.get(f"/v2/calls?campaign_id={w.campaign_id}", headers=w.tenant.headers)).json()
    assert calls["meta"]["total"] == 0


async def test_a_campaign_not_running_or_at_its_cap_keeps_the_visitor_waiting(clocked: Api) -> None:
    draft = await _widget(clocked, start=False)
    face = (await draft.campaign()).json()["data"]
    assert face["status"] == "draft" and face["open_now"] is False and face["next_open_at"] is None
    waiting = (await draft.submit()).json()["data"]
    assert waiting["status"] == "pending" and waiting["call_id"] is None

    capped = await _widget(clocked, max_concurrent_calls=1)
    first = (await capped.submit({"phone": "+1555010004"})).json()["data"]
    assert first["call_id"] is not None
    second = await capped.submit({"phone": "+1555010005"})
    assert second.status_code == 201, second.text
    assert second.json()["data"]["status"] == "pending" and second.json()["data"]["call_id"] is None


async def test_a_number_on_a_dnc_list_is_refused_and_not_kept(clocked: Api) -> None:
    w = await _widget(clocked)
    listed = await _created(clocked, w.tenant, "/v2/dnc/lists", {"name": "Opt-outs"})
    entries = await clocked.client.post(f"/v2/dnc/lists/{listed}/entries", headers=w.tenant.headers,
                                        json={"phone_numbers": [PHONE]})
    assert entries.status_code == 201, entries.text
    refused = await w.submit()
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "dnc_blocked", refused.text
    contacts = (await clocked.client.get(f"/v2/campaigns/{w.campaign_id}/contacts",
                                         headers=w.tenant.headers)).json()
    assert PHONE not in {c["phone"] for c in contacts["data"]}


async def test_a_bad_phone_is_a_400_naming_it(clocked: Api) -> None:
    w = await _widget(clocked)
    refused = await w.submit({"phone": "call me maybe"})
    assert refused.status_code == 400 and "phone" in refused.json()["error"]["details"]["validation_errors"]
    assert refused.headers["access-control-allow-origin"] == SHOP  # the page can read why


async def test_open_now_and_next_open_at_agree_at_the_boundaries(make_api: ApiFactory, sql_url: str) -> None:
    """next_open_at is null while calls go out, and the next opening (after now) while they do not: the two never
    say open now and open later at once, to the microsecond at either edge of the hours."""
    clock = ManualClock(datetime(2026, 1, 5, 7, 59, 59, 500_000, tzinfo=UTC))
    api = await make_api(sql_url, clock=clock)
    w = await _widget(api, calling_hours={"start": "08:00", "end": "08:01"})

    async def face() -> tuple[bool, str | None]:
        data = (await w.campaign()).json()["data"]
        return data["open_now"], data["next_open_at"]

    assert await face() == (False, "2026-01-05T08:00:00Z")
    clock.advance(seconds=0.5)  # 08:00:00 exactly
    assert await face() == (True, None)
    clock.advance(seconds=59.999999)  # 08:00:59.999999
    assert await face() == (True, None)
    clock.advance(seconds=0.000001)  # 08:01:00: closed until tomorrow
    assert await face() == (False, "2026-01-06T08:00:00Z")


@pytest.mark.slow
async def test_a_manual_campaign_keeps_taking_visitors_after_its_first_batch_drained(
        make_api: ApiFactory, sql_url: str) -> None:
    """A widget campaign whose completion is manual starts empty, drains its first visitor and stays running: the
    next visitor is dialled too (a when_empty campaign would have completed and refused them)."""
    from tests.http import dialer_support as support

    api = await make_api(sql_url, clock=ManualClock(MONDAY_NOON))
    try:
        w = await _widget(api, start=False, completion="manual")
        started = await api.client.post(f"/v2/campaigns/{w.campaign_id}/start", headers=w.tenant.headers)
        assert started.status_code == 200, started.text  # empty, yet it starts
        first = (await w.submit({"phone": PHONE, "name": "Ada"})).json()["data"]
        assert first["status"] == "dialing" and first["call_id"], first
        for _ in range(6):
            await support.tick(api)
        drained = (await api.client.get(f"/v2/campaigns/{w.campaign_id}", headers=w.tenant.headers)).json()["data"]
        assert drained["stats"]["completed"] == 1 and drained["stats"]["pending"] == 0, drained["stats"]
        assert drained["status"] == "running", drained
        assert (await w.campaign()).json()["data"]["open_now"] is True
        second = await w.submit({"phone": "+1555010005", "name": "Bo"})
        assert second.status_code == 201, second.text
        assert second.json()["data"]["status"] == "dialing" and second.json()["data"]["call_id"], second.text
        for _ in range(6):
            await support.tick(api)
        done = (await api.client.get(f"/v2/campaigns/{w.campaign_id}", headers=w.tenant.headers)).json()["data"]
        assert (done["status"], done["stats"]["completed"]) == ("running", 2), done
    finally:
        await support.close_workers()


# ------------------------------------------------------------------------------------------- refusals


async def test_a_token_expires_at_the_clocks_time(make_api: ApiFactory, sql_url: str) -> None:
    clock = ManualClock(MONDAY_NOON)
    api = await make_api(sql_url, clock=clock)
    w = await _widget(api)
    clock.advance(seconds=899)
    assert (await w.campaign()).status_code == 200
    clock.advance(seconds=1)
    expired = await w.campaign()
    _auth_error(expired, 401, "INVALID_WIDGET_TOKEN")
    assert "expired" in expired.json()["error"]["message"]
    assert expired.headers["www-authenticate"].startswith("Widget")


async def test_a_token_stops_working_when_its_minting_key_is_revoked(clocked: Api) -> None:
    w = await _widget(clocked)
    minter = await clocked.key_for(w.tenant.organization_id, ("widget:write",))
    minted = await _mint(clocked, minter, w.campaign_id)
    assert minted.status_code == 201, minted.text
    token = minted.json()["data"]["token"]
    assert (await w.campaign(token=token)).status_code == 200
    revoked = await clocked.client.delete(f"/v2/api-keys/{minter.key_id}", headers=w.tenant.headers)
    assert revoked.status_code in (200, 204), revoked.text
    for refused in (await w.campaign(token=token), await w.submit(token=token)):
        _auth_error(refused, 401, "INVALID_WIDGET_TOKEN")
        assert "revoked" in refused.json()["error"]["message"]
    assert (await w.campaign()).status_code == 200  # a token of another key works on


async def test_a_token_stops_working_when_its_minting_key_expires(clocked: Api) -> None:
    w = await _widget(clocked)
    minter = await clocked.key_for(w.tenant.organization_id, ("widget:write",),
                                   expires_at=MONDAY_NOON + timedelta(minutes=5))
    token = (await _mint(clocked, minter, w.campaign_id)).json()["data"]["token"]
    assert (await w.campaign(token=token)).status_code == 200
    clocked.clock.advance(seconds=300)  # type: ignore[union-attr]
    _auth_error(await w.campaign(token=token), 401, "INVALID_WIDGET_TOKEN")


async def test_forged_tokens_are_refused(clocked: Api) -> None:
    w = await _widget(clocked)
    assert (await w.campaign(token=_forged(w))).status_code == 200  # the forging itself is faithful
    forgeries = {
        "another audience": _forged(w, aud="parley-dashboard"),
        "no audience": _forged(w, aud=None),
        "another secret": _forged(w, key="another-secret-key-of-32-bytes-or-more!"),
        "the raw secret key": _forged(w, key=clocked.settings.secret_key.encode().ljust(32, b"-")),
        "HS512 with the right key": _forged(w, algorithm="HS512"),
        "alg none": _forged(w, key="", algorithm="none"),
        "alg none, no signature part": _forged(w, key="", algorithm="none").rstrip("."),
        "no jti": _forged(w, jti=None),
        "no exp": _forged(w, exp=None),
        "garbage": "not.a.token",
    }
    for name, token in forgeries.items():
        response = await w.campaign(token=token)
        assert response.status_code == 401, f"{name}: {response.text}"
        assert response.json()["error"]["code"] == "INVALID_WIDGET_TOKEN", name


async def test_a_token_reaches_only_its_own_campaign(clocked: Api) -> None:
    a = await _widget(clocked)
    b_campaign = await _campaign(clocked, a.tenant)
    # the body cannot name another campaign
    steered = await a.submit({"phone": PHONE, "campaign_id": b_campaign})
    assert steered.status_code == 400, steered.text
    # a token claiming campaign B is only valid if Parley signed it
    claimed = await a.submit(token=_forged(a, key="another-secret-key-of-32-bytes-or-more!", campaign=b_campaign))
    _auth_error(claimed, 401, "INVALID_WIDGET_TOKEN")
    assert (await a.submit()).status_code == 201
    b_contacts = (await clocked.client.get(f"/v2/campaigns/{b_campaign}/contacts",
                                           headers=a.tenant.headers)).json()
    assert PHONE not in {c["phone"] for c in b_contacts["data"]}
    # the token is no key for the campaign routes (or any other)
    bearer = {"Authorization": f"Bearer {a.token}", "Origin": SHOP}
    _auth_error(await clocked.client.post(f"/v2/campaigns/{b_campaign}/dial", json={"phone": PHONE},
                                          headers=bearer), 401, "INVALID_API_KEY")


async def test_origins_outside_the_token_are_refused(clocked: Api) -> None:
    w = await _widget(clocked)
    for origin in ("https://evil.example", "http://shop.example", "https://shop.example:8443",
                   "https://sub.shop.example", "null"):
        refused = await w.campaign(origin=origin)
        assert refused.status_code == 403, f"{origin}: {refused.text}"
        assert refused.json()["error"]["code"] == "origin_not_allowed"
        assert refused.headers["access-control-allow-origin"] == origin  # the page can read why, and only why
    missing = await w.submit(origin=None)
    assert missing.status_code == 403 and missing.json()["error"]["code"] == "origin_not_allowed"
    assert (await w.campaign(origin="https://shop.example:443")).status_code == 200  # the same origin, spelt out


async def test_bearer_and_widget_credentials_never_cross(clocked: Api) -> None:
    w = await _widget(clocked)
    _auth_error(await clocked.client.get("/v2/campaigns", headers={"Authorization": f"Bearer {w.token}"}), 401,
                "INVALID_API_KEY")
    _auth_error(await clocked.client.get("/v2/widget/campaign", headers={**w.tenant.headers, "Origin": SHOP}), 401,
                "INVALID_WIDGET_TOKEN")
    _auth_error(await clocked.client.get("/v2/widget/campaign",
                                         headers={"Authorization": f"Widget {w.tenant.key}", "Origin": SHOP}),
                401, "INVALID_WIDGET_TOKEN")
    _auth_error(await clocked.client.get("/v2/agents", headers={"Authorization": f"Widget {w.token}"}), 401,
                "MISSING_AUTH")


async def test_a_token_has_twenty_requests_a_minute_of_its_own(clocked: Api) -> None:
    w = await _widget(clocked)
    key_before = await clocked.client.get("/v2/campaigns", headers=w.tenant.headers)
    remaining_before = int(key_before.headers["x-ratelimit-remaining"])
    for i in range(20):
        response = await w.campaign()
        assert response.status_code == 200, f"request {i + 1}: {response.text}"
        assert response.headers["x-ratelimit-remaining"] == str(19 - i)
    refused = await w.submit()
    _auth_error(refused, 429, "RATE_LIMIT_EXCEEDED")
    assert refused.headers["retry-after"] == "60" and refused.json()["error"]["retry_after"] == 60
    assert refused.headers["access-control-allow-origin"] == SHOP  # the page can tell the visitor to wait
    key_after = await clocked.client.get("/v2/campaigns", headers=w.tenant.headers)
    assert int(key_after.headers["x-ratelimit-remaining"]) == remaining_before - 1  # the key's own, untouched
    other = await _mint(clocked, w.tenant, w.campaign_id)  # another token: another budget
    assert (await w.campaign(token=other.json()["data"]["token"])).status_code == 200
    clocked.clock.advance(seconds=60)  # type: ignore[union-attr]
    assert (await w.campaign()).status_code == 200


# ----------------------------------------------------------------------------------------------- CORS


async def test_widget_errors_carry_the_cors_headers_of_a_success(make_api: ApiFactory, sql_url: str) -> None:
    clock = ManualClock(MONDAY_NOON)
    api = await make_api(sql_url, clock=clock)
    w = await _widget(api)
    success = await w.campaign()
    assert success.status_code == 200
    cors = {"access-control-allow-origin": SHOP, "vary": "Origin"}
    forged = _forged(w, key="another-secret-key-of-32-bytes-or-more!")
    errors = {
        "missing token": await api.client.get("/v2/widget/campaign", headers={"Origin": SHOP}),
        "forged token": await w.campaign(token=forged),
        "bad body": await w.submit({"phone": PHONE, "campaign_id": 1}),
        "unknown widget route": await api.client.get("/v2/widget/nothing", headers=w.headers()),
    }
    clock.advance(seconds=900)
    errors["expired token"] = await w.submit()
    for what, response in errors.items():
        assert response.status_code in (400, 401, 404), f"{what}: {response.text}"
        assert response.json()["success"] is False, what
        for header, value in cors.items():
            assert success.headers[header] == value
            assert response.headers.get(header) == value, f"{what}: {dict(response.headers)}"
        assert response.headers.get_list("access-control-allow-origin") == [SHOP], what
        exposed = {h.strip().lower() for h in response.headers["access-control-expose-headers"].split(",")}
        wanted = {"location", "retry-after", "x-request-id", "idempotency-replayed", "x-ratelimit-remaining"}
        assert wanted <= exposed, what


async def test_cors_is_answered_on_widget_routes_only(api: Api) -> None:
    preflight = {"Origin": "https://anyone.example", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization, content-type"}
    for path in ("/v2/widget/contacts", "/v2/widget/campaign", "/api/v2/widget/contacts"):
        answered = await api.client.options(path, headers=preflight)
        assert answered.status_code == 204, answered.text
        assert answered.headers["access-control-allow-origin"] == "https://anyone.example"
        allowed = {h.strip().lower() for h in answered.headers["access-control-allow-headers"].split(",")}
        assert allowed == {"authorization", "content-type", "idempotency-key", "x-request-id"}
        assert "POST" in answered.headers["access-control-allow-methods"]
        assert "Origin" in answered.headers["vary"]
        assert "access-control-allow-credentials" not in answered.headers
        assert answered.headers["x-request-id"]

    t = await api.tenant()
    for method, path, headers in (("OPTIONS", "/v2/agents", preflight), ("OPTIONS", "/v2/health", preflight),
                                  ("GET", "/v2/agents", {**t.headers, "Origin": SHOP}),
                                  ("GET", "/v2/health", {"Origin": SHOP}),
                                  ("GET", "/widget.js", {"Origin": SHOP})):
        response = await api.client.request(method, path, headers=headers)
        assert response.status_code < 400, f"{method} {path}: {response.text}"
        cors = [h for h in response.headers if h.lower().startswith("access-control-")]
        assert cors == [], f"{method} {path} sends CORS headers {cors}"


async def test_the_script_is_served_as_javascript_with_caching(api: Api) -> None:
    for path in ("/widget.js", "/v2/widget.js", "/api/v2/widget.js"):
        script = await api.client.get(path)
        assert script.status_code == 200, path
        assert script.headers["content-type"] == "text/javascript; charset=utf-8"
        assert script.headers["cache-control"] == "public, max-age=300"
        assert "/widget/contacts" in script.text and "Authorization" in script.text
        assert len(script.content) < 10_000  # a few KB


async def test_a_tokens_stored_responses_are_its_own(clocked: Api) -> None:
    w = await _widget(clocked)
    other = (await _mint(clocked, w.tenant, w.campaign_id)).json()["data"]["token"]
    key = {"Idempotency-Key": "visitor-1"}
    first = await clocked.client.post("/v2/widget/contacts", json={"phone": PHONE}, headers={**w.headers(), **key})
    assert first.status_code == 201, first.text
    replay = await clocked.client.post("/v2/widget/contacts", json={"phone": PHONE}, headers={**w.headers(), **key})
    assert replay.headers.get("idempotency-replayed") == "true" and replay.content == first.content
    assert replay.headers["access-control-allow-origin"] == SHOP
    elsewhere = await clocked.client.post("/v2/widget/contacts", json={"phone": PHONE},
                                          headers={**w.headers(token=other), **key})
    assert elsewhere.status_code == 201 and "idempotency-replayed" not in elsewhere.headers
    assert elsewhere.json()["data"]["call_id"] is None  # the same contact, not dialled twice


# ------------------------------------------------------------------------------------------ intake caps


async def test_a_campaign_takes_at_most_its_widget_contacts_per_hour(clocked: Api) -> None:
    w = await _widget(clocked, widget_max_contacts_per_hour=3)
    for _ in range(3):
        taken = await w.submit({"phone": unique_phone()})
        assert taken.status_code == 201, taken.text
    clocked.clock.advance(seconds=600)  # type: ignore[union-attr]
    capped = await w.submit({"phone": unique_phone()})
    assert capped.status_code == 429, capped.text
    error = capped.json()["error"]
    assert error["code"] == "widget_intake_limited" and error["details"]["scope"] == "campaign"
    assert capped.headers["retry-after"] == "3000" and error["details"]["retry_after"] == 3000  # the hour's end
    assert capped.headers["access-control-allow-origin"] == SHOP  # the page can read why
    listed = await clocked.client.get(f"/v2/campaigns/{w.campaign_id}/contacts", headers=w.tenant.headers)
    assert listed.json()["meta"]["total"] == 1 + 3  # the refused visitor was not kept
    clocked.clock.advance(seconds=3000)  # type: ignore[union-attr]
    fresh = (await _mint(clocked, w.tenant, w.campaign_id)).json()["data"]["token"]  # the first one expired
    assert (await w.submit({"phone": unique_phone()}, token=fresh)).status_code == 201  # a new hour
    campaign = await clocked.client.get(f"/v2/campaigns/{w.campaign_id}", headers=w.tenant.headers)
    assert campaign.json()["data"]["widget_max_contacts_per_hour"] == 3


async def test_one_client_address_adds_at_most_five_contacts_an_hour(clocked: Api) -> None:
    w = await _widget(clocked)
    for _ in range(5):
        taken = await w.submit({"phone": unique_phone()})
        assert taken.status_code == 201, taken.text
    capped = await w.submit({"phone": unique_phone()})
    assert capped.status_code == 429, capped.text
    assert capped.json()["error"]["details"]["scope"] == "address" and capped.headers["retry-after"] == "3600"
    # a fresh token (minted per page view) of another campaign of the organization changes nothing
    other = await _campaign(clocked, w.tenant)
    minted = await _mint(clocked, w.tenant, other)
    fresh = Widget(clocked, w.tenant, other, minted.json()["data"]["token"])
    assert (await fresh.submit({"phone": unique_phone()})).status_code == 429
    clocked.clock.advance(seconds=3600)  # type: ignore[union-attr]
    later = (await _mint(clocked, w.tenant, other)).json()["data"]["token"]
    assert (await fresh.submit({"phone": unique_phone()}, token=later)).status_code == 201


async def test_a_contact_the_agent_could_never_call_is_refused_at_once(clocked: Api) -> None:
    t = await clocked.tenant()
    agent = await _created(clocked, t, "/v2/agents", {"name": "Riley", "prompt": "Call {{contact_name}} about "
                                                                                 "{{plan}} and {{renewal_date}}."})
    assert (await clocked.client.post(f"/v2/agents/{agent}/publish", headers=t.headers)).status_code == 200
    campaign = await _created(clocked, t, "/v2/campaigns", {"name": "Renewals", "agent_id": agent,
                                                            "timezone_mode": "campaign"})
    minted = await _mint(clocked, t, campaign)
    w = Widget(clocked, t, campaign, minted.json()["data"]["token"])
    # the draft needs nothing, but a call runs the published version, whose placeholders are the ones that count
    drafted = await clocked.client.patch(f"/v2/agents/{agent}", headers=t.headers, json={"prompt": "Be brief."})
    assert drafted.status_code == 200, drafted.text
    refused = await w.submit({"phone": PHONE, "custom_data": {"plan": "Gold"}})
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "missing_placeholders"
    assert error["details"]["missing_placeholders"] == ["contact_name", "renewal_date"]
    assert set(error["details"]["validation_errors"]) == {"name", "custom_data"}  # a visitor's name is its own field
    listed = await clocked.client.get(f"/v2/campaigns/{campaign}/contacts", headers=t.headers)
    assert listed.json()["meta"]["total"] == 0  # never queued to fail later
    taken = await w.submit({"phone": PHONE, "name": "Ada", "custom_data": {"plan": "Gold",
                                                                           "renewal_date": "June"}})
    assert taken.status_code == 201, taken.text
