"""The deployment of docs/operations.md and compose.yaml, as real processes on one fresh PostgreSQL database:
`parley migrate` once, then 3 `parley serve --no-migrate --no-worker` and 2 `parley worker --no-migrate`.
Everything is proved through HTTP only (the servers' API and a loopback webhook receiver):

- a key's 60 requests per minute hold across the three servers exactly (the counters are in the database);
- 20 concurrent bookings of one slot spread over the servers: exactly one wins;
- webhook events are delivered exactly once each by the two competing workers;
- a campaign's concurrency cap holds across both workers and no contact is dialled twice, also when one worker
  is killed with SIGKILL mid-run (the other takes its jobs over once their short leases expire), and every
  call's `call.ended` still reaches the receiver (again with the same X-Webhook-Id if it was in flight);
- a server sent SIGTERM while 50 requests are in flight answers every one of them before it exits.

Real processes run on real time: the simulator runs fast (PARLEY_SIMULATOR_SPEED) and the leases are short
(PARLEY_JOB_LEASE_SECONDS, PARLEY_WEBHOOK_LEASE_SECONDS)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from entrypoints.cli import create_key, create_org
from entrypoints.settings import Settings
from tests.support.databases import asyncpg_dsn, named
from tests.support.receiver import Receiver

# serial: three servers and two workers, each with its connection pool, answer 60 requests at once; next to
# another test process on the same PostgreSQL some of them failed for want of a connection (500s)
pytestmark = [pytest.mark.slow, pytest.mark.serial, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]
_SCRIPT = Path(sys.executable).parent / "parley"
PARLEY = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "entrypoints.cli"]
SECRET = "multi-process-test-secret-key-0123456789abcdef"
SERVERS, WORKERS = 3, 2
PER_MINUTE = 60  # the default, not raised
CAP, CONTACTS = 3, 24
BOOKINGS, DISTINCT_SLOTS, IN_FLIGHT = 20, 10, 50


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def empty_pg(postgres_url: str) -> AsyncIterator[str]:
    """A new, empty PostgreSQL database (not migrated: `parley migrate` does that), dropped afterwards."""
    import asyncpg

    name = f"parley_mp_{uuid.uuid4().hex[:12]}"
    admin = asyncpg_dsn(postgres_url)
    conn = await asyncpg.connect(admin)
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()
    yield named(postgres_url, name)
    conn = await asyncpg.connect(admin)
    await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await conn.close()


def _env(url: str, var_dir: Path) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("PARLEY_")}
    return {**env, "PARLEY_DATABASE_URL": url, "PARLEY_SECRET_KEY": SECRET, "PARLEY_VAR_DIR": str(var_dir),
            "PARLEY_ALLOW_LOOPBACK_TARGETS": "1", "PARLEY_SIMULATOR_SPEED": "10",
            "PARLEY_JOB_LEASE_SECONDS": "3", "PARLEY_WEBHOOK_LEASE_SECONDS": "3", "PARLEY_LOG_LEVEL": "WARNING",
            "PYTHONPATH": str(ROOT)}


class Processes:
    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env, self.logs = env, logs
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        with (self.logs / f"{name}.log").open("wb") as out:
            process = subprocess.Popen([*PARLEY, *args], cwd=ROOT, env=self.env, stdout=out,
                                       stderr=subprocess.STDOUT)
        self.started.append(process)
        return process

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")

    def stop_all(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.started:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


async def _wait_healthy(client: httpx.AsyncClient, base: str, process: subprocess.Popen[bytes],
                        deadline: float) -> None:
    while True:
        with contextlib.suppress(httpx.TransportError):
            if (await client.get(f"{base}/v2/health", timeout=2)).status_code == 200:
                return
        assert process.poll() is None, f"{base} exited with {process.returncode}"
        assert time.monotonic() < deadline, f"{base} did not start"
        await asyncio.sleep(0.2)


def _request(path: str, headers: dict[str, str]) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)).decode("latin-1").split("\r\n")
    fields = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in head[1:])}
    body = await reader.readexactly(int(fields.get("content-length", "0")))
    return int(head[0].split()[1]), body


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str) -> tuple[int, bytes]:
    writer.write(_request(path, {}))
    await writer.drain()
    return await _response(reader)


def _overlap(intervals: list[tuple[datetime, datetime]]) -> int:
    """The most intervals [start, end) open at one instant (an end before a start at the same instant)."""
    points = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda p: (p[0], p[1]))
    most = current = 0
    for _, step in points:
        current += step
        most = max(most, current)
    return most


async def _until_counted(url: str, bucket: str, requests: int, within: float = 30) -> None:
    """Until the shared rate-limit counters of ``bucket``'s minute windows add up to ``requests``."""
    engine = create_async_engine(url)
    try:
        deadline = time.monotonic() + within
        while True:
            async with engine.connect() as conn:
                counted = (await conn.execute(sa.text(
                    "SELECT coalesce(sum(count), 0) FROM rate_limit_counters WHERE bucket = :bucket "
                    "AND window_seconds = 60"), {"bucket": bucket})).scalar_one()
            if counted >= requests:
                return
            assert time.monotonic() < deadline, f"{counted} of {requests} requests read"
            await asyncio.sleep(0.02)
    finally:
        await engine.dispose()


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def test_three_servers_and_two_workers_on_one_database(empty_pg: str, tmp_path: Path) -> None:
    env = _env(empty_pg, tmp_path / "var")
    migrated = await asyncio.to_thread(subprocess.run, [*PARLEY, "migrate"], cwd=ROOT, env=env, capture_output=True,
                                       text=True, timeout=90)
    assert migrated.returncode == 0, migrated.stderr
    settings = Settings(database_url=empty_pg, secret_key=SECRET, var_dir=tmp_path / "var")
    processes = Processes(env, tmp_path)
    ports = [_free_port() for _ in range(SERVERS)]
    servers = [processes.start(f"serve-{n}", "serve", "--no-migrate", "--no-worker", "--host", "127.0.0.1",
                               "--port", str(port)) for n, port in enumerate(ports)]
    workers = [processes.start(f"worker-{n}", "worker", "--no-migrate") for n in range(WORKERS)]
    bases = [f"http://127.0.0.1:{port}/v2" for port in ports]
    receiver = await Receiver().start()
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=0)  # a new connection per request
    client = httpx.AsyncClient(timeout=30, limits=limits)
    try:
        # one organization; a key per concern, since each key has its own 60 requests per minute
        org = await create_org(settings, "Scale-out", "enterprise", "standard", None)
        made = {name: await create_key(settings, org["id"], ["*"], name, None)
                for name in ("setup", "limit", "book", "poll", "term")}
        keys = {name: key["key"] for name, key in made.items()}
        auth = {name: {"Authorization": f"Bearer {key}"} for name, key in keys.items()}
        deadline = time.monotonic() + 60
        for base, process in zip(bases, servers, strict=True):
            await _wait_healthy(client, base.removesuffix("/v2"), process, deadline)

        async def call(method: str, n: int, path: str, who: str, **kwargs: Any) -> httpx.Response:
            return await client.request(method, f"{bases[n % SERVERS]}{path}", headers=auth[who], **kwargs)

        async def ok(method: str, n: int, path: str, **kwargs: Any) -> Any:
            response = await call(method, n, path, "setup", **kwargs)
            assert response.status_code in (200, 201), response.text
            return response.json()["data"]

        # --- set-up, through every server in turn -------------------------------------------------------
        booked_hook = await ok("POST", 0, "/webhooks", json={"url": receiver.url("/booked"),
                                                             "events": ["appointment.booked"]})
        await ok("POST", 1, "/webhooks", json={"url": receiver.url("/ended"), "events": ["call.ended"]})
        calendar = await ok("POST", 2, "/scheduling/calendars", json={"name": "Desk", "timezone": "UTC",
                                                                    "horizon_days": 60})
        for weekday in range(7):
            await ok("POST", weekday, f"/scheduling/calendars/{calendar['id']}/rules",
                     json={"weekday": weekday, "start_time": "00:00", "end_time": "23:00"})
        agent = await ok("POST", 0, "/agents", json={"name": "Caller", "prompt": "You call {{contact_name}}."})
        await ok("POST", 1, f"/agents/{agent['id']}/publish")
        campaign = await ok("POST", 2, "/campaigns", json={
            "name": "Renewals", "agent_id": agent["id"], "max_concurrent_calls": CAP, "timezone_mode": "campaign",
            "calling_hours": {"start": "00:00", "end": "24:00"}})
        people = [{"phone": f"+1415555{i:04d}", "name": f"C{i}", "custom_data": {"plan": "x"}}
                  for i in range(CONTACTS)]
        assert (await ok("POST", 0, f"/campaigns/{campaign['id']}/contacts", json={"contacts": people})
                )["accepted"] == CONTACTS

        # --- the rate limit: 60 concurrent requests over the 3 servers pass, then every server refuses ---
        if time.time() % 60 > 50:  # the counters are per clock minute: start in a fresh one
            await asyncio.sleep(60.5 - time.time() % 60)
        passed = await asyncio.gather(*(call("GET", n, "/agents?limit=1", "limit") for n in range(PER_MINUTE)))
        refused = await asyncio.gather(*(call("GET", n, "/agents?limit=1", "limit") for n in range(SERVERS)))
        assert [r.status_code for r in passed] == [200] * PER_MINUTE, [r.text for r in passed if r.status_code != 200]
        assert [r.status_code for r in refused] == [429] * SERVERS
        assert {r.json()["error"]["code"] for r in refused} == {"RATE_LIMIT_EXCEEDED"}
        assert sorted(int(r.headers["x-ratelimit-remaining"]) for r in passed) == list(range(PER_MINUTE))

        # --- 20 concurrent bookings of one slot: one winner; 10 other slots booked at the same time ------
        day = (datetime.now(UTC) + timedelta(days=2)).date()
        slot = datetime(day.year, day.month, day.day, 10, tzinfo=UTC)
        others = [slot + timedelta(hours=1 + h) for h in range(DISTINCT_SLOTS)]

        def booking(n: int, at: datetime) -> Any:
            body = {"calendar_id": calendar["id"], "slot_start": at.isoformat().replace("+00:00", "Z"),
                    "attendee_name": f"caller {n}"}
            return call("POST", n, "/scheduling/appointments", "book", json=body)

        contested, spread = await asyncio.gather(
            asyncio.gather(*(booking(n, slot) for n in range(BOOKINGS))),
            asyncio.gather(*(booking(n, at) for n, at in enumerate(others))))
        outcomes = sorted((r.status_code, r.json().get("error", {}).get("code")) for r in contested)
        assert outcomes == [(201, None)] + [(409, "slot_unavailable")] * (BOOKINGS - 1), outcomes
        assert [r.status_code for r in spread] == [201] * DISTINCT_SLOTS, [r.text for r in spread]
        listed = (await call("GET", 1, f"/scheduling/appointments?calendar_id={calendar['id']}&limit=100", "book")
                  ).json()
        assert listed["meta"]["total"] == 1 + DISTINCT_SLOTS

        # --- webhooks: each of the 11 appointment.booked events delivered exactly once --------------------
        await receiver.wait_for(1 + DISTINCT_SLOTS, path="/booked", timeout=40)
        await asyncio.sleep(1.5)  # a second delivery of any of them would arrive by now
        booked = receiver.on("/booked")
        ids = [r.webhook_id for r in booked]
        assert len(ids) == len(set(ids)) == 1 + DISTINCT_SLOTS, ids
        appointments = {msgspec.json.decode(r.body)["data"]["id"] for r in booked}
        assert appointments == {a["id"] for a in listed["data"]}
        logs = (await call("GET", 2, f"/webhooks/{booked_hook['id']}/logs?limit=100", "book")).json()["data"]
        assert sorted(log["message_id"] for log in logs) == sorted(ids)
        assert {log["status"] for log in logs} == {"succeeded"}

        # --- the campaign on both workers; one of them killed with SIGKILL a third of the way through -----
        await ok("POST", 1, f"/campaigns/{campaign['id']}/start")
        killed, polls = False, 0
        finish_by = time.monotonic() + 120  # about 20 s on a quiet machine
        while True:
            response = await call("GET", polls, f"/campaigns/{campaign['id']}", "poll")
            polls += 1
            if response.status_code == 429:  # a slow machine: more than a minute of polls; wait for the window
                await asyncio.sleep(float(response.headers["retry-after"]))
                continue
            assert response.status_code == 200, response.text
            found = response.json()["data"]
            if found["status"] == "completed":
                break
            assert time.monotonic() < finish_by, found
            if not killed and found["stats"]["completed"] >= CONTACTS // 3:
                workers[0].send_signal(signal.SIGKILL)  # mid-run: it may hold the dialer's or the calls' lease
                assert workers[0].wait(10) == -signal.SIGKILL
                killed = True
            await asyncio.sleep(1.0)  # 60 polls a minute at most: the poll key's limit
        assert killed, "the campaign ended before a third of it was done"
        assert found["stats"]["completed"] == CONTACTS
        calls = (await ok("GET", 0, f"/calls?campaign_id={campaign['id']}&limit=100"))
        assert len(calls) == CONTACTS == len({c["contact_id"] for c in calls})  # one call per contact
        assert _overlap([(_at(c["created_at"]), _at(c["ended_at"])) for c in calls]) <= CAP
        contacts = await ok("GET", 1, f"/campaigns/{campaign['id']}/contacts?limit=100")
        assert sorted(c["attempt_count"] for c in contacts) == [1] * CONTACTS

        # every call's call.ended arrives, across the kill (a delivery in flight then is sent again, same id)
        await receiver.wait_for(CONTACTS, path="/ended", timeout=40, distinct=True)  # one may come twice
        by_id: dict[str, set[str]] = defaultdict(set)
        for got in receiver.on("/ended"):
            by_id[got.webhook_id].add(msgspec.json.decode(got.body)["data"]["id"])
        assert all(len(call_ids) == 1 for call_ids in by_id.values()), by_id
        assert {next(iter(v)) for v in by_id.values()} == {c["id"] for c in calls}
        assert len(by_id) == CONTACTS

        # --- SIGTERM with 50 requests in flight: every one is answered ------------------------------------
        # 50 connections, each proved accepted by a first request answered on it (keep-alive); then a slow request
        # written whole on every one of them; then SIGTERM at once (answering them takes the server about a second)
        start = slot.date().isoformat()
        end = (slot + timedelta(days=45)).date().isoformat()
        heavy = f"/v2/scheduling/availability?calendar_id={calendar['id']}&start={start}&end={end}"
        connections = await asyncio.gather(*(asyncio.open_connection("127.0.0.1", ports[2])
                                             for _ in range(IN_FLIGHT)))
        try:
            for reader, writer in connections:
                assert (await _exchange(reader, writer, "/v2/health"))[0] == 200
            for _, writer in connections:
                writer.write(_request(heavy, auth["term"]))  # 50 requests: within the key's 60 a minute
            await asyncio.gather(*(writer.drain() for _, writer in connections))
            # SIGTERM once the server has read all 50 (each counted by the rate limit, in the database): a request
            # still unread in a socket's buffer finds an idle keep-alive connection, which a server shutting down
            # closes (a client retries such a request on a new connection)
            await _until_counted(empty_pg, f"key:{made['term']['id']}", IN_FLIGHT)
            servers[2].send_signal(signal.SIGTERM)
            answered = await asyncio.gather(*(_response(reader) for reader, _ in connections),
                                            return_exceptions=True)
        finally:
            for _, writer in connections:
                writer.close()
        failures = [a for a in answered if isinstance(a, BaseException) or a[0] != 200]
        assert not failures, failures
        assert all(b'"slots"' in a[1] for a in answered if not isinstance(a, BaseException))
        assert await asyncio.to_thread(servers[2].wait, 30) == 0, processes.log("serve-2")
    finally:
        await client.aclose()
        await receiver.close()
        await asyncio.to_thread(processes.stop_all)
        shutil.rmtree(tmp_path / "var", ignore_errors=True)
