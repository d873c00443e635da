"""No double booking under concurrency, on SQLite and PostgreSQL, through the real HTTP API.

Litestar's AsyncTestClient runs each request to completion in a portal thread, so requests gathered on it
never overlap. These tests drive the same app through httpx's ASGITransport instead: every request runs
on the test's event loop and they interleave at every database await, as on a server.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from adapters.memory.clock import ManualClock
from adapters.sql.scheduling import SqlCalendarRepository, SqlScheduleReader
from entrypoints.asgi_app import http_container
from entrypoints.overrides import ClockProvider
from entrypoints.settings import Settings
from tests.http.scheduling_support import START, UNLIMITED, book, make_calendar, outbox
from tests.support.apps import Api, AppPool

ATTEMPTS = 20


async def _concurrent_api(url: str, tmp_root: Path, pool: AppPool) -> AsyncIterator[Api]:
    settings = Settings(database_url=url, var_dir=tmp_root / "var", secret_key="test-secret-key",
                        allow_loopback_targets=True, **UNLIMITED)
    clock = ManualClock(START)
    overrides = (ClockProvider(clock),)
    app, release = await pool.lend_app(settings, http_container(settings, *overrides))
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://testserver.local") as client:
            api = Api(client, settings, clock, overrides)  # type: ignore[arg-type]
            try:
                yield api
            finally:
                await api.close_admin()
    finally:
        await release()


@pytest.fixture
async def any_sched(sql_url: str, tmp_root: Path, app_pool: AppPool) -> AsyncIterator[Api]:
    async for api in _concurrent_api(sql_url, tmp_root, app_pool):
        yield api


@pytest.fixture
async def pg_sched(postgres_url: str, tmp_root: Path, app_pool: AppPool) -> AsyncIterator[Api]:
    async for api in _concurrent_api(postgres_url, tmp_root, app_pool):
        yield api


def _outcomes(responses: list) -> Counter[tuple[int, str | None]]:  # type: ignore[type-arg]
    return Counter((r.status_code, r.json().get("error", {}).get("code")) for r in responses)


async def test_twenty_concurrent_bookings_of_one_slot_one_wins(any_sched: Api) -> None:
    api, t = any_sched, await any_sched.tenant()
    cal = await make_calendar(api, t)
    responses = await asyncio.gather(*(
        book(api, t, cal["id"], "2026-03-10T09:00:00-04:00", attendee_name=f"caller {i}",
             require_approval=i % 2 == 0)
        for i in range(ATTEMPTS)))
    assert _outcomes(responses) == {(201, None): 1, (409, "slot_unavailable"): ATTEMPTS - 1}
    listed = (await api.client.get("/v2/scheduling/appointments", headers=t.headers,
                                   params={"calendar_id": cal["id"]})).json()
    assert listed["meta"]["total"] == 1
    winner = next(r for r in responses if r.status_code == 201).json()["data"]
    assert listed["data"][0] == winner
    assert len(await outbox(api, t.organization_id)) == (1 if winner["status"] == "confirmed" else 0)


async def test_concurrent_overlapping_starts_are_serialized(any_sched: Api) -> None:
    """Different slot starts that overlap through the buffer: the unique index cannot see these, the
    calendar lock (PostgreSQL) or the serialized write transaction (SQLite) must."""
    api, t = any_sched, await any_sched.tenant()
    cal = await make_calendar(api, t, buffer_minutes=30)
    starts = ["2026-03-10T09:00:00-04:00", "2026-03-10T09:30:00-04:00"]
    responses = await asyncio.gather(*(book(api, t, cal["id"], starts[i % 2]) for i in range(ATTEMPTS)))
    assert _outcomes(responses) == {(201, None): 1, (409, "slot_unavailable"): ATTEMPTS - 1}


async def test_concurrent_reschedules_into_one_slot(any_sched: Api) -> None:
    api, t = any_sched, await any_sched.tenant()
    cal = await make_calendar(api, t)
    originals = [(await book(api, t, cal["id"], f"2026-03-10T{9 + i:02d}:00:00-04:00")).json()["data"]
                 for i in range(4)]
    target = "2026-03-11T09:00:00-04:00"
    moves = [api.client.patch(f"/v2/scheduling/appointments/{a['id']}", json={"slot_start": target},
                              headers=t.headers) for a in originals]
    responses = await asyncio.gather(*moves, book(api, t, cal["id"], target), book(api, t, cal["id"], target))
    winners = [r for r in responses if r.status_code in (200, 201)]
    losers = [r for r in responses if r not in winners]
    assert len(winners) == 1
    assert {(r.status_code, r.json()["error"]["code"]) for r in losers} == {(409, "slot_unavailable")}
    # the losers did not move: still confirmed in their own slots
    listed = (await api.client.get("/v2/scheduling/appointments", headers=t.headers,
                                   params={"calendar_id": cal["id"], "status": "confirmed"})).json()["data"]
    at_target = [a for a in listed if a["slot_start"] == "2026-03-11T13:00:00Z"]
    assert len(at_target) == 1
    moved = sum(r.status_code == 200 for r in responses[:4])
    assert len(listed) == 4 + (1 - moved)


class _Gate:
    """Holds each caller right after it read the calendar's busy time, the worst moment for a race.

    ``everyone=True``: until all ``expected`` callers arrived, however long that takes on a busy machine
    (``timeout`` only bounds a broken setup, and fails the test); otherwise for at most ``timeout`` seconds
    (callers serialized by a lock never fill the gate, each is merely held a little)."""

    def __init__(self, expected: int, timeout: float, *, everyone: bool = False) -> None:
        self.expected, self.timeout, self.everyone, self.arrived = expected, timeout, everyone, 0
        self.full = asyncio.Event()

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived >= self.expected:
            self.full.set()
        try:
            await asyncio.wait_for(self.full.wait(), self.timeout)
        except TimeoutError:
            if self.everyone:
                raise AssertionError(f"only {self.arrived} of {self.expected} callers reached the gate") from None


def _gate_reads(monkeypatch: pytest.MonkeyPatch, gate: _Gate) -> None:
    original = SqlScheduleReader.schedule

    async def gated(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        found = await original(self, *args, **kwargs)
        await gate.wait()
        return found

    monkeypatch.setattr(SqlScheduleReader, "schedule", gated)


@pytest.mark.postgres
async def test_postgres_unique_index_catches_a_same_slot_race(pg_sched: Api,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the calendar lock every transaction reads "free" at once; the partial unique index still
    lets exactly one insert through and the violation maps to 409 slot_unavailable."""
    api = pg_sched
    t = await api.tenant()
    cal = await make_calendar(api, t)
    monkeypatch.setattr(SqlCalendarRepository, "get_for_update", SqlCalendarRepository.get)
    _gate_reads(monkeypatch, _Gate(ATTEMPTS, timeout=120, everyone=True))
    responses = await asyncio.gather(*(book(api, t, cal["id"], "2026-03-10T09:00:00-04:00")
                                       for _ in range(ATTEMPTS)))
    assert _outcomes(responses) == {(201, None): 1, (409, "slot_unavailable"): ATTEMPTS - 1}
    messages = {r.json()["error"]["message"] for r in responses if r.status_code == 409}
    assert messages == {"slot_start is already held by another appointment of this calendar"}


@pytest.mark.postgres
async def test_postgres_calendar_lock_serializes_overlapping_starts(pg_sched: Api,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    api = pg_sched
    t = await api.tenant()
    starts = ["2026-03-10T09:00:00-04:00", "2026-03-10T09:30:00-04:00"]
    attempts = 8

    # with the lock: each transaction reads only after the previous one committed
    cal = await make_calendar(api, t, buffer_minutes=30)
    _gate_reads(monkeypatch, _Gate(attempts, timeout=0.1))
    responses = await asyncio.gather(*(book(api, t, cal["id"], starts[i % 2]) for i in range(attempts)))
    assert _outcomes(responses) == {(201, None): 1, (409, "slot_unavailable"): attempts - 1}

    # the control: without the lock the same race double-books (which is why the lock is there)
    unlocked = await make_calendar(api, t, buffer_minutes=30)
    monkeypatch.setattr(SqlCalendarRepository, "get_for_update", SqlCalendarRepository.get)
    # every transaction reads "free" before any inserts (the gate waits for all of them, not for a time):
    # one booking per start gets past the unique index, so exactly two overlapping bookings
    _gate_reads(monkeypatch, _Gate(attempts, timeout=120, everyone=True))
    responses = await asyncio.gather(*(book(api, t, unlocked["id"], starts[i % 2]) for i in range(attempts)))
    assert _outcomes(responses) == {(201, None): 2, (409, "slot_unavailable"): attempts - 2}


@pytest.mark.postgres
async def test_postgres_status_moves_racing_a_reschedule_never_deadlock(pg_sched: Api) -> None:
    """Every writer of a calendar's appointments locks the calendar row before the appointment row (the
    revision triggers update the calendar row too): a cancel, approve or decline racing a reschedule of the
    same appointment waits its turn instead of deadlocking (which PostgreSQL would end with an error)."""
    api = pg_sched
    t = await api.tenant()
    cal = await make_calendar(api, t)
    for day in range(10, 18):
        pending = (await book(api, t, cal["id"], f"2026-03-{day}T09:00:00-04:00", require_approval=True)).json()
        target = f"2026-03-{day}T11:00:00-04:00"
        path = f"/v2/scheduling/appointments/{pending['data']['id']}"
        racing = [
            api.client.patch(path, json={"slot_start": target}, headers=t.headers),
            api.client.delete(path, headers=t.headers),
            api.client.post(f"{path}/approve", headers=t.headers),
            api.client.post(f"{path}/decline", headers=t.headers),
        ]
        responses = await asyncio.gather(*racing)
        assert {r.status_code for r in responses} <= {200, 201, 409}, [r.text for r in responses]
        assert any(r.status_code in (200, 201) for r in responses)


@pytest.fixture
async def other_sched(sql_url: str, tmp_root: Path, app_pool: AppPool) -> AsyncIterator[Api]:
    """A second app on the same database: another API process, with its own availability cache."""
    async for api in _concurrent_api(sql_url, tmp_root, app_pool):
        yield api


@pytest.mark.slow
async def test_availability_in_another_process_never_offers_a_committed_booking(any_sched: Api,
                                                                                other_sched: Api) -> None:
    """Two apps on one database (two API processes, each with its own availability cache). One books
    slot after slot while the other reads availability concurrently: no read offers a slot whose booking
    had been answered before that read began, and once all is done both offer exactly the same slots."""
    booker, reader = any_sched, other_sched
    t = await booker.tenant()
    cal = await make_calendar(booker, t)
    params = {"calendar_id": cal["id"], "start": "2026-03-10", "end": "2026-03-12"}

    async def offered(api: Api) -> list[str]:
        response = await api.client.get("/v2/scheduling/availability", params=params, headers=t.headers)
        assert response.status_code == 200, response.text
        return [s["start"] for s in response.json()["data"]["slots"]]

    initial = await offered(reader)
    targets = initial[:12]
    booked: list[str] = []  # answered 201, in order
    violations: list[str] = []

    async def book_all() -> None:
        for start in targets:
            response = await book(booker, t, cal["id"], start)
            assert response.status_code == 201, response.text
            booked.append(start)

    async def read_many() -> None:
        for _ in range(40):
            committed = list(booked)
            seen = set(await offered(reader))
            violations.extend(f"{s} offered after its booking was answered" for s in committed if s in seen)
            await asyncio.sleep(0)

    await asyncio.gather(book_all(), read_many(), read_many())
    assert not violations, violations[:3]
    assert await offered(reader) == await offered(booker) == [s for s in initial if s not in targets]


async def test_concurrent_bookings_by_one_attendee_never_exceed_the_cap(any_sched: Api) -> None:
    """Twenty different slots booked at once by one attendee (the same email, in any case, or the same phone):
    the count and the insert happen under the calendar's lock, so exactly max_upcoming_per_attendee win."""
    api, t = any_sched, await any_sched.tenant()
    cal = await make_calendar(api, t, slot_duration_minutes=15)  # max_upcoming_per_attendee defaults to 3
    responses = await asyncio.gather(*(
        book(api, t, cal["id"], f"2026-03-10T{9 + i // 4:02d}:{15 * (i % 4):02d}:00-04:00",
             attendee_email="Ada@Example.com" if i % 2 else "ada@example.com",
             attendee_phone="+14155550123" if i % 3 == 0 else None)
        for i in range(ATTEMPTS)))
    assert _outcomes(responses) == {(201, None): 3, (409, "booking_limit_reached"): ATTEMPTS - 3}
    listed = (await api.client.get("/v2/scheduling/appointments", headers=t.headers,
                                   params={"calendar_id": cal["id"]})).json()
    assert listed["meta"]["total"] == 3


async def test_concurrent_bookings_of_one_day_never_exceed_the_daily_cap(any_sched: Api) -> None:
    api, t = any_sched, await any_sched.tenant()
    cal = await make_calendar(api, t, slot_duration_minutes=15, max_bookings_per_day=2,
                              max_upcoming_per_attendee=None)
    responses = await asyncio.gather(*(
        book(api, t, cal["id"], f"2026-03-10T{9 + i // 4:02d}:{15 * (i % 4):02d}:00-04:00",
             attendee_email=f"caller{i}@example.com")
        for i in range(ATTEMPTS)))
    assert _outcomes(responses) == {(201, None): 2, (409, "booking_limit_reached"): ATTEMPTS - 2}
