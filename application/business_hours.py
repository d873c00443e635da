"""Business-hours schedules: creating, reading, changing and deleting them, their status at an instant and a
preview of their openings. Use cases never commit (the HTTP pipeline does)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta

from application.context import Actor
from application.ports.business_hours import HolidayCalendars, ScheduleRepository, ScheduleUsage
from application.ports.platform import Clock, Page, PageRequest
from domain.business_hours import (
    HolidayRegion,
    IsHoliday,
    Schedule,
    ScheduleException,
    Status,
    WeeklyInterval,
    build_schedule,
    exceptions_document,
    no_holidays,
    preview,
    require_supported,
    schedule_document,
    status_at,
    weekly_document,
)
from domain.errors import InUse, NotFound
from domain.identity import persisted
from domain.patching import MergePatch, merge_patch
from domain.timezones import local_day_start, validate_timezone

DEFAULT_PREVIEW_DAYS = 7


class SchedulesForCampaigns:
    """CampaignSchedules from this feature: a campaign may follow any live schedule of its organization."""

    def __init__(self, schedules: ScheduleRepository) -> None:
        self.schedules = schedules

    async def exists(self, organization_id: int, schedule_id: int) -> bool:
        """The schedule is live, and stays so until the caller's transaction ends (its row share-locked: a delete
        waits, then finds the campaign that follows it and refuses)."""
        return await self.schedules.get_locked(organization_id, schedule_id, shared=True) is not None


async def load_schedule(schedules: ScheduleRepository, actor: Actor, schedule_id: int, *,
                        lock: bool = False) -> Schedule:
    """``lock``: the row locked for a change that must not race a campaign starting to follow it (a delete)."""
    if lock:
        schedule = await schedules.get_locked(actor.organization_id, schedule_id, shared=False)
    else:
        schedule = await schedules.get(actor.organization_id, schedule_id)
    if schedule is None:
        raise NotFound("schedule", schedule_id)
    return schedule


def holiday_predicate(calendars: HolidayCalendars, schedule: Schedule) -> IsHoliday:
    return no_holidays if schedule.holidays is None else calendars.is_holiday(schedule.holidays)


@dataclass(frozen=True, slots=True)
class CreateScheduleCommand:
    actor: Actor
    name: str
    timezone: str
    weekly: tuple[WeeklyInterval, ...] = ()
    exceptions: tuple[ScheduleException, ...] = ()
    holidays: HolidayRegion | None = None


class CreateSchedule:
    def __init__(self, schedules: ScheduleRepository, calendars: HolidayCalendars, clock: Clock) -> None:
        self.schedules, self.calendars, self.clock = schedules, calendars, clock

    async def execute(self, command: CreateScheduleCommand) -> Schedule:
        now = self.clock.now()
        # the same checks as any client document (the command's values may come from elsewhere than HTTP)
        schedule = build_schedule(id=None, organization_id=command.actor.organization_id, name=command.name,
                                  timezone=command.timezone, weekly=weekly_document(command.weekly),
                                  exceptions=exceptions_document(command.exceptions),
                                  holidays=None if command.holidays is None else {
                                      "country": command.holidays.country,
                                      "subdivision": command.holidays.subdivision},
                                  created_at=now, updated_at=now)
        if schedule.holidays is not None:
            self.calendars.check(schedule.holidays)
        return await self.schedules.add(schedule)


@dataclass(frozen=True, slots=True)
class GetScheduleCommand:
    actor: Actor
    schedule_id: int


class GetSchedule:
    def __init__(self, schedules: ScheduleRepository) -> None:
        self.schedules = schedules

    async def execute(self, command: GetScheduleCommand) -> Schedule:
        return await load_schedule(self.schedules, command.actor, command.schedule_id)


@dataclass(frozen=True, slots=True)
class ListSchedulesCommand:
    actor: Actor
    page: PageRequest


class ListSchedules:
    def __init__(self, schedules: ScheduleRepository) -> None:
        self.schedules = schedules

    async def execute(self, command: ListSchedulesCommand) -> Page[Schedule]:
        return await self.schedules.list(command.actor.organization_id, command.page)


@dataclass(frozen=True, slots=True)
class UpdateScheduleCommand:
    actor: Actor
    schedule_id: int
    patch: MergePatch
    """Over the schedule's document (name, timezone, weekly, exceptions, holidays): lists are replaced,
    ``holidays: null`` stops following holidays, ``exceptions: null`` removes every exception."""


class UpdateSchedule:
    """The merged document is validated as a whole, as a create would be. The campaigns that use the schedule are
    told of a change (``ScheduleUsage.schedule_changed``): their contacts waiting for its old hours are re-planned."""

    def __init__(self, schedules: ScheduleRepository, calendars: HolidayCalendars, usage: ScheduleUsage,
                 clock: Clock) -> None:
        self.schedules, self.calendars, self.usage, self.clock = schedules, calendars, usage, clock

    async def execute(self, command: UpdateScheduleCommand) -> Schedule:
        current = await load_schedule(self.schedules, command.actor, command.schedule_id)
        document = merge_patch(schedule_document(current), command.patch)
        updated = build_schedule(id=current.id, organization_id=current.organization_id,
                                 name=document.get("name"), timezone=document.get("timezone"),
                                 weekly=document.get("weekly"), exceptions=document.get("exceptions"),
                                 holidays=document.get("holidays"), created_at=current.created_at,
                                 updated_at=current.updated_at)
        if updated.holidays is not None and updated.holidays != current.holidays:
            self.calendars.check(updated.holidays)
        if updated == current:  # a PATCH that changes nothing leaves updated_at alone
            return current
        now = self.clock.now()
        saved = await self.schedules.update(replace(updated, updated_at=now))
        await self.usage.schedule_changed(current.organization_id, persisted(current.id), now)
        return saved


@dataclass(frozen=True, slots=True)
class DeleteScheduleCommand:
    actor: Actor
    schedule_id: int


class DeleteSchedule:
    """Refused (409 in_use) while a running or paused campaign uses the schedule."""

    def __init__(self, schedules: ScheduleRepository, usage: ScheduleUsage, clock: Clock) -> None:
        self.schedules, self.usage, self.clock = schedules, usage, clock

    async def execute(self, command: DeleteScheduleCommand) -> None:
        # locked first: a campaign starting to follow the schedule meanwhile either committed (and is found below)
        # or waits for this transaction and then finds the schedule deleted
        await load_schedule(self.schedules, command.actor, command.schedule_id, lock=True)
        users = await self.usage.users_of(command.actor.organization_id, command.schedule_id)
        if users:
            raise InUse(f"the schedule is used by {len(users)} running or paused campaign(s)",
                        details={"campaign_ids": sorted(users)})
        if not await self.schedules.delete(command.actor.organization_id, command.schedule_id, self.clock.now()):
            raise NotFound("schedule", command.schedule_id)


@dataclass(frozen=True, slots=True)
class GetScheduleStatusCommand:
    actor: Actor
    schedule_id: int
    at: datetime | None = None
    """Default: now."""
    timezone: str | None = None
    """The zone whose wall clock the hours are read in (a recipient's); default: the schedule's."""


@dataclass(frozen=True, slots=True)
class ScheduleStatus:
    schedule: Schedule
    at: datetime
    timezone: str
    status: Status


class GetScheduleStatus:
    def __init__(self, schedules: ScheduleRepository, calendars: HolidayCalendars, clock: Clock) -> None:
        self.schedules, self.calendars, self.clock = schedules, calendars, clock

    async def execute(self, command: GetScheduleStatusCommand) -> ScheduleStatus:
        zone = None if command.timezone is None else validate_timezone(command.timezone)
        at = require_supported(self.clock.now() if command.at is None else command.at, "at")
        schedule = await load_schedule(self.schedules, command.actor, command.schedule_id)
        status = status_at(schedule, at, zone=zone, is_holiday=holiday_predicate(self.calendars, schedule))
        return ScheduleStatus(schedule, at, zone or schedule.timezone, status)


@dataclass(frozen=True, slots=True)
class PreviewScheduleCommand:
    actor: Actor
    schedule_id: int
    start: datetime | date | None = None
    """Default: now. A date is the first instant of that local date (in ``timezone``, else the schedule's)."""
    end: datetime | date | None = None
    """Default: start + 7 days; at most 62 days after start."""
    timezone: str | None = None


@dataclass(frozen=True, slots=True)
class SchedulePreview:
    schedule: Schedule
    start: datetime
    end: datetime
    timezone: str
    intervals: list[tuple[datetime, datetime]]


class PreviewSchedule:
    def __init__(self, schedules: ScheduleRepository, calendars: HolidayCalendars, clock: Clock) -> None:
        self.schedules, self.calendars, self.clock = schedules, calendars, clock

    async def execute(self, command: PreviewScheduleCommand) -> SchedulePreview:
        zone = None if command.timezone is None else validate_timezone(command.timezone)
        schedule = await load_schedule(self.schedules, command.actor, command.schedule_id)
        shown = zone or schedule.timezone

        def bound(value: datetime | date, field: str) -> datetime:
            if isinstance(value, datetime):
                return require_supported(value, field)
            require_supported(datetime(value.year, value.month, value.day, tzinfo=UTC), field)
            return local_day_start(value, shown)

        start = self.clock.now() if command.start is None else bound(command.start, "start")
        end = start + timedelta(days=DEFAULT_PREVIEW_DAYS) if command.end is None else bound(command.end, "end")
        intervals = preview(schedule, start, end, zone=zone, is_holiday=holiday_predicate(self.calendars, schedule))
        return SchedulePreview(schedule, start, end, shown, intervals)
