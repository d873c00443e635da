"""In-house scheduling over HTTP: calendars, rules, blackouts, availability, appointments, ICS feeds."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated, Literal

from dishka import FromDishka
from litestar import Response
from litestar.params import JSONBody, PathParameter, QueryParameter

from application.context import Actor, ApiBaseUrl
from application.phones import e164
from application.ports.phones import PhoneNormalizer
from application.ports.platform import PageRequest
from application.ports.scheduling import AppointmentFilter
from application.scheduling import availability, booking, calendars, feeds
from domain.errors import NotFound, SlotUnavailable
from domain.identity import persisted
from domain.parsing import MAX_ID
from domain.rfc3339 import parse_day_or_instant, parse_instant, render_in_zone
from domain.scheduling.model import parse_slot_start
from domain.scheduling.slots import render_slots
from entrypoints.http.envelope import Envelope, ListEnvelope, ListMeta
from entrypoints.http.routing import MAX_OFFSET, endpoint
from entrypoints.http.schemas.scheduling import (
    AppointmentCreate,
    AppointmentOut,
    AvailabilityOut,
    BlackoutCreate,
    BlackoutOut,
    CalendarCreate,
    CalendarOut,
    CalendarUpdate,
    FeedTokenOut,
    OutcomeIn,
    RescheduleIn,
    RescheduleOut,
    RuleCreate,
    RuleOut,
    SlotOut,
)
from entrypoints.http.validation import set_fields

TAGS = ["Scheduling"]
READ = ("scheduling:read",)
WRITE = ("scheduling:write",)
DELETE = ("scheduling:delete",)
ICS_MEDIA_TYPE = "text/calendar"
FEED_SUFFIX = ".ics"

Limit = Annotated[int, QueryParameter(ge=1, le=100, description="Page size (1-100)")]
Offset = Annotated[int, QueryParameter(ge=0, le=MAX_OFFSET, description="Items to skip")]
CalendarId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="Calendar id")]
AppointmentId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="Appointment id")]
RuleId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="Availability rule id")]
BlackoutId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="Blackout id")]
InstantQuery = Annotated[str | None, QueryParameter(max_length=64, format="date-time",
                                                    description="RFC 3339 timestamp with an offset or Z")]
BoundQuery = Annotated[str | None, QueryParameter(
    max_length=64, description="RFC 3339 timestamp with an offset or Z, or a date YYYY-MM-DD (the start of that "
                               "local date in the display time zone)")]

SLOT_TAKEN = "slot_unavailable: the slot is not open (taken, held, outside the rules, blacked out, too soon or too far)"
BOOKING_CAPPED = ("booking_limit_reached: the attendee has max_upcoming_per_attendee upcoming appointments, or the "
                  "slot's local date has max_bookings_per_day bookings")
ILLEGAL_MOVE = "invalid_transition: the appointment's status does not allow this"


@contextmanager
def _slot_as_sent(slot_start: object) -> Iterator[None]:
    """A refused slot is named in the 409's details as the client wrote it, not as converted."""
    try:
        yield
    except SlotUnavailable as exc:
        exc.details = {**(exc.details or {}), "slot_start": slot_start}
        raise


def _instant(value: str | None, field: str) -> datetime | None:
    return parse_instant(value, field) if value is not None else None


def _feed_response(body: bytes) -> Response[bytes]:
    return Response(body, media_type=ICS_MEDIA_TYPE, headers={"Cache-Control": "private, max-age=0"})


# --------------------------------------------------------------------------- calendars


@endpoint("POST", "/scheduling/calendars", operation_id="createCalendar", summary="Create a calendar", tags=TAGS,
          location="/scheduling/calendars/{id}",
          scopes=WRITE, idempotent=True, errors={404: "not_found: agent_id is not an agent of this organization"})
async def create_calendar(data: JSONBody[CalendarCreate], actor: FromDishka[Actor],
                          use_case: FromDishka[calendars.CreateCalendar]) -> Envelope[CalendarOut]:
    command = calendars.CreateCalendarCommand(
        actor, name=data.name, timezone=data.timezone, slot_duration_minutes=data.slot_duration_minutes,
        buffer_minutes=data.buffer_minutes, min_notice_minutes=data.min_notice_minutes,
        horizon_days=data.horizon_days, agent_id=data.agent_id,
        max_upcoming_per_attendee=data.max_upcoming_per_attendee, max_bookings_per_day=data.max_bookings_per_day,
        reminder_minutes=data.reminder_minutes, reminder_channel=data.reminder_channel,
    )
    return Envelope(CalendarOut.of(await use_case.execute(command)))


@endpoint("GET", "/scheduling/calendars", operation_id="listCalendars", summary="List calendars", tags=TAGS,
          scopes=READ)
async def list_calendars(
    actor: FromDishka[Actor],
    use_case: FromDishka[calendars.ListCalendars],
    limit: Limit = 25,
    offset: Offset = 0,
    agent_id: Annotated[int | None, QueryParameter(ge=1, le=MAX_ID, description="Only this agent's")] = None,
) -> ListEnvelope[CalendarOut]:
    page = await use_case.execute(calendars.ListCalendarsCommand(actor, PageRequest(limit, offset), agent_id))
    return ListEnvelope([CalendarOut.of(c) for c in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("GET", "/scheduling/calendars/{id:int}", operation_id="getCalendar", summary="Get a calendar", tags=TAGS,
          scopes=READ, errors={404: ""})
async def get_calendar(id: CalendarId, actor: FromDishka[Actor],
                       use_case: FromDishka[calendars.GetCalendar]) -> Envelope[CalendarOut]:
    return Envelope(CalendarOut.of(await use_case.execute(calendars.CalendarRef(actor, id))))


@endpoint("PATCH", "/scheduling/calendars/{id:int}", operation_id="updateCalendar", summary="Update a calendar",
          tags=TAGS, scopes=WRITE, errors={404: ""})
async def update_calendar(id: CalendarId, data: JSONBody[CalendarUpdate], actor: FromDishka[Actor],
                          use_case: FromDishka[calendars.UpdateCalendar]) -> Envelope[CalendarOut]:
    calendar = await use_case.execute(calendars.UpdateCalendarCommand(actor, id, set_fields(data)))
    return Envelope(CalendarOut.of(calendar))


@endpoint("DELETE", "/scheduling/calendars/{id:int}", operation_id="deleteCalendar", summary="Delete a calendar",
          tags=TAGS, scopes=DELETE, status_code=204,
          errors={404: "", 409: "conflict: the calendar still has upcoming pending or confirmed appointments"})
async def delete_calendar(id: CalendarId, actor: FromDishka[Actor],
                          use_case: FromDishka[calendars.DeleteCalendar]) -> None:
    await use_case.execute(calendars.CalendarRef(actor, id))


# --------------------------------------------------------------------------- rules


@endpoint("POST", "/scheduling/calendars/{id:int}/rules", operation_id="createAvailabilityRule",
          location="/scheduling/calendars/{path.id}/rules/{id}",
          summary="Add an availability rule (weekday and local start/end)", tags=TAGS, scopes=WRITE,
          idempotent=True, errors={404: ""})
async def create_rule(id: CalendarId, data: JSONBody[RuleCreate], actor: FromDishka[Actor],
                      use_case: FromDishka[calendars.AddAvailabilityRule]) -> Envelope[RuleOut]:
    rule = await use_case.execute(calendars.AddAvailabilityRuleCommand(actor, id, data.weekday, data.start_time,
                                                                data.end_time))
    return Envelope(RuleOut.of(rule))


@endpoint("GET", "/scheduling/calendars/{id:int}/rules", operation_id="listAvailabilityRules",
          summary="List a calendar's availability rules", tags=TAGS, scopes=READ, errors={404: ""})
async def list_rules(id: CalendarId, actor: FromDishka[Actor], use_case: FromDishka[calendars.ListAvailabilityRules],
                     limit: Limit = 25, offset: Offset = 0) -> ListEnvelope[RuleOut]:
    page = await use_case.execute(calendars.ListAvailabilityRulesCommand(actor, id, PageRequest(limit, offset)))
    return ListEnvelope([RuleOut.of(r) for r in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("DELETE", "/scheduling/calendars/{id:int}/rules/{rule_id:int}", operation_id="deleteAvailabilityRule",
          summary="Delete an availability rule", tags=TAGS, scopes=DELETE, status_code=204, errors={404: ""})
async def delete_rule(id: CalendarId, rule_id: RuleId, actor: FromDishka[Actor],
                      use_case: FromDishka[calendars.DeleteAvailabilityRule]) -> None:
    await use_case.execute(calendars.DeleteAvailabilityRuleCommand(actor, id, rule_id))


# --------------------------------------------------------------------------- blackouts


@endpoint("POST", "/scheduling/calendars/{id:int}/blackouts", operation_id="createBlackout",
          location="/scheduling/calendars/{path.id}/blackouts/{id}",
          summary="Add a blackout (an RFC 3339 range in which nothing can be booked)", tags=TAGS, scopes=WRITE,
          idempotent=True, errors={404: ""})
async def create_blackout(id: CalendarId, data: JSONBody[BlackoutCreate], actor: FromDishka[Actor],
                          use_case: FromDishka[calendars.AddBlackout]) -> Envelope[BlackoutOut]:
    blackout = await use_case.execute(calendars.AddBlackoutCommand(actor, id, data.start, data.end, data.reason))
    return Envelope(BlackoutOut.of(blackout))


@endpoint("GET", "/scheduling/calendars/{id:int}/blackouts", operation_id="listBlackouts",
          summary="List a calendar's blackouts", tags=TAGS, scopes=READ, errors={404: ""})
async def list_blackouts(
    id: CalendarId,
    actor: FromDishka[Actor],
    use_case: FromDishka[calendars.ListBlackouts],
    limit: Limit = 25,
    offset: Offset = 0,
    start: InstantQuery = None,
    end: InstantQuery = None,
) -> ListEnvelope[BlackoutOut]:
    page = await use_case.execute(calendars.ListBlackoutsCommand(actor, id, PageRequest(limit, offset),
                                                                 _instant(start, "start"), _instant(end, "end")))
    return ListEnvelope([BlackoutOut.of(b) for b in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("DELETE", "/scheduling/calendars/{id:int}/blackouts/{blackout_id:int}", operation_id="deleteBlackout",
          summary="Delete a blackout", tags=TAGS, scopes=DELETE, status_code=204, errors={404: ""})
async def delete_blackout(id: CalendarId, blackout_id: BlackoutId, actor: FromDishka[Actor],
                          use_case: FromDishka[calendars.DeleteBlackout]) -> None:
    await use_case.execute(calendars.DeleteBlackoutCommand(actor, id, blackout_id))


# --------------------------------------------------------------------------- availability


@endpoint("GET", "/scheduling/availability", operation_id="getAvailability",
          summary="Open slots of a calendar; each start is a valid slot_start", tags=TAGS, scopes=READ,
          errors={404: "not_found: unknown calendar"})
async def get_availability(
    actor: FromDishka[Actor],
    use_case: FromDishka[availability.GetAvailability],
    calendar_id: Annotated[int, QueryParameter(ge=1, le=MAX_ID, description="Calendar id")],
    start: BoundQuery = None,
    end: BoundQuery = None,
    timezone: Annotated[str | None, QueryParameter(
        max_length=64, description="IANA zone the slots are rendered in (default: the calendar's)")] = None,
) -> Envelope[AvailabilityOut]:
    command = availability.GetAvailabilityCommand(
        actor, calendar_id,
        parse_day_or_instant(start, "start") if start is not None else None,
        parse_day_or_instant(end, "end") if end is not None else None,
        timezone,
    )
    result = await use_case.execute(command)
    slots = [SlotOut(s, e) for s, e in render_slots(result.slots, result.timezone)]
    return Envelope(AvailabilityOut(result.calendar.id or calendar_id, result.timezone,
                                    render_in_zone(result.start, result.timezone),
                                    render_in_zone(result.end, result.timezone), slots))


# --------------------------------------------------------------------------- appointments


@endpoint("POST", "/scheduling/appointments", operation_id="createAppointment",
          location="/scheduling/appointments/{id}",
          summary="Book an open slot (or request it with require_approval: the slot is held as pending)",
          tags=TAGS, scopes=WRITE, idempotent=True,
          errors={400: "bad_request: e.g. slot_start without an offset", 404: "not_found: unknown calendar",
                  409: f"{SLOT_TAKEN}; {BOOKING_CAPPED}"})
async def create_appointment(data: JSONBody[AppointmentCreate], actor: FromDishka[Actor],
                             use_case: FromDishka[booking.BookAppointment],
                             phones: FromDishka[PhoneNormalizer]) -> Envelope[AppointmentOut]:
    command = booking.BookAppointmentCommand(
        actor=actor, calendar_id=data.calendar_id, slot_start=parse_slot_start(data.slot_start),
        attendee_name=data.attendee_name, attendee_email=data.attendee_email,
        attendee_phone=e164(phones, data.attendee_phone, "attendee_phone") if data.attendee_phone else None,
        require_approval=data.require_approval, notes=data.notes,
    )
    with _slot_as_sent(data.slot_start):
        return Envelope(AppointmentOut.of(await use_case.execute(command)))


@endpoint("GET", "/scheduling/appointments", operation_id="listAppointments", summary="List appointments",
          tags=TAGS, scopes=READ)
async def list_appointments(
    actor: FromDishka[Actor],
    use_case: FromDishka[booking.ListAppointments],
    limit: Limit = 25,
    offset: Offset = 0,
    calendar_id: Annotated[int | None, QueryParameter(ge=1, le=MAX_ID)] = None,
    status: Annotated[Literal["pending", "confirmed", "cancelled", "completed", "no_show"] | None,
                      QueryParameter()] = None,
    start: Annotated[str | None, QueryParameter(
        max_length=64, format="date-time", description="slot_start at or after (RFC 3339)")] = None,
    end: Annotated[str | None, QueryParameter(
        max_length=64, format="date-time", description="slot_start before (RFC 3339)")] = None,
) -> ListEnvelope[AppointmentOut]:
    filters = AppointmentFilter(calendar_id, status, _instant(start, "start"), _instant(end, "end"))
    page = await use_case.execute(booking.ListAppointmentsCommand(actor, filters, PageRequest(limit, offset)))
    return ListEnvelope([AppointmentOut.of(a) for a in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("GET", "/scheduling/appointments/{id:int}", operation_id="getAppointment", summary="Get an appointment",
          tags=TAGS, scopes=READ, errors={404: ""})
async def get_appointment(id: AppointmentId, actor: FromDishka[Actor],
                          use_case: FromDishka[booking.GetAppointment]) -> Envelope[AppointmentOut]:
    return Envelope(AppointmentOut.of(await use_case.execute(booking.AppointmentRef(actor, id))))


@endpoint("PATCH", "/scheduling/appointments/{id:int}", operation_id="rescheduleAppointment",
          summary="Reschedule: the appointment is cancelled (rescheduled) and a new one with a new id replaces it",
          tags=TAGS, scopes=WRITE, errors={404: "", 409: f"{SLOT_TAKEN}; {BOOKING_CAPPED}; {ILLEGAL_MOVE}"})
async def reschedule_appointment(id: AppointmentId, data: JSONBody[RescheduleIn], actor: FromDishka[Actor],
                                 use_case: FromDishka[booking.RescheduleAppointment]) -> Envelope[RescheduleOut]:
    with _slot_as_sent(data.slot_start):
        result = await use_case.execute(booking.RescheduleAppointmentCommand(actor, id,
                                                                             parse_slot_start(data.slot_start)))
    new = result.appointment
    return Envelope(RescheduleOut(persisted(new.id), result.previous.id or id, new.status,  # type: ignore[arg-type]  # the domain's status is a str; the schema's a Literal
                                  new.slot_start, new.slot_end))


@endpoint("DELETE", "/scheduling/appointments/{id:int}", operation_id="cancelAppointment",
          summary="Cancel an appointment (returns it, cancelled)", tags=TAGS,
          scopes=("scheduling:write", "scheduling:delete"), status_code=200, errors={404: "", 409: ILLEGAL_MOVE})
async def cancel_appointment(id: AppointmentId, actor: FromDishka[Actor],
                             use_case: FromDishka[booking.CancelAppointment]) -> Envelope[AppointmentOut]:
    return Envelope(AppointmentOut.of(await use_case.execute(booking.AppointmentRef(actor, id))))


@endpoint("POST", "/scheduling/appointments/{id:int}/approve", operation_id="approveAppointment",
          summary="Approve a pending appointment", tags=TAGS, scopes=WRITE, status_code=200,
          errors={404: "", 409: ILLEGAL_MOVE})
async def approve_appointment(id: AppointmentId, actor: FromDishka[Actor],
                              use_case: FromDishka[booking.ApproveAppointment]) -> Envelope[AppointmentOut]:
    return Envelope(AppointmentOut.of(await use_case.execute(booking.AppointmentRef(actor, id))))


@endpoint("POST", "/scheduling/appointments/{id:int}/decline", operation_id="declineAppointment",
          summary="Decline a pending appointment", tags=TAGS, scopes=WRITE, status_code=200,
          errors={404: "", 409: ILLEGAL_MOVE})
async def decline_appointment(id: AppointmentId, actor: FromDishka[Actor],
                              use_case: FromDishka[booking.DeclineAppointment]) -> Envelope[AppointmentOut]:
    return Envelope(AppointmentOut.of(await use_case.execute(booking.AppointmentRef(actor, id))))


@endpoint("POST", "/scheduling/appointments/{id:int}/outcome", operation_id="recordAppointmentOutcome",
          summary="Record the outcome of a confirmed appointment (completed or no_show)", tags=TAGS, scopes=WRITE,
          status_code=200, errors={404: "", 409: ILLEGAL_MOVE})
async def record_outcome(id: AppointmentId, data: JSONBody[OutcomeIn], actor: FromDishka[Actor],
                         use_case: FromDishka[booking.RecordAppointmentOutcome]) -> Envelope[AppointmentOut]:
    appointment = await use_case.execute(booking.RecordAppointmentOutcomeCommand(actor, id, data.outcome, data.notes))
    return Envelope(AppointmentOut.of(appointment))


# --------------------------------------------------------------------------- ICS feeds


@endpoint("GET", "/scheduling/calendars/{id:int}/feed.ics", operation_id="getCalendarFeed",
          summary="The calendar's appointments as an ICS (RFC 5545) feed", tags=TAGS, scopes=READ,
          errors={404: ""}, media_type="text/calendar")
async def calendar_feed(id: CalendarId, actor: FromDishka[Actor],
                        use_case: FromDishka[feeds.RenderCalendarFeed]) -> Response[bytes]:
    return _feed_response(await use_case.execute(calendars.CalendarRef(actor, id)))


@endpoint("POST", "/scheduling/calendars/{id:int}/feed-token", operation_id="createCalendarFeedToken",
          location="/scheduling/calendars/{path.id}/feed-token",
          summary="Create or rotate the secret feed URL for calendar apps (the previous one stops working)",
          tags=TAGS, scopes=WRITE, errors={404: ""}, secret=True, status_code=201)
async def create_feed_token(id: CalendarId, actor: FromDishka[Actor], base: FromDishka[ApiBaseUrl],
                            use_case: FromDishka[feeds.IssueFeedToken]) -> Envelope[FeedTokenOut]:
    token = await use_case.execute(calendars.CalendarRef(actor, id))
    url = base.link(f"/scheduling/feeds/{token}{FEED_SUFFIX}")
    return Envelope(FeedTokenOut(url, token))


@endpoint("DELETE", "/scheduling/calendars/{id:int}/feed-token", operation_id="deleteCalendarFeedToken",
          summary="Revoke the secret feed URL", tags=TAGS, scopes=DELETE, status_code=204, errors={404: ""})
async def delete_feed_token(id: CalendarId, actor: FromDishka[Actor],
                            use_case: FromDishka[feeds.RevokeFeedToken]) -> None:
    await use_case.execute(calendars.CalendarRef(actor, id))


@endpoint("GET", "/scheduling/feeds/{filename:str}", operation_id="getCalendarFeedByToken",
          summary="The ICS feed behind a secret feed URL (no API key: the token in the URL is the credential)",
          tags=TAGS, auth="public", errors={404: "not_found: unknown or revoked token"}, media_type="text/calendar")
async def feed_by_token(filename: Annotated[str, PathParameter(max_length=200, description="<token>.ics")],
                        use_case: FromDishka[feeds.RenderFeedByToken]) -> Response[bytes]:
    if not filename.endswith(FEED_SUFFIX):
        raise NotFound("calendar feed", "for this token")
    return _feed_response(await use_case.execute(feeds.RenderFeedByTokenCommand(filename[: -len(FEED_SUFFIX)])))


ROUTES = [
    create_calendar, list_calendars, get_calendar, update_calendar, delete_calendar,
    create_rule, list_rules, delete_rule,
    create_blackout, list_blackouts, delete_blackout,
    get_availability,
    create_appointment, list_appointments, get_appointment, reschedule_appointment, cancel_appointment,
    approve_appointment, decline_appointment, record_outcome,
    calendar_feed, create_feed_token, delete_feed_token, feed_by_token,
]
