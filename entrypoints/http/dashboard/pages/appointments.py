"""Appointments by day: the appointments of one day (``?date=YYYY-MM-DD``, today by default) across the
organization's calendars, each at its time in its calendar's zone, through the same scheduling use cases as the
API. A day is the calendar's own day: an appointment is listed when its start, read in its calendar's zone,
falls on that date."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from dishka import FromDishka
from litestar import Request
from litestar.response import ServerSentEvent, Template

from application.ports.platform import Clock, PageRequest, Unit, Units
from application.ports.scheduling import AppointmentFilter
from application.scheduling import booking
from application.scheduling import calendars as calendars_uc
from domain.identity import persisted
from entrypoints.http.dashboard.live import stream
from entrypoints.http.dashboard.pages import page
from entrypoints.http.dashboard.view import View

CALENDARS = 500
"""Calendars read to name them and know their zones (an organization has far fewer)."""
PER_DAY = 500
"""Appointments shown for one day at most."""
ZONE_REACH = timedelta(hours=14)
"""The farthest any zone is from UTC: the UTC window that holds a local day in every zone."""


def _day(value: str | None, today: date) -> tuple[date, str]:
    """The day asked for, or today with a message when ``value`` is not a date."""
    if not value:
        return today, ""
    try:
        day = date.fromisoformat(value.strip())
    except ValueError:
        day = None
    if day is None or not 1970 <= day.year <= 9000:
        return today, f"“{value[:20]}” is not a date (YYYY-MM-DD): showing today."
    return day, ""


@page("GET", "/appointments", section="appointments", scopes=("scheduling:read",))
async def appointments(request: Request[Any, Any, Any], clock: FromDishka[Clock],
                       listing: FromDishka[booking.ListAppointments],
                       calendars: FromDishka[calendars_uc.ListCalendars]) -> Template:
    view = View.of(request)
    return view.page("appointments.html", **await _day_values(view, clock, listing, calendars))


@page("GET", "/live/appointments", section="appointments", stream=True, scopes=("scheduling:read",))
async def appointments_live(request: Request[Any, Any, Any], clock: FromDishka[Clock],
                            units: FromDishka[Units]) -> ServerSentEvent:
    """The day's appointments, live (``live.py``): a booking, a reschedule or a cancellation shows at once."""
    view = View.of(request)

    async def values(unit: Unit) -> dict[str, Any]:
        return await _day_values(view, clock, await unit.get(booking.ListAppointments),
                                 await unit.get(calendars_uc.ListCalendars))

    return await stream(view, units, "appointments.html", values)


async def _day_values(view: View, clock: Clock, listing: booking.ListAppointments,
                      calendars: calendars_uc.ListCalendars) -> dict[str, Any]:
    request = view.request
    today = clock.now().astimezone(UTC).date()
    day, problem = _day(request.query_params.get("date"), today)
    start = datetime.combine(day, time(0), UTC) - ZONE_REACH
    end = datetime.combine(day + timedelta(days=1), time(0), UTC) + ZONE_REACH
    found = await view.run(calendars, lambda actor: calendars_uc.ListCalendarsCommand(actor, PageRequest(CALENDARS)))
    by_id = {c.id: c for c in found.items}
    listed = await view.run(listing, lambda actor: booking.ListAppointmentsCommand(
        actor, AppointmentFilter(start=start, end=end), PageRequest(PER_DAY)))
    rows: list[dict[str, Any]] = []
    for appointment in listed.items:
        calendar = by_id.get(appointment.calendar_id)
        zone = ZoneInfo(calendar.timezone) if calendar is not None else UTC
        local_start, local_end = appointment.slot_start.astimezone(zone), appointment.slot_end.astimezone(zone)
        if local_start.date() != day:
            continue
        rows.append({"appointment": appointment, "calendar": calendar, "start": local_start, "end": local_end,
                     "zone": str(zone)})
    rows.sort(key=lambda row: (row["start"].astimezone(UTC), persisted(row["appointment"].id)))
    return {"day": day, "today": today, "rows": rows, "error": problem, "previous": day - timedelta(days=1),
            "next": day + timedelta(days=1), "calendars": len(found.items)}


HANDLERS = [appointments, appointments_live]
