"""Attendee notifications survive a worker killed with SIGKILL mid-run, on SQLite and PostgreSQL: a real
`parley worker` (only the attendee jobs, on the wall clock) has 120 appointments whose confirmation and reminder
are due at once (240 emails) to hand to a real SMTP server (aiosmtpd on 127.0.0.1, a little slow to answer, so
the kill lands inside the run); it is killed after some have gone, then a second worker finishes once the first
one's leases expired.

What holds (docs/scheduling.md, "Exactly once"): every notification is marked ``sent`` and every one of them
reached the server; a message the server took twice carries the same ``Message-ID`` (the one window: the server
accepted it, the process died before the mark committed), so the attendee's mail client shows it once. Such
repeats are at most the jobs in flight at the kill (``attendees.notify`` runs 4 at a time), each at most twice."""

from __future__ import annotations

import asyncio
import email.message
import os
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from adapters.memory.clock import ManualClock
from adapters.sql.scheduling_tables import attendee_notifications
from tests.http.scheduling_support import UNLIMITED, book, make_calendar, slots
from tests.http.triggers_support import Mailbox, SmtpServer
from tests.support.apps import ApiFactory

ROOT = Path(__file__).resolve().parents[2]
APPOINTMENTS = 120
NOTIFICATIONS = 2 * APPOINTMENTS  # a confirmation and a reminder each
IN_FLIGHT = 4
"""``attendees.notify`` runs this many at a time: the most a kill can leave between the server and the mark."""
REMINDER_MINUTES = 10_080  # a week: every appointment of the coming days is due its reminder now
ATTENDEE_JOBS = "attendees.plan,attendees.notify"


@dataclass
class SlowMailbox(Mailbox):
    """Takes a moment before it accepts a message (a real server's disk and checks): what it keeps is what it
    answered 250 to."""

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        await asyncio.sleep(0.02)
        self.messages.append(email.message_from_bytes(envelope.content))
        return "250 OK"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def crash_db(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue("fresh_sqlite_url" if request.param == "sqlite" else "fresh_pg_url")


def _start_worker(url: str, smtp_url: str, var_dir: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PARLEY_DATABASE_URL": url, "PARLEY_SECRET_KEY": "test-secret-key",
           "PARLEY_VAR_DIR": str(var_dir), "PARLEY_SMTP_URL": smtp_url, "PARLEY_JOB_LEASE_SECONDS": "2",
           "PARLEY_LOG_LEVEL": "WARNING"}
    return subprocess.Popen([sys.executable, "-m", "entrypoints.cli", "worker", "--no-migrate", "--jobs",
                             ATTENDEE_JOBS], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


async def _until(check: Any, timeout: float, what: str) -> None:  # noqa: ASYNC109
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def _rows(url: str) -> list[Any]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return list((await conn.execute(sa.select(
                attendee_notifications.c.id, attendee_notifications.c.kind, attendee_notifications.c.recipient,
                attendee_notifications.c.status))).all())
    finally:
        await engine.dispose()


@pytest.mark.slow
async def test_a_worker_killed_mid_run_leaves_every_notification_sent_and_none_as_two_messages(
        make_api: ApiFactory, crash_db: str, tmp_path: Path) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    # booked a week and a day ago (the app's clock), for the coming days: every reminder is due when the worker runs
    api = await make_api(crash_db, clock=ManualClock(now - timedelta(days=8)), **UNLIMITED)
    t = await api.tenant()
    calendar = await make_calendar(api, t, tz="UTC", hours=("00:00", "23:30"), reminder_minutes=REMINDER_MINUTES)
    offered = await slots(api, t, calendar["id"], (now + timedelta(hours=2)).isoformat(),
                          (now + timedelta(days=6)).isoformat())
    assert len(offered) >= APPOINTMENTS
    for n, start in enumerate(offered[:APPOINTMENTS]):
        made = await book(api, t, calendar["id"], start, attendee_name=f"Attendee {n}",
                          attendee_email=f"attendee-{n}@example.com")
        assert made.status_code == 201, made.text

    sink = SlowMailbox()
    with SmtpServer() as smtp:
        smtp.controller.handler = sink  # the server's handler, before any connection
        first = _start_worker(crash_db, smtp.url, tmp_path)
        try:
            await _until(lambda: _some(sink, 60), 120, "the first 60 messages")
        finally:
            first.send_signal(signal.SIGKILL)  # kill -9, mid-run
        await asyncio.to_thread(first.wait, 10)
        assert first.returncode == -signal.SIGKILL
        before = len(sink.messages)
        assert 0 < before < NOTIFICATIONS, before

        second = _start_worker(crash_db, smtp.url, tmp_path)
        try:
            async def all_sent() -> bool:
                rows = await _rows(crash_db)
                return len(rows) == NOTIFICATIONS and all(r.status == "sent" for r in rows)

            await _until(all_sent, 120, "every notification marked sent")
        finally:
            second.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(second.wait, 30) == 0, second.stderr.read() if second.stderr else ""

    rows = await _rows(crash_db)
    assert Counter(r.kind for r in rows) == {"confirmation": APPOINTMENTS, "reminder": APPOINTMENTS}
    expected = {f"<attendee-notification-{r.id}@parley>": r for r in rows}
    received = Counter(str(m["Message-ID"]) for m in sink.messages)
    assert set(received) == set(expected)  # every notification reached the server, nothing else did
    for message in sink.messages:  # each message went to its own attendee
        assert message["To"] == expected[str(message["Message-ID"])].recipient
    repeated = {mid: n for mid, n in received.items() if n > 1}
    assert all(n == 2 for n in repeated.values()) and len(repeated) <= IN_FLIGHT, repeated
    reminders = Counter(expected[mid].recipient for mid in received if expected[mid].kind == "reminder")
    assert set(reminders.values()) == {1} and len(reminders) == APPOINTMENTS  # one reminder per attendee


async def _some(sink: SlowMailbox, count: int) -> bool:
    return len(sink.messages) >= count
