"""Business-hours schedules: weekly hours, exceptions and public holidays; status and preview."""

from __future__ import annotations

from dishka import Provider, Scope, provide, provide_all

from adapters.holidays import PythonHolidayCalendars
from adapters.memory.schedules import InMemoryScheduleRepository
from adapters.sql.schedules import SqlScheduleRepository
from application import schedules
from application.ports.campaigns import CampaignSchedules
from application.ports.schedules import HolidayCalendars, ScheduleRepository
from entrypoints.features import Feature


class SqlSchedulesProvider(Provider):
    schedules = provide(SqlScheduleRepository, provides=ScheduleRepository, scope=Scope.REQUEST)


class MemorySchedulesProvider(Provider):
    schedules = provide(InMemoryScheduleRepository, provides=ScheduleRepository, scope=Scope.REQUEST)


class SchedulesProvider(Provider):
    # computed locally by the holidays package; one calendar per region for the process
    holiday_calendars = provide(PythonHolidayCalendars, provides=HolidayCalendars, scope=Scope.APP)
    # for the campaigns feature: a campaign's schedule_id may name this feature's schedules
    campaign_schedules = provide(schedules.SchedulesForCampaigns, provides=CampaignSchedules, scope=Scope.REQUEST)

    cases = provide_all(
        schedules.CreateSchedule,
        schedules.GetSchedule,
        schedules.ListSchedules,
        schedules.UpdateSchedule,
        schedules.DeleteSchedule,
        schedules.GetScheduleStatus,
        schedules.PreviewSchedule,
        scope=Scope.REQUEST,
    )


FEATURE = Feature(
    name="schedules",
    providers=(SchedulesProvider,),
    sql=SqlSchedulesProvider,
    memory=MemorySchedulesProvider,
)
