"""In-house scheduling: calendars, rules, blackouts, availability, appointments and ICS feeds."""

from __future__ import annotations

from dishka import Provider, Scope, provide, provide_all

from adapters.ics.renderer import ICalendarRenderer
from adapters.memory.scheduling import (
    InMemoryAppointmentRepository,
    InMemoryCalendarRepository,
    InMemoryScheduleReader,
)
from adapters.sql.schedule_cache import ScheduleCache
from adapters.sql.scheduling import (
    SqlAppointmentRepository,
    SqlCalendarRepository,
    SqlScheduleReader,
)
from application.ports.agents import AgentCalendars
from application.ports.scheduling import AppointmentRepository, CalendarRepository, IcsRenderer, ScheduleReader
from application.scheduling import availability, booking, calendars, feeds
from entrypoints.features import Feature


class SqlSchedulingProvider(Provider):
    calendars = provide(SqlCalendarRepository, provides=CalendarRepository, scope=Scope.REQUEST)
    appointments = provide(SqlAppointmentRepository, provides=AppointmentRepository, scope=Scope.REQUEST)

    @provide(scope=Scope.APP)
    def schedule_cache(self) -> ScheduleCache:
        return ScheduleCache()

    schedules = provide(SqlScheduleReader, provides=ScheduleReader, scope=Scope.REQUEST)


class MemorySchedulingProvider(Provider):
    calendars = provide(InMemoryCalendarRepository, provides=CalendarRepository, scope=Scope.REQUEST)
    appointments = provide(InMemoryAppointmentRepository, provides=AppointmentRepository, scope=Scope.REQUEST)
    schedules = provide(InMemoryScheduleReader, provides=ScheduleReader, scope=Scope.REQUEST)


class SchedulingProvider(Provider):
    renderer = provide(ICalendarRenderer, provides=IcsRenderer, scope=Scope.APP)
    # for the core's agents: they may point at this feature's calendars
    agent_calendars = provide(calendars.CalendarsForAgents, provides=AgentCalendars, scope=Scope.REQUEST)

    cases = provide_all(
        calendars.CreateCalendar,
        calendars.GetCalendar,
        calendars.ListCalendars,
        calendars.UpdateCalendar,
        calendars.DeleteCalendar,
        calendars.AddAvailabilityRule,
        calendars.ListAvailabilityRules,
        calendars.DeleteAvailabilityRule,
        calendars.AddBlackout,
        calendars.ListBlackouts,
        calendars.DeleteBlackout,
        availability.GetAvailability,
        availability.NextOpenSlot,
        booking.BookAppointment,
        booking.BookNextOpenSlot,
        booking.GetAppointment,
        booking.ListAppointments,
        booking.RescheduleAppointment,
        booking.ApproveAppointment,
        booking.DeclineAppointment,
        booking.CancelAppointment,
        booking.RecordAppointmentOutcome,
        feeds.IssueFeedToken,
        feeds.RevokeFeedToken,
        feeds.RenderCalendarFeed,
        feeds.RenderFeedByToken,
        scope=Scope.REQUEST,
    )


FEATURE = Feature(
    name="scheduling",
    providers=(SchedulingProvider,),
    sql=SqlSchedulingProvider,
    memory=MemorySchedulingProvider,
)
