"""Business-hours schedules over HTTP: CRUD, status at an instant and a preview of the openings."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec
from dishka import FromDishka
from litestar.params import JSONBody, PathParameter, QueryParameter

from application import business_hours
from application.context import Actor
from application.ports.platform import PageRequest
from domain.business_hours import MAX_PREVIEW_DAYS, parse_exceptions, parse_holidays, parse_weekly
from domain.parsing import MAX_ID
from domain.rfc3339 import parse_day_or_instant, parse_instant, render_in_zone
from entrypoints.http.envelope import Envelope, ListEnvelope, ListMeta
from entrypoints.http.routing import Limit, Offset, endpoint
from entrypoints.http.schemas.schedules import (
    OpeningOut,
    PreviewOut,
    ScheduleCreate,
    ScheduleOut,
    ScheduleUpdate,
    StatusOut,
)
from entrypoints.http.validation import set_fields

TAGS = ["Schedules"]
READ = ("schedules:read",)
WRITE = ("schedules:write",)
DELETE = ("schedules:delete",)

ScheduleId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="Schedule id")]
ZoneQuery = Annotated[str | None, QueryParameter(max_length=64, description=(
    "IANA zone whose wall clock the hours are read in, and in which instants are written (default: the "
    "schedule's), e.g. a recipient's"))]
BoundQuery = Annotated[str | None, QueryParameter(max_length=64, description=(
    "RFC 3339 timestamp with an offset or Z, or a date YYYY-MM-DD (the start of that local date)"))]


@endpoint("POST", "/schedules", operation_id="createSchedule", summary="Create a business-hours schedule",
          tags=TAGS, scopes=WRITE, idempotent=True, location="/schedules/{id}")
async def create_schedule(data: JSONBody[ScheduleCreate], actor: FromDishka[Actor],
                          use_case: FromDishka[business_hours.CreateSchedule]) -> Envelope[ScheduleOut]:
    command = business_hours.CreateScheduleCommand(
        actor=actor, name=data.name, timezone=data.timezone,
        weekly=parse_weekly(msgspec.to_builtins(data.weekly)),
        exceptions=parse_exceptions(msgspec.to_builtins(data.exceptions or [])),
        holidays=parse_holidays(msgspec.to_builtins(data.holidays)),
    )
    return Envelope(ScheduleOut.of(await use_case.execute(command)))


@endpoint("GET", "/schedules", operation_id="listSchedules", summary="List schedules", tags=TAGS, scopes=READ)
async def list_schedules(actor: FromDishka[Actor], use_case: FromDishka[business_hours.ListSchedules],
                         limit: Limit = 25, offset: Offset = 0) -> ListEnvelope[ScheduleOut]:
    page = await use_case.execute(business_hours.ListSchedulesCommand(actor, PageRequest(limit, offset)))
    return ListEnvelope([ScheduleOut.of(s) for s in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("GET", "/schedules/{id:int}", operation_id="getSchedule", summary="Get a schedule", tags=TAGS,
          scopes=READ, errors={404: ""})
async def get_schedule(id: ScheduleId, actor: FromDishka[Actor],
                       use_case: FromDishka[business_hours.GetSchedule]) -> Envelope[ScheduleOut]:
    return Envelope(ScheduleOut.of(await use_case.execute(business_hours.GetScheduleCommand(actor, id))))


@endpoint("PATCH", "/schedules/{id:int}", operation_id="updateSchedule",
          summary="Update a schedule (JSON merge patch; lists are replaced whole)", tags=TAGS, scopes=WRITE,
          errors={404: ""})
async def update_schedule(id: ScheduleId, data: JSONBody[ScheduleUpdate], actor: FromDishka[Actor],
                          use_case: FromDishka[business_hours.UpdateSchedule]) -> Envelope[ScheduleOut]:
    patch = {name: msgspec.to_builtins(value) for name, value in set_fields(data).items()}
    return Envelope(ScheduleOut.of(await use_case.execute(business_hours.UpdateScheduleCommand(actor, id, patch))))


@endpoint("DELETE", "/schedules/{id:int}", operation_id="deleteSchedule", summary="Delete a schedule", tags=TAGS,
          scopes=DELETE, status_code=204,
          errors={404: "", 409: "in_use: a running or paused campaign uses the schedule"})
async def delete_schedule(id: ScheduleId, actor: FromDishka[Actor],
                          use_case: FromDishka[business_hours.DeleteSchedule]) -> None:
    await use_case.execute(business_hours.DeleteScheduleCommand(actor, id))


@endpoint("GET", "/schedules/{id:int}/status", operation_id="getScheduleStatus",
          summary="Whether the schedule is open at an instant (default now), why, and when that next changes",
          tags=TAGS, scopes=READ, errors={404: ""})
async def schedule_status(
    id: ScheduleId,
    actor: FromDishka[Actor],
    use_case: FromDishka[business_hours.GetScheduleStatus],
    at: Annotated[str | None, QueryParameter(max_length=64, format="date-time", description=(
        "RFC 3339 timestamp with an offset or Z (default: now)"))] = None,
    timezone: ZoneQuery = None,
) -> Envelope[StatusOut]:
    command = business_hours.GetScheduleStatusCommand(actor, id, parse_instant(at, "at") if at is not None else None,
                                              timezone)
    result = await use_case.execute(command)
    status, zone = result.status, result.timezone

    def shown(value: datetime | None) -> str | None:
        return render_in_zone(value, zone) if value is not None else None

    return Envelope(StatusOut(id, render_in_zone(result.at, zone), zone, status.open, status.reason,
                              shown(status.next_open_at), shown(status.next_close_at)))


@endpoint("GET", "/schedules/{id:int}/preview", operation_id="previewSchedule",
          summary=f"The schedule's openings between start and end (at most {MAX_PREVIEW_DAYS} days)", tags=TAGS,
          scopes=READ, errors={404: "", 400: f"end more than {MAX_PREVIEW_DAYS} days after start: "
                                             "details.reason range_too_long"})
async def schedule_preview(
    id: ScheduleId,
    actor: FromDishka[Actor],
    use_case: FromDishka[business_hours.PreviewSchedule],
    start: BoundQuery = None,
    end: BoundQuery = None,
    timezone: ZoneQuery = None,
) -> Envelope[PreviewOut]:
    command = business_hours.PreviewScheduleCommand(
        actor, id, parse_day_or_instant(start, "start") if start is not None else None,
        parse_day_or_instant(end, "end") if end is not None else None, timezone)
    result = await use_case.execute(command)
    zone = result.timezone
    return Envelope(PreviewOut(id, zone, render_in_zone(result.start, zone), render_in_zone(result.end, zone),
                               [OpeningOut(render_in_zone(a, zone), render_in_zone(b, zone))
                                for a, b in result.intervals]))


ROUTES = [create_schedule, list_schedules, get_schedule, update_schedule, delete_schedule, schedule_status,
          schedule_preview]
