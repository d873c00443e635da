"""In-house scheduling: calendars, rules, blackouts, availability, appointments and ICS feeds."""

from __future__ import annotations

from dishka import Provider, Scope, provide, provide_all

from adapters.ics.renderer import ICalendarRenderer
from adapters.memory.scheduling import (
    InMemoryAppointmentRepository,
    InMemoryCalendarRepository,
    InMemoryScheduleReader,
)
from adapters.sql.scheduling import (
    ScheduleCache,
    SqlAppointmentRepository,
    SqlCalendarRepository,
    SqlScheduleReader,
)
from application import scheduling
from application.call_booking import AtomicSchedulingAppointmentBooker
from application.ports.agents import AgentCalendars
from application.ports.calls import AppointmentBooker
from application.ports.scheduling import AppointmentRepository, CalendarRepository, IcsRenderer, ScheduleReader
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
    # overrides the core's NoCalendars: agents may point at this feature's calendars
    agent_calendars = provide(scheduling.CalendarsForAgents, provides=AgentCalendars, scope=Scope.REQUEST)

    @provide(scope=Scope.REQUEST)
    def appointment_booker(self, book_next_open_slot: scheduling.BookNextOpenSlot,
                           get_calendar: scheduling.GetCalendar) -> AppointmentBooker:
        """Overrides the core's NoAppointmentBooker: agents book during calls on this feature's calendars."""
        return AtomicSchedulingAppointmentBooker(book_next_open_slot, scheduling.BookNextOpenSlotCommand,
                                                 get_calendar)

    cases = provide_all(
        scheduling.CreateCalendar,
        scheduling.GetCalendar,
        scheduling.ListCalendars,
        scheduling.UpdateCalendar,
        scheduling.DeleteCalendar,
        scheduling.AddAvailabilityRule,
        scheduling.ListAvailabilityRules,
        scheduling.DeleteAvailabilityRule,
        scheduling.AddBlackout,
        scheduling.ListBlackouts,
        scheduling.DeleteBlackout,
        scheduling.GetAvailability,
        scheduling.NextOpenSlot,
        scheduling.BookAppointment,
        scheduling.BookNextOpenSlot,
        scheduling.GetAppointment,
        scheduling.ListAppointments,
        scheduling.RescheduleAppointment,
        scheduling.ApproveAppointment,
        scheduling.DeclineAppointment,
        scheduling.CancelAppointment,
        scheduling.RecordAppointmentOutcome,
        scheduling.IssueFeedToken,
        scheduling.RevokeFeedToken,
        scheduling.RenderCalendarFeed,
        scheduling.RenderFeedByToken,
        scope=Scope.REQUEST,
    )


FEATURE = Feature(
    name="scheduling",
    providers=(SchedulingProvider,),
    sql=SqlSchedulingProvider,
    memory=MemorySchedulingProvider,
)
