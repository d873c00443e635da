"""The Phone numbers section of the dashboard through HTTP, on both databases, with a Twilio emulator (a real HTTP
server on 127.0.0.1) as the carrier: the organization's numbers with their inbound agent and SMS flag, the
carrier's numbers searched and one bought through the same use cases as the API (a refusal of the carrier shown on
the page, nothing kept), a number released at the carrier only once confirmed, a simulator number only removed,
and without a carrier provider no search is offered."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.http import calls_support
from tests.http.calls_support import ApiWith, active_agent, unique_phone
from tests.http.dashboard_support import cookie, login, new_user
from tests.http.twilio_support import app, route_to
from tests.support.apps import Api, AppPool
from tests.support.emulators.twilio import TwilioEmulator


@pytest.fixture
async def api_with(tmp_root: Path, app_pool: AppPool) -> AsyncIterator[ApiWith]:
    async for factory in calls_support.apps_with_providers(tmp_root, app_pool):
        yield factory


@pytest.fixture
def emulator() -> Any:
    emulator = TwilioEmulator().start()
    yield emulator
    emulator.stop()


async def _post(api: Api, headers: dict[str, str], path: str, data: Any) -> Any:
    return await api.client.post(f"/dashboard{path}", headers=headers, data=data, follow_redirects=False)


async def _numbers(api: Api, user: Any) -> dict[str, dict[str, Any]]:
    found = await api.client.get("/v2/telephony/phone-numbers?limit=100", headers=user.tenant.headers)
    return {n["phone_number"]: n for n in found.json()["data"]}


async def test_search_buy_and_release_at_the_carrier(api_with: ApiWith, sql_url: str,
                                                     emulator: TwilioEmulator) -> None:
    api, _ = await app(api_with, sql_url)
    emulator.deliver = route_to(api)
    user = await new_user(api)
    session, csrf = await login(api, user)
    headers = cookie(session)
    agent = await active_agent(api, user.tenant)
    provider = (await api.client.post("/v2/telephony/providers", headers=user.tenant.headers, json={
        "name": "Twilio", "type": "twilio", "credentials": emulator.credentials,
        "settings": {"api_base_url": emulator.url}})).json()["data"]

    listed = await api.client.get("/dashboard/phone-numbers", headers=headers)
    assert listed.status_code == 200 and "No phone numbers yet" in listed.text
    assert 'id="number-search"' in listed.text and f'value="{provider["id"]}"' in listed.text

    bad = await api.client.get("/dashboard/phone-numbers/available", headers=headers,
                               params={"provider_id": provider["id"], "country": "USA"})
    assert bad.status_code == 400 and 'id="country-error"' in bad.text
    found = await api.client.get("/dashboard/phone-numbers/available", headers=headers,
                                 params={"provider_id": provider["id"], "country": "US", "area_code": "415"})
    assert found.status_code == 200 and 'id="available-numbers"' in found.text, found.text[-2000:]
    assert 'value="+14155550101"' in found.text and 'value="+14155550177"' in found.text
    assert "San Francisco" in found.text

    taken = await _post(api, headers, "/phone-numbers", {"csrf_token": csrf, "provider_id": str(provider["id"]),
                                                         "phone_number": unique_phone()})  # not for sale
    assert taken.status_code == 502 and "is not available" in taken.text and 'role="alert"' in taken.text
    assert await _numbers(api, user) == {}
    bought = await _post(api, headers, "/phone-numbers", {
        "csrf_token": csrf, "provider_id": str(provider["id"]), "phone_number": "+14155550177",
        "inbound_agent_id": str(agent["id"]), "label": "Front desk", "sms": "on"})
    assert bought.status_code == 303 and "bought" in bought.headers["location"], bought.text
    number = (await _numbers(api, user))["+14155550177"]
    assert number["inbound_agent_id"] == agent["id"] and number["capabilities"]["sms"] is True
    assert "+14155550177" in emulator.owned

    page = await api.client.get("/dashboard/phone-numbers", headers=headers)
    assert 'id="phone-numbers"' in page.text and "+14155550177" in page.text and "Front desk" in page.text
    assert f"/dashboard/agents/{agent['id']}" in page.text and "Release…" in page.text

    # releasing asks first, then gives the number back to the carrier
    path = f"/phone-numbers/{number['id']}/delete"
    asked = await api.client.get(f"/dashboard{path}", headers=headers)
    assert asked.status_code == 200 and "released at Twilio" in asked.text and "cannot be undone" in asked.text
    unconfirmed = await _post(api, headers, path, {"csrf_token": csrf})
    assert unconfirmed.status_code == 200 and 'id="confirm-delete"' in unconfirmed.text
    assert "+14155550177" in emulator.owned and "+14155550177" in await _numbers(api, user)
    released = await _post(api, headers, path, {"csrf_token": csrf, "confirm": "delete"})
    assert released.status_code == 303 and "released" in released.headers["location"]
    assert "+14155550177" not in emulator.owned and await _numbers(api, user) == {}

    events = (await api.client.get("/v2/audit-events?limit=50", headers=user.tenant.headers)).json()["data"]
    actions = [e["action"] for e in events if e["actor"]["type"] == "user"]
    assert "phone_number.created" in actions and "phone_number.deleted" in actions, actions


async def test_simulator_numbers_are_listed_and_removed_and_other_organizations_are_404(any_api: Api) -> None:
    user = await new_user(any_api)
    session, csrf = await login(any_api, user)
    headers = cookie(session)
    made = await any_api.client.post("/v2/telephony/phone-numbers", headers=user.tenant.headers, json={
        "phone_number": unique_phone(), "capabilities": {"voice": True, "sms": False}})
    number = made.json()["data"]
    page = await any_api.client.get("/dashboard/phone-numbers", headers=headers)
    assert number["phone_number"] in page.text and 'id="no-carrier"' in page.text and "Remove…" in page.text
    assert 'id="number-search"' not in page.text
    simulator = next(p for p in (await any_api.client.get("/v2/telephony/providers", headers=user.tenant.headers)
                                 ).json()["data"] if p["type"] == "simulator")
    refused = await any_api.client.get("/dashboard/phone-numbers/available", headers=headers,
                                       params={"provider_id": simulator["id"]})
    assert refused.status_code == 400 and "only a twilio or telnyx provider" in refused.text

    other = await new_user(any_api)
    other_session, other_csrf = await login(any_api, other)
    other_headers = cookie(other_session)
    path = f"/phone-numbers/{number['id']}/delete"
    assert (await any_api.client.get(f"/dashboard{path}", headers=other_headers)).status_code == 404
    assert (await _post(any_api, other_headers, path, {"csrf_token": other_csrf, "confirm": "delete"})
            ).status_code == 404
    assert number["phone_number"] not in (await any_api.client.get("/dashboard/phone-numbers",
                                                                   headers=other_headers)).text

    asked = await any_api.client.get(f"/dashboard{path}", headers=headers)
    assert "removed from the organization" in asked.text
    removed = await _post(any_api, headers, path, {"csrf_token": csrf, "confirm": "delete"})
    assert removed.status_code == 303 and "removed" in removed.headers["location"]
    assert await _numbers(any_api, user) == {}
