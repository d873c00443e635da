"""Attendee notifications: what an appointment's attendee is told, and sending it exactly once.

* ``PlanAttendeeNotifications`` is the outbox's ``attendees`` consumer: every ``appointment.booked``,
  ``appointment.rescheduled`` and ``appointment.cancelled`` event becomes notification rows (a confirmation, a
  reschedule or a cancellation email when the appointment has an attendee email; a reminder, by email or SMS, when
  the calendar sets ``reminder_minutes``), each with a job ``attendees.notify`` due when it should go out. The rows,
  the jobs and the cursor commit together.
* ``DeliverAttendeeNotification`` runs one such job. A notification row is the durable mark: ``sent`` is written
  once and a notification that is no longer ``pending`` is never sent again, however often its job runs (a worker
  killed after the mark but before the job's completion was recorded runs it again: nothing more goes out).
  An SMS reminder is sent through ``SendSms`` (the one DNC gate and quota gate) in the same transaction as its
  mark: both commit or neither does. An email cannot be part of a transaction: it is handed to the mail server
  between reading the row and writing its mark, with the same Message-ID on every attempt, so the one window in
  which it can go out twice (the process dies after the server accepted it, before the mark committed) repeats
  a message the receiving side recognises as the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from application.context import Actor
from application.outbox import ATTENDEES
from application.ports.events import OutboxReader
from application.ports.jobs import JobQueue, NewJob
from application.ports.platform import Clock, UnitOfWork, Units
from application.ports.scheduling import (
    AppointmentRepository,
    AttendeeNotificationRepository,
    CalendarRepository,
    IcsRenderer,
    Invitation,
)
from application.ports.triggers import EmailAttachment, EmailFailed, EmailMessage, EmailSender
from application.sms import SendSms, SendSmsCommand
from domain.errors import DomainError, Unavailable
from domain.events import EventRecord, EventType
from domain.rfc3339 import parse_instant
from domain.scheduling.model import Appointment, AppointmentStatus
from domain.scheduling.notifications import (
    AttendeeNotification,
    NotificationKind,
    NotificationStatus,
    Occasion,
    email_text,
    reminder_due,
    retry_delay,
    sms_text,
)

NOTIFY_JOB = "attendees.notify"
"""One job per notification (key: its id), due when it should go out."""


async def thread_of(appointments: AppointmentRepository, organization_id: int, appointment: dict[str, Any]) -> int:
    """The first appointment of the reschedule chain ``appointment`` belongs to (its id when it has no
    predecessor): every message about the chain carries that one's ICS UID."""
    thread, previous = int(appointment["id"]), appointment.get("rescheduled_from")
    seen = {thread}
    while previous is not None and previous not in seen:
        seen.add(previous)
        thread = int(previous)
        found = await appointments.get(organization_id, thread)
        previous = found.rescheduled_from if found is not None else None
    return thread


@dataclass(frozen=True, slots=True)
class PlanAttendeeNotificationsCommand:
    limit: int = 500


class PlanAttendeeNotifications:
    """The outbox's ``attendees`` consumer (module docstring). Appointments that have ended by the time their event
    is read get nothing."""

    def __init__(self, uow: UnitOfWork, outbox: OutboxReader, notifications: AttendeeNotificationRepository,
                 appointments: AppointmentRepository, calendars: CalendarRepository, jobs: JobQueue,
                 clock: Clock) -> None:
        self.uow, self.outbox, self.notifications, self.jobs = uow, outbox, notifications, jobs
        self.appointments, self.calendars, self.clock = appointments, calendars, clock

    async def execute(self, command: PlanAttendeeNotificationsCommand) -> int:
        """How many events were read (0: nothing new)."""
        events = await self.outbox.pending(ATTENDEES, command.limit)
        if not events:
            return 0
        now = self.clock.now()
        planned: list[AttendeeNotification] = []
        for event in events:
            planned.extend(await self._plan(event, now))
        if planned:
            await self.jobs.schedule_new([
                NewJob(NOTIFY_JOB, n.due_at, str(n.id), {"organization_id": n.organization_id, "notification_id": n.id})
                for n in planned])
            self.uow.created_work()
        await self.outbox.advance(ATTENDEES, events[-1].id, now)
        return len(events)

    async def _plan(self, event: EventRecord, now: datetime) -> list[AttendeeNotification]:
        data = event.data if isinstance(event.data, dict) else {}
        if event.type == EventType.APPOINTMENT_BOOKED:
            return await self._announce(event.organization_id, data, NotificationKind.CONFIRMATION, now)
        if event.type == EventType.APPOINTMENT_RESCHEDULED:
            previous = data.get("previous_appointment")
            if isinstance(previous, dict):
                await self._skip_reminder(event.organization_id, int(previous["id"]), "the appointment was moved")
            if data.get("status") != AppointmentStatus.CONFIRMED:
                return []  # a pending request moved: its attendee hears when it is approved
            return await self._announce(event.organization_id, data, NotificationKind.RESCHEDULE, now)
        if event.type == EventType.APPOINTMENT_CANCELLED:
            await self._skip_reminder(event.organization_id, int(data["id"]), "the appointment was cancelled")
            return await self._announce(event.organization_id, data, NotificationKind.CANCELLATION, now)
        return []

    async def _announce(self, org: int, data: dict[str, Any], kind: NotificationKind,
                        now: datetime) -> list[AttendeeNotification]:
        slot_start = parse_instant(data["slot_start"], "slot_start")
        if parse_instant(data["slot_end"], "slot_end") <= now:
            return []
        appointment_id = int(data["id"])
        thread = await thread_of(self.appointments, org, data)
        planned: list[AttendeeNotification] = []
        email, phone = data.get("attendee_email"), data.get("attendee_phone")
        if email:
            last = await self.notifications.last_sequence(org, thread)
            stored = await self.notifications.add_new(AttendeeNotification(
                id=None, organization_id=org, appointment_id=appointment_id, thread_id=thread, kind=kind,
                channel="email", recipient=email, sequence=0 if last is None else last + 1, due_at=now,
                created_at=now))
            if stored is not None:
                planned.append(stored)
        if kind == NotificationKind.CANCELLATION:
            return planned
        calendar = await self.calendars.get(org, int(data["calendar_id"]))
        if calendar is None:
            return planned
        booked_at = parse_instant(data["updated_at"], "updated_at") if data.get("updated_at") else now
        due = reminder_due(slot_start, calendar.reminder_minutes, booked_at)
        recipient = email if calendar.reminder_channel == "email" else phone
        if due is not None and recipient:
            stored = await self.notifications.add_new(AttendeeNotification(
                id=None, organization_id=org, appointment_id=appointment_id, thread_id=thread,
                kind=NotificationKind.REMINDER, channel=calendar.reminder_channel, recipient=recipient,
                sequence=0, due_at=max(due, now), created_at=now))
            if stored is not None:
                planned.append(stored)
        return planned

    async def _skip_reminder(self, org: int, appointment_id: int, reason: str) -> None:
        reminder = await self.notifications.find(org, appointment_id, NotificationKind.REMINDER)
        if reminder is not None and reminder.status == NotificationStatus.PENDING:
            await self.notifications.update(reminder.skipped(reason))


@dataclass(frozen=True, slots=True)
class NotificationRef:
    organization_id: int
    notification_id: int


@dataclass(frozen=True, slots=True)
class NotificationWork:
    """A pending notification and what it speaks of, read in one unit of work."""

    notification: AttendeeNotification
    appointment: Appointment
    occasion: Occasion


class ReadAttendeeNotification:
    """A notification still to send, with its appointment; None when there is nothing to send (already sent,
    failed or skipped; a reminder whose appointment is no longer confirmed or has started is marked skipped)."""

    def __init__(self, notifications: AttendeeNotificationRepository, appointments: AppointmentRepository,
                 calendars: CalendarRepository, clock: Clock) -> None:
        self.notifications, self.appointments = notifications, appointments
        self.calendars, self.clock = calendars, clock

    async def execute(self, command: NotificationRef) -> NotificationWork | None:
        org = command.organization_id
        notification = await self.notifications.get(org, command.notification_id, lock=True)
        if notification is None or notification.status != NotificationStatus.PENDING:
            return None
        appointment = await self.appointments.get(org, notification.appointment_id)
        if appointment is None:
            await self.notifications.update(notification.skipped("the appointment is gone"))
            return None
        if notification.kind == NotificationKind.REMINDER and (
                appointment.status != AppointmentStatus.CONFIRMED or appointment.slot_start <= self.clock.now()):
            await self.notifications.update(notification.skipped(f"the appointment is {appointment.status}"))
            return None
        calendar = await self.calendars.get(org, appointment.calendar_id)
        occasion = Occasion(calendar.name if calendar else "Appointment", calendar.timezone if calendar else "UTC",
                            appointment.slot_start, appointment.slot_end, appointment.attendee_name,
                            appointment.cancel_reason)
        return NotificationWork(notification, appointment, occasion)


@dataclass(frozen=True, slots=True)
class MarkNotificationCommand:
    ref: NotificationRef
    error: str | None = None
    """None: sent; else one failed attempt (``for_good``: no more attempts)."""
    for_good: bool = False


class MarkAttendeeNotification:
    """Writes the outcome of an attempt on the row (under its lock); returns when the next attempt is due (None:
    no more attempts)."""

    def __init__(self, notifications: AttendeeNotificationRepository, clock: Clock) -> None:
        self.notifications, self.clock = notifications, clock

    async def execute(self, command: MarkNotificationCommand) -> datetime | None:
        now = self.clock.now()
        notification = await self.notifications.get(command.ref.organization_id, command.ref.notification_id,
                                                     lock=True)
        if notification is None or notification.status != NotificationStatus.PENDING:
            return None
        if command.error is None:
            await self.notifications.update(notification.sent(now))
            return None
        failed = notification.failed(command.error) if command.for_good else notification.failed_attempt(command.error)
        await self.notifications.update(failed)
        return now + retry_delay(failed.attempts) if failed.status == NotificationStatus.PENDING else None


@dataclass(frozen=True, slots=True)
class SmsReminderCommand:
    ref: NotificationRef


class SendSmsReminder:
    """An SMS reminder and its ``sent`` mark in one transaction, through ``SendSms`` (the DNC gate, the quota gate,
    the carrier). Returns False when there was nothing to send."""

    def __init__(self, read: ReadAttendeeNotification, mark: MarkAttendeeNotification, send_sms: SendSms) -> None:
        self.read, self.mark, self.send_sms = read, mark, send_sms

    async def execute(self, command: SmsReminderCommand) -> bool:
        work = await self.read.execute(command.ref)
        if work is None:
            return False
        notification = work.notification
        await self.send_sms.execute(SendSmsCommand(Actor.system(notification.organization_id), notification.recipient,
                                                   sms_text(work.occasion)))
        await self.mark.execute(MarkNotificationCommand(command.ref))
        return True


@dataclass(frozen=True, slots=True)
class AttendeeMail:
    organizer: str
    """The address invitations name as their ORGANIZER (the sender's)."""


class DeliverAttendeeNotification:
    """One run of an ``attendees.notify`` job (module docstring), each step in a unit of work of its own. Returns
    when the job is due again (a failed attempt), None when it is done."""

    def __init__(self, units: Units, email: EmailSender, renderer: IcsRenderer, mail: AttendeeMail,
                 clock: Clock) -> None:
        self.units, self.email, self.renderer, self.mail, self.clock = units, email, renderer, mail, clock

    async def execute(self, command: NotificationRef) -> datetime | None:
        async with self.units.begin() as unit:
            work = await (await unit.get(ReadAttendeeNotification)).execute(command)
            await unit.commit()  # a skip is kept
        if work is None:
            return None
        if work.notification.channel == "sms":
            return await self._sms(command)
        error: str | None = None
        try:
            await self.email.send(self.message(work))
        except EmailFailed as exc:
            error = str(exc) or type(exc).__name__
        return await self._mark(MarkNotificationCommand(command, error))

    async def _sms(self, command: NotificationRef) -> datetime | None:
        try:
            async with self.units.begin() as unit:
                await (await unit.get(SendSmsReminder)).execute(SmsReminderCommand(command))
                await unit.commit()
            return None
        except Unavailable as exc:  # screening impossible now: try again later
            return await self._mark(MarkNotificationCommand(command, str(exc)))
        except DomainError as exc:  # DNC, opt-out, quota, no SMS: trying again changes nothing
            return await self._mark(MarkNotificationCommand(command, f"{type(exc).__name__}: {exc}", for_good=True))

    async def _mark(self, command: MarkNotificationCommand) -> datetime | None:
        async with self.units.begin() as unit:
            due = await (await unit.get(MarkAttendeeNotification)).execute(command)
            await unit.commit()
        return due

    def message(self, work: NotificationWork) -> EmailMessage:
        notification, appointment, occasion = work.notification, work.appointment, work.occasion
        subject, body = email_text(notification.kind, occasion)
        attachments: tuple[EmailAttachment, ...] = ()
        if notification.kind != NotificationKind.REMINDER:
            invite = self.renderer.invitation(Invitation(
                method=notification.method, uid=notification.uid, sequence=notification.sequence,
                summary=occasion.calendar_name, description=body, start=appointment.slot_start,
                end=appointment.slot_end, stamp=notification.created_at or self.clock.now(),
                organizer=self.mail.organizer, attendee=notification.recipient,
                attendee_name=appointment.attendee_name))
            attachments = (EmailAttachment("invite.ics", f"text/calendar; method={notification.method}", invite),)
        return EmailMessage((notification.recipient,), subject, body, attachments, notification.message_id)
