"""Attendee notifications through the HTTP API, on SQLite and PostgreSQL, with a real SMTP server (aiosmtpd on
127.0.0.1): a booking's confirmation, a reschedule and a cancellation reach the attendee with an ICS invitation
that two independent parsers (icalendar, vobject) read as one event (one UID, SEQUENCE 0, 1, 2; METHOD REQUEST,
REQUEST, CANCEL); reminders go out `reminder_minutes` before, by email or by SMS (through SendSms, the one DNC
gate), exactly once however often the jobs run, and after a crash between the SMS and its mark."""

from __future__ import annotations

import asyncio
import email.message
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import icalendar
import pytest
import vobject

from adapters.memory.clock import ManualClock
from application.scheduling import notifications as cases
from entrypoints.features.attendees import notify_job, plan_job
from entrypoints.features.triggers import TriggerSettings
from entrypoints.worker import make_runner
from tests.http.scheduling_support import UNLIMITED, book, make_calendar
from tests.http.triggers_support import SmtpServer
from tests.support.apps import Api, ApiFactory, Tenant

START = datetime(2026, 3, 2, 12, tzinfo=UTC)  # Monday 07:00 in New York
SLOT = "2026-03-03T10:00:00-05:00"  # Tuesday 10:00 in New York, 15:00 UTC
NEW_SLOT = "2026-03-04T11:00:00-05:00"


@pytest.fixture
def smtp() -> Any:
    with SmtpServer() as server:
        yield server


@pytest.fixture
async def api(make_api: ApiFactory, sql_url: str, smtp: SmtpServer) -> AsyncIterator[Api]:
    yield await make_api(sql_url, clock=ManualClock(START), sections=(TriggerSettings(url=smtp.url),),
                         **UNLIMITED)


def address(name: str) -> str:
    """An attendee address of this test alone: the run's database is shared, and the consumer and the jobs serve
    every test's appointments, so a test reads only the messages to its own addresses."""
    return f"{name}-{uuid.uuid4().hex[:10]}@example.com"


def to(smtp: SmtpServer, recipient: str) -> list[email.message.Message]:
    return [m for m in smtp.mailbox.messages if m["To"] == recipient]


async def inbox(smtp: SmtpServer, recipient: str, count: int, timeout: float = 10.0) -> list[email.message.Message]:  # noqa: ASYNC109
    deadline = asyncio.get_running_loop().time() + timeout
    while len(to(smtp, recipient)) < count:
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"{len(to(smtp, recipient))} of {count} messages arrived")
        await asyncio.sleep(0.02)
    return to(smtp, recipient)


async def run_jobs(api: Api, rounds: int = 2) -> int:
    """The consumer and the notification jobs, as the worker runs them, by the app's clock."""
    container = api.worker()
    runner = await make_runner(container, api.settings, kinds=[plan_job(container, api.settings),
                                                                notify_job(container, api.settings)])
    await runner.start()
    ran = 0
    for _ in range(rounds):
        ran += await runner.run_due(woken=True)
    return ran


def subject(message: email.message.Message) -> str:
    return " ".join(str(message["Subject"]).split())  # unfolded


def invitation(message: email.message.Message) -> tuple[bytes, str]:
    """(the ICS attachment, its Content-Type's method parameter)."""
    parts = [p for p in message.walk() if p.get_content_type() == "text/calendar"]
    assert len(parts) == 1, [p.get_content_type() for p in message.walk()]
    assert parts[0].get_filename() == "invite.ics"
    payload = parts[0].get_payload(decode=True)
    assert isinstance(payload, bytes)
    return payload, str(parts[0].get_param("method"))


def parsed(ics: bytes) -> dict[str, Any]:
    """What both parsers read; they must agree."""
    one = icalendar.Calendar.from_ical(ics)
    events = [c for c in one.walk() if c.name == "VEVENT"]
    assert len(events) == 1
    event = events[0]
    other = vobject.readOne(ics.decode())
    vevent = other.vevent
    seen = {
        "method": str(one["METHOD"]),
        "uid": str(event["UID"]),
        "sequence": int(event["SEQUENCE"]),
        "status": str(event["STATUS"]),
        "start": event.decoded("DTSTART"),
        "end": event.decoded("DTEND"),
        "organizer": str(event["ORGANIZER"]),
        "attendee": str(event["ATTENDEE"]),
    }
    assert other.method.value == seen["method"]
    assert vevent.uid.value == seen["uid"]
    assert int(vevent.sequence.value) == seen["sequence"]
    assert vevent.status.value == seen["status"]
    assert vevent.dtstart.value == seen["start"] and vevent.dtend.value == seen["end"]
    assert vevent.attendee.value == seen["attendee"]
    return seen


async def appointment(api: Api, t: Tenant, calendar_id: int, slot: str = SLOT, **fields: Any) -> dict[str, Any]:
    made = await book(api, t, calendar_id, slot, **fields)
    assert made.status_code == 201, made.text
    return made.json()["data"]  # type: ignore[no-any-return]


async def test_confirmation_reschedule_and_cancellation_carry_one_event_calendar_apps_update(
        api: Api, smtp: SmtpServer) -> None:
    t = await api.tenant()
    calendar = await make_calendar(api, t, name="Dr. Smith")
    ada = address("ada")
    booked = await appointment(api, t, calendar["id"], attendee_name="Ada Lovelace", attendee_email=ada)
    await run_jobs(api)
    [confirmation] = await inbox(smtp, ada, 1)
    assert subject(confirmation).startswith("Confirmed: Dr. Smith, Tuesday 3 March 2026, 10:00-10:30")
    assert "Hello Ada Lovelace," in confirmation.get_payload()[0].get_payload(decode=True).decode()
    ics, method = invitation(confirmation)
    first = parsed(ics)
    uid = f"appointment-{booked['id']}@parley"
    assert (method, first["method"], first["uid"], first["sequence"], first["status"]) == (
        "REQUEST", "REQUEST", uid, 0, "CONFIRMED")
    assert first["start"] == datetime(2026, 3, 3, 15, tzinfo=UTC)
    assert first["end"] == datetime(2026, 3, 3, 15, 30, tzinfo=UTC)
    assert first["attendee"] == f"mailto:{ada}"
    assert first["organizer"] == "mailto:parley@localhost"

    moved = await api.client.patch(f"/v2/scheduling/appointments/{booked['id']}", json={"slot_start": NEW_SLOT},
                                   headers=t.headers)
    assert moved.status_code == 200, moved.text
    await run_jobs(api)
    messages = await inbox(smtp, ada, 2)
    second = parsed(invitation(messages[1])[0])
    assert subject(messages[1]).startswith("Rescheduled: Dr. Smith, Wednesday 4 March 2026, 11:00-11:30")
    assert (second["method"], second["uid"], second["sequence"]) == ("REQUEST", uid, 1)  # the same event, updated
    assert second["start"] == datetime(2026, 3, 4, 16, tzinfo=UTC)

    new_id = moved.json()["data"]["appointment_id"]
    cancelled = await api.client.delete(f"/v2/scheduling/appointments/{new_id}", headers=t.headers)
    assert cancelled.status_code == 200, cancelled.text
    await run_jobs(api)
    messages = await inbox(smtp, ada, 3)
    ics, method = invitation(messages[2])
    third = parsed(ics)
    assert (method, third["method"], third["uid"], third["sequence"], third["status"]) == (
        "CANCEL", "CANCEL", uid, 2, "CANCELLED")
    assert subject(messages[2]).startswith("Cancelled: ")

    await run_jobs(api, rounds=3)  # nothing more, however often the jobs run
    assert len(to(smtp, ada)) == 3
    assert len({m["Message-ID"] for m in to(smtp, ada)}) == 3


async def test_no_email_without_an_attendee_email(api: Api, smtp: SmtpServer) -> None:
    t = await api.tenant()
    calendar = await make_calendar(api, t, reminder_minutes=60)
    await appointment(api, t, calendar["id"], attendee_name="No address", attendee_phone="+14155550100")
    api.clock.advance(hours=26)
    await run_jobs(api)
    assert not [m for m in smtp.mailbox.messages if "No address" in str(m)]


async def test_a_pending_request_is_confirmed_when_approved(api: Api, smtp: SmtpServer) -> None:
    t = await api.tenant()
    calendar = await make_calendar(api, t)
    ada = address("ada")
    requested = await appointment(api, t, calendar["id"], attendee_email=ada, require_approval=True)
    await run_jobs(api)
    assert to(smtp, ada) == []
    approved = await api.client.post(f"/v2/scheduling/appointments/{requested['id']}/approve", headers=t.headers)
    assert approved.status_code == 200, approved.text
    await run_jobs(api)
    [message] = await inbox(smtp, ada, 1)
    assert parsed(invitation(message)[0])["method"] == "REQUEST"


async def test_an_email_reminder_goes_out_reminder_minutes_before_exactly_once(api: Api, smtp: SmtpServer) -> None:
    t = await api.tenant()
    calendar = await make_calendar(api, t, reminder_minutes=120)
    assert calendar["reminder_minutes"] == 120 and calendar["reminder_channel"] == "email"
    ada = address("ada")
    await appointment(api, t, calendar["id"], attendee_email=ada)
    await run_jobs(api)
    await inbox(smtp, ada, 1)  # the confirmation
    api.clock.set(datetime(2026, 3, 3, 12, 59, tzinfo=UTC))  # 2 h 1 min before
    await run_jobs(api)
    assert len(to(smtp, ada)) == 1
    api.clock.set(datetime(2026, 3, 3, 13, 0, tzinfo=UTC))  # 2 h before
    await run_jobs(api, rounds=3)
    messages = await inbox(smtp, ada, 2)
    assert subject(messages[1]).startswith("Reminder: Front desk, Tuesday 3 March 2026, 10:00-10:30")
    assert not [p for p in messages[1].walk() if p.get_content_type() == "text/calendar"]
    api.clock.advance(minutes=30)
    await run_jobs(api, rounds=3)
    assert len(to(smtp, ada)) == 2


async def test_a_cancelled_or_moved_appointment_gets_no_reminder(api: Api, smtp: SmtpServer) -> None:
    t = await api.tenant()
    calendar = await make_calendar(api, t, reminder_minutes=60)
    ada, bob = address("ada"), address("bob")
    first = await appointment(api, t, calendar["id"], attendee_email=ada)
    await appointment(api, t, calendar["id"], "2026-03-03T11:00:00-05:00", attendee_email=bob)
    await api.client.delete(f"/v2/scheduling/appointments/{first['id']}", headers=t.headers)
    await run_jobs(api)
    api.clock.set(datetime(2026, 3, 3, 15, 5, tzinfo=UTC))
    await run_jobs(api)
    reminders = [m["To"] for m in smtp.mailbox.messages if subject(m).startswith("Reminder") and m["To"] in (ada, bob)]
    assert reminders == [bob]


async def sms_to(api: Api, t: Tenant, phone: str) -> list[dict[str, Any]]:
    listed = await api.client.get("/v2/sms", params={"limit": 100}, headers=t.headers)
    assert listed.status_code == 200, listed.text
    return [m for m in listed.json()["data"] if m["to"] == phone]


async def test_an_sms_reminder_goes_through_send_sms_exactly_once(api: Api, smtp: SmtpServer) -> None:
    t = await api.tenant()
    calendar = await make_calendar(api, t, reminder_minutes=30, reminder_channel="sms")
    await appointment(api, t, calendar["id"], attendee_phone="+14155550123")
    api.clock.set(datetime(2026, 3, 3, 14, 30, tzinfo=UTC))
    await run_jobs(api, rounds=3)
    [sms] = await sms_to(api, t, "+14155550123")
    assert sms["body"].startswith("Reminder: Front desk, Tuesday 3 March 2026, 10:00-10:30")
    await run_jobs(api, rounds=3)
    assert len(await sms_to(api, t, "+14155550123")) == 1


async def test_an_sms_reminder_to_a_number_on_a_dnc_list_is_not_sent(api: Api, smtp: SmtpServer) -> None:
    t = await api.tenant()
    calendar = await make_calendar(api, t, reminder_minutes=30, reminder_channel="sms")
    await appointment(api, t, calendar["id"], attendee_phone="+14155550124")
    dnc = (await api.client.post("/v2/dnc/lists", json={"name": "Opted out"}, headers=t.headers)).json()["data"]
    blocked = await api.client.post(f"/v2/dnc/lists/{dnc['id']}/entries", json={"phone_numbers": ["+14155550124"]},
                                    headers=t.headers)
    assert blocked.status_code in (200, 201), blocked.text
    api.clock.set(datetime(2026, 3, 3, 14, 30, tzinfo=UTC))
    await run_jobs(api, rounds=3)
    assert await sms_to(api, t, "+14155550124") == []


async def test_a_crash_between_the_sms_and_its_mark_sends_it_once_on_the_next_run(
        api: Api, smtp: SmtpServer, monkeypatch: pytest.MonkeyPatch) -> None:
    t = await api.tenant()
    calendar = await make_calendar(api, t, reminder_minutes=30, reminder_channel="sms")
    await appointment(api, t, calendar["id"], attendee_phone="+14155550125")
    api.clock.set(datetime(2026, 3, 3, 14, 30, tzinfo=UTC))
    real = cases.MarkAttendeeNotification.execute

    async def crash(self: cases.MarkAttendeeNotification, command: cases.MarkNotificationCommand) -> Any:
        raise RuntimeError("the worker died before its commit")

    monkeypatch.setattr(cases.MarkAttendeeNotification, "execute", crash)
    await run_jobs(api, rounds=1)
    assert await sms_to(api, t, "+14155550125") == []  # the SMS and its mark rolled back together
    monkeypatch.setattr(cases.MarkAttendeeNotification, "execute", real)
    api.clock.advance(minutes=5)  # past the failed job's backoff
    await run_jobs(api, rounds=3)
    assert len(await sms_to(api, t, "+14155550125")) == 1


async def test_a_job_run_again_after_the_mark_committed_sends_nothing_more(api: Api, smtp: SmtpServer) -> None:
    """A worker killed after the ``sent`` mark committed but before its job's completion was recorded: the job
    runs again (its lease expired) and finds the mark."""
    from entrypoints.features.attendees import notify

    t = await api.tenant()
    calendar = await make_calendar(api, t)
    ada = address("ada")
    await appointment(api, t, calendar["id"], attendee_email=ada)
    await run_jobs(api)
    [message] = await inbox(smtp, ada, 1)
    organization_id = t.organization_id
    notification_id = int(message["Message-ID"].split("-")[-1].split("@")[0])
    assert await notify(api.worker(), organization_id, notification_id) is None
    assert len(to(smtp, ada)) == 1


async def test_a_mail_server_that_refuses_is_tried_again_later(make_api: ApiFactory, sql_url: str) -> None:
    api = await make_api(sql_url, clock=ManualClock(START), sections=(TriggerSettings(url="smtp://127.0.0.1:9"),),
                         **UNLIMITED)
    t = await api.tenant()
    calendar = await make_calendar(api, t)
    await appointment(api, t, calendar["id"], attendee_email=address("ada"))
    with SmtpServer() as late:
        await run_jobs(api)  # port 9 refuses: the attempt fails and is due again in a minute
        assert late.mailbox.messages == []
    api.clock.advance(minutes=2)
    assert await run_jobs(api) >= 1


async def test_reminder_settings_are_validated_and_patchable(api: Api) -> None:
    t = await api.tenant()
    calendar = await make_calendar(api, t)
    assert (calendar["reminder_minutes"], calendar["reminder_channel"]) == (None, "email")
    for body in ({"reminder_minutes": 4}, {"reminder_minutes": 10_081}, {"reminder_channel": "fax"}):
        r = await api.client.patch(f"/v2/scheduling/calendars/{calendar['id']}", json=body, headers=t.headers)
        assert r.status_code == 400, (body, r.text)
    r = await api.client.patch(f"/v2/scheduling/calendars/{calendar['id']}", headers=t.headers,
                               json={"reminder_minutes": 1440, "reminder_channel": "sms"})
    assert r.status_code == 200, r.text
    assert (r.json()["data"]["reminder_minutes"], r.json()["data"]["reminder_channel"]) == (1440, "sms")


def test_reminders_are_due_before_the_slot() -> None:
    from domain.scheduling.notifications import reminder_due

    start = datetime(2026, 3, 3, 15, tzinfo=UTC)
    assert reminder_due(start, 60, start - timedelta(days=1)) == start - timedelta(hours=1)
    assert reminder_due(start, 60, start - timedelta(minutes=30)) is None
    assert reminder_due(start, None, start - timedelta(days=1)) is None
