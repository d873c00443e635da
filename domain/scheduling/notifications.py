"""What an appointment's attendee is told: a confirmation, a reschedule and a cancellation by email (each with an
ICS invitation: one UID for the whole reschedule chain, its SEQUENCE growing with every message), and a reminder
by email or SMS some minutes before (the calendar's ``reminder_minutes`` and ``reminder_channel``).

One notification per appointment and kind; its ``status`` is the durable mark that it went out (``sent``), could
not (``failed``, with the reason) or no longer needed to (``skipped``: a reminder of an appointment that was
cancelled, moved or has started).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo

from domain.scheduling.feeds import ics_uid


class NotificationKind(StrEnum):
    CONFIRMATION = "confirmation"
    RESCHEDULE = "reschedule"
    CANCELLATION = "cancellation"
    REMINDER = "reminder"


class NotificationStatus(StrEnum):
    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"
    SKIPPED = "skipped"


class IcsMethod(StrEnum):
    """RFC 5546 (iTIP) METHOD of an invitation: REQUEST adds or updates the event, CANCEL removes it."""

    REQUEST = "REQUEST"
    CANCEL = "CANCEL"


MAX_ATTEMPTS = 5
"""An email the mail server does not accept is tried this many times (backoff between), then ``failed``."""
ERROR_MAX_LENGTH = 300


@dataclass(frozen=True, slots=True)
class AttendeeNotification:
    id: int | None
    organization_id: int
    appointment_id: int
    thread_id: int
    """The first appointment of its reschedule chain: the invitation's UID (``ics_uid(thread_id)``)."""
    kind: NotificationKind
    channel: str
    """``email`` or ``sms``."""
    recipient: str
    sequence: int
    """The invitation's SEQUENCE: one more than the thread's previous message."""
    due_at: datetime
    status: NotificationStatus = NotificationStatus.PENDING
    attempts: int = 0
    error: str | None = None
    sent_at: datetime | None = None
    created_at: datetime | None = None

    @property
    def uid(self) -> str:
        return ics_uid(self.thread_id)

    @property
    def method(self) -> IcsMethod:
        return IcsMethod.CANCEL if self.kind == NotificationKind.CANCELLATION else IcsMethod.REQUEST

    @property
    def message_id(self) -> str:
        """The email's Message-ID, the same on every attempt: a repeat after a crash is recognisably the same
        message."""
        return f"<attendee-notification-{self.id}@parley>"

    def sent(self, now: datetime) -> AttendeeNotification:
        return replace(self, status=NotificationStatus.SENT, sent_at=now, error=None)

    def skipped(self, reason: str) -> AttendeeNotification:
        return replace(self, status=NotificationStatus.SKIPPED, error=reason[:ERROR_MAX_LENGTH])

    def failed_attempt(self, error: str) -> AttendeeNotification:
        """One more failed attempt; ``failed`` for good at ``MAX_ATTEMPTS``."""
        attempts = self.attempts + 1
        status = NotificationStatus.FAILED if attempts >= MAX_ATTEMPTS else NotificationStatus.PENDING
        return replace(self, attempts=attempts, status=status, error=error[:ERROR_MAX_LENGTH])

    def failed(self, error: str) -> AttendeeNotification:
        """Failed for good (a refusal that will not change by trying again: DNC, opt-out, quota)."""
        return replace(self, attempts=self.attempts + 1, status=NotificationStatus.FAILED,
                       error=error[:ERROR_MAX_LENGTH])


def retry_delay(attempts: int) -> timedelta:
    """After the ``attempts``-th failed attempt: 1, 2, 4, 8 minutes."""
    return timedelta(minutes=2 ** max(0, attempts - 1))


def reminder_due(slot_start: datetime, reminder_minutes: int | None, booked_at: datetime) -> datetime | None:
    """When the reminder of an appointment starting at ``slot_start`` goes out: ``reminder_minutes`` before it,
    or None (no reminder set, or the booking came later than that: its confirmation says it all)."""
    if reminder_minutes is None:
        return None
    due = slot_start - timedelta(minutes=reminder_minutes)
    return due if due > booked_at else None


@dataclass(frozen=True, slots=True)
class Occasion:
    """What a message speaks of: the appointment's calendar (name, zone) and times."""

    calendar_name: str
    timezone: str
    slot_start: datetime
    slot_end: datetime
    attendee_name: str | None
    cancel_reason: str | None = None

    def when(self) -> str:
        """``Tuesday 10 March 2026, 09:00-09:30 (Europe/Berlin)``: the calendar's own zone."""
        zone = ZoneInfo(self.timezone)
        start, end = self.slot_start.astimezone(zone), self.slot_end.astimezone(zone)
        return f"{start:%A} {start.day} {start:%B %Y, %H:%M}-{end:%H:%M} ({self.timezone})"


SUBJECTS = {
    NotificationKind.CONFIRMATION: "Confirmed: {name}, {when}",
    NotificationKind.RESCHEDULE: "Rescheduled: {name}, {when}",
    NotificationKind.CANCELLATION: "Cancelled: {name}, {when}",
    NotificationKind.REMINDER: "Reminder: {name}, {when}",
}
OPENINGS = {
    NotificationKind.CONFIRMATION: "Your appointment is confirmed.",
    NotificationKind.RESCHEDULE: "Your appointment has moved to a new time.",
    NotificationKind.CANCELLATION: "Your appointment is cancelled.",
    NotificationKind.REMINDER: "A reminder of your appointment.",
}


def email_text(kind: NotificationKind, occasion: Occasion) -> tuple[str, str]:
    """(subject, plain-text body) of an email to the attendee."""
    when = occasion.when()
    subject = SUBJECTS[kind].format(name=occasion.calendar_name, when=when)
    opening = OPENINGS[kind]
    if kind == NotificationKind.CANCELLATION and occasion.cancel_reason == "declined":
        opening = "Your appointment request was declined."
    greeting = f"Hello {occasion.attendee_name}," if occasion.attendee_name else "Hello,"
    lines = [greeting, "", opening, "", f"{occasion.calendar_name}", when]
    if kind != NotificationKind.REMINDER:
        lines += ["", "The attached invitation (invite.ics) updates your calendar."]
    return " ".join(subject.split()), "\n".join(lines) + "\n"


def sms_text(occasion: Occasion) -> str:
    return f"Reminder: {occasion.calendar_name}, {occasion.when()}."
