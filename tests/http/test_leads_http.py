"""Leads through the real HTTP API on SQLite and PostgreSQL: a call queued at once or a campaign contact, DNC
kept as blocked_dnc, external_id de-duplication (also under a race), Idempotency-Key, the status following the
call (the calls worker pass, then the leads consumer), the list's filters, scopes and the lead.created event."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.memory.clock import ManualClock
from application.leads import FollowLeadOutcomes, FollowLeadOutcomesCommand
from application.outbox import CONSUMER_FALLBACK
from application.ports.campaigns import ContactRepository
from application.ports.platform import UnitOfWork
from domain.events import EventType
from entrypoints.features.leads import KIND, follow_job
from entrypoints.ioc import build_container
from entrypoints.units import ScopedUnits
from entrypoints.worker import jobs, make_runner
from tests.http import calls_support
from tests.http.calls_support import active_agent, finish_calls, outbox
from tests.http.test_calls_http import FailingScreenerProvider
from tests.support.apps import Api, ApiFactory, AppPool, Tenant

START = datetime(2026, 1, 5, 9, tzinfo=UTC)


@pytest.fixture(autouse=True)
async def close_workers() -> AsyncIterator[None]:
    yield
    await calls_support.close_workers()


async def follow(api: Api) -> int:
    """One pass of the leads consumer on the app's database and clock, as the worker runs it."""
    container = api.worker()
    read = 0
    while (step := await ScopedUnits(container).execute(FollowLeadOutcomes, FollowLeadOutcomesCommand())) > 0:
        read += step
    return read


async def plain_agent(api: Api, t: Tenant) -> dict[str, Any]:
    """An active agent whose prompt needs no placeholder."""
    return await active_agent(api, t, prompt="You call people back about their enquiry.", first_message="Hello.")


async def post_lead(api: Api, t: Tenant, **body: Any) -> Any:
    return await api.client.post("/v2/leads", json=body, headers=t.headers)


async def get_lead(api: Api, t: Tenant, lead_id: int) -> dict[str, Any]:
    response = await api.client.get(f"/v2/leads/{lead_id}", headers=t.headers)
    assert response.status_code == 200, response.text
    return response.json()["data"]  # type: ignore[no-any-return]


async def new_campaign(api: Api, t: Tenant, agent_id: int) -> dict[str, Any]:
    created = await api.client.post("/v2/campaigns", json={"name": "Spring", "agent_id": agent_id},
                                    headers=t.headers)
    assert created.status_code == 201, created.text
    return created.json()["data"]  # type: ignore[no-any-return]


async def record(api: Api, *events: Any) -> None:
    """Events as another part of Parley (the campaign dialer) records them: in a unit of work, to the outbox."""
    container = api.worker()
    async with container() as r:
        uow = await r.get(UnitOfWork)
        for event in events:
            uow.record(event)
        await uow.commit()


async def test_a_lead_for_an_agent_queues_its_call_and_follows_it(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant()
    agent = await active_agent(api, t)
    reached = await post_lead(api, t, phone="+1 555 010 000".replace(" ", ""), name="Ada", email="ada@example.com",
                              agent_id=agent["id"], custom_data={"crm_id": "A-17"}, source="website")
    assert reached.status_code == 201, reached.text
    lead = reached.json()["data"]
    assert reached.headers["location"].endswith(f"/leads/{lead['id']}")
    assert (lead["status"], lead["phone"], lead["agent_id"], lead["campaign_id"], lead["contact_id"]) == (
        "queued", "+1555010000", agent["id"], None, None)
    call = (await api.client.get(f"/v2/calls/{lead['call_id']}", headers=t.headers)).json()["data"]
    # the call is placed as POST /calls places it: the lead's name and custom_data fill the agent's prompt
    assert (call["status"], call["destination_phone"], call["contact_name"], call["custom_data"]) == (
        "queued", "+1555010000", "Ada", {"crm_id": "A-17"})
    busy = (await post_lead(api, t, phone="+1555010001", name="Bob", agent_id=agent["id"])).json()["data"]
    await finish_calls(api, t.organization_id)
    assert (await get_lead(api, t, lead["id"]))["status"] == "queued"  # until the consumer has read call.ended
    await follow(api)
    done = await get_lead(api, t, lead["id"])
    assert (done["status"], done["reason"], done["call_id"]) == ("called", None, lead["call_id"])
    failed = await get_lead(api, t, busy["id"])
    assert (failed["status"], failed["reason"]) == ("failed", "busy")
    created = [data for kind, data in await outbox(api, t.organization_id, "lead.")]
    assert [(d["id"], d["status"], d["call_id"]) for d in created] == [
        (lead["id"], "queued", lead["call_id"]), (busy["id"], "queued", busy["call_id"])]
    assert await follow(api) == 0  # nothing is read twice


async def test_the_consumer_is_a_job_of_the_worker_woken_by_new_events(make_api: ApiFactory, sql_url: str) -> None:
    clock = ManualClock(START)
    api = await make_api(sql_url, clock=clock)
    t = await api.tenant()
    agent = await plain_agent(api, t)
    assert follow_job in jobs()  # the worker runs it
    lead = (await post_lead(api, t, phone="+1555010002", agent_id=agent["id"])).json()["data"]
    await finish_calls(api, t.organization_id)
    container = build_container(api.settings, *api.overrides)
    try:
        kind = follow_job(container, api.settings)
        assert (kind.name, kind.on_wake, kind.recurring) == (KIND, True, True)
        runner = await make_runner(container, api.settings, kinds=[kind])
        await runner.start()
        assert await runner.run_due() == 1  # a fresh start runs it once
        assert (await get_lead(api, t, lead["id"]))["status"] == "failed"
        # due again only after its fallback, unless a commit that recorded events wakes it (or the shared
        # recheck, outbox.recheck, makes it due: tests/contract/test_outbox_consumers.py)
        await record(api, EventType.CALL_ENDED(t.organization_id, {"id": "other", "status": "completed"}))
        assert await runner.run_due() == 0
        assert await runner.run_due(woken=True) == 1
        clock.advance(seconds=16)
        assert await runner.run_due() == 0
        clock.advance(seconds=CONSUMER_FALLBACK.total_seconds())
        assert await runner.run_due() == 1
    finally:
        await container.close()
    got = await get_lead(api, t, lead["id"])
    assert (got["status"], got["reason"]) == ("failed", "no_answer")


async def test_a_dnc_listed_number_is_kept_as_blocked_dnc_without_a_call(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    agent = await plain_agent(api, t)
    campaign = await new_campaign(api, t, agent["id"])
    dnc = (await api.client.post("/v2/dnc/lists", json={"name": "Opt-outs"}, headers=t.headers)).json()["data"]
    await api.client.post(f"/v2/dnc/lists/{dnc['id']}/entries", json={"phone_numbers": ["+14155550100"]},
                          headers=t.headers)
    for target in ({"agent_id": agent["id"]}, {"campaign_id": campaign["id"]}):
        blocked = await post_lead(api, t, phone="+1 (415) 555-0100", name="Ada", **target)
        assert blocked.status_code == 201, blocked.text
        lead = blocked.json()["data"]
        assert (lead["status"], lead["reason"], lead["call_id"], lead["contact_id"]) == (
            "blocked_dnc", "dnc_blocked", None, None)
        assert (await get_lead(api, t, lead["id"]))["status"] == "blocked_dnc"
    assert (await api.client.get("/v2/calls", headers=t.headers)).json()["meta"]["total"] == 0
    contacts = await api.client.get(f"/v2/campaigns/{campaign['id']}/contacts", headers=t.headers)
    assert contacts.json()["meta"]["total"] == 0
    listed = await api.client.get("/v2/leads", params={"status": "blocked_dnc"}, headers=t.headers)
    assert listed.json()["meta"]["total"] == 2


async def test_when_screening_fails_nothing_is_stored_or_dialled(tmp_root: Path, sql_url: str, app_pool: AppPool
                                                                ) -> None:
    async for api_with in calls_support.apps_with_providers(tmp_root, app_pool):
        api = await api_with(sql_url, FailingScreenerProvider())
        t = await api.tenant()
        agent = await plain_agent(api, t)
        refused = await post_lead(api, t, phone="+14155550100", agent_id=agent["id"], external_id="crm-9")
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "dnc_unavailable"
        assert (await api.client.get("/v2/leads", headers=t.headers)).json()["meta"]["total"] == 0
        assert (await api.client.get("/v2/calls", headers=t.headers)).json()["meta"]["total"] == 0


async def test_a_repeated_external_id_returns_the_existing_lead_with_200(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    agent = await plain_agent(api, t)
    first = await post_lead(api, t, phone="+14155550100", agent_id=agent["id"], external_id="crm-1")
    assert first.status_code == 201, first.text
    again = await post_lead(api, t, phone="+14155550199", agent_id=agent["id"], external_id="crm-1", name="Other")
    assert again.status_code == 200, again.text
    assert again.json()["data"] == first.json()["data"] and "location" not in again.headers
    assert (await api.client.get("/v2/calls", headers=t.headers)).json()["meta"]["total"] == 1
    # another organization's external ids are its own
    other = await api.tenant()
    other_agent = await plain_agent(api, other)
    theirs = await post_lead(api, other, phone="+14155550100", agent_id=other_agent["id"], external_id="crm-1")
    assert theirs.status_code == 201 and theirs.json()["data"]["id"] != first.json()["data"]["id"]
    # leads without an external id are never de-duplicated
    for _ in range(2):
        assert (await post_lead(api, t, phone="+14155550100", agent_id=agent["id"])).status_code == 201
    assert (await api.client.get("/v2/leads", headers=t.headers)).json()["meta"]["total"] == 3


async def test_racing_requests_with_one_external_id_store_one_lead_and_one_call(concurrent_api: Api) -> None:
    api = concurrent_api
    t = await api.tenant()
    agent = await plain_agent(api, t)

    async def send(n: int) -> Any:
        return await post_lead(api, t, phone=f"+1415555{n:04d}", agent_id=agent["id"], external_id="race-1")

    answers = await asyncio.gather(*(send(n) for n in range(5)))
    statuses = sorted(r.status_code for r in answers)
    assert statuses == [200, 200, 200, 200, 201], [r.text for r in answers]
    assert len({r.json()["data"]["id"] for r in answers}) == 1
    assert (await api.client.get("/v2/calls", headers=t.headers)).json()["meta"]["total"] == 1
    assert (await api.client.get("/v2/leads", headers=t.headers)).json()["meta"]["total"] == 1


async def test_an_idempotency_key_replays_the_creation(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    agent = await plain_agent(api, t)
    body = {"phone": "+14155550100", "agent_id": agent["id"]}
    headers = {**t.headers, "Idempotency-Key": "lead-1"}
    first = await api.client.post("/v2/leads", json=body, headers=headers)
    replay = await api.client.post("/v2/leads", json=body, headers=headers)
    assert (first.status_code, replay.status_code) == (201, 201)
    assert replay.headers["idempotency-replayed"] == "true" and replay.content == first.content
    mismatch = await api.client.post("/v2/leads", json={**body, "name": "Else"}, headers=headers)
    assert mismatch.status_code == 422 and mismatch.json()["error"]["code"] == "idempotency_key_mismatch"
    assert (await api.client.get("/v2/calls", headers=t.headers)).json()["meta"]["total"] == 1


async def test_a_lead_for_a_campaign_becomes_its_contact_and_follows_the_contact(
        make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant()
    agent = await plain_agent(api, t)
    campaign = await new_campaign(api, t, agent["id"])
    first = await post_lead(api, t, phone="+14155550100", name="Ada", campaign_id=campaign["id"],
                            custom_data={"plan": "gold"})
    assert first.status_code == 201, first.text
    lead = first.json()["data"]
    assert (lead["status"], lead["call_id"], lead["campaign_id"], lead["agent_id"]) == (
        "queued", None, campaign["id"], None)
    contact = (await api.client.get(f"/v2/campaigns/{campaign['id']}/contacts/{lead['contact_id']}",
                                    headers=t.headers)).json()["data"]
    assert (contact["phone"], contact["name"], contact["custom_data"], contact["status"]) == (
        "+14155550100", "Ada", {"plan": "gold"}, "pending")
    # the same number again: the campaign's existing contact, no second one
    twin = (await post_lead(api, t, phone="+1 415 555 0100", campaign_id=campaign["id"])).json()["data"]
    assert twin["contact_id"] == lead["contact_id"] and twin["id"] != lead["id"]
    other = (await post_lead(api, t, phone="+14155550101", campaign_id=campaign["id"])).json()["data"]
    contacts = await api.client.get(f"/v2/campaigns/{campaign['id']}/contacts", headers=t.headers)
    assert contacts.json()["meta"]["total"] == 2
    assert (await api.client.get("/v2/calls", headers=t.headers)).json()["meta"]["total"] == 0
    # the dialer's events, as it records them
    org = t.organization_id
    await record(api, EventType.CONTACT_COMPLETED(org, {
        "campaign_id": campaign["id"], "contact_id": lead["contact_id"], "phone": "+14155550100", "attempts": 1,
        "last_call_id": "call-1", "reason": None}), EventType.CONTACT_FAILED(org, {
            "campaign_id": campaign["id"], "contact_id": other["contact_id"], "phone": "+14155550101",
            "attempts": 3, "last_call_id": "call-2", "reason": "no_answer"}))
    await follow(api)
    for reached in (lead, twin):
        got = await get_lead(api, t, reached["id"])
        assert (got["status"], got["call_id"], got["reason"]) == ("called", "call-1", None)
    got = await get_lead(api, t, other["id"])
    assert (got["status"], got["call_id"], got["reason"]) == ("failed", "call-2", "no_answer")
    # a lead for a number whose contact is already done takes the contact's outcome... once the contact is
    # final in the store: here it is still pending (the events above came without the dialer's writes)
    late = (await post_lead(api, t, phone="+14155550100", campaign_id=campaign["id"])).json()["data"]
    assert late["status"] == "queued" and late["contact_id"] == lead["contact_id"]


async def test_a_finished_campaign_or_an_inactive_agent_takes_no_lead(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    agent = await plain_agent(api, t)
    draft_agent = (await api.client.post("/v2/agents", json={"name": "Draft"}, headers=t.headers)).json()["data"]
    refused = await post_lead(api, t, phone="+14155550100", agent_id=draft_agent["id"])
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "invalid_transition"
    campaign = await new_campaign(api, t, agent["id"])
    await api.client.post(f"/v2/campaigns/{campaign['id']}/cancel", headers=t.headers)
    ended = await post_lead(api, t, phone="+14155550100", campaign_id=campaign["id"])
    assert ended.status_code == 409 and ended.json()["error"]["code"] == "invalid_transition"
    assert (await api.client.get("/v2/leads", headers=t.headers)).json()["meta"]["total"] == 0


async def test_bad_leads_are_refused_naming_the_field(any_api: Api) -> None:
    api = any_api
    t = await api.tenant()
    agent = await plain_agent(api, t)
    campaign = await new_campaign(api, t, agent["id"])
    other = await api.tenant()
    their_agent = await plain_agent(api, other)

    async def error(status: int, **body: Any) -> dict[str, Any]:
        response = await post_lead(api, t, **body)
        assert response.status_code == status, response.text
        return response.json()["error"]  # type: ignore[no-any-return]

    both = await error(422, phone="+14155550100", agent_id=agent["id"], campaign_id=campaign["id"])
    assert both["code"] == "invalid_target" and set(both["details"]["validation_errors"]) == {"campaign_id"}
    neither = await error(422, phone="+14155550100")
    assert set(neither["details"]["validation_errors"]) == {"agent_id", "campaign_id"}
    assert "phone" in (await error(400, phone="12", agent_id=agent["id"]))["details"]["validation_errors"]
    assert "email" in (await error(400, phone="+14155550100", email="nope", agent_id=agent["id"]))[
        "details"]["validation_errors"]
    assert (await error(404, phone="+14155550100", agent_id=999999))["details"]["field"] == "agent_id"
    assert (await error(404, phone="+14155550100", agent_id=their_agent["id"]))["details"]["field"] == "agent_id"
    assert (await error(404, phone="+14155550100", campaign_id=999999))["details"]["field"] == "campaign_id"
    missing = await error(400, phone="+14155550100", agent_id=agent["id"], unknown=1)
    assert missing["code"] == "bad_request"
    placeholders = await api.client.post("/v2/agents", json={"name": "P", "prompt": "Hi {{plan}}"},
                                         headers=t.headers)
    needy = placeholders.json()["data"]
    await api.client.post(f"/v2/agents/{needy['id']}/publish", headers=t.headers)
    unresolved = await error(400, phone="+14155550100", agent_id=needy["id"])
    assert unresolved["details"]["missing_placeholders"] == ["plan"]
    assert list(unresolved["details"]["validation_errors"]) == ["custom_data"]
    named = await api.client.post("/v2/agents", json={"name": "N", "prompt": "Hi {{contact_name}}"},
                                  headers=t.headers)
    await api.client.post(f"/v2/agents/{named.json()['data']['id']}/publish", headers=t.headers)
    nameless = await error(400, phone="+14155550100", agent_id=named.json()["data"]["id"])
    assert list(nameless["details"]["validation_errors"]) == ["name"]  # a lead's name fills {{contact_name}}
    assert (await api.client.get("/v2/leads", headers=t.headers)).json()["meta"]["total"] == 0


async def test_leads_are_listed_newest_first_with_filters_and_scopes(make_api: ApiFactory, sqlite_url: str) -> None:
    clock = ManualClock(START)
    api = await make_api(sqlite_url, clock=clock)
    t = await api.tenant()
    agent = await plain_agent(api, t)
    ids = []
    for n, source in enumerate(("website", "zapier", "website")):
        created = await post_lead(api, t, phone=f"+141555501{n:02d}", agent_id=agent["id"], source=source)
        ids.append(created.json()["data"]["id"])
        clock.advance(hours=1)

    async def listed(**params: Any) -> tuple[list[int], int]:
        response = await api.client.get("/v2/leads", params=params, headers=t.headers)
        assert response.status_code == 200, response.text
        body = response.json()
        return [x["id"] for x in body["data"]], body["meta"]["total"]

    assert await listed() == (ids[::-1], 3)
    assert await listed(limit=1, offset=1) == ([ids[1]], 3)
    assert await listed(source="website") == ([ids[2], ids[0]], 2)
    assert await listed(status="queued") == (ids[::-1], 3)
    assert await listed(status="called") == ([], 0)
    after = (START + timedelta(minutes=30)).isoformat()
    before = (START + timedelta(hours=1, minutes=30)).isoformat()
    assert await listed(created_after=after, created_before=before) == ([ids[1]], 1)
    bad = await api.client.get("/v2/leads", params={"created_after": "yesterday"}, headers=t.headers)
    assert bad.status_code == 400 and "created_after" in bad.json()["error"]["details"]["validation_errors"]
    assert (await api.client.get("/v2/leads", params={"status": "lost"}, headers=t.headers)).status_code == 400
    # scopes: leads:write ingests, leads:read reads
    writer = await api.key_for(t.organization_id, ("leads:write",))
    reader = await api.key_for(t.organization_id, ("leads:read",))
    assert (await post_lead(api, writer, phone="+14155550150", agent_id=agent["id"])).status_code == 201
    assert (await api.client.get("/v2/leads", headers=writer.headers)).status_code == 403
    assert (await post_lead(api, reader, phone="+14155550151", agent_id=agent["id"])).status_code == 403
    assert (await api.client.get(f"/v2/leads/{ids[0]}", headers=reader.headers)).status_code == 200
    # another organization's lead is not found
    other = await api.tenant()
    assert (await api.client.get(f"/v2/leads/{ids[0]}", headers=other.headers)).status_code == 404
    assert (await api.client.get("/v2/leads/999999", headers=t.headers)).status_code == 404


async def test_lead_created_is_in_the_event_catalogue(api: Api) -> None:
    t = await api.tenant()
    events = (await api.client.get("/v2/webhooks/events", headers=t.headers)).json()["data"]
    lead = next(e for e in events if e["name"] == "lead.created")
    assert lead["group"] == "leads" and lead["description"] and lead["example"]["status"] == "queued"
    subscription = {"url": "https://hooks.example.com/p", "events": ["lead.created"]}
    hook = await api.client.post("/v2/webhooks", json=subscription, headers=t.headers)
    assert hook.status_code == 201, hook.text


async def test_leads_of_contacts_cancelled_or_deleted_fail_with_the_reason(make_api: ApiFactory, sql_url: str) -> None:
    """Contacts cancelled with their campaign, or deleted, have no outcome event: their queued leads fail at once
    with the reason; a lead whose contact is being dialled stays queued, and other campaigns' leads are untouched."""
    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant()
    agent = await plain_agent(api, t)
    spring, summer, autumn = [await new_campaign(api, t, agent["id"]) for _ in range(3)]

    async def lead_on(campaign: dict[str, Any], phone: str) -> dict[str, Any]:
        response = await post_lead(api, t, phone=phone, campaign_id=campaign["id"])
        assert response.status_code == 201, response.text
        return response.json()["data"]  # type: ignore[no-any-return]

    waiting, twin = await lead_on(spring, "+14155550100"), await lead_on(spring, "+14155550100")
    removed, dialling = await lead_on(spring, "+14155550101"), await lead_on(spring, "+14155550102")
    deleted_with_campaign, elsewhere = await lead_on(summer, "+14155550100"), await lead_on(autumn, "+14155550100")
    # the dialer has one contact on the line
    container = api.worker()
    async with container() as r:
        contacts = await r.get(ContactRepository)
        contact = await contacts.get(t.organization_id, spring["id"], dialling["contact_id"])
        assert contact is not None
        await contacts.update(contact.move("dial", START, last_call_id="00000000-0000-4000-8000-000000000009"))
        await (await r.get(UnitOfWork)).commit()

    gone = await api.client.delete(f"/v2/campaigns/{spring['id']}/contacts/{removed['contact_id']}",
                                   headers=t.headers)
    assert gone.status_code == 204, gone.text
    got = await get_lead(api, t, removed["id"])
    assert (got["status"], got["reason"]) == ("failed", "contact_deleted")
    assert (await get_lead(api, t, waiting["id"]))["status"] == "queued"

    cancelled = await api.client.post(f"/v2/campaigns/{spring['id']}/cancel", headers=t.headers)
    assert cancelled.status_code == 200, cancelled.text
    for lead in (waiting, twin):
        got = await get_lead(api, t, lead["id"])
        assert (got["status"], got["reason"]) == ("failed", "campaign_cancelled")
    got = await get_lead(api, t, dialling["id"])
    assert (got["status"], got["reason"]) == ("queued", None)  # its call's end will settle it

    assert (await api.client.delete(f"/v2/campaigns/{summer['id']}", headers=t.headers)).status_code == 204
    got = await get_lead(api, t, deleted_with_campaign["id"])
    assert (got["status"], got["reason"]) == ("failed", "campaign_deleted")
    assert (await get_lead(api, t, elsewhere["id"]))["status"] == "queued"
    listed = await api.client.get("/v2/leads?status=failed", headers=t.headers)
    assert listed.json()["meta"]["total"] == 4
