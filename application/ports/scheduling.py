"""Ports for in-house scheduling: calendars (with their rules, blackouts and feed token), appointments,
and the ICS rendering of a calendar."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from application.ports.platform import Page, PageRequest
from domain.scheduling.model import Appointment, AvailabilityRule, Blackout, Calendar, HeldSlot, Schedule
from domain.scheduling.notifications import AttendeeNotification, IcsMethod, NotificationKind


@dataclass(frozen=True, slots=True)
class AppointmentFilter:
    calendar_id: int | None = None
    status: str | None = None
    start: datetime | None = None
    """Appointments whose slot_start is at or after this instant."""
    end: datetime | None = None
    """Appointments whose slot_start is before this instant."""


class CalendarRepository(Protocol):
    """Calendars and what belongs to them. Every method is scoped to an organization, except
    ``find_by_feed_token`` (the token is its own credential, like an API key)."""

    async def add(self, calendar: Calendar) -> Calendar: ...

    async def get(self, organization_id: int, calendar_id: int) -> Calendar | None: ...

    async def get_for_update(self, organization_id: int, calendar_id: int) -> Calendar | None:
        """Like get, but locks the calendar row until the transaction ends (PostgreSQL: SELECT ... FOR
        UPDATE; SQLite write transactions are serialized already). Bookings, reschedules and calendar
        changes take this lock first, so checks and writes for one calendar never interleave."""
        ...

    async def list(self, organization_id: int, page: PageRequest, agent_id: int | None = None) -> Page[Calendar]: ...

    async def update(self, calendar: Calendar) -> Calendar: ...

    async def delete(self, organization_id: int, calendar_id: int, at: datetime) -> None:
        """Soft delete: the calendar stops being reachable (its appointments stay readable); its rules,
        blackouts and feed token are removed."""
        ...

    async def set_feed_token(self, organization_id: int, calendar_id: int, token_digest: str | None) -> None:
        """Store the SHA-256 of the calendar's ICS feed token (None revokes it). ``Calendar.feed_token``
        reads back this digest, never the token."""
        ...

    async def find_by_feed_token(self, token_digest: str) -> Calendar | None: ...

    async def add_rule(self, organization_id: int, rule: AvailabilityRule) -> AvailabilityRule: ...

    async def list_rules(self, organization_id: int, calendar_id: int) -> builtins.list[AvailabilityRule]:
        """Every rule of the calendar, by weekday, start time, then id."""
        ...

    async def delete_rule(self, organization_id: int, calendar_id: int, rule_id: int) -> bool: ...

    async def add_blackout(self, organization_id: int, blackout: Blackout) -> Blackout: ...

    async def list_blackouts(self, organization_id: int, calendar_id: int, page: PageRequest,
                             start: datetime | None = None, end: datetime | None = None) -> Page[Blackout]:
        """Blackouts by start then id; with start/end, only those overlapping ``[start, end)``."""
        ...

    async def blackouts_overlapping(self, organization_id: int, calendar_id: int, start: datetime,
                                    end: datetime) -> builtins.list[Blackout]: ...

    async def delete_blackout(self, organization_id: int, calendar_id: int, blackout_id: int) -> bool: ...


class AppointmentRepository(Protocol):
    async def add(self, appointment: Appointment) -> Appointment:
        """Insert; raises ``SlotUnavailable`` when another pending or confirmed appointment of the same
        calendar starts at the same instant (a unique index over active appointments backs this)."""
        ...

    async def get(self, organization_id: int, appointment_id: int) -> Appointment | None: ...

    async def get_for_update(self, organization_id: int, appointment_id: int) -> Appointment | None: ...

    async def update(self, appointment: Appointment) -> Appointment:
        """Store the appointment's status, cancel reason, notes, sequence and updated_at."""
        ...

    async def list(self, organization_id: int, filters: AppointmentFilter, page: PageRequest) -> Page[Appointment]:
        """By slot_start, then id."""
        ...

    async def held_slots(self, organization_id: int, calendar_id: int, start: datetime,
                         end: datetime) -> builtins.list[HeldSlot]:
        """The slots of the calendar's appointments that are busy time (``BUSY_STATUSES``: pending, confirmed,
        completed, no_show; an outcome never frees a slot) overlapping ``[start, end)``, by slot_start, without the
        rest of each appointment."""
        ...

    async def count_holding_after(self, organization_id: int, calendar_id: int, after: datetime) -> int:
        """Pending and confirmed appointments of the calendar that end after ``after``."""
        ...

    async def count_upcoming_of_attendee(self, organization_id: int, calendar_id: int, after: datetime,
                                         email: str | None, phone: str | None,
                                         exclude_appointment_id: int | None = None) -> int:
        """Pending and confirmed appointments of the calendar starting after ``after`` whose attendee has this email
        (any case) or this phone (E.164); 0 when both are None."""
        ...

    async def count_starting_between(self, organization_id: int, calendar_id: int, start: datetime, end: datetime,
                                     exclude_appointment_id: int | None = None) -> int:
        """Appointments of the calendar that are not cancelled (``BUSY_STATUSES``) starting in ``[start, end)``."""
        ...

    async def for_feed(self, organization_id: int, calendar_id: int, ending_after: datetime,
                       limit: int) -> builtins.list[Appointment]:
        """Appointments of every status ending after ``ending_after``, by slot_start then id."""
        ...


class ScheduleReader(Protocol):
    """One read of everything slot generation needs (the SQL adapter serves it from a per-process cache,
    valid while the calendar's revision is unchanged)."""

    async def schedule(self, organization_id: int, calendar_id: int, start: datetime, end: datetime, *,
                       fresh: bool = False) -> Schedule:
        """The calendar's rules (by weekday, start time, then id), and its blackouts (by start) and held
        slots (by slot_start) that overlap ``[start, end)``, as the current transaction sees them.
        Empty for an unknown or deleted calendar or another organization's. ``fresh`` reads the tables
        and bypasses any cache: the checks a booking makes under the calendar lock use it, so that
        what guards against double booking never depends on a cache."""
        ...


class IcsRenderer(Protocol):
    def render(self, calendar: Calendar, appointments: Sequence[Appointment]) -> bytes:
        """An RFC 5545 VCALENDAR with one VEVENT per appointment."""
        ...

    def invitation(self, invite: Invitation) -> bytes:
        """An RFC 5546 (iTIP) message about one appointment: METHOD REQUEST (add or update) or CANCEL, one VEVENT
        with the thread's UID and SEQUENCE, the organizer and the attendee, times in UTC."""
        ...


@dataclass(frozen=True, slots=True)
class Invitation:
    method: IcsMethod
    uid: str
    sequence: int
    summary: str
    description: str
    start: datetime
    end: datetime
    stamp: datetime
    organizer: str
    """An email address."""
    attendee: str
    attendee_name: str | None = None


class AttendeeNotificationRepository(Protocol):
    """What appointment attendees are told (``domain/scheduling/notifications.py``); the caller commits."""

    async def add_new(self, notification: AttendeeNotification) -> AttendeeNotification | None:
        """Stores it unless the appointment already has a notification of that kind (None then: one per
        appointment and kind, whatever the races)."""
        ...

    async def get(self, organization_id: int, notification_id: int, *,
                  lock: bool = False) -> AttendeeNotification | None:
        """``lock``: row-locked for this transaction (a second sender waits, then sees the mark)."""
        ...

    async def update(self, notification: AttendeeNotification) -> AttendeeNotification: ...

    async def last_sequence(self, organization_id: int, thread_id: int) -> int | None:
        """The highest SEQUENCE of the thread's notifications (None: none yet)."""
        ...

    async def find(self, organization_id: int, appointment_id: int,
                   kind: NotificationKind) -> AttendeeNotification | None: ...

    async def list_for_appointment(self, organization_id: int,
                                   appointment_id: int) -> builtins.list[AttendeeNotification]:
        """Oldest first."""
        ...
