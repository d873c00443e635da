"""One resource's events reach a subscription in the order they happened, retries included: a call's
events wait while an earlier one of the same call is still on its way; other resources do not wait."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from application.webhooks import WebhookPolicy
from tests.http.calls_support import active_agent, close_workers, finish_calls, place
from tests.support.apps import ApiFactory
from tests.support.receiver import Receiver, Reply
from tests.support.webhooks import make_harness

CALL_EVENTS = ["call.started", "call.answered", "call.ended", "call.completed"]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fresh_url(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue(f"fresh_{'sqlite' if request.param == 'sqlite' else 'pg'}_url")


@pytest.fixture(autouse=True)
async def close_call_workers() -> AsyncIterator[None]:
    yield
    await close_workers()


async def test_a_calls_events_arrive_in_order_even_when_the_first_is_retried(
        make_api: ApiFactory, fresh_url: str, receiver: Receiver) -> None:
    h, jobs = await make_harness(make_api, fresh_url, receiver, WebhookPolicy(allow_loopback=True, timeout_seconds=2.0))
    try:
        t = await h.api.tenant()
        hook = await h.subscribe(t, [*CALL_EVENTS, "appointment.booked"])
        call = (await place(h.api, t, await active_agent(h.api, t), "+1555010000")).json()["data"]
        await finish_calls(h.api, t.organization_id)  # the whole call happens before the worker dispatches
        await h.emit(t.organization_id, "appointment.booked", {"id": 77})  # another resource

        def arrived() -> list[tuple[str, object]]:
            return [(r.headers["x-webhook-event"], json.loads(r.body)["data"]["id"]) for r in h.receiver.requests]

        h.receiver.script("/hook", Reply(500))  # the first delivery fails
        await h.drain()
        assert arrived() == [("call.started", call["id"]), ("appointment.booked", 77)]  # the call's others wait
        pending = [row for row in await h.logs(t, hook["id"]) if row["event"] != "appointment.booked"]
        assert [(row["event"], row["status"]) for row in pending] == [("call.started", "failed")]

        h.clock.advance(seconds=6)  # the retry is due
        await h.drain()
        assert [event for event, _ in arrived()] == ["call.started", "appointment.booked", *CALL_EVENTS]
        assert {data_id for event, data_id in arrived() if event != "appointment.booked"} == {call["id"]}
    finally:
        await jobs.close()
