"""Telephony providers (credentials write-only, encrypted at rest), phone numbers and stats."""

from __future__ import annotations

import sqlalchemy as sa

from adapters.sql.calls_tables import telephony_providers
from adapters.sql.uow import SqlUnitOfWork
from application.telephony import ReadProviderCredentials, ReadProviderCredentialsCommand
from entrypoints.ioc import build_container
from tests.http.calls_support import unique_phone
from tests.support.apps import Api


async def _sealed(api: Api, provider_id: int) -> str | None:
    container = api.worker()
    async with container() as r:
        conn = await (await r.get(SqlUnitOfWork)).connection()
        return (await conn.execute(sa.select(telephony_providers.c.credentials_sealed)
                                   .where(telephony_providers.c.id == provider_id))).scalar_one()


async def test_every_organization_has_the_simulator_as_default(any_api: Api) -> None:
    t = await any_api.tenant()
    listed = (await any_api.client.get("/v2/telephony/providers", headers=t.headers)).json()
    assert listed["meta"]["total"] == 1
    simulator = listed["data"][0]
    assert (simulator["type"], simulator["is_default"], simulator["builtin"]) == ("simulator", True, True)
    again = (await any_api.client.get("/v2/telephony/providers", headers=t.headers)).json()
    assert again["data"] == listed["data"]
    refused = await any_api.client.delete(f"/v2/telephony/providers/{simulator['id']}", headers=t.headers)
    assert refused.status_code == 409


async def test_credentials_are_write_only_and_encrypted_at_rest(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    created = await api.client.post("/v2/telephony/providers", json={
        "name": "Vonage US", "type": "vonage", "credentials": {"api_key": "AC123", "api_secret": "s3cr3t-token"},
        "settings": {"region": "us1"}}, headers=t.headers)
    assert created.status_code == 201, created.text
    provider = created.json()["data"]
    assert "credentials" not in provider and "s3cr3t-token" not in created.text
    assert provider["has_credentials"] and provider["credential_fields"] == ["api_key", "api_secret"]
    assert provider["is_default"] is False
    sealed = await _sealed(api, provider["id"])
    assert sealed and "s3cr3t-token" not in sealed and "AC123" not in sealed
    got = await api.client.get(f"/v2/telephony/providers/{provider['id']}", headers=t.headers)
    assert "s3cr3t-token" not in got.text and got.json()["data"]["settings"] == {"region": "us1"}
    container = build_container(api.settings, *api.overrides)
    try:
        async with container() as r:
            command = ReadProviderCredentialsCommand(t.organization_id, provider["id"])
            opened = await (await r.get(ReadProviderCredentials)).execute(command)
    finally:
        await container.close()
    assert opened == {"api_key": "AC123", "api_secret": "s3cr3t-token"}

    made_default = await api.client.patch(f"/v2/telephony/providers/{provider['id']}",
                                          json={"is_default": True, "credentials": None}, headers=t.headers)
    assert made_default.json()["data"]["is_default"] and not made_default.json()["data"]["has_credentials"]
    providers = (await api.client.get("/v2/telephony/providers", headers=t.headers)).json()["data"]
    assert [p["is_default"] for p in providers] == [False, True]
    undefault = await api.client.patch(f"/v2/telephony/providers/{provider['id']}", json={"is_default": False},
                                       headers=t.headers)
    assert undefault.status_code == 409
    writer = await api.key_for(t.organization_id, ("telephony:write", "telephony:read"))
    denied = await api.client.post("/v2/telephony/providers", json={"name": "x", "type": "sip"},
                                   headers=writer.headers)
    assert denied.status_code == 403
    bad = await api.client.post("/v2/telephony/providers", json={"name": "x", "type": "carrier-pigeon"},
                                headers=t.headers)
    assert bad.status_code == 400


async def test_phone_numbers(api: Api) -> None:
    t = await api.tenant()
    agent = (await api.client.post("/v2/agents", json={"name": "Inbound desk", "agent_mode": "inbound"},
                                   headers=t.headers)).json()["data"]
    main = unique_phone()
    created = await api.client.post("/v2/telephony/phone-numbers", json={
        "phone_number": f"{main[:2]} {main[2:5]} {main[5:8]} {main[8:]}", "label": "Main line",
        "inbound_agent_id": agent["id"],
        "capabilities": {"voice": True, "sms": True}}, headers=t.headers)
    assert created.status_code == 201, created.text
    number = created.json()["data"]
    providers = (await api.client.get("/v2/telephony/providers", headers=t.headers)).json()["data"]
    assert number["phone_number"] == main and number["provider_id"] == providers[0]["id"]
    assert number["capabilities"] == {"voice": True, "sms": True} and number["inbound_agent_id"] == agent["id"]
    duplicate = await api.client.post("/v2/telephony/phone-numbers", json={"phone_number": main},
                                      headers=t.headers)
    assert duplicate.status_code == 409
    for body, field in [({"phone_number": "555"}, "phone_number"),
                        ({"phone_number": "+14155550151", "provider_id": 999999}, "provider_id"),
                        ({"phone_number": "+14155550151", "inbound_agent_id": 999999}, "inbound_agent_id")]:
        bad = await api.client.post("/v2/telephony/phone-numbers", json=body, headers=t.headers)
        assert bad.status_code == 400 and field in bad.json()["error"]["details"]["validation_errors"], body
    updated = await api.client.patch(f"/v2/telephony/phone-numbers/{number['id']}",
                                     json={"inbound_agent_id": None, "capabilities": {"voice": True, "sms": False}},
                                     headers=t.headers)
    assert updated.json()["data"]["inbound_agent_id"] is None and updated.json()["data"]["capabilities"]["sms"] is False
    in_use = await api.client.delete(f"/v2/telephony/providers/{providers[0]['id']}", headers=t.headers)
    assert in_use.status_code == 409
    listed = (await api.client.get("/v2/telephony/phone-numbers", headers=t.headers)).json()
    assert listed["meta"]["total"] == 1
    other = await api.tenant()
    assert (await api.client.get(f"/v2/telephony/phone-numbers/{number['id']}", headers=other.headers)).status_code \
        == 404
    assert (await api.client.delete(f"/v2/telephony/phone-numbers/{number['id']}", headers=t.headers)).status_code \
        == 204
    assert (await api.client.get(f"/v2/telephony/phone-numbers/{number['id']}", headers=t.headers)).status_code \
        == 404


async def test_a_call_uses_the_agents_number_as_caller_id(api: Api) -> None:
    t = await api.tenant()
    agent = (await api.client.post("/v2/agents", json={"name": "A"}, headers=t.headers)).json()["data"]
    await api.client.post(f"/v2/agents/{agent['id']}/publish", headers=t.headers)
    caller = unique_phone()
    await api.client.post("/v2/telephony/phone-numbers", json={"phone_number": unique_phone()}, headers=t.headers)
    await api.client.post("/v2/telephony/phone-numbers", json={"phone_number": caller,
                                                                "inbound_agent_id": agent["id"]}, headers=t.headers)
    call = await api.client.post("/v2/calls", json={"bot_id": str(agent["id"]), "destination_phone": "+1555010000"},
                                 headers=t.headers)
    assert call.json()["data"]["from_phone"] == caller


async def test_stats_validation(api: Api) -> None:
    t = await api.tenant()
    empty = (await api.client.get("/v2/telephony/stats", headers=t.headers)).json()["data"]
    assert empty["total_calls"] == 0 and empty["answer_rate"] is None and empty["by_status"] == {}
    backwards = await api.client.get("/v2/telephony/stats?start=2026-02-01T00:00:00Z&end=2026-01-01T00:00:00Z",
                                     headers=t.headers)
    assert backwards.status_code == 400
    too_long = await api.client.get("/v2/telephony/stats?start=2024-01-01T00:00:00Z&end=2026-01-01T00:00:00Z",
                                    headers=t.headers)
    assert too_long.status_code == 400
    reader = await api.key_for(t.organization_id, ("calls:read",))
    assert (await api.client.get("/v2/telephony/stats", headers=reader.headers)).status_code == 403
