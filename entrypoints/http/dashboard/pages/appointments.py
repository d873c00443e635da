"""Appointments by day: the appointments of one day (``?date=YYYY-MM-DD``, today by default) across the
organization's calendars, each at its time in its calendar's zone, through the same scheduling use cases as the
API. A day is the calendar's own day: an appointment is listed when its start, read in its calendar's zone,
falls on that date.

An appointment still pending or confirmed can be cancelled (it asks first: ``GET .../cancel`` says what happens,
its form sends ``confirm``) and rescheduled (``GET .../reschedule`` lists the open slots of a day of its calendar,
``GetAvailability``; the form sends the chosen ``slot_start``), through ``CancelAppointment`` and
``RescheduleAppointment``, the use cases of ``DELETE`` and ``PATCH /scheduling/appointments/{id}``: the same
conflict rules, a slot taken meanwhile a 409 page that says so."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from dishka import FromDishka
from litestar import Request
from litestar.response import Response, ServerSentEvent, Template

from application.ports.platform import Clock, PageRequest, Unit, Units
from application.ports.scheduling import AppointmentFilter
from application.scheduling import availability, booking
from application.scheduling import calendars as calendars_uc
from domain.errors import DomainError, SlotUnavailable
from domain.identity import persisted
from domain.scheduling.model import Appointment, Calendar, parse_slot_start
from domain.scheduling.slots import render_slots
from entrypoints.http.dashboard.live import stream
from entrypoints.http.dashboard.pages import page
from entrypoints.http.dashboard.pages.params import PathId
from entrypoints.http.dashboard.view import View, field_errors
from entrypoints.http.envelope import status_for

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


CONFIRM_FIELD = "confirm"
OPEN = ("pending", "confirmed")
"""The statuses an appointment can still be cancelled or rescheduled in."""
SLOT_TAKEN = ("That time is no longer open (slot_unavailable): it was booked, held or blacked out meanwhile, or "
              "is outside the calendar's hours or notice. Nothing changed: choose another slot.")


async def _appointment(view: View, getting: booking.GetAppointment, calendar: calendars_uc.GetCalendar,
                       appointment_id: int) -> dict[str, Any]:
    found: Appointment = await view.run(getting, lambda actor: booking.AppointmentRef(actor, appointment_id))
    owner: Calendar = await view.run(calendar, lambda actor: calendars_uc.CalendarRef(actor, found.calendar_id))
    zone = ZoneInfo(owner.timezone)
    start = found.slot_start.astimezone(zone)
    return {"appointment": found, "calendar": owner, "start": start, "end": found.slot_end.astimezone(zone),
            "zone": owner.timezone, "open": found.status in OPEN}


@page("GET", "/appointments/{appointment_id:int}/cancel", section="appointments",
      scopes=("scheduling:write", "scheduling:delete"))
async def confirm_cancel(request: Request[Any, Any, Any], appointment_id: PathId,
                         getting: FromDishka[booking.GetAppointment],
                         calendar: FromDishka[calendars_uc.GetCalendar]) -> Template:
    view = View.of(request)
    return view.page("appointment_cancel.html", **await _appointment(view, getting, calendar, appointment_id))


@page("POST", "/appointments/{appointment_id:int}/cancel", operation="cancelAppointment", section="appointments",
      scopes=("scheduling:write", "scheduling:delete"))
async def cancel(request: Request[Any, Any, Any], appointment_id: PathId,
                 use_case: FromDishka[booking.CancelAppointment], getting: FromDishka[booking.GetAppointment],
                 calendar: FromDishka[calendars_uc.GetCalendar]) -> Response[Any] | Template:
    view = View.of(request)
    values = await _appointment(view, getting, calendar, appointment_id)
    if (await view.form()).get(CONFIRM_FIELD) != "cancel":
        return view.page("appointment_cancel.html", **values)
    try:
        await view.run(use_case, lambda actor: booking.AppointmentRef(actor, appointment_id))
    except DomainError as exc:
        status = status_for(exc)
        if status >= 500 or status == 404:
            raise
        return view.page("appointment_cancel.html", status=status, error=exc.message, **values)
    return view.redirect(f"/appointments?date={values['start'].date().isoformat()}", "Appointment cancelled")


async def _slots(view: View, finder: availability.GetAvailability, values: dict[str, Any],
                 day: date) -> list[tuple[str, str]]:
    """The open slots of ``day`` (the calendar's local date) as (slot_start, the time people read)."""
    calendar = values["calendar"]
    found = await view.run(finder, lambda actor: availability.GetAvailabilityCommand(
        actor, persisted(calendar.id), day, day + timedelta(days=1)))
    return [(start, datetime.fromisoformat(start).strftime("%H:%M")) for start, _ in
            render_slots(found.slots, found.timezone)]


async def _reschedule_values(view: View, getting: booking.GetAppointment, calendar: calendars_uc.GetCalendar,
                             finder: availability.GetAvailability, appointment_id: int,
                             wanted: str | None) -> dict[str, Any]:
    values = await _appointment(view, getting, calendar, appointment_id)
    day, problem = _day(wanted, values["start"].date())
    slots = await _slots(view, finder, values, day) if values["open"] else []
    return {**values, "day": day, "slots": slots, "previous": day - timedelta(days=1),
            "next": day + timedelta(days=1), "day_error": problem}


@page("GET", "/appointments/{appointment_id:int}/reschedule", section="appointments",
      scopes=("scheduling:write",))
async def reschedule_page(request: Request[Any, Any, Any], appointment_id: PathId,
                          getting: FromDishka[booking.GetAppointment],
                          calendar: FromDishka[calendars_uc.GetCalendar],
                          finder: FromDishka[availability.GetAvailability]) -> Template:
    view = View.of(request)
    return view.page("appointment_reschedule.html", **await _reschedule_values(
        view, getting, calendar, finder, appointment_id, request.query_params.get("date")))


@page("POST", "/appointments/{appointment_id:int}/reschedule", operation="rescheduleAppointment",
      section="appointments", scopes=("scheduling:write",))
async def reschedule(request: Request[Any, Any, Any], appointment_id: PathId,
                     use_case: FromDishka[booking.RescheduleAppointment], getting: FromDishka[booking.GetAppointment],
                     calendar: FromDishka[calendars_uc.GetCalendar],
                     finder: FromDishka[availability.GetAvailability]) -> Response[Any] | Template:
    view = View.of(request)
    form = await view.form()
    try:
        result = await view.run(use_case, lambda actor: booking.RescheduleAppointmentCommand(
            actor, appointment_id, parse_slot_start(form.get("slot_start", "").strip())))
    except DomainError as exc:
        status = status_for(exc)
        if status >= 500 or status == 404:
            raise
        values = await _reschedule_values(view, getting, calendar, finder, appointment_id, form.get("date"))
        taken = isinstance(exc, SlotUnavailable)
        return view.page("appointment_reschedule.html", status=status, form=form, errors=field_errors(exc),
                         error=SLOT_TAKEN if taken else exc.message, taken=taken, **values)
    new = result.appointment
    zone = ZoneInfo((await view.run(calendar, lambda actor: calendars_uc.CalendarRef(actor, new.calendar_id))).timezone)
    local = new.slot_start.astimezone(zone)
    return view.redirect(f"/appointments?date={local.date().isoformat()}",
                         f"Appointment moved to {local.strftime('%Y-%m-%d %H:%M')} ({zone.key})")


HANDLERS = [appointments, appointments_live, confirm_cancel, cancel, reschedule_page, reschedule]
