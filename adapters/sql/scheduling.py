"""SQL repositories for calendars (with rules, blackouts and feed tokens) and appointments, and the schedule
reads availability makes, through the per-process ``ScheduleCache`` (``adapters/sql/schedule_cache.py``)."""

from __future__ import annotations

import builtins
from array import array
from datetime import datetime, time, timedelta
from typing import Any

import sqlalchemy as sa

from adapters.sql.constraints import constraint_errors
from adapters.sql.paging import fetch_page
from adapters.sql.schedule_cache import CachedSchedule, ScheduleCache
from adapters.sql.scheduling_tables import (
    HOLDING_CONDITION,
    OUTCOME_CONDITION,
    appointments,
    availability_rules,
    blackouts,
    calendars,
)
from adapters.sql.uow import SqlUnitOfWork
from application.ports.platform import Page, PageRequest
from application.ports.scheduling import AppointmentFilter
from domain.scheduling.model import (
    BUSY_STATUSES,
    MAX_APPOINTMENT_LENGTH,
    Appointment,
    AvailabilityRule,
    Blackout,
    Calendar,
    HeldIntervals,
    HeldSlot,
    Schedule,
)

_CALENDAR_COLUMNS = [c for c in calendars.c if c.name not in ("deleted_at", "revision")]
def _row_to_calendar(row: Any) -> Calendar:
    return Calendar(
        id=row.id, organization_id=row.organization_id, name=row.name, timezone=row.timezone,
        slot_duration_minutes=row.slot_duration_minutes, buffer_minutes=row.buffer_minutes,
        min_notice_minutes=row.min_notice_minutes, horizon_days=row.horizon_days, agent_id=row.agent_id,
        created_at=row.created_at, updated_at=row.updated_at, feed_token=row.feed_token_hash,
        max_upcoming_per_attendee=row.max_upcoming_per_attendee, max_bookings_per_day=row.max_bookings_per_day,
        reminder_minutes=row.reminder_minutes, reminder_channel=row.reminder_channel,
    )


def _calendar_values(c: Calendar) -> dict[str, Any]:
    return {
        "organization_id": c.organization_id, "name": c.name, "timezone": c.timezone,
        "slot_duration_minutes": c.slot_duration_minutes, "buffer_minutes": c.buffer_minutes,
        "min_notice_minutes": c.min_notice_minutes, "horizon_days": c.horizon_days, "agent_id": c.agent_id,
        "max_upcoming_per_attendee": c.max_upcoming_per_attendee, "max_bookings_per_day": c.max_bookings_per_day,
        "reminder_minutes": c.reminder_minutes, "reminder_channel": c.reminder_channel,
        "created_at": c.created_at, "updated_at": c.updated_at,
    }


def _row_to_rule(row: Any) -> AvailabilityRule:
    return AvailabilityRule(row.id, row.calendar_id, row.weekday, time(row.start_minute // 60, row.start_minute % 60),
                            time(row.end_minute // 60 % 24, row.end_minute % 60))  # 1440 (24:00) as 00:00


def _row_to_blackout(row: Any) -> Blackout:
    return Blackout(row.id, row.calendar_id, row.start_at, row.end_at, row.reason)


def _row_to_appointment(row: Any) -> Appointment:
    return Appointment(
        id=row.id, organization_id=row.organization_id, calendar_id=row.calendar_id, status=row.status,
        slot_start=row.slot_start, slot_end=row.slot_end, attendee_name=row.attendee_name,
        attendee_email=row.attendee_email, attendee_phone=row.attendee_phone, notes=row.notes,
        cancel_reason=row.cancel_reason, rescheduled_from=row.rescheduled_from, sequence=row.sequence,
        created_at=row.created_at, updated_at=row.updated_at, call_id=row.call_id,
    )


def _appointment_values(a: Appointment) -> dict[str, Any]:
    return {
        "organization_id": a.organization_id, "calendar_id": a.calendar_id, "status": a.status,
        "slot_start": a.slot_start, "slot_end": a.slot_end, "attendee_name": a.attendee_name,
        "attendee_email": a.attendee_email, "attendee_phone": a.attendee_phone, "notes": a.notes,
        "cancel_reason": a.cancel_reason, "rescheduled_from": a.rescheduled_from, "sequence": a.sequence,
        "call_id": a.call_id, "created_at": a.created_at, "updated_at": a.updated_at,
    }


def _with_outcome(organization_id: int, calendar_id: int, start: datetime, end: datetime) -> Any:
    """Completed and no_show appointments of the calendar overlapping ``[start, end)``: busy time too (an
    outcome never frees a slot). Few rows, found through their own partial index."""
    return sa.and_(
        appointments.c.calendar_id == calendar_id,
        sa.text(OUTCOME_CONDITION),  # literal, as in the partial index
        appointments.c.slot_end > start,
        appointments.c.slot_start < end,
        appointments.c.organization_id == organization_id,
    )


def _holding(organization_id: int, calendar_id: int, start: datetime, end: datetime) -> Any:
    """Pending and confirmed appointments of the calendar overlapping ``[start, end)``."""
    return sa.and_(
        appointments.c.calendar_id == calendar_id,
        sa.text(HOLDING_CONDITION),  # literal, as in the partial index, so SQLite searches that index
        appointments.c.slot_start < end,
        # bounds the index range scan from below: no appointment is longer than the longest slot
        appointments.c.slot_start > start - MAX_APPOINTMENT_LENGTH,
        appointments.c.slot_end > start,
        appointments.c.organization_id == organization_id,
    )


class SqlCalendarRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    @staticmethod
    def _live(organization_id: int) -> Any:
        return sa.and_(calendars.c.organization_id == organization_id, calendars.c.deleted_at.is_(None))

    async def add(self, calendar: Calendar) -> Calendar:
        conn = await self.uow.connection()
        row = (await conn.execute(calendars.insert().returning(*_CALENDAR_COLUMNS), _calendar_values(calendar))).one()
        return _row_to_calendar(row)

    async def _get(self, organization_id: int, calendar_id: int, lock: bool) -> Calendar | None:
        conn = await self.uow.connection()
        query = sa.select(*_CALENDAR_COLUMNS).where(self._live(organization_id), calendars.c.id == calendar_id)
        if lock:
            query = query.with_for_update()
        row = (await conn.execute(query)).first()
        return _row_to_calendar(row) if row else None

    async def get(self, organization_id: int, calendar_id: int) -> Calendar | None:
        return await self._get(organization_id, calendar_id, lock=False)

    async def get_for_update(self, organization_id: int, calendar_id: int) -> Calendar | None:
        return await self._get(organization_id, calendar_id, lock=True)

    async def list(self, organization_id: int, page: PageRequest, agent_id: int | None = None) -> Page[Calendar]:
        conn = await self.uow.connection()
        condition = self._live(organization_id)
        if agent_id is not None:
            condition = sa.and_(condition, calendars.c.agent_id == agent_id)
        rows, total = await fetch_page(conn, _CALENDAR_COLUMNS, condition, [calendars.c.id], page)
        return Page([_row_to_calendar(r) for r in rows], total, page.limit, page.offset)

    async def update(self, calendar: Calendar) -> Calendar:
        conn = await self.uow.connection()
        values = _calendar_values(calendar)
        values.pop("organization_id")
        values.pop("created_at")
        await conn.execute(calendars.update().where(self._live(calendar.organization_id),
                                                    calendars.c.id == calendar.id).values(**values))
        return calendar

    async def delete(self, organization_id: int, calendar_id: int, at: datetime) -> None:
        conn = await self.uow.connection()
        owned = sa.and_(availability_rules.c.organization_id == organization_id,
                        availability_rules.c.calendar_id == calendar_id)
        await conn.execute(availability_rules.delete().where(owned))
        await conn.execute(blackouts.delete().where(blackouts.c.organization_id == organization_id,
                                                    blackouts.c.calendar_id == calendar_id))
        await conn.execute(calendars.update().where(self._live(organization_id), calendars.c.id == calendar_id)
                           .values(deleted_at=at, feed_token_hash=None))

    async def set_feed_token(self, organization_id: int, calendar_id: int, token_digest: str | None) -> None:
        conn = await self.uow.connection()
        await conn.execute(calendars.update().where(self._live(organization_id), calendars.c.id == calendar_id)
                           .values(feed_token_hash=token_digest))

    async def find_by_feed_token(self, token_digest: str) -> Calendar | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(*_CALENDAR_COLUMNS).where(
            calendars.c.feed_token_hash == token_digest, calendars.c.deleted_at.is_(None)))).first()
        return _row_to_calendar(row) if row else None

    async def add_rule(self, organization_id: int, rule: AvailabilityRule) -> AvailabilityRule:
        conn = await self.uow.connection()
        row = (await conn.execute(availability_rules.insert().returning(*availability_rules.c), {
            "organization_id": organization_id, "calendar_id": rule.calendar_id, "weekday": rule.weekday,
            "start_minute": rule.start_minute, "end_minute": rule.end_minute,  # 1440: until 24:00
        })).one()
        return _row_to_rule(row)

    async def list_rules(self, organization_id: int, calendar_id: int) -> builtins.list[AvailabilityRule]:
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(availability_rules).where(
            availability_rules.c.organization_id == organization_id, availability_rules.c.calendar_id == calendar_id,
        ).order_by(availability_rules.c.weekday, availability_rules.c.start_minute, availability_rules.c.id))
        return [_row_to_rule(r) for r in rows]

    async def delete_rule(self, organization_id: int, calendar_id: int, rule_id: int) -> bool:
        conn = await self.uow.connection()
        result = await conn.execute(availability_rules.delete().where(
            availability_rules.c.organization_id == organization_id, availability_rules.c.calendar_id == calendar_id,
            availability_rules.c.id == rule_id))
        return bool(result.rowcount)

    async def add_blackout(self, organization_id: int, blackout: Blackout) -> Blackout:
        conn = await self.uow.connection()
        row = (await conn.execute(blackouts.insert().returning(*blackouts.c), {
            "organization_id": organization_id, "calendar_id": blackout.calendar_id, "start_at": blackout.start,
            "end_at": blackout.end, "reason": blackout.reason,
        })).one()
        return _row_to_blackout(row)

    @staticmethod
    def _blackout_condition(organization_id: int, calendar_id: int, start: datetime | None,
                            end: datetime | None) -> Any:
        condition = sa.and_(blackouts.c.organization_id == organization_id, blackouts.c.calendar_id == calendar_id)
        if end is not None:
            condition = sa.and_(condition, blackouts.c.start_at < end)
        if start is not None:
            condition = sa.and_(condition, blackouts.c.end_at > start)
        return condition

    async def list_blackouts(self, organization_id: int, calendar_id: int, page: PageRequest,
                             start: datetime | None = None, end: datetime | None = None) -> Page[Blackout]:
        conn = await self.uow.connection()
        condition = self._blackout_condition(organization_id, calendar_id, start, end)
        rows, total = await fetch_page(conn, list(blackouts.c), condition,
                                   [blackouts.c.start_at, blackouts.c.id], page)
        return Page([_row_to_blackout(r) for r in rows], total, page.limit, page.offset)

    async def blackouts_overlapping(self, organization_id: int, calendar_id: int, start: datetime,
                                    end: datetime) -> builtins.list[Blackout]:
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(blackouts).where(
            self._blackout_condition(organization_id, calendar_id, start, end)).order_by(blackouts.c.start_at))
        return [_row_to_blackout(r) for r in rows]

    async def delete_blackout(self, organization_id: int, calendar_id: int, blackout_id: int) -> bool:
        conn = await self.uow.connection()
        result = await conn.execute(blackouts.delete().where(
            blackouts.c.organization_id == organization_id, blackouts.c.calendar_id == calendar_id,
            blackouts.c.id == blackout_id))
        return bool(result.rowcount)


class SqlAppointmentRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def add(self, appointment: Appointment) -> Appointment:
        conn = await self.uow.connection()
        with constraint_errors():  # the active-slot index: SlotUnavailable
            row = (await conn.execute(appointments.insert().returning(*appointments.c),
                                      _appointment_values(appointment))).one()
        return _row_to_appointment(row)

    async def _get(self, organization_id: int, appointment_id: int, lock: bool) -> Appointment | None:
        conn = await self.uow.connection()
        query = sa.select(appointments).where(appointments.c.organization_id == organization_id,
                                              appointments.c.id == appointment_id)
        if lock:
            query = query.with_for_update()
        row = (await conn.execute(query)).first()
        return _row_to_appointment(row) if row else None

    async def get(self, organization_id: int, appointment_id: int) -> Appointment | None:
        return await self._get(organization_id, appointment_id, lock=False)

    async def get_for_update(self, organization_id: int, appointment_id: int) -> Appointment | None:
        return await self._get(organization_id, appointment_id, lock=True)

    async def update(self, appointment: Appointment) -> Appointment:
        conn = await self.uow.connection()
        with constraint_errors():
            await conn.execute(appointments.update().where(
                appointments.c.organization_id == appointment.organization_id, appointments.c.id == appointment.id,
            ).values(status=appointment.status, cancel_reason=appointment.cancel_reason, notes=appointment.notes,
                     sequence=appointment.sequence, updated_at=appointment.updated_at))
        return appointment

    async def list(self, organization_id: int, filters: AppointmentFilter, page: PageRequest) -> Page[Appointment]:
        conn = await self.uow.connection()
        where = [appointments.c.organization_id == organization_id]
        if filters.calendar_id is not None:
            where.append(appointments.c.calendar_id == filters.calendar_id)
        if filters.status is not None:
            where.append(appointments.c.status == filters.status)
        if filters.start is not None:
            where.append(appointments.c.slot_start >= filters.start)
        if filters.end is not None:
            where.append(appointments.c.slot_start < filters.end)
        rows, total = await fetch_page(conn, list(appointments.c), sa.and_(*where),
                                   [appointments.c.slot_start, appointments.c.id], page)
        return Page([_row_to_appointment(r) for r in rows], total, page.limit, page.offset)

    async def held_slots(self, organization_id: int, calendar_id: int, start: datetime,
                         end: datetime) -> builtins.list[HeldSlot]:
        conn = await self.uow.connection()
        columns = (appointments.c.id, appointments.c.slot_start, appointments.c.slot_end, appointments.c.status)
        rows = list(await conn.execute(sa.select(*columns).where(_holding(organization_id, calendar_id, start, end))
                                       .order_by(appointments.c.slot_start)))
        outcomes = list(await conn.execute(sa.select(*columns).where(
            _with_outcome(organization_id, calendar_id, start, end))))
        if outcomes:
            rows = sorted(rows + outcomes, key=lambda r: r[1])
        return [HeldSlot(i, a, b, status) for i, a, b, status in rows]

    async def count_holding_after(self, organization_id: int, calendar_id: int, after: datetime) -> int:
        conn = await self.uow.connection()
        return int((await conn.execute(sa.select(sa.func.count()).select_from(appointments).where(
            appointments.c.organization_id == organization_id, appointments.c.calendar_id == calendar_id,
            sa.text(HOLDING_CONDITION), appointments.c.slot_end > after))).scalar_one())

    async def count_upcoming_of_attendee(self, organization_id: int, calendar_id: int, after: datetime,
                                         email: str | None, phone: str | None,
                                         exclude_appointment_id: int | None = None) -> int:
        if email is None and phone is None:
            return 0
        same: builtins.list[sa.ColumnElement[bool]] = []
        if email is not None:
            same.append(sa.func.lower(appointments.c.attendee_email) == email.lower())
        if phone is not None:
            same.append(appointments.c.attendee_phone == phone)
        where: builtins.list[sa.ColumnElement[bool] | sa.TextClause] = [
            appointments.c.organization_id == organization_id, appointments.c.calendar_id == calendar_id,
            sa.text(HOLDING_CONDITION), appointments.c.slot_start > after, sa.or_(*same)]
        if exclude_appointment_id is not None:
            where.append(appointments.c.id != exclude_appointment_id)
        conn = await self.uow.connection()
        return int((await conn.execute(sa.select(sa.func.count()).select_from(appointments).where(*where)))
                   .scalar_one())

    async def count_starting_between(self, organization_id: int, calendar_id: int, start: datetime, end: datetime,
                                     exclude_appointment_id: int | None = None) -> int:
        where = [appointments.c.organization_id == organization_id, appointments.c.calendar_id == calendar_id,
                 appointments.c.status.in_(sorted(BUSY_STATUSES)), appointments.c.slot_start >= start,
                 appointments.c.slot_start < end]
        if exclude_appointment_id is not None:
            where.append(appointments.c.id != exclude_appointment_id)
        conn = await self.uow.connection()
        return int((await conn.execute(sa.select(sa.func.count()).select_from(appointments).where(*where)))
                   .scalar_one())

    async def for_feed(self, organization_id: int, calendar_id: int, ending_after: datetime,
                       limit: int) -> builtins.list[Appointment]:
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(appointments).where(
            appointments.c.organization_id == organization_id, appointments.c.calendar_id == calendar_id,
            appointments.c.slot_end > ending_after,
        ).order_by(appointments.c.slot_start, appointments.c.id).limit(limit))
        return [_row_to_appointment(r) for r in rows]


# --------------------------------------------------------------------------- schedule reads, cached


class SqlScheduleReader:
    """Reads a calendar's revision (one indexed row), then serves its schedule from the cache or loads
    rules, blackouts and held slots for the window widened by ``SLACK``, so that the next requests of a
    sliding window (``start`` defaults to now) still find it."""

    SLACK = timedelta(days=1)

    def __init__(self, uow: SqlUnitOfWork, cache: ScheduleCache) -> None:
        self.uow, self.cache = uow, cache
        self.calendars = SqlCalendarRepository(uow)

    async def schedule(self, organization_id: int, calendar_id: int, start: datetime, end: datetime, *,
                       fresh: bool = False) -> Schedule:
        conn = await self.uow.connection()
        revision = (await conn.execute(sa.select(calendars.c.revision).where(
            calendars.c.id == calendar_id, calendars.c.organization_id == organization_id,
            calendars.c.deleted_at.is_(None)))).scalar()
        if revision is None:
            return Schedule.empty()
        if fresh:
            return await self._load(organization_id, calendar_id, start, end)
        key = (organization_id, calendar_id)
        found = self.cache.get(key, revision, start, end)
        if found is not None:
            return found
        # read after the revision: what is loaded is at least as new as the revision it is filed under
        high = end + self.SLACK
        loaded = await self._load(organization_id, calendar_id, start, high)
        entry = CachedSchedule(revision, start, high, tuple(loaded.rules), tuple(loaded.blackouts), loaded.held)
        self.cache.put(key, entry)
        return entry.window(start, end)

    async def _load(self, organization_id: int, calendar_id: int, start: datetime, end: datetime) -> Schedule:
        return Schedule(await self.calendars.list_rules(organization_id, calendar_id),
                        await self.calendars.blackouts_overlapping(organization_id, calendar_id, start, end),
                        await self._held_intervals(organization_id, calendar_id, start, end))

    async def _held_intervals(self, organization_id: int, calendar_id: int, start: datetime,
                              end: datetime) -> HeldIntervals:
        """Like ``held_slots``, with each instant turned into epoch microseconds by the database (thousands
        of rows: integers are cheaper to fetch than timestamps are to parse, and stored compactly)."""
        conn = await self.uow.connection()
        columns = (appointments.c.id, _epoch_us(appointments.c.slot_start, self.uow.dialect),
                   _epoch_us(appointments.c.slot_end, self.uow.dialect))
        rows = (await conn.execute(sa.select(*columns).where(_holding(organization_id, calendar_id, start, end))
                                   .order_by(appointments.c.slot_start))).all()
        outcomes = (await conn.execute(sa.select(*columns).where(
            _with_outcome(organization_id, calendar_id, start, end)))).all()
        if outcomes:  # an outcome never frees its time: busy like a confirmed appointment
            rows = sorted([*rows, *outcomes], key=lambda r: (r[1], r[2]))
        return HeldIntervals(array("q", [r[0] for r in rows]), array("q", [r[1] for r in rows]),
                             array("q", [r[2] for r in rows]))


def _epoch_us(column: Any, dialect: str) -> Any:
    """SQL for a UtcDateTime column as integer microseconds since the Unix epoch. SQLite stores the naive
    UTC text ``YYYY-MM-DD HH:MM:SS.ffffff``: whole seconds from strftime, microseconds from the text."""
    if dialect == "sqlite":
        text = sa.type_coerce(column, sa.String)
        seconds = sa.cast(sa.func.strftime("%s", text), sa.BigInteger)
        return seconds * 1_000_000 + sa.cast(sa.func.substr(text, 21, 6), sa.BigInteger)
    return sa.cast(sa.extract("epoch", column) * 1_000_000, sa.BigInteger)
