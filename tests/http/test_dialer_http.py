"""The campaign dialer end to end through HTTP on SQLite and PostgreSQL, with a manual clock: every simulator
outcome under the retry policy, the calling window, schedules, DNC at dial time, pause, the cap and the
priority of single calls."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from adapters.memory.clock import ManualClock
from application.call_progress import RunCallProgressCommand
from entrypoints.features import calls as calls_feature
from tests.http import dialer_support as support
from tests.http.calls_support import outbox, unique_phone
from tests.http.dashboard_support import cookie, login, new_user
from tests.http.dialer_support import campaign, campaign_calls, contacts, dial, get, tick
from tests.support.apps import ApiFactory

MONDAY_9 = datetime(2026, 1, 5, 9, tzinfo=UTC)
OUTCOMES = {  # number: (final contact status, attempts made, reason)
    "+1555010000": ("completed", 1, "conversation_completed"),
    "+1555010001": ("failed", 3, "busy"),
    "+1555010002": ("failed", 2, "no_answer"),
    "+1555010003": ("failed", 2, "failed"),
    "+1555010004": ("failed", 1, "voicemail"),
    "+1555010005": ("completed", 1, "transferred"),
}
POLICY = {"busy": {"max_attempts": 3, "delay_minutes": 10}, "no_answer": {"max_attempts": 2, "delay_minutes": 60},
          "voicemail": {"max_attempts": 1, "delay_minutes": 60}, "failed": {"max_attempts": 2, "delay_minutes": 30}}
DELAYS = {"+1555010001": 10, "+1555010002": 60, "+1555010003": 30}


@pytest.fixture(autouse=True)
async def close_workers() -> AsyncIterator[None]:
    yield
    await support.close_workers()


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.mark.slow  # a campaign run through the worker's passes to its end (make test runs it)
async def test_a_campaign_runs_to_completion_with_every_outcome_and_the_retry_policy(
        make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(MONDAY_9))
    t = await api.tenant()
    people = [{"phone": n, "name": f"Contact {i}", "custom_data": {"plan": "pro"}} for i, n in enumerate(OUTCOMES)]
    c = await campaign(api, t, people, retry=POLICY, max_concurrent_calls=3)
    for _ in range(200):
        await tick(api, seconds=120)
        if (await get(api, t, f"/campaigns/{c['id']}"))["status"] == "completed":
            break
    found = await get(api, t, f"/campaigns/{c['id']}")
    assert found["status"] == "completed", found
    assert found["stats"]["completed"] == 2 and found["stats"]["failed"] == 4
    by_phone = await contacts(api, t, c["id"])
    for number, (status, attempts, reason) in OUTCOMES.items():
        contact = by_phone[number]
        assert (contact["status"], contact["attempt_count"], contact["reason"]) == (status, attempts, reason), contact
        assert [a["attempt"] for a in contact["attempts"]] == list(range(1, attempts + 1))
        for earlier, later in zip(contact["attempts"], contact["attempts"][1:], strict=False):
            waited = _at(later["started_at"]) - _at(earlier["ended_at"])
            assert timedelta(minutes=DELAYS[number]) <= waited < timedelta(minutes=DELAYS[number], seconds=121)
    calls = await campaign_calls(api, t, c["id"])
    assert len(calls) == sum(a for _, a, _ in OUTCOMES.values())
    assert {call["contact_id"] for call in calls} == {p["id"] for p in by_phone.values()}
    assert all(call["campaign_id"] == c["id"] for call in calls)
    events = await outbox(api, t.organization_id, prefix="c")
    kinds = [kind for kind, _ in events if kind.startswith(("contact.", "campaign."))]
    assert kinds.count("contact.completed") == 2 and kinds.count("contact.failed") == 4
    assert kinds[-1] == "campaign.completed"
    failed = next(data for kind, data in events if kind == "contact.failed" and data["phone"] == "+1555010001")
    assert failed["attempts"] == 3 and failed["reason"] == "busy" and failed["campaign_id"] == c["id"]


async def test_a_contact_at_three_in_the_morning_waits_for_its_opening(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(datetime(2026, 1, 5, 8, tzinfo=UTC)))  # 03:00 in New York
    t = await api.tenant()
    c = await campaign(api, t, [{"phone": "+1555010000", "timezone": "America/New_York", "name": "Ada",
                                 "custom_data": {"plan": "x"}}])
    await tick(api, seconds=1)
    assert await campaign_calls(api, t, c["id"]) == []
    found = await get(api, t, f"/campaigns/{c['id']}")
    assert found["status_reason"] == "outside_calling_hours"
    assert _at(found["next_dial_at"]) == datetime(2026, 1, 5, 13, tzinfo=UTC)  # 08:00 EST
    contact = next(iter((await contacts(api, t, c["id"])).values()))
    assert contact["status"] == "pending" and _at(contact["next_attempt_at"]) == datetime(2026, 1, 5, 13, tzinfo=UTC)
    assert api.clock is not None
    api.clock.set(datetime(2026, 1, 5, 12, 59, tzinfo=UTC))
    await dial(api)
    assert await campaign_calls(api, t, c["id"]) == []
    api.clock.set(datetime(2026, 1, 5, 13, 0, tzinfo=UTC))
    await dial(api)
    assert len(await campaign_calls(api, t, c["id"])) == 1
    assert (await get(api, t, f"/campaigns/{c['id']}"))["status_reason"] is None


async def test_a_pass_leaves_a_campaign_that_waits_alone_until_it_has_work(make_api: ApiFactory,
                                                                            private_sql_url: str) -> None:
    """The pass lists the running campaigns with their first open contact in one statement; a campaign whose
    contact waits for its hours and that already says so gets no step, until its agent is archived. On a
    database of its own: the pass lists the first ten running campaigns of the database, and the campaigns
    other tests leave running would hide this one."""
    from application.dialer import wants_turn
    from application.ports.dialer import CampaignTurn, DialerStore
    from entrypoints.units import ScopedUnits

    api = await make_api(private_sql_url, clock=ManualClock(datetime(2026, 1, 5, 8, tzinfo=UTC)))  # 03:00 New York
    t = await api.tenant()
    c = await campaign(api, t, [{"phone": "+1555010000", "timezone": "America/New_York", "name": "Ada",
                                 "custom_data": {"plan": "x"}}])
    assert api.clock is not None
    now = api.clock.now()

    async def turn() -> CampaignTurn:
        async def work(unit: Any) -> CampaignTurn:
            turns = await (await unit.get(DialerStore)).campaign_turns(10)
            return next(x for x in turns if x.ref.campaign_id == c["id"])
        return await ScopedUnits(support.worker(api)).run(work)

    first = await turn()
    assert first.has_open and first.agent_live and first.first_due_at is not None and wants_turn(first, now)
    await dial(api)  # the step defers the contact to 08:00 EST and says so on the campaign
    waiting = await turn()
    assert (waiting.first_due_at, waiting.status_reason) == (datetime(2026, 1, 5, 13, tzinfo=UTC),
                                                             "outside_calling_hours")
    assert not wants_turn(waiting, now)
    archived = await api.client.patch(f"/v2/agents/{c['agent_id']}", json={"status": "archived"}, headers=t.headers)
    assert archived.status_code == 200, archived.text
    assert wants_turn(await turn(), now)
    await dial(api)
    found = await get(api, t, f"/campaigns/{c['id']}")
    assert (found["status"], found["status_reason"]) == ("failed", "agent_archived")


async def test_a_schedule_holiday_closes_dialing(make_api: ApiFactory, sql_url: str) -> None:
    new_year = datetime(2026, 1, 1, 15, tzinfo=UTC)  # a Thursday, 10:00 in New York
    api = await make_api(sql_url, clock=ManualClock(new_year))
    t = await api.tenant()
    schedule = await api.client.post("/v2/schedules", headers=t.headers, json={
        "name": "office", "timezone": "America/New_York", "holidays": {"country": "US"},
        "weekly": [{"day": d, "start": "09:00", "end": "17:00"} for d in range(5)]})
    assert schedule.status_code == 201, schedule.text
    c = await campaign(api, t, [{"phone": "+1555010000", "name": "Ada", "custom_data": {"plan": "x"}}],
                       schedule_id=schedule.json()["data"]["id"], timezone="America/New_York",
                       timezone_mode="campaign")
    await tick(api, seconds=1)
    assert await campaign_calls(api, t, c["id"]) == []
    found = await get(api, t, f"/campaigns/{c['id']}")
    assert found["status_reason"] == "outside_calling_hours"
    assert _at(found["next_dial_at"]) == datetime(2026, 1, 2, 14, tzinfo=UTC)  # Friday 09:00 EST
    deleted = await api.client.delete(f"/v2/schedules/{schedule.json()['data']['id']}", headers=t.headers)
    assert deleted.status_code == 409 and deleted.json()["error"]["details"]["campaign_ids"] == [c["id"]]
    assert api.clock is not None
    api.clock.set(datetime(2026, 1, 2, 14, tzinfo=UTC))
    await dial(api)
    assert len(await campaign_calls(api, t, c["id"])) == 1


async def test_dnc_added_after_import_skips_the_contact_at_dial_time(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(MONDAY_9))
    t = await api.tenant()
    c = await campaign(api, t, [{"phone": "+1555010000", "name": "Ada", "custom_data": {"plan": "x"}},
                                {"phone": "+14155550142", "name": "Ada", "custom_data": {"plan": "x"}}], start=False,
                       timezone_mode="campaign")
    dnc = (await api.client.post("/v2/dnc/lists", json={"name": "opt-outs"}, headers=t.headers)).json()["data"]
    added = await api.client.post(f"/v2/dnc/lists/{dnc['id']}/entries", json={"phone_numbers": ["+14155550142"]},
                                  headers=t.headers)
    assert added.status_code in (200, 201), added.text
    assert (await api.client.post(f"/v2/campaigns/{c['id']}/start", headers=t.headers)).status_code == 200
    await tick(api)
    by_phone = await contacts(api, t, c["id"])
    assert by_phone["+14155550142"]["status"] == "skipped_dnc" and by_phone["+14155550142"]["attempts"] == []
    assert [call["destination_phone"] for call in await campaign_calls(api, t, c["id"])] == ["+1555010000"]


async def test_unresolved_placeholders_fail_the_contact_and_the_campaign_goes_on(make_api: ApiFactory,
                                                                                 sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(MONDAY_9))
    t = await api.tenant()
    c = await campaign(api, t, [{"phone": "+1555010000", "custom_data": {"x": "y"}},
                                {"phone": "+1555010005", "name": "Ada", "custom_data": {"plan": "x"}}])
    await tick(api)
    by_phone = await contacts(api, t, c["id"])
    assert by_phone["+1555010000"]["status"] == "failed"
    assert by_phone["+1555010000"]["reason"] == "unresolved_placeholders"
    assert [call["destination_phone"] for call in await campaign_calls(api, t, c["id"])] == ["+1555010005"]


async def test_pause_stops_new_dials_and_calls_in_flight_still_settle(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(MONDAY_9))
    t = await api.tenant(plan="starter")  # two lines: the dial queue's order decides who gets them
    people = [{"phone": f"+1415555{i:04d}", "name": "Ada", "custom_data": {"plan": "x"}} for i in range(6)]
    c = await campaign(api, t, people, max_concurrent_calls=2, timezone_mode="campaign")
    await dial(api)
    assert len(await campaign_calls(api, t, c["id"])) == 2
    assert (await api.client.post(f"/v2/campaigns/{c['id']}/pause", headers=t.headers)).status_code == 200
    for _ in range(10):
        await tick(api)
    assert len(await campaign_calls(api, t, c["id"])) == 2
    stats = (await get(api, t, f"/campaigns/{c['id']}"))["stats"]
    assert stats["completed"] == 2 and stats["dialing"] == 0 and stats["pending"] == 4
    assert (await get(api, t, f"/campaigns/{c['id']}"))["status"] == "paused"


@pytest.mark.slow  # a campaign run through the worker's passes to its end (make test runs it)
async def test_the_cap_is_never_exceeded_and_single_calls_go_first(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(MONDAY_9))
    t = await api.tenant(plan="starter")  # two lines: the dial queue's order decides who gets them
    people = [{"phone": f"+1415555{i:04d}", "name": "Ada", "custom_data": {"plan": "x"}} for i in range(12)]
    c = await campaign(api, t, people, max_concurrent_calls=3, timezone_mode="campaign")
    await dial(api)
    single = await api.client.post("/v2/calls", headers=t.headers, json={
        "bot_id": str(c["agent_id"]), "destination_phone": "+1555010000", "contact_name": "Ada",
        "custom_data": {"plan": "x"}})
    assert single.status_code == 201, single.text
    await calls_feature.progress(support.worker(api)).execute(RunCallProgressCommand())
    got = await get(api, t, f"/calls/{single.json()['data']['id']}")
    assert got["status"] != "queued" and got["campaign_id"] is None  # dialled before the queued campaign calls
    states = sorted(call["status"] for call in await campaign_calls(api, t, c["id"]))
    assert states == ["queued", "queued", "ringing"]
    for _ in range(60):
        await tick(api, seconds=20)
        unfinished = [call for call in await campaign_calls(api, t, c["id"])
                      if call["status"] in ("queued", "ringing", "in_progress")]
        assert len(unfinished) <= 3
        if (await get(api, t, f"/campaigns/{c['id']}"))["status"] == "completed":
            break
    assert (await get(api, t, f"/campaigns/{c['id']}"))["stats"]["completed"] == 12
    assert len(await campaign_calls(api, t, c["id"])) == 12


async def test_dial_now_answers_the_window_the_cap_and_the_campaign_state(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(datetime(2026, 1, 5, 8, tzinfo=UTC)))  # 03:00 in New York
    t = await api.tenant()
    night = {"phone": "+1555010000", "timezone": "America/New_York", "name": "Ada", "custom_data": {"plan": "x"}}
    c = await campaign(api, t, [night], max_concurrent_calls=1, start=False)
    path = f"/v2/campaigns/{c['id']}/dial"
    contact_id = next(iter((await contacts(api, t, c["id"])).values()))["id"]
    refused = await api.client.post(path, json={"contact_id": contact_id}, headers=t.headers)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "invalid_transition"
    assert (await api.client.post(f"/v2/campaigns/{c['id']}/start", headers=t.headers)).status_code == 200
    closed = await api.client.post(path, json={"contact_id": contact_id}, headers=t.headers)
    assert closed.status_code == 409, closed.text
    assert closed.json()["error"]["code"] == "outside_calling_hours"
    assert closed.json()["error"]["details"]["next_open_at"] == "2026-01-05T13:00:00Z"
    assert api.clock is not None
    api.clock.set(datetime(2026, 1, 5, 13, tzinfo=UTC))  # 08:00 in New York: the window opens
    dialled = await api.client.post(path, json={"contact_id": contact_id}, headers={**t.headers,
                                                                                   "Idempotency-Key": "dial-1"})
    assert dialled.status_code == 201, dialled.text
    body = dialled.json()["data"]
    assert body["contact_id"] == contact_id
    replay = await api.client.post(path, json={"contact_id": contact_id}, headers={**t.headers,
                                                                                  "Idempotency-Key": "dial-1"})
    assert replay.status_code == 201 and replay.json()["data"] == body
    assert replay.headers.get("idempotency-replayed") == "true"
    call = await get(api, t, f"/calls/{body['call_id']}")
    assert call["campaign_id"] == c["id"] and call["contact_id"] == contact_id
    full = await api.client.post(path, json={"phone": "+1555010005", "name": "Bo", "custom_data": {"plan": "y"}},
                                 headers=t.headers)
    assert full.status_code == 409 and full.json()["error"]["code"] == "concurrency_limit"
    cancelled = await api.client.post(f"/v2/calls/{body['call_id']}/cancel", headers=t.headers)
    assert cancelled.status_code == 200, cancelled.text  # a final call frees its slot at once
    added = await api.client.post(path, json={"phone": "+1 555 010 005", "name": "Bo", "custom_data": {"plan": "y"}},
                                  headers=t.headers)
    assert added.status_code == 201, added.text
    by_phone = await contacts(api, t, c["id"])
    assert by_phone["+1555010005"]["id"] == added.json()["data"]["contact_id"]
    assert by_phone["+1555010005"]["status"] == "dialing"
    await dial(api)
    first = await get(api, t, f"/campaigns/{c['id']}/contacts/{contact_id}")
    assert (first["status"], first["reason"]) == ("failed", "call_cancelled")
    assert first["attempts"][0]["status"] == "cancelled"
    again = await api.client.post(path, json={"contact_id": contact_id}, headers=t.headers)
    assert again.status_code == 409 and again.json()["error"]["code"] == "invalid_transition"  # failed
    neither = await api.client.post(path, json={}, headers=t.headers)
    assert neither.status_code == 400


@pytest.mark.slow  # a campaign run through the worker's passes to its end (make test runs it)
async def test_fifty_contacts_on_test_numbers_complete_in_a_few_worker_rounds(make_api: ApiFactory,
                                                                             sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(MONDAY_9))
    t = await api.tenant()
    number = await api.client.post("/v2/telephony/phone-numbers", json={"phone_number": unique_phone()},
                                   headers=t.headers)
    assert number.status_code == 201, number.text
    people = [{"phone": p, "name": "Ada", "custom_data": {"plan": "x"}}
              for p in ["+1555010000", "+1555010005"] + [f"+1415555{i:04d}" for i in range(48)]]
    c = await campaign(api, t, people, max_concurrent_calls=10, timezone_mode="campaign",
                       from_phone_number_id=number.json()["data"]["id"])
    rounds = 0
    while (await get(api, t, f"/campaigns/{c['id']}"))["status"] != "completed":
        rounds += 1
        assert rounds <= 30
        await tick(api, seconds=60)
    calls = await campaign_calls(api, t, c["id"])
    assert len(calls) == 50 and {call["status"] for call in calls} == {"completed", "transferred"}
    assert {call["from_phone"] for call in calls} == {number.json()["data"]["phone_number"]}


# --------------------------------------------------------------------------- re-planning, completion, failure


@pytest.mark.slow
async def test_widened_hours_on_resume_dial_the_contacts_that_waited_for_the_old_ones(
        make_api: ApiFactory, sql_url: str) -> None:
    """Pause, widen the calling hours to the whole day, resume: the contact that waited for tomorrow's opening is
    dialled at once (also by a worker started afresh), the campaign no longer says it is outside its hours, and a
    contact waiting for a retry delay keeps its time."""
    api = await make_api(sql_url, clock=ManualClock(datetime(2026, 1, 5, 20, 30, tzinfo=UTC)))
    user = await new_user(api)
    t = user.tenant
    c = await campaign(api, t, [{"phone": "+1555010002", "name": "Ada", "custom_data": {"plan": "x"}}],
                       timezone_mode="campaign", retry=POLICY)
    path = f"/campaigns/{c['id']}"
    for _ in range(5):  # no answer: it waits an hour for its retry
        await tick(api, seconds=30)
    retrying = (await contacts(api, t, c["id"]))["+1555010002"]
    assert retrying["status"] == "retry_wait" and retrying["reason"] == "no_answer", retrying
    assert api.clock is not None
    api.clock.set(datetime(2026, 1, 5, 21, 5, tzinfo=UTC))  # the hours closed at 21:00
    bo = {"phone": "+1555010000", "name": "Bo", "custom_data": {"plan": "y"}}
    added = await api.client.post(f"/v2{path}/contacts", headers=t.headers, json={"contacts": [bo]})
    assert added.status_code == 201, added.text
    await dial(api)
    waiting = (await contacts(api, t, c["id"]))["+1555010000"]
    assert (waiting["status"], waiting["reason"]) == ("pending", "outside_calling_hours")
    assert _at(waiting["next_attempt_at"]) == datetime(2026, 1, 6, 8, tzinfo=UTC)

    assert (await api.client.post(f"/v2{path}/pause", headers=t.headers)).status_code == 200
    widened = await api.client.patch(f"/v2{path}", headers=t.headers,
                                     json={"calling_hours": {"start": "00:00", "end": "24:00"}})
    assert widened.status_code == 200, widened.text
    replanned = (await contacts(api, t, c["id"]))["+1555010000"]
    assert _at(replanned["next_attempt_at"]) == datetime(2026, 1, 5, 21, 5, tzinfo=UTC)
    assert replanned["reason"] is None
    assert (await api.client.post(f"/v2{path}/start", headers=t.headers)).status_code == 200
    resumed = await get(api, t, path)
    assert resumed["status_reason"] != "outside_calling_hours" and resumed["next_dial_at"] is None, resumed

    await support.close_workers()  # a worker started afresh reads what was stored
    await dial(api)
    by_phone = await contacts(api, t, c["id"])
    assert by_phone["+1555010000"]["status"] == "dialing", by_phone["+1555010000"]
    assert by_phone["+1555010002"]["status"] == "retry_wait"
    assert by_phone["+1555010002"]["next_attempt_at"] == retrying["next_attempt_at"]  # its retry delay holds
    explained = await get(api, t, path)
    assert (explained["status_reason"], explained["next_dial_at"]) in ((None, None), (
        "waiting_for_retry", retrying["next_attempt_at"])), explained
    session, _ = await login(api, user)  # the dashboard shows the new hours, and no longer "outside calling hours"
    dashboard = await api.client.get(f"/dashboard{path}", headers=cookie(session))
    assert dashboard.status_code == 200, dashboard.text
    assert "00:00\u201324:00" in dashboard.text and "outside calling hours" not in dashboard.text


async def test_a_changed_schedule_replans_the_contacts_of_its_running_campaign(
        make_api: ApiFactory, sql_url: str) -> None:
    saturday = datetime(2026, 1, 10, 15, tzinfo=UTC)  # 10:00 in New York
    api = await make_api(sql_url, clock=ManualClock(saturday))
    t = await api.tenant()
    schedule = await api.client.post("/v2/schedules", headers=t.headers, json={
        "name": "office", "timezone": "America/New_York",
        "weekly": [{"day": d, "start": "09:00", "end": "17:00"} for d in range(5)]})
    assert schedule.status_code == 201, schedule.text
    schedule_id = schedule.json()["data"]["id"]
    c = await campaign(api, t, [{"phone": "+1555010000", "name": "Ada", "custom_data": {"plan": "x"}}],
                       schedule_id=schedule_id, timezone="America/New_York", timezone_mode="campaign")
    await tick(api, seconds=1)
    found = await get(api, t, f"/campaigns/{c['id']}")
    assert found["status_reason"] == "outside_calling_hours"
    assert _at(found["next_dial_at"]) == datetime(2026, 1, 12, 14, tzinfo=UTC)  # Monday 09:00 EST
    weekends = await api.client.patch(f"/v2/schedules/{schedule_id}", headers=t.headers, json={
        "weekly": [{"day": d, "start": "09:00", "end": "17:00"} for d in range(7)]})
    assert weekends.status_code == 200, weekends.text
    assert (await get(api, t, f"/campaigns/{c['id']}"))["status_reason"] is None
    await dial(api)
    assert len(await campaign_calls(api, t, c["id"])) == 1


async def test_a_manual_campaign_starts_empty_and_keeps_running_when_its_queue_drains(
        make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(MONDAY_9))
    t = await api.tenant()
    c = await campaign(api, t, [{"phone": "+1555010000", "name": "Ada", "custom_data": {"plan": "x"}}],
                       start=False, completion="manual")
    assert c["completion"] == "manual"
    empty = await campaign(api, t, [{"phone": "+1555010000", "name": "Ada", "custom_data": {"plan": "x"}}],
                           start=False)
    assert empty["completion"] == "when_empty"
    bare = await api.client.post("/v2/campaigns", headers=t.headers, json={
        "name": "Inbound leads", "agent_id": c["agent_id"], "completion": "manual"})
    assert bare.status_code == 201, bare.text
    started = await api.client.post(f"/v2/campaigns/{bare.json()['data']['id']}/start", headers=t.headers)
    assert started.status_code == 200, started.text  # no campaign_empty
    refused = await api.client.post("/v2/campaigns", headers=t.headers, json={
        "name": "X", "agent_id": c["agent_id"], "completion": "never"})
    assert refused.status_code == 400 and "completion" in refused.text
    assert (await api.client.post(f"/v2/campaigns/{c['id']}/start", headers=t.headers)).status_code == 200
    for _ in range(6):
        await tick(api)
    found = await get(api, t, f"/campaigns/{c['id']}")
    assert found["stats"]["completed"] == 1
    assert (found["status"], found["status_reason"]) == ("running", "waiting_for_contacts"), found
    # paused, it may become when_empty again; resumed, it completes as its queue is drained
    assert (await api.client.post(f"/v2/campaigns/{c['id']}/pause", headers=t.headers)).status_code == 200
    changed = await api.client.patch(f"/v2/campaigns/{c['id']}", headers=t.headers, json={"completion": "when_empty"})
    assert changed.status_code == 200 and changed.json()["data"]["completion"] == "when_empty"
    assert (await api.client.post(f"/v2/campaigns/{c['id']}/start", headers=t.headers)).status_code == 200
    await dial(api)
    assert (await get(api, t, f"/campaigns/{c['id']}"))["status"] == "completed"


async def test_a_failed_campaign_cancels_its_waiting_contacts_and_fails_their_leads(
        make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(datetime(2026, 1, 5, 3, tzinfo=UTC)))  # before the hours
    t = await api.tenant()
    c = await campaign(api, t, [{"phone": "+1555010000", "name": "Ada", "custom_data": {"plan": "x"}}],
                       timezone_mode="campaign")
    lead = await api.client.post("/v2/leads", headers=t.headers, json={
        "phone": "+1555010001", "name": "Bo", "campaign_id": c["id"], "custom_data": {"plan": "y"}})
    assert lead.status_code == 201, lead.text
    await dial(api)
    archived = await api.client.patch(f"/v2/agents/{c['agent_id']}", json={"status": "archived"}, headers=t.headers)
    assert archived.status_code == 200, archived.text
    await dial(api)
    found = await get(api, t, f"/campaigns/{c['id']}")
    assert (found["status"], found["status_reason"]) == ("failed", "agent_archived")
    assert found["stats"]["cancelled"] == 2 and found["stats"]["pending"] == 0, found["stats"]
    for contact in (await contacts(api, t, c["id"])).values():
        assert (contact["status"], contact["reason"]) == ("cancelled", "campaign_failed"), contact
    got = await get(api, t, f"/leads/{lead.json()['data']['id']}")
    assert (got["status"], got["reason"]) == ("failed", "campaign_failed"), got
