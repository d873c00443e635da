"""An agent's calendar_id: only a live calendar of the agent's own organization, and a calendar deleted later
is a handled "no booking" mid-call."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from adapters.memory.clock import ManualClock
from tests.http import calls_support
from tests.http.calls_support import active_agent, finish_calls, place
from tests.support.apps import Api, ApiFactory, Tenant

START = datetime(2026, 1, 5, 9, tzinfo=UTC)


@pytest.fixture(autouse=True)
async def close_workers() -> AsyncIterator[None]:
    yield
    await calls_support.close_workers()


async def _calendar(api: Api, tenant: Tenant, *, rules: bool = False) -> int:
    created = await api.client.post("/v2/scheduling/calendars", json={
        "name": "Sales", "timezone": "UTC", "slot_duration_minutes": 30}, headers=tenant.headers)
    assert created.status_code == 201, created.text
    calendar_id: int = created.json()["data"]["id"]
    for weekday in range(7 if rules else 0):
        rule = await api.client.post(f"/v2/scheduling/calendars/{calendar_id}/rules", json={
            "weekday": weekday, "start_time": "10:00", "end_time": "12:00"}, headers=tenant.headers)
        assert rule.status_code == 201, rule.text
    return calendar_id


def _names_calendar_id(response: object, calendar_id: int) -> None:
    assert response.status_code == 404, response.text  # type: ignore[attr-defined]
    error = response.json()["error"]  # type: ignore[attr-defined]
    assert error["code"] == "not_found"
    assert "calendar_id" in error["message"] and str(calendar_id) in error["message"]
    assert error["details"] == {"field": "calendar_id"}


async def test_an_agent_points_only_at_a_calendar_of_its_organization(any_api: Api) -> None:
    mine, other = await any_api.tenant(), await any_api.tenant()
    theirs = await _calendar(any_api, other)
    own = await _calendar(any_api, mine)
    c = any_api.client

    for calendar_id in (theirs, 2**40):
        _names_calendar_id(await c.post("/v2/agents", json={"name": "A", "calendar_id": calendar_id},
                                        headers=mine.headers), calendar_id)
    assert (await c.get("/v2/agents", headers=mine.headers)).json()["meta"]["total"] == 0

    created = await c.post("/v2/agents", json={"name": "A", "calendar_id": own}, headers=mine.headers)
    assert created.status_code == 201 and created.json()["data"]["calendar_id"] == own
    agent_id = created.json()["data"]["id"]
    _names_calendar_id(await c.patch(f"/v2/agents/{agent_id}", json={"calendar_id": theirs}, headers=mine.headers),
                       theirs)
    assert (await c.get(f"/v2/agents/{agent_id}", headers=mine.headers)).json()["data"]["calendar_id"] == own
    cleared = await c.patch(f"/v2/agents/{agent_id}", json={"calendar_id": None}, headers=mine.headers)
    assert cleared.status_code == 200 and cleared.json()["data"]["calendar_id"] is None

    assert (await c.delete(f"/v2/scheduling/calendars/{own}", headers=mine.headers)).status_code == 204
    _names_calendar_id(await c.patch(f"/v2/agents/{agent_id}", json={"calendar_id": own}, headers=mine.headers),
                       own)


async def test_a_calendar_deleted_after_the_agent_pointed_at_it_books_nothing_mid_call(
        make_api: ApiFactory, sql_url: str, caplog: pytest.LogCaptureFixture) -> None:
    api = await make_api(sql_url, clock=ManualClock(START))
    t = await api.tenant()
    calendar_id = await _calendar(api, t, rules=True)
    agent = await active_agent(api, t, calendar_id=calendar_id)
    deleted = await api.client.delete(f"/v2/scheduling/calendars/{calendar_id}", headers=t.headers)
    assert deleted.status_code == 204
    call_id = (await place(api, t, agent, "+1555010006")).json()["data"]["id"]
    with caplog.at_level(logging.WARNING):
        await finish_calls(api, t.organization_id)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]
    call = (await api.client.get(f"/v2/calls/{call_id}", headers=t.headers)).json()["data"]
    assert call["status"] == "completed" and call["outcome"] == "conversation_completed"
    log = (await api.client.get(f"/v2/call-logs/{call['call_log_id']}", headers=t.headers)).json()["data"]
    # the conversation's check_availability tool failed and the agent said so (the model is told why)
    assert any(turn["text"].startswith("I'm sorry, that didn't work: calendar") for turn in log["transcript"])
    appointments = (await api.client.get("/v2/scheduling/appointments", headers=t.headers)).json()
    assert appointments["meta"]["total"] == 0
