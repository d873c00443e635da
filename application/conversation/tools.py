"""The tools a voice agent's model may call during a conversation.

Built-ins: ``check_availability`` and ``book_appointment`` on the agent's calendar (the scheduling use cases, each
in a unit of work of its own: the same rules as the HTTP API, ``appointment.booked`` as for any booking),
``transfer_call`` and ``end_call`` (the conversation acts on them once the words before them are spoken), and
``send_sms`` (the SMS use case: the one DNC gate and the one quota gate). Custom ``http`` tools POST the model's
arguments as JSON through the SSRF-safe egress, signed like webhooks.

Whatever goes wrong (bad arguments, a refused booking, a time-out, a non-2xx answer, a blocked address) comes back
as a result that tells the model the tool failed and why: a tool never ends the conversation by failing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal, TypeVar

from application.context import Actor, CauseContext
from application.conversation.config import (
    BOOK_APPOINTMENT,
    CHECK_AVAILABILITY,
    END_CALL,
    SEND_SMS,
    TRANSFER_CALL,
    ConversationConfig,
    HttpTool,
)
from application.ports.conversation import ToolSecrets
from application.ports.egress import RequestFailed, SafeHttp
from application.ports.engines import ToolCall, ToolSpec
from application.ports.platform import Unit, Units
from application.ports.scheduling import AppointmentRepository
from application.scheduling.availability import GetAvailability, GetAvailabilityCommand
from application.scheduling.booking import BookAppointment, BookAppointmentCommand, bookable
from application.scheduling.calendars import CalendarRef, GetCalendar
from application.sms import SendSms, SendSmsCommand
from domain import json_schema
from domain import webhooks as wh
from domain.calls import spoken_time
from domain.errors import DomainError, NotFound
from domain.rfc3339 import format_utc_or_none
from domain.timezones import zone_of

log = logging.getLogger("parley.conversation")
T = TypeVar("T")

RESULT_MAX_CHARS = 2000
"""A tool's answer is cut to this many characters before the model reads it."""
RESPONSE_MAX_BYTES = 64_000
SLOTS_OFFERED = 8
TOOL_USER_AGENT = "Parley-Tools/2.0"
CALL_ID_HEADER = "X-Parley-Call-Id"

_NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}
BUILT_IN_SPECS = {
    CHECK_AVAILABILITY: ToolSpec(
        CHECK_AVAILABILITY,
        "Open appointment slots on the calendar. Give a date (YYYY-MM-DD, the calendar's local date) to see that "
        "day; without one, the next open slots.",
        {"type": "object", "properties": {"date": {"type": "string", "description": "YYYY-MM-DD"}}},
    ),
    BOOK_APPOINTMENT: ToolSpec(
        BOOK_APPOINTMENT,
        "Book an open slot for the caller. slot_start is the slot's start as ISO 8601: a local time "
        "(2026-03-03T10:00) is read in the calendar's time zone.",
        {"type": "object", "required": ["slot_start"], "properties": {
            "slot_start": {"type": "string", "description": "ISO 8601 date and time"},
            "attendee_name": {"type": "string"},
            "attendee_email": {"type": "string"},
            "notes": {"type": "string"},
        }},
    ),
    TRANSFER_CALL: ToolSpec(TRANSFER_CALL, "Transfer the caller to a human colleague.", _NO_ARGUMENTS),
    END_CALL: ToolSpec(END_CALL, "End the call, after saying goodbye.", _NO_ARGUMENTS),
    SEND_SMS: ToolSpec(
        SEND_SMS,
        "Send a text message; to the caller's number unless another number is given.",
        {"type": "object", "required": ["body"], "properties": {
            "body": {"type": "string", "minLength": 1, "maxLength": 1600},
            "to": {"type": "string", "description": "E.164 phone number"},
        }},
    ),
}


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """``content``: what the model reads (JSON text); ``action``: what the conversation does once the words spoken
    before the call are heard."""

    content: str
    ok: bool
    action: Literal["end_call", "transfer"] | None = None
    transfer_to: str | None = None
    booking: dict[str, Any] | None = None
    details: dict[str, Any] = field(default_factory=dict)


def _result(payload: dict[str, Any]) -> str:
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str)
    return text if len(text) <= RESULT_MAX_CHARS else text[:RESULT_MAX_CHARS - 3] + "..."


def failed(name: str, why: str) -> ToolOutcome:
    """The result telling the model the tool did not work and why (it can tell the caller, or try otherwise)."""
    return ToolOutcome(_result({"ok": False, "tool": name, "error": why}), ok=False)


def _ok(payload: dict[str, Any], **extra: Any) -> ToolOutcome:
    return ToolOutcome(_result({"ok": True, **payload}), ok=True, **extra)


class Toolbox:
    """The tools of one conversation: their specs for the model, and running one call of them."""

    def __init__(self, config: ConversationConfig, units: Units | None, http: SafeHttp | None,
                 secrets: ToolSecrets | None = None) -> None:
        self.config, self.units, self.http, self.secrets = config, units, http, secrets
        self.http_tools = {tool.name: tool for tool in config.http_tools}
        self.built_in = [name for name in config.built_in_tools if name in BUILT_IN_SPECS]
        self.actor = Actor.system(config.organization_id)

    def specs(self) -> list[ToolSpec]:
        specs = [BUILT_IN_SPECS[name] for name in self.built_in]
        return specs + [ToolSpec(t.name, t.description, t.parameters) for t in self.http_tools.values()
                        if t.name not in self.built_in]

    async def run(self, call: ToolCall, now: datetime) -> ToolOutcome:
        """Run one tool call; never raises (a failure is a result)."""
        try:
            return await self._run(call, now)
        except NotFound as gone:  # the agent names something deleted since (its calendar): worth an operator's look
            log.warning("call %s: tool %s could not run: %s", self.config.call_id, call.name, gone.message)
            return failed(call.name, gone.message)
        except DomainError as refused:  # a rule of the use case said no: the model tells the caller
            return failed(call.name, refused.message)
        except Exception:
            log.exception("call %s: tool %s raised", self.config.call_id, call.name)
            return failed(call.name, "the tool failed unexpectedly")

    async def _run(self, call: ToolCall, now: datetime) -> ToolOutcome:
        name, arguments = call.name, call.arguments
        if name in self.built_in:
            problems = json_schema.errors(arguments, BUILT_IN_SPECS[name].parameters)
            if problems:
                return failed(name, "invalid arguments: " + "; ".join(problems))
            if name == END_CALL:
                return _ok({"ending": True}, action="end_call")
            if name == TRANSFER_CALL:
                if not self.config.transfer_phone:
                    return failed(name, "no transfer number is configured for this agent")
                return _ok({"transferring": True}, action="transfer", transfer_to=self.config.transfer_phone)
            if name == CHECK_AVAILABILITY:
                return await self._availability(arguments, now)
            if name == BOOK_APPOINTMENT:
                return await self._book(arguments)
            if name == SEND_SMS:
                return await self._sms(arguments)
        tool = self.http_tools.get(name)
        if tool is None:
            return failed(name, f"there is no tool named {name}")
        return await self._http(tool, call, now)

    # -- built-ins over the use cases, each in a unit of work of its own

    async def _in_unit(self, work: Callable[[Unit], Awaitable[T]]) -> T:
        if self.units is None:
            raise DomainError("this tool is not available here")
        depth = self.config.cause_depth

        async def run(unit: Unit) -> T:
            if depth:  # what the call books or sends is as deep as the trigger action that placed it
                (await unit.get(CauseContext)).depth = depth
            return await work(unit)

        return await self.units.run(run)

    async def _availability(self, arguments: dict[str, Any], now: datetime) -> ToolOutcome:
        calendar_id = self.config.calendar_id
        if calendar_id is None:
            return failed(CHECK_AVAILABILITY, "this agent has no calendar")
        start: date | datetime = now
        end: date | datetime | None = None
        if arguments.get("date"):
            try:
                start = date.fromisoformat(str(arguments["date"]))
            except ValueError:
                return failed(CHECK_AVAILABILITY, "date must be YYYY-MM-DD")
            end = start + timedelta(days=1)
        command = GetAvailabilityCommand(self.actor, calendar_id, start=start, end=end)

        async def work(unit: Unit) -> tuple[Any, list[Any]]:
            found = await (await unit.get(GetAvailability)).execute(command)
            # a local date at the calendar's max_bookings_per_day is not offered: its booking would be refused
            return found, await bookable(await unit.get(AppointmentRepository), found.calendar, found.slots)

        found, open_slots = await self._in_unit(work)
        zone = zone_of(found.timezone)
        slots = [{"start": slot.start.astimezone(zone).isoformat(timespec="minutes"),
                  "spoken": spoken_time(slot.start, found.timezone)} for slot in open_slots[:SLOTS_OFFERED]]
        return _ok({"timezone": found.timezone, "slots": slots,
                    "note": "no open slots" if not slots else f"the first {len(slots)} open slots"})

    async def _book(self, arguments: dict[str, Any]) -> ToolOutcome:
        calendar_id = self.config.calendar_id
        if calendar_id is None:
            return failed(BOOK_APPOINTMENT, "this agent has no calendar")
        try:
            asked = datetime.fromisoformat(str(arguments["slot_start"]).replace("Z", "+00:00"))
        except ValueError:
            return failed(BOOK_APPOINTMENT, "slot_start must be an ISO 8601 date and time")
        config = self.config

        async def work(unit: Unit) -> tuple[Any, str]:
            calendar = await (await unit.get(GetCalendar)).execute(CalendarRef(self.actor, calendar_id))
            slot_start = asked if asked.tzinfo is not None else asked.replace(tzinfo=zone_of(calendar.timezone))
            appointment = await (await unit.get(BookAppointment)).execute(BookAppointmentCommand(
                actor=self.actor, calendar_id=calendar_id, slot_start=slot_start.astimezone(UTC),
                attendee_name=arguments.get("attendee_name") or config.contact_name,
                attendee_email=arguments.get("attendee_email") or None, attendee_phone=config.contact_phone,
                notes=arguments.get("notes") or f"Booked by the voice agent during call {config.call_id}",
                call_id=config.call_id))
            return appointment, calendar.timezone

        appointment, timezone = await self._in_unit(work)
        booking = {
            "appointment_id": appointment.id, "calendar_id": calendar_id,
            "slot_start": format_utc_or_none(appointment.slot_start),
            "slot_end": format_utc_or_none(appointment.slot_end), "status": appointment.status,
            "timezone": timezone,
        }
        return _ok({"booked": True, "appointment_id": appointment.id, "status": appointment.status,
                    "spoken": spoken_time(appointment.slot_start, timezone)}, booking=booking)

    async def _sms(self, arguments: dict[str, Any]) -> ToolOutcome:
        to = arguments.get("to") or self.config.contact_phone
        if not to:
            return failed(SEND_SMS, "there is no number to send to")
        command = SendSmsCommand(self.actor, str(to), str(arguments["body"]))

        async def work(unit: Unit) -> Any:
            return await (await unit.get(SendSms)).execute(command)

        message = await self._in_unit(work)
        return _ok({"sent": True, "sms_id": message.id, "to": message.to_phone})

    # -- custom http tools

    async def _http(self, tool: HttpTool, call: ToolCall, now: datetime) -> ToolOutcome:
        problems = json_schema.errors(call.arguments, tool.parameters)
        if problems:
            return failed(tool.name, "invalid arguments: " + "; ".join(problems))
        if self.http is None:
            return failed(tool.name, "custom tools are not available here")
        body = json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":")).encode()
        timestamp = int(now.timestamp())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": TOOL_USER_AGENT,
            wh.ID_HEADER: call.id,
            wh.EVENT_HEADER: f"tool.{tool.name}",
            wh.TIMESTAMP_HEADER: str(timestamp),
            CALL_ID_HEADER: self.config.call_id,
        }
        secret = tool.secret or (self.secrets.for_organization(self.config.organization_id) if self.secrets else None)
        if secret:
            headers[wh.SIGNATURE_HEADER] = wh.signature_header([secret], timestamp, body)
        try:
            answer = await self.http.request("POST", tool.url, headers=headers, body=body,
                                             timeout=tool.timeout_ms / 1000, max_bytes=RESPONSE_MAX_BYTES)
        except RequestFailed as exc:
            return failed(tool.name, f"no answer: {exc.message}")
        if not 200 <= answer.status < 300:
            return failed(tool.name, f"the tool answered HTTP {answer.status}")
        text = answer.body.decode("utf-8", errors="replace")
        try:
            result: Any = json.loads(text) if text.strip() else None
        except ValueError:
            result = text[:RESULT_MAX_CHARS]
        return _ok({"result": result}, details={"status": answer.status})
