"""Every way Parley places a call reaches a real carrier: a lead (``POST /v2/leads``), a trigger's ``call`` action
(a text to the organization's number asks to be called back) and the widget (``POST /v2/widget/contacts``) each
reach the Twilio emulator as a ``Calls.json`` request and the Telnyx emulator as a ``POST /v2/calls``, from the
organization's number to the right person, and the emulator's signed callbacks drive the call to ``completed``, on
SQLite and PostgreSQL. (Calls placed through ``POST /v2/calls`` and by a campaign: test_twilio_http.py,
tests/e2e/test_telnyx_calls.py.)"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.memory.clock import ManualClock
from application.leads import FollowLeadOutcomes, FollowLeadOutcomesCommand
from entrypoints.units import ScopedUnits
from tests.e2e.telnyx_support import telnyx_world
from tests.http import calls_support, dialer_support, twilio_support
from tests.http.calls_support import active_agent, drive, events_of, outbox, unique_phone
from tests.http.triggers_support import create, evaluate, run_jobs, runs
from tests.support.apps import Api, AppPool, Tenant
from tests.support.emulators.twilio import TwilioEmulator

# end to end through a carrier's protocol (make test runs it; make test-fast leaves it out)
pytestmark = pytest.mark.slow

SHOP = "https://shop.example"
TALK_SECONDS = 31


@dataclass
class Carrier:
    """An app whose default provider is a carrier on its emulator, a tenant and its voice + SMS number there, and
    what differs between the carriers: which dials the emulator was asked for, a person texting the number, and
    the callee answering and hanging up after ``seconds``."""

    name: str
    api: Api
    tenant: Tenant
    number: str
    dials: Callable[[], list[tuple[str, str]]]
    """(to, from) of every dial request the emulator received, in order."""
    dialled_to: Callable[[str], str]
    """The carrier's id of the call dialled to a number."""
    text: Callable[[str, str], Awaitable[int]]
    """A person texts the organization's number: the status Parley answered the carrier's webhook with."""
    talk: Callable[[str, int], Awaitable[None]]
    """The callee answers and hangs up ``seconds`` later (the carrier's callbacks, signed)."""

    @property
    def clock(self) -> ManualClock:
        assert isinstance(self.api.clock, ManualClock)
        return self.api.clock

    async def get(self, path: str) -> Any:
        response = await self.api.client.get(path, headers=self.tenant.headers)
        assert response.status_code == 200, response.text
        return response.json()["data"]


@contextlib.asynccontextmanager
async def twilio(tmp_root: Path, app_pool: AppPool, sql_url: str) -> AsyncIterator[Carrier]:
    emulator = TwilioEmulator().start()
    apps = calls_support.apps_with_providers(tmp_root, app_pool)
    try:
        api, tokens = await twilio_support.app(await anext(apps), sql_url)
        line, _ = await twilio_support.twilio_line(api, tokens, emulator)

        def dials() -> list[tuple[str, str]]:
            return [(sent["To"][0], sent["From"][0]) for sent in emulator.requests_to("/Calls.json")]

        def dialled_to(phone: str) -> str:
            (call,) = [c for c in emulator.calls.values() if c.to == phone]
            return call.sid

        async def text(person: str, body: str) -> int:
            return (await emulator.inbound_sms(person, line.number["phone_number"], body)).status_code

        async def talk(sid: str, seconds: int) -> None:
            for step in (emulator.initiate, emulator.ring, emulator.answer):
                assert (await step(sid)).status_code == 204
            assert (await emulator.complete(sid, duration=seconds)).status_code == 204

        yield Carrier("twilio", api, line.tenant, line.number["phone_number"], dials, dialled_to, text, talk)
    finally:
        await calls_support.close_workers()
        await dialer_support.close_workers()
        with contextlib.suppress(StopAsyncIteration):
            await anext(apps)
        emulator.stop()


@contextlib.asynccontextmanager
async def telnyx(tmp_root: Path, app_pool: AppPool, sql_url: str) -> AsyncIterator[Carrier]:
    worlds = telnyx_world(tmp_root, app_pool, sql_url)
    world = await anext(worlds)
    emulator = world.emulator
    try:
        def dials() -> list[tuple[str, str]]:
            return [(sent.json["to"], sent.json["from"]) for sent in emulator.on("POST", "/v2/calls")
                    if sent.path == "/v2/calls"]

        def dialled_to(phone: str) -> str:
            (call,) = [c for c in emulator.calls.values() if c.direction == "outgoing" and c.to_phone == phone]
            return call.call_control_id

        async def text(person: str, body: str) -> int:
            return (await emulator.inbound_sms(person, world.number, body)).status

        async def talk(ccid: str, seconds: int) -> None:
            assert (await emulator.ring(ccid)).status == 204
            assert [d.status for d in await emulator.answer(ccid)] == [204] * 3
            world.clock.advance(seconds=seconds)
            assert (await emulator.hangup(ccid)).status == 204

        yield Carrier("telnyx", world.api, world.tenant, world.number, dials, dialled_to, text, talk)
    finally:
        await dialer_support.close_workers()
        with contextlib.suppress(StopAsyncIteration):
            await anext(worlds)


@pytest.fixture(params=["twilio", "telnyx"])
async def carrier(request: pytest.FixtureRequest, tmp_root: Path, app_pool: AppPool,
                  sql_url: str) -> AsyncIterator[Carrier]:
    world = twilio if request.param == "twilio" else telnyx
    async with world(tmp_root, app_pool, sql_url) as made:
        yield made


async def plain_agent(carrier: Carrier) -> dict[str, Any]:
    """An active agent whose prompt needs no placeholder (a trigger's call has no contact name)."""
    return await active_agent(carrier.api, carrier.tenant, prompt="You call people back about their enquiry.",
                              first_message="Hello, this is Parley calling you back.")


async def dialled_and_completed(carrier: Carrier, call_id: str, person: str) -> dict[str, Any]:
    """The worker's calls pass dials the call at the carrier, from the organization's number to ``person``; the
    carrier's callbacks take it to ``completed``. The call as the API shows it then."""
    assert (await carrier.get(f"/v2/calls/{call_id}"))["status"] == "queued"
    await drive(carrier.api, carrier.tenant.organization_id)
    assert carrier.dials() == [(person, carrier.number)]  # one real dial request, to the person, from our number
    call = await carrier.get(f"/v2/calls/{call_id}")
    assert (call["status"], call["destination_phone"], call["from_phone"]) == ("ringing", person, carrier.number)
    await carrier.talk(carrier.dialled_to(person), TALK_SECONDS)
    call = await carrier.get(f"/v2/calls/{call_id}")
    assert (call["status"], call["end_reason"], call["duration_seconds"]) == ("completed", "hangup", TALK_SECONDS)
    assert events_of(await outbox(carrier.api, carrier.tenant.organization_id), call_id) == [
        "call.started", "call.answered", "call.ended", "call.completed"]
    await drive(carrier.api, carrier.tenant.organization_id)  # the worker changes nothing after, dials no more
    assert len(carrier.dials()) == 1
    return call  # type: ignore[no-any-return]


async def test_a_lead_is_called_through_the_carrier(carrier: Carrier) -> None:
    agent = await active_agent(carrier.api, carrier.tenant)
    person = unique_phone()
    posted = await carrier.api.client.post("/v2/leads", headers=carrier.tenant.headers, json={
        "phone": person, "name": "Ada", "agent_id": agent["id"], "source": "website"})
    assert posted.status_code == 201, posted.text
    lead = posted.json()["data"]
    call = await dialled_and_completed(carrier, lead["call_id"], person)
    assert call["contact_name"] == "Ada"
    units = ScopedUnits(carrier.api.worker())
    while await units.execute(FollowLeadOutcomes, FollowLeadOutcomesCommand()) > 0:  # the leads consumer: call.ended
        pass
    followed = await carrier.get(f"/v2/leads/{lead['id']}")
    assert (followed["status"], followed["call_id"]) == ("called", lead["call_id"])


async def test_a_trigger_calls_back_whoever_texts_the_number_through_the_carrier(carrier: Carrier) -> None:
    agent = await plain_agent(carrier)
    made = await create(carrier.api, carrier.tenant, name="Call texters back", event="sms.received",
                        conditions={"all": [{"field": "data.keyword", "op": "eq", "value": None}]},
                        actions=[{"type": "call", "config": {"agent_id": agent["id"], "phone": "{{data.from}}"}}])
    assert made.status_code == 201, made.text
    await evaluate(carrier.api)
    person = unique_phone()
    assert await carrier.text(person, "Please call me back about the flat.") == 204  # the carrier's webhook
    await evaluate(carrier.api)
    await run_jobs(carrier.api)
    (run,) = await runs(carrier.api, carrier.tenant, made.json()["data"]["id"])
    assert run["status"] == "succeeded", run
    (queued,) = await carrier.get("/v2/calls")
    assert (queued["agent_id"], queued["destination_phone"]) == (agent["id"], person)
    await dialled_and_completed(carrier, queued["id"], person)


async def test_a_widget_visitor_is_called_through_the_carrier(carrier: Carrier) -> None:
    agent = await plain_agent(carrier)
    campaign = await dialer_support.campaign(carrier.api, carrier.tenant, [{"phone": unique_phone()}],
                                             agent_id=agent["id"], timezone_mode="campaign")
    minted = await carrier.api.client.post("/v2/widget/tokens", headers=carrier.tenant.headers, json={
        "campaign_id": campaign["id"], "allowed_origins": [SHOP]})
    assert minted.status_code == 201, minted.text
    visitor = unique_phone()
    submitted = await carrier.api.client.post("/v2/widget/contacts", json={"phone": visitor, "name": "Ada"}, headers={
        "Authorization": f"Widget {minted.json()['data']['token']}", "Origin": SHOP})
    assert submitted.status_code == 201, submitted.text
    data = submitted.json()["data"]
    assert data["status"] == "dialing" and data["call_id"], data
    call = await dialled_and_completed(carrier, data["call_id"], visitor)
    assert (call["campaign_id"], call["contact_id"]) == (campaign["id"], data["contact_id"])
