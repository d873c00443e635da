"""Business-hours schedules: weekly hours, exceptions and public holidays; status and preview."""

from __future__ import annotations

from dishka import Provider, Scope, provide, provide_all

from adapters.holidays import PythonHolidayCalendars
from adapters.memory.business_hours import InMemoryScheduleRepository
from adapters.sql.business_hours import SqlScheduleRepository
from application import business_hours
from application.ports.business_hours import HolidayCalendars, ScheduleRepository
from application.ports.campaigns import CampaignSchedules
from entrypoints.features import Feature


class SqlSchedulesProvider(Provider):
    schedules = provide(SqlScheduleRepository, provides=ScheduleRepository, scope=Scope.REQUEST)


class MemorySchedulesProvider(Provider):
    schedules = provide(InMemoryScheduleRepository, provides=ScheduleRepository, scope=Scope.REQUEST)


class SchedulesProvider(Provider):
    # computed locally by the holidays package; one calendar per region for the process
    holiday_calendars = provide(PythonHolidayCalendars, provides=HolidayCalendars, scope=Scope.APP)
    # for the campaigns feature: a campaign's schedule_id may name this feature's schedules
    campaign_schedules = provide(business_hours.SchedulesForCampaigns, provides=CampaignSchedules, scope=Scope.REQUEST)

    cases = provide_all(
        business_hours.CreateSchedule,
        business_hours.GetSchedule,
        business_hours.ListSchedules,
        business_hours.UpdateSchedule,
        business_hours.DeleteSchedule,
        business_hours.GetScheduleStatus,
        business_hours.PreviewSchedule,
        scope=Scope.REQUEST,
    )


FEATURE = Feature(
    name="business_hours",
    providers=(SchedulesProvider,),
    sql=SqlSchedulesProvider,
    memory=MemorySchedulesProvider,
)
