"""Business-hours schedules: the list, a schedule's page (open or closed now and why, its weekly hours, exceptions
and holiday region), creating and editing one and deleting it (it asks first: ``GET .../delete`` says what happens,
its form sends ``confirm``; a schedule a running or paused campaign uses is refused, 409 ``in_use``), through the
schedule use cases of the API and its body rules.

The form writes what the API's JSON holds as text people type: the hours of each weekday (``09:00-12:00,
13:00-17:00``; empty: closed; an end before the start runs past midnight), one exception a line (``2026-12-24
closed`` or ``2026-12-31 09:00-12:00``), and the holiday region (a country and an optional subdivision). An error
is shown beside the weekday, the exceptions (with the line) or the field it belongs to."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import msgspec
from dishka import FromDishka
from litestar import Request
from litestar.response import Response, Template

from application import business_hours as uc
from application.context import Actor
from application.ports.platform import PageRequest
from domain.business_hours import Schedule, parse_exceptions, parse_holidays, parse_weekly, schedule_document
from domain.errors import DomainError, ValidationFailed
from entrypoints.http.dashboard.pages import page
from entrypoints.http.dashboard.pages.params import PathId
from entrypoints.http.dashboard.view import View, convert, field_errors
from entrypoints.http.envelope import status_for
from entrypoints.http.schemas.schedules import ScheduleCreate, ScheduleUpdate

SCHEDULES = 100
CONFIRM_FIELD = "confirm"
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
HOURS_RULE = 'write hours as 09:00-17:00, several separated by commas (an end of 24:00 is the end of the day)'
_INTERVAL = re.compile(r"^\s*(\d{1,2}:\d{2})\s*[-\u2013]\s*(\d{1,2}:\d{2})\s*$")
_START = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")
_END = re.compile(r"^(([01]\d|2[0-3]):[0-5]\d|24:00)$")
_INDEXED = re.compile(r"^(weekly|exceptions)\[(\d+)\](.*)$")


def _padded(value: str) -> str:
    return value if len(value) == 5 else "0" + value


def _intervals(text: str, field: str) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for part in (p for p in text.split(",") if p.strip()):
        found = _INTERVAL.match(part)
        start, end = (_padded(found.group(1)), _padded(found.group(2))) if found else ("", "")
        if not found or not _START.match(start) or not _END.match(end):
            raise ValidationFailed.field(field, f"“{part.strip()[:40]}”: {HOURS_RULE}")
        out.append({"start": start, "end": end})
    return out


class _Parsed:
    """The form as the API's body, and where each list item came from (to put an error beside it)."""

    def __init__(self, form: Mapping[str, str]) -> None:
        self.weekly: list[dict[str, Any]] = []
        self.weekly_days: list[int] = []
        for day in range(7):
            for interval in _intervals(form.get(f"weekly.{day}", ""), f"weekly.{day}"):
                self.weekly.append({"day": day, **interval})
                self.weekly_days.append(day)
        self.exceptions: list[dict[str, Any]] = []
        self.exception_lines: list[int] = []
        for number, line in enumerate(form.get("exceptions", "").splitlines(), start=1):
            if not line.strip():
                continue
            when, _, rest = line.strip().partition(" ")
            if rest.strip().lower() == "closed":
                self.exceptions.append({"date": when, "closed": True})
            else:
                try:
                    intervals = _intervals(rest, "exceptions")
                except ValidationFailed:
                    raise ValidationFailed.field("exceptions", f"line {number}: write “YYYY-MM-DD closed” or "
                                                               f"“YYYY-MM-DD 09:00-12:00, 13:00-15:00”") from None
                if not intervals:
                    raise ValidationFailed.field("exceptions", f"line {number}: say closed or give hours")
                self.exceptions.append({"date": when, "intervals": intervals})
            self.exception_lines.append(number)
        country = form.get("holidays.country", "").strip().upper()
        subdivision = form.get("holidays.subdivision", "").strip().upper()
        self.holidays: dict[str, Any] | None = None
        if country:
            self.holidays = {"country": country, **({"subdivision": subdivision} if subdivision else {})}
        elif subdivision:
            raise ValidationFailed.field("holidays.country", "is needed for a subdivision")
        self.body = {"name": form.get("name", ""), "timezone": form.get("timezone", "").strip(),
                     "weekly": self.weekly, "exceptions": self.exceptions, "holidays": self.holidays}

    def beside(self, errors: dict[str, str]) -> dict[str, str]:
        """``weekly[3].end`` beside its weekday's field, ``exceptions[1].date`` beside the exceptions, its line
        named."""
        out: dict[str, str] = {}
        for name, message in errors.items():
            found = _INDEXED.match(name)
            if found and found.group(1) == "weekly" and int(found.group(2)) < len(self.weekly_days):
                day = self.weekly_days[int(found.group(2))]
                out.setdefault(f"weekly.{day}", f"{found.group(3).lstrip('.') or 'hours'} {message}")
            elif found and found.group(1) == "exceptions" and int(found.group(2)) < len(self.exception_lines):
                line = self.exception_lines[int(found.group(2))]
                out.setdefault("exceptions", f"line {line}: {found.group(3).lstrip('.') or 'date'} {message}")
            else:
                out.setdefault(name, message)
        return out


def form_of(schedule: Schedule) -> dict[str, str]:
    document = schedule_document(schedule)
    form = {"name": document["name"], "timezone": document["timezone"]}
    for day in range(7):
        form[f"weekly.{day}"] = ", ".join(f"{w['start']}-{w['end']}" for w in document["weekly"] if w["day"] == day)
    form["exceptions"] = "\n".join(
        f"{e['date']} closed" if e.get("closed") else
        f"{e['date']} " + ", ".join(f"{i['start']}-{i['end']}" for i in e["intervals"])
        for e in document["exceptions"])
    holidays = document["holidays"] or {}
    form["holidays.country"] = holidays.get("country") or ""
    form["holidays.subdivision"] = holidays.get("subdivision") or ""
    return form


async def _submit(view: View, run: Any, *, template: str, done: Any, values: dict[str, Any]) -> Any:
    """Parse the form, run the use case (``run(actor, parsed)``), show the page again with the errors beside their
    fields on a 4xx."""
    form = await view.form()
    parsed: _Parsed | None = None
    try:
        parsed = _Parsed(form)
        result = await run(view.require_actor(), parsed)
    except DomainError as exc:
        status = status_for(exc)
        if status >= 500 or status == 404:
            raise
        errors = field_errors(exc)
        return view.page(template, status=status, form=form, error=exc.message,
                         errors=parsed.beside(errors) if parsed is not None else errors, **values)
    return done(result)


async def _listing(view: View, listing: uc.ListSchedules) -> dict[str, Any]:
    found = await view.run(listing, lambda actor: uc.ListSchedulesCommand(actor, PageRequest(SCHEDULES)))
    rows = [{"schedule": s, "days": _days(s)} for s in found.items]
    return {"rows": rows, "total": found.total, "weekdays": list(enumerate(WEEKDAYS))}


def _days(schedule: Schedule) -> list[tuple[str, str]]:
    """(weekday, its hours or "closed") of a schedule."""
    form = form_of(schedule)
    return [(name, form[f"weekly.{day}"] or "closed") for day, name in enumerate(WEEKDAYS)]


NEW_SCHEDULE = {"timezone": "UTC", **{f"weekly.{day}": "09:00-17:00" for day in range(5)}}


@page("GET", "/schedules", section="schedules", scopes=("schedules:read",))
async def schedules(request: Request[Any, Any, Any], listing: FromDishka[uc.ListSchedules]) -> Template:
    view = View.of(request)
    return view.page("schedules.html", form=NEW_SCHEDULE, **await _listing(view, listing))


@page("POST", "/schedules", operation="createSchedule", section="schedules", scopes=("schedules:write",))
async def create_schedule(request: Request[Any, Any, Any], use_case: FromDishka[uc.CreateSchedule],
                          listing: FromDishka[uc.ListSchedules]) -> Response[Any] | Template:
    view = View.of(request)

    async def run(actor: Actor, parsed: _Parsed) -> Schedule:
        data = convert(parsed.body, ScheduleCreate)
        return await use_case.execute(uc.CreateScheduleCommand(
            actor=actor, name=data.name, timezone=data.timezone,
            weekly=parse_weekly(msgspec.to_builtins(data.weekly)),
            exceptions=parse_exceptions(msgspec.to_builtins(data.exceptions or [])),
            holidays=parse_holidays(msgspec.to_builtins(data.holidays))))

    return await _submit(view, run, template="schedules.html", values=await _listing(view, listing),
                         done=lambda made: view.redirect(f"/schedules/{made.id}", "Schedule created"))


async def _schedule(view: View, getting: uc.GetSchedule, schedule_id: int) -> Schedule:
    return await view.run(getting, lambda actor: uc.GetScheduleCommand(actor, schedule_id))


@page("GET", "/schedules/{schedule_id:int}", section="schedules", scopes=("schedules:read",))
async def schedule_page(request: Request[Any, Any, Any], schedule_id: PathId,
                        status: FromDishka[uc.GetScheduleStatus]) -> Template:
    view = View.of(request)
    now = await view.run(status, lambda actor: uc.GetScheduleStatusCommand(actor, schedule_id))
    schedule = now.schedule
    return view.page("schedule.html", schedule=schedule, now=now, days=_days(schedule),
                     exceptions=form_of(schedule)["exceptions"].splitlines())


@page("GET", "/schedules/{schedule_id:int}/edit", section="schedules", scopes=("schedules:write",))
async def edit_schedule_page(request: Request[Any, Any, Any], schedule_id: PathId,
                             getting: FromDishka[uc.GetSchedule]) -> Template:
    view = View.of(request)
    schedule = await _schedule(view, getting, schedule_id)
    return view.page("schedule_edit.html", schedule=schedule, form=form_of(schedule),
                     weekdays=list(enumerate(WEEKDAYS)))


@page("POST", "/schedules/{schedule_id:int}/edit",
      operation="updateSchedule", section="schedules", scopes=("schedules:write",))
async def edit_schedule(request: Request[Any, Any, Any], schedule_id: PathId, use_case: FromDishka[uc.UpdateSchedule],
                        getting: FromDishka[uc.GetSchedule]) -> Response[Any] | Template:
    view = View.of(request)
    schedule = await _schedule(view, getting, schedule_id)

    async def run(actor: Actor, parsed: _Parsed) -> Schedule:
        data = convert(parsed.body, ScheduleUpdate)
        patch = {name: msgspec.to_builtins(getattr(data, name))
                 for name in ("name", "timezone", "weekly", "exceptions", "holidays")}
        return await use_case.execute(uc.UpdateScheduleCommand(actor, schedule_id, patch))

    return await _submit(view, run, template="schedule_edit.html",
                         values={"schedule": schedule, "weekdays": list(enumerate(WEEKDAYS))},
                         done=lambda saved: view.redirect(f"/schedules/{schedule_id}", "Schedule saved"))


@page("GET", "/schedules/{schedule_id:int}/delete", section="schedules", scopes=("schedules:delete",))
async def confirm_delete(request: Request[Any, Any, Any], schedule_id: PathId,
                         getting: FromDishka[uc.GetSchedule]) -> Template:
    view = View.of(request)
    return view.page("schedule_delete.html", schedule=await _schedule(view, getting, schedule_id))


@page("POST", "/schedules/{schedule_id:int}/delete",
      operation="deleteSchedule", section="schedules", scopes=("schedules:delete",))
async def delete_schedule(request: Request[Any, Any, Any], schedule_id: PathId,
                          use_case: FromDishka[uc.DeleteSchedule],
                          getting: FromDishka[uc.GetSchedule]) -> Response[Any] | Template:
    view = View.of(request)
    schedule = await _schedule(view, getting, schedule_id)
    if (await view.form()).get(CONFIRM_FIELD) != "delete":
        return view.page("schedule_delete.html", schedule=schedule)
    try:
        await view.run(use_case, lambda actor: uc.DeleteScheduleCommand(actor, schedule_id))
    except DomainError as exc:
        status = status_for(exc)
        if status >= 500 or status == 404:
            raise
        return view.page("schedule_delete.html", status=status, schedule=schedule, error=exc.message)
    return view.redirect("/schedules", f"Schedule {schedule.name} deleted")


HANDLERS = [schedules, create_schedule, schedule_page, edit_schedule_page, edit_schedule, confirm_delete,
            delete_schedule]
