"""Calendars and their availability rules and blackouts: creating, reading, changing and deleting them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, time

from application.context import Actor
from application.ports.agents import AgentRepository
from application.ports.platform import Clock, Page, PageRequest
from application.ports.scheduling import AppointmentRepository, CalendarRepository
from domain.errors import Conflict, NotFound, ValidationFailed
from domain.patching import MergePatch, apply_patch
from domain.scheduling.model import DEFAULT_MAX_UPCOMING_PER_ATTENDEE, AvailabilityRule, Blackout, Calendar
from domain.scheduling.rules import MAX_RULES_PER_CALENDAR, build_blackout, build_rule, validate_blackout_reason

CALENDAR_FIELDS = frozenset({"name", "timezone", "slot_duration_minutes", "buffer_minutes", "min_notice_minutes",
                             "horizon_days", "agent_id", "max_upcoming_per_attendee", "max_bookings_per_day",
                             "reminder_minutes", "reminder_channel"})
"""The calendar fields a client sets (on create, and in a PATCH)."""


@dataclass(frozen=True, slots=True)
class CalendarRef:
    """One calendar of the actor's organization: what reading, deleting or (re)issuing its feed needs."""

    actor: Actor
    calendar_id: int


async def load_calendar(calendars: CalendarRepository, actor: Actor, calendar_id: int, *,
                        lock: bool = False, field: str | None = None) -> Calendar:
    """``field``: the body's field that named the calendar (a 404 names it), none when the path did."""
    getter = calendars.get_for_update if lock else calendars.get
    calendar = await getter(actor.organization_id, calendar_id)
    if calendar is None:
        raise NotFound("calendar", calendar_id, field=field)
    return calendar


async def _check_agent(agents: AgentRepository, organization_id: int, agent_id: int | None) -> None:
    if agent_id is not None and await agents.get(organization_id, agent_id) is None:
        raise NotFound("agent", agent_id, field="agent_id")


class CalendarsForAgents:
    """AgentCalendars over the calendar repository: the organization's live (not deleted) calendars."""

    def __init__(self, calendars: CalendarRepository) -> None:
        self.calendars = calendars

    async def exists(self, organization_id: int, calendar_id: int) -> bool:
        return await self.calendars.get(organization_id, calendar_id) is not None


@dataclass(frozen=True, slots=True)
class CreateCalendarCommand:
    actor: Actor
    name: str
    timezone: str
    """IANA time zone, e.g. Europe/Berlin."""
    slot_duration_minutes: int = 30
    buffer_minutes: int = 0
    min_notice_minutes: int = 0
    horizon_days: int = 60
    agent_id: int | None = None
    max_upcoming_per_attendee: int | None = DEFAULT_MAX_UPCOMING_PER_ATTENDEE
    max_bookings_per_day: int | None = None
    reminder_minutes: int | None = None
    reminder_channel: str = "email"


class CreateCalendar:
    def __init__(self, calendars: CalendarRepository, agents: AgentRepository, clock: Clock) -> None:
        self.calendars, self.agents, self.clock = calendars, agents, clock

    async def execute(self, command: CreateCalendarCommand) -> Calendar:
        now = self.clock.now()
        calendar = Calendar(
            id=None, organization_id=command.actor.organization_id, name=command.name, timezone=command.timezone,
            slot_duration_minutes=command.slot_duration_minutes, buffer_minutes=command.buffer_minutes,
            min_notice_minutes=command.min_notice_minutes, horizon_days=command.horizon_days,
            agent_id=command.agent_id, max_upcoming_per_attendee=command.max_upcoming_per_attendee,
            max_bookings_per_day=command.max_bookings_per_day, reminder_minutes=command.reminder_minutes,
            reminder_channel=command.reminder_channel, created_at=now, updated_at=now,
        ).validated()
        await _check_agent(self.agents, calendar.organization_id, calendar.agent_id)
        return await self.calendars.add(calendar)


class GetCalendar:
    def __init__(self, calendars: CalendarRepository) -> None:
        self.calendars = calendars

    async def execute(self, command: CalendarRef) -> Calendar:
        return await load_calendar(self.calendars, command.actor, command.calendar_id)


@dataclass(frozen=True, slots=True)
class ListCalendarsCommand:
    actor: Actor
    page: PageRequest
    agent_id: int | None = None
    """Only this agent's calendars."""


class ListCalendars:
    def __init__(self, calendars: CalendarRepository) -> None:
        self.calendars = calendars

    async def execute(self, command: ListCalendarsCommand) -> Page[Calendar]:
        return await self.calendars.list(command.actor.organization_id, command.page, command.agent_id)


@dataclass(frozen=True, slots=True)
class UpdateCalendarCommand:
    actor: Actor
    calendar_id: int
    patch: MergePatch
    """Any of the CALENDAR_FIELDS."""


class UpdateCalendar:
    def __init__(self, calendars: CalendarRepository, agents: AgentRepository, clock: Clock) -> None:
        self.calendars, self.agents, self.clock = calendars, agents, clock

    async def execute(self, command: UpdateCalendarCommand) -> Calendar:
        calendar = await load_calendar(self.calendars, command.actor, command.calendar_id, lock=True)
        changes = {k: v for k, v in command.patch.items() if k in CALENDAR_FIELDS}
        if changes.get("agent_id") is not None and changes["agent_id"] != calendar.agent_id:
            await _check_agent(self.agents, calendar.organization_id, changes["agent_id"])
        updated = apply_patch(calendar, changes).validated()
        if updated == calendar:  # a PATCH that changes nothing leaves updated_at alone
            return calendar
        return await self.calendars.update(replace(updated, updated_at=self.clock.now()))


class DeleteCalendar:
    """Refused (409 conflict) while the calendar has pending or confirmed appointments that have not ended."""

    def __init__(self, calendars: CalendarRepository, appointments: AppointmentRepository, clock: Clock) -> None:
        self.calendars, self.appointments, self.clock = calendars, appointments, clock

    async def execute(self, command: CalendarRef) -> None:
        actor, calendar_id = command.actor, command.calendar_id
        await load_calendar(self.calendars, actor, calendar_id, lock=True)
        now = self.clock.now()
        active = await self.appointments.count_holding_after(actor.organization_id, calendar_id, now)
        if active:
            raise Conflict(
                f"the calendar has {active} upcoming pending or confirmed appointment(s); cancel them first",
                details={"active_appointments": active},
            )
        await self.calendars.delete(actor.organization_id, calendar_id, now)


@dataclass(frozen=True, slots=True)
class AddAvailabilityRuleCommand:
    actor: Actor
    calendar_id: int
    weekday: int
    start_time: str | time
    """``"HH:MM"`` or a ``datetime.time``, local to the calendar."""
    end_time: str | time


class AddAvailabilityRule:
    def __init__(self, calendars: CalendarRepository) -> None:
        self.calendars = calendars

    async def execute(self, command: AddAvailabilityRuleCommand) -> AvailabilityRule:
        rule = build_rule(id=None, calendar_id=command.calendar_id, weekday=command.weekday,
                          start_time=command.start_time, end_time=command.end_time)
        await load_calendar(self.calendars, command.actor, command.calendar_id, lock=True)
        existing = await self.calendars.list_rules(command.actor.organization_id, command.calendar_id)
        if len(existing) >= MAX_RULES_PER_CALENDAR:
            raise ValidationFailed.field("rules", f"a calendar holds at most {MAX_RULES_PER_CALENDAR} rules")
        return await self.calendars.add_rule(command.actor.organization_id, rule)


@dataclass(frozen=True, slots=True)
class ListAvailabilityRulesCommand:
    actor: Actor
    calendar_id: int
    page: PageRequest


class ListAvailabilityRules:
    def __init__(self, calendars: CalendarRepository) -> None:
        self.calendars = calendars

    async def execute(self, command: ListAvailabilityRulesCommand) -> Page[AvailabilityRule]:
        actor, calendar_id = command.actor, command.calendar_id
        await load_calendar(self.calendars, actor, calendar_id)
        rules = await self.calendars.list_rules(actor.organization_id, calendar_id)
        return command.page.slice(rules)


@dataclass(frozen=True, slots=True)
class DeleteAvailabilityRuleCommand:
    actor: Actor
    calendar_id: int
    rule_id: int


class DeleteAvailabilityRule:
    def __init__(self, calendars: CalendarRepository) -> None:
        self.calendars = calendars

    async def execute(self, command: DeleteAvailabilityRuleCommand) -> None:
        actor, calendar_id, rule_id = command.actor, command.calendar_id, command.rule_id
        await load_calendar(self.calendars, actor, calendar_id, lock=True)
        if not await self.calendars.delete_rule(actor.organization_id, calendar_id, rule_id):
            raise NotFound("availability rule", rule_id)


@dataclass(frozen=True, slots=True)
class AddBlackoutCommand:
    actor: Actor
    calendar_id: int
    start: str | datetime
    """RFC 3339 text with an offset, or an aware datetime."""
    end: str | datetime
    reason: str | None = None


class AddBlackout:
    """Existing appointments inside a new blackout are kept; the blackout only stops new bookings."""

    def __init__(self, calendars: CalendarRepository, clock: Clock) -> None:
        self.calendars, self.clock = calendars, clock

    async def execute(self, command: AddBlackoutCommand) -> Blackout:
        blackout = build_blackout(id=None, calendar_id=command.calendar_id, start=command.start, end=command.end,
                                  reason=validate_blackout_reason(command.reason))
        await load_calendar(self.calendars, command.actor, command.calendar_id, lock=True)
        return await self.calendars.add_blackout(command.actor.organization_id, blackout)


@dataclass(frozen=True, slots=True)
class ListBlackoutsCommand:
    actor: Actor
    calendar_id: int
    page: PageRequest
    start: datetime | None = None
    end: datetime | None = None


class ListBlackouts:
    def __init__(self, calendars: CalendarRepository) -> None:
        self.calendars = calendars

    async def execute(self, command: ListBlackoutsCommand) -> Page[Blackout]:
        actor, calendar_id = command.actor, command.calendar_id
        await load_calendar(self.calendars, actor, calendar_id)
        return await self.calendars.list_blackouts(actor.organization_id, calendar_id, command.page, command.start,
                                                   command.end)


@dataclass(frozen=True, slots=True)
class DeleteBlackoutCommand:
    actor: Actor
    calendar_id: int
    blackout_id: int


class DeleteBlackout:
    def __init__(self, calendars: CalendarRepository) -> None:
        self.calendars = calendars

    async def execute(self, command: DeleteBlackoutCommand) -> None:
        actor, calendar_id, blackout_id = command.actor, command.calendar_id, command.blackout_id
        await load_calendar(self.calendars, actor, calendar_id, lock=True)
        if not await self.calendars.delete_blackout(actor.organization_id, calendar_id, blackout_id):
            raise NotFound("blackout", blackout_id)
