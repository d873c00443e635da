"""In-memory calendars (with rules, blackouts and feed tokens) and appointments."""

from __future__ import annotations

import builtins
from dataclasses import replace
from datetime import datetime
from typing import Any

from adapters.memory.store import InMemoryUnitOfWork
from application.ports.platform import Page, PageRequest
from application.ports.scheduling import AppointmentFilter
from domain.errors import SlotUnavailable
from domain.identity import persisted
from domain.scheduling.model import (
    BUSY_STATUSES,
    SLOT_HOLDING_STATUSES,
    Appointment,
    AvailabilityRule,
    Blackout,
    Calendar,
    HeldIntervals,
    HeldSlot,
    Schedule,
)
from domain.scheduling.notifications import AttendeeNotification, NotificationKind


class InMemoryCalendarRepository:
    """Tables: ``calendars`` id -> (Calendar, deleted_at), ``availability_rules`` id -> (org, rule),
    ``blackouts`` id -> (org, blackout)."""

    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def _live(self, organization_id: int, calendar_id: int) -> Calendar | None:
        entry = (await self.uow.tables())["calendars"].get(calendar_id)
        if entry is None or entry[1] is not None or entry[0].organization_id != organization_id:
            return None
        return entry[0]

    async def add(self, calendar: Calendar) -> Calendar:
        tables = await self.uow.tables()
        stored = replace(calendar, id=self.uow.store.next_id("calendars"), feed_token=None)
        tables["calendars"][stored.id] = (stored, None)
        return stored

    async def get(self, organization_id: int, calendar_id: int) -> Calendar | None:
        return await self._live(organization_id, calendar_id)

    get_for_update = get

    async def list(self, organization_id: int, page: PageRequest, agent_id: int | None = None) -> Page[Calendar]:
        tables = await self.uow.tables()
        found = [c for c, deleted in sorted(tables["calendars"].values(), key=lambda e: e[0].id)
                 if c.organization_id == organization_id and deleted is None
                 and (agent_id is None or c.agent_id == agent_id)]
        return page.slice(found)

    async def update(self, calendar: Calendar) -> Calendar:
        current = await self._live(calendar.organization_id, persisted(calendar.id))
        if current is not None:
            tables = await self.uow.tables()
            tables["calendars"][calendar.id] = (
                replace(calendar, created_at=current.created_at, feed_token=current.feed_token), None)
        return calendar

    async def delete(self, organization_id: int, calendar_id: int, at: datetime) -> None:
        current = await self._live(organization_id, calendar_id)
        if current is None:
            return
        tables = await self.uow.tables()
        tables["calendars"][calendar_id] = (replace(current, feed_token=None), at)
        for name in ("availability_rules", "blackouts"):
            for key, (org, item) in list(tables[name].items()):
                if org == organization_id and item.calendar_id == calendar_id:
                    del tables[name][key]

    async def set_feed_token(self, organization_id: int, calendar_id: int, token_digest: str | None) -> None:
        current = await self._live(organization_id, calendar_id)
        if current is not None:
            tables = await self.uow.tables()
            if token_digest is not None and any(c.feed_token == token_digest for c, _ in tables["calendars"].values()):
                raise ValueError("duplicate feed token")
            tables["calendars"][calendar_id] = (replace(current, feed_token=token_digest), None)

    async def find_by_feed_token(self, token_digest: str) -> Calendar | None:
        tables = await self.uow.tables()
        for calendar, deleted in tables["calendars"].values():
            if deleted is None and calendar.feed_token == token_digest:
                return calendar
        return None

    async def add_rule(self, organization_id: int, rule: AvailabilityRule) -> AvailabilityRule:
        tables = await self.uow.tables()
        stored = replace(rule, id=self.uow.store.next_id("availability_rules"))
        tables["availability_rules"][stored.id] = (organization_id, stored)
        return stored

    async def list_rules(self, organization_id: int, calendar_id: int) -> builtins.list[AvailabilityRule]:
        tables = await self.uow.tables()
        rules = [r for org, r in tables["availability_rules"].values()
                 if org == organization_id and r.calendar_id == calendar_id]
        return sorted(rules, key=lambda r: (r.weekday, r.start_time, r.id))

    async def delete_rule(self, organization_id: int, calendar_id: int, rule_id: int) -> bool:
        tables = await self.uow.tables()
        entry = tables["availability_rules"].get(rule_id)
        if entry is None or entry[0] != organization_id or entry[1].calendar_id != calendar_id:
            return False
        del tables["availability_rules"][rule_id]
        return True

    async def add_blackout(self, organization_id: int, blackout: Blackout) -> Blackout:
        tables = await self.uow.tables()
        stored = replace(blackout, id=self.uow.store.next_id("blackouts"))
        tables["blackouts"][stored.id] = (organization_id, stored)
        return stored

    async def _blackouts(self, organization_id: int, calendar_id: int, start: datetime | None,
                         end: datetime | None) -> builtins.list[Blackout]:
        tables = await self.uow.tables()
        found = [b for org, b in tables["blackouts"].values()
                 if org == organization_id and b.calendar_id == calendar_id
                 and (end is None or b.start < end) and (start is None or b.end > start)]
        return sorted(found, key=lambda b: (b.start, b.id))

    async def list_blackouts(self, organization_id: int, calendar_id: int, page: PageRequest,
                             start: datetime | None = None, end: datetime | None = None) -> Page[Blackout]:
        return page.slice(await self._blackouts(organization_id, calendar_id, start, end))

    async def blackouts_overlapping(self, organization_id: int, calendar_id: int, start: datetime,
                                    end: datetime) -> builtins.list[Blackout]:
        return await self._blackouts(organization_id, calendar_id, start, end)

    async def delete_blackout(self, organization_id: int, calendar_id: int, blackout_id: int) -> bool:
        tables = await self.uow.tables()
        entry = tables["blackouts"].get(blackout_id)
        if entry is None or entry[0] != organization_id or entry[1].calendar_id != calendar_id:
            return False
        del tables["blackouts"][blackout_id]
        return True


class InMemoryAppointmentRepository:
    """Table ``appointments`` id -> Appointment; the one-active-appointment-per-slot rule is checked
    like the SQL unique index."""

    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    @staticmethod
    def _check_slot(table: dict[Any, Any], appointment: Appointment) -> None:
        if appointment.status not in SLOT_HOLDING_STATUSES:
            return
        for other in table.values():
            if (other.id != appointment.id and other.calendar_id == appointment.calendar_id
                    and other.slot_start == appointment.slot_start and other.status in SLOT_HOLDING_STATUSES):
                raise SlotUnavailable("slot_start is already held by another appointment of this calendar")

    async def add(self, appointment: Appointment) -> Appointment:
        table = (await self.uow.tables())["appointments"]
        self._check_slot(table, appointment)
        stored = replace(appointment, id=self.uow.store.next_id("appointments"))
        table[stored.id] = stored
        return stored

    async def get(self, organization_id: int, appointment_id: int) -> Appointment | None:
        found = (await self.uow.tables())["appointments"].get(appointment_id)
        return found if found is not None and found.organization_id == organization_id else None

    get_for_update = get

    async def update(self, appointment: Appointment) -> Appointment:
        table = (await self.uow.tables())["appointments"]
        current = table.get(appointment.id)
        if current is None or current.organization_id != appointment.organization_id:
            return appointment
        changed = replace(current, status=appointment.status, cancel_reason=appointment.cancel_reason,
                          notes=appointment.notes, sequence=appointment.sequence, updated_at=appointment.updated_at)
        self._check_slot(table, changed)
        table[appointment.id] = changed
        return appointment

    async def _all(self, organization_id: int) -> list[Appointment]:
        table = (await self.uow.tables())["appointments"]
        return sorted((a for a in table.values() if a.organization_id == organization_id),
                      key=lambda a: (a.slot_start, a.id))

    async def list(self, organization_id: int, filters: AppointmentFilter, page: PageRequest) -> Page[Appointment]:
        found = [a for a in await self._all(organization_id)
                 if (filters.calendar_id is None or a.calendar_id == filters.calendar_id)
                 and (filters.status is None or a.status == filters.status)
                 and (filters.start is None or a.slot_start >= filters.start)
                 and (filters.end is None or a.slot_start < filters.end)]
        return page.slice(found)

    async def held_slots(self, organization_id: int, calendar_id: int, start: datetime,
                         end: datetime) -> builtins.list[HeldSlot]:
        return [HeldSlot(a.id, a.slot_start, a.slot_end, a.status) for a in await self._all(organization_id)
                if a.calendar_id == calendar_id and a.status in BUSY_STATUSES
                and a.slot_start < end and a.slot_end > start]

    async def count_holding_after(self, organization_id: int, calendar_id: int, after: datetime) -> int:
        return sum(1 for a in await self._all(organization_id)
                   if a.calendar_id == calendar_id and a.status in SLOT_HOLDING_STATUSES and a.slot_end > after)

    async def count_upcoming_of_attendee(self, organization_id: int, calendar_id: int, after: datetime,
                                         email: str | None, phone: str | None,
                                         exclude_appointment_id: int | None = None) -> int:
        if email is None and phone is None:
            return 0

        def same(a: Appointment) -> bool:
            return ((email is not None and (a.attendee_email or "").lower() == email.lower())
                    or (phone is not None and a.attendee_phone == phone))

        return sum(1 for a in await self._all(organization_id)
                   if a.calendar_id == calendar_id and a.status in SLOT_HOLDING_STATUSES and a.slot_start > after
                   and a.id != exclude_appointment_id and same(a))

    async def count_starting_between(self, organization_id: int, calendar_id: int, start: datetime, end: datetime,
                                     exclude_appointment_id: int | None = None) -> int:
        return sum(1 for a in await self._all(organization_id)
                   if a.calendar_id == calendar_id and a.status in BUSY_STATUSES and start <= a.slot_start < end
                   and a.id != exclude_appointment_id)

    async def for_feed(self, organization_id: int, calendar_id: int, ending_after: datetime,
                       limit: int) -> builtins.list[Appointment]:
        return [a for a in await self._all(organization_id)
                if a.calendar_id == calendar_id and a.slot_end > ending_after][:limit]


class InMemoryScheduleReader:
    """The schedule read straight from the tables (nothing to cache in memory)."""

    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.calendars = InMemoryCalendarRepository(uow)
        self.appointments = InMemoryAppointmentRepository(uow)

    async def schedule(self, organization_id: int, calendar_id: int, start: datetime, end: datetime, *,
                       fresh: bool = False) -> Schedule:
        if await self.calendars.get(organization_id, calendar_id) is None:
            return Schedule.empty()
        return Schedule(await self.calendars.list_rules(organization_id, calendar_id),
                        await self.calendars.blackouts_overlapping(organization_id, calendar_id, start, end),
                        HeldIntervals.of(await self.appointments.held_slots(organization_id, calendar_id, start,
                                                                            end)))


class InMemoryAttendeeNotificationRepository:
    """Table ``attendee_notifications`` id -> AttendeeNotification; one per (appointment, kind) like the SQL
    unique constraint."""

    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def _all(self) -> dict[Any, AttendeeNotification]:
        return (await self.uow.tables())["attendee_notifications"]

    async def add_new(self, notification: AttendeeNotification) -> AttendeeNotification | None:
        table = await self._all()
        if any(n.appointment_id == notification.appointment_id and n.kind == notification.kind
               for n in table.values()):
            return None
        stored = replace(notification, id=self.uow.store.next_id("attendee_notifications"))
        table[stored.id] = stored
        return stored

    async def get(self, organization_id: int, notification_id: int, *,
                  lock: bool = False) -> AttendeeNotification | None:
        found = (await self._all()).get(notification_id)
        return found if found is not None and found.organization_id == organization_id else None

    async def update(self, notification: AttendeeNotification) -> AttendeeNotification:
        (await self._all())[notification.id] = notification
        return notification

    async def last_sequence(self, organization_id: int, thread_id: int) -> int | None:
        found = [n.sequence for n in (await self._all()).values() if n.organization_id == organization_id
                 and n.thread_id == thread_id and n.kind != NotificationKind.REMINDER]
        return max(found) if found else None

    async def find(self, organization_id: int, appointment_id: int,
                   kind: NotificationKind) -> AttendeeNotification | None:
        return next((n for n in (await self._all()).values() if n.organization_id == organization_id
                     and n.appointment_id == appointment_id and n.kind == kind), None)

    async def list_for_appointment(self, organization_id: int,
                                   appointment_id: int) -> builtins.list[AttendeeNotification]:
        return sorted((n for n in (await self._all()).values() if n.organization_id == organization_id
                       and n.appointment_id == appointment_id), key=lambda n: persisted(n.id))
