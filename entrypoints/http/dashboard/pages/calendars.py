"""Calendars: the list, a form that creates one, and a calendar's page: its settings (name, time zone, slot length,
buffer, notice, horizon, the booking caps, the reminder's minutes and channel) edited through the API's rules (an
error shown beside its field), and its availability rules by weekday, added and removed, through the calendar use
cases of the API. An empty cap or reminder is none (null), as in the API."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dishka import FromDishka
from litestar import Request
from litestar.response import Response, Template

from application.context import Actor
from application.ports.platform import PageRequest
from application.scheduling import calendars as uc
from domain.errors import DomainError
from domain.scheduling.model import Calendar
from domain.scheduling.rules import format_hhmm, format_rule_end
from entrypoints.http.dashboard.pages import page
from entrypoints.http.dashboard.pages.params import PathId
from entrypoints.http.dashboard.view import View, convert, field_errors
from entrypoints.http.envelope import status_for
from entrypoints.http.schemas.scheduling import CalendarCreate, CalendarUpdate, RuleCreate

CALENDARS = 100
RULES = 100
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
NUMBERS = ("slot_duration_minutes", "buffer_minutes", "min_notice_minutes", "horizon_days")
"""Required: an empty one is an error (the API's range named)."""
NULLABLE = ("max_upcoming_per_attendee", "max_bookings_per_day", "reminder_minutes")
"""Empty: none (no cap, no reminder)."""
NEW_CALENDAR = {"slot_duration_minutes": "30", "buffer_minutes": "0", "min_notice_minutes": "0",
                "horizon_days": "60", "max_upcoming_per_attendee": "3", "reminder_channel": "email",
                "timezone": "UTC"}


def form_of(calendar: Calendar) -> dict[str, str]:
    values = {name: getattr(calendar, name) for name in ("name", "timezone", "reminder_channel", *NUMBERS, *NULLABLE)}
    return {name: "" if value is None else str(value) for name, value in values.items()}


def body_of(form: Mapping[str, str]) -> dict[str, Any]:
    """The form as the API's JSON body (numbers as text: the schema reads them)."""
    body: dict[str, Any] = {"name": form.get("name", ""), "timezone": form.get("timezone", "").strip(),
                            "reminder_channel": form.get("reminder_channel", "email")}
    for name in NUMBERS:
        body[name] = form.get(name, "").strip()
    for name in NULLABLE:
        body[name] = form.get(name, "").strip() or None
    return body


async def _listing(view: View, listing: uc.ListCalendars) -> dict[str, Any]:
    found = await view.run(listing, lambda actor: uc.ListCalendarsCommand(actor, PageRequest(CALENDARS)))
    return {"calendars": found.items, "total": found.total}


@page("GET", "/calendars", section="calendars", scopes=("scheduling:read",))
async def calendars(request: Request[Any, Any, Any], listing: FromDishka[uc.ListCalendars]) -> Template:
    view = View.of(request)
    return view.page("calendars.html", form=NEW_CALENDAR, **await _listing(view, listing))


@page("POST", "/calendars", operation="createCalendar", section="calendars", scopes=("scheduling:write",))
async def create_calendar(request: Request[Any, Any, Any], use_case: FromDishka[uc.CreateCalendar],
                          listing: FromDishka[uc.ListCalendars]) -> Response[Any] | Template:
    view = View.of(request)

    def command(actor: Actor, form: Mapping[str, str]) -> uc.CreateCalendarCommand:
        data = convert(body_of(form), CalendarCreate)
        return uc.CreateCalendarCommand(
            actor, name=data.name, timezone=data.timezone, slot_duration_minutes=data.slot_duration_minutes,
            buffer_minutes=data.buffer_minutes, min_notice_minutes=data.min_notice_minutes,
            horizon_days=data.horizon_days, max_upcoming_per_attendee=data.max_upcoming_per_attendee,
            max_bookings_per_day=data.max_bookings_per_day, reminder_minutes=data.reminder_minutes,
            reminder_channel=data.reminder_channel)

    return await view.submit(
        use_case, command, template="calendars.html", context=lambda: _listing(view, listing),
        done=lambda made: view.redirect(f"/calendars/{made.id}", "Calendar created: add the hours it can be "
                                                                 "booked"))


async def _calendar(view: View, getting: uc.GetCalendar, rules: uc.ListAvailabilityRules,
                    calendar_id: int) -> dict[str, Any]:
    calendar = await view.run(getting, lambda actor: uc.CalendarRef(actor, calendar_id))
    found = await view.run(rules, lambda actor: uc.ListAvailabilityRulesCommand(actor, calendar_id,
                                                                                PageRequest(RULES)))
    by_day: list[tuple[int, str, list[dict[str, Any]]]] = [(day, name, []) for day, name in enumerate(WEEKDAYS)]
    for rule in sorted(found.items, key=lambda r: (r.weekday, r.start_time)):
        by_day[rule.weekday][2].append({"id": rule.id, "start": format_hhmm(rule.start_time),
                                        "end": format_rule_end(rule)})
    return {"calendar": calendar, "week": by_day, "rules": found.total, "weekdays": list(enumerate(WEEKDAYS))}


@page("GET", "/calendars/{calendar_id:int}", section="calendars", scopes=("scheduling:read",))
async def calendar_page(request: Request[Any, Any, Any], calendar_id: PathId, getting: FromDishka[uc.GetCalendar],
                        rules: FromDishka[uc.ListAvailabilityRules]) -> Template:
    view = View.of(request)
    values = await _calendar(view, getting, rules, calendar_id)
    return view.page("calendar.html", form=form_of(values["calendar"]), **values)


@page("POST", "/calendars/{calendar_id:int}",
      operation="updateCalendar", section="calendars", scopes=("scheduling:write",))
async def update_calendar(request: Request[Any, Any, Any], calendar_id: PathId,
                          use_case: FromDishka[uc.UpdateCalendar], getting: FromDishka[uc.GetCalendar],
                          rules: FromDishka[uc.ListAvailabilityRules]) -> Response[Any] | Template:
    view = View.of(request)
    values = await _calendar(view, getting, rules, calendar_id)

    def command(actor: Actor, form: Mapping[str, str]) -> uc.UpdateCalendarCommand:
        data = convert(body_of(form), CalendarUpdate)
        changes = {name: getattr(data, name) for name in ("name", "timezone", "reminder_channel", *NUMBERS, *NULLABLE)}
        return uc.UpdateCalendarCommand(actor, calendar_id, changes)

    async def again() -> dict[str, Any]:
        return values

    return await view.submit(use_case, command, template="calendar.html", context=again,
                             done=lambda saved: view.redirect(f"/calendars/{calendar_id}", "Calendar saved"))


@page("POST", "/calendars/{calendar_id:int}/rules",
      operation="createAvailabilityRule", section="calendars", scopes=("scheduling:write",))
async def add_rule(request: Request[Any, Any, Any], calendar_id: PathId,
                   use_case: FromDishka[uc.AddAvailabilityRule], getting: FromDishka[uc.GetCalendar],
                   rules: FromDishka[uc.ListAvailabilityRules]) -> Response[Any] | Template:
    view = View.of(request)
    values = await _calendar(view, getting, rules, calendar_id)

    form = await view.form()
    try:
        data = convert({"weekday": form.get("weekday", ""), "start_time": form.get("start_time", "").strip(),
                        "end_time": form.get("end_time", "").strip()}, RuleCreate)
        rule = await view.run(use_case, lambda actor: uc.AddAvailabilityRuleCommand(
            actor, calendar_id, data.weekday, data.start_time, data.end_time))
    except DomainError as exc:
        status = status_for(exc)
        if status >= 500 or status == 404:
            raise
        # the settings form keeps the calendar's values; the errors are the rule form's
        return view.page("calendar.html", status=status, form=form_of(values["calendar"]), rule_form=form,
                         rule_errors=field_errors(exc) or {"rule": exc.message}, **values)
    return view.redirect(f"/calendars/{calendar_id}", f"{WEEKDAYS[rule.weekday]} {format_hhmm(rule.start_time)} "
                                                      f"to {format_rule_end(rule)} added")


@page("POST", "/calendars/{calendar_id:int}/rules/{rule_id:int}/delete",
      operation="deleteAvailabilityRule", section="calendars", scopes=("scheduling:delete",))
async def delete_rule(request: Request[Any, Any, Any], calendar_id: PathId, rule_id: PathId,
                      use_case: FromDishka[uc.DeleteAvailabilityRule]) -> Response[Any]:
    view = View.of(request)
    await view.run(use_case, lambda actor: uc.DeleteAvailabilityRuleCommand(actor, calendar_id, rule_id))
    return view.redirect(f"/calendars/{calendar_id}", "Availability removed")


HANDLERS = [calendars, create_calendar, calendar_page, update_calendar, add_rule, delete_rule]
