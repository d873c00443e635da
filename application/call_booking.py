"""Mid-call booking (simulator number ...06): the AppointmentBooker implementations.

The scheduling booker drives the in-house scheduling use cases; the composition root hands it those use cases
and their command types, so this module does not depend on the scheduling feature. A booking carries its calendar's
``timezone``: the agent confirms it in the calendar's local time. A calendar that is gone by the time the agent
books (deleted after the agent was pointed at it) is an ordinary "no booking" (None), not an error of the call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from application.context import Actor
from domain.errors import NotFound
from domain.rfc3339 import format_utc_or_none
from domain.scheduling.model import BookingLimitReached

log = logging.getLogger("parley.calls")


def _booking(appointment: Any, calendar_id: int, timezone: str | None) -> dict[str, Any]:
    return {
        "appointment_id": getattr(appointment, "id", None),
        "calendar_id": calendar_id,
        "slot_start": format_utc_or_none(getattr(appointment, "slot_start", None)),
        "slot_end": format_utc_or_none(getattr(appointment, "slot_end", None)),
        "status": getattr(appointment, "status", None),
        "timezone": timezone,
    }


async def _timezone(get_calendar: Any, make_calendar_ref: Callable[..., Any] | None, actor: Actor,
                    calendar_id: int) -> str | None:
    """The calendar's IANA time zone (``GetCalendar``), None when it cannot be read."""
    if get_calendar is None or make_calendar_ref is None:
        return None
    calendar = await get_calendar.execute(make_calendar_ref(actor=actor, calendar_id=calendar_id))
    return getattr(calendar, "timezone", None)


def _calendar_gone(organization_id: int, calendar_id: int, call_id: str) -> None:
    log.warning("call %s: the agent's calendar %s of organization %s is gone; nothing was booked",
                call_id, calendar_id, organization_id)


def _notes(call_id: str) -> str:
    return f"Booked by the voice agent during call {call_id}"


class AtomicSchedulingAppointmentBooker:
    """``BookNextOpenSlot``: finds and books the first open slot under the calendar's lock (no race between
    finding and booking)."""

    def __init__(self, book_next_open_slot: Any, make_command: Callable[..., Any], get_calendar: Any = None,
                 make_calendar_ref: Callable[..., Any] | None = None) -> None:
        self.book_next_open_slot, self.make_command = book_next_open_slot, make_command
        self.get_calendar, self.make_calendar_ref = get_calendar, make_calendar_ref

    async def book_next_slot(self, organization_id: int, calendar_id: int, after: datetime,
                             attendee_name: str | None, attendee_phone: str | None,
                             call_id: str) -> dict[str, Any] | None:
        actor = Actor.system(organization_id)
        try:
            appointment = await self.book_next_open_slot.execute(self.make_command(
                actor=actor, calendar_id=calendar_id, after=after, attendee_name=attendee_name,
                attendee_phone=attendee_phone, notes=_notes(call_id), call_id=call_id,
            ))
            if appointment is None:
                return None
            timezone = await _timezone(self.get_calendar, self.make_calendar_ref, actor, calendar_id)
        except NotFound:
            _calendar_gone(organization_id, calendar_id, call_id)
            return None
        except BookingLimitReached as refused:  # the calendar's caps hold for agents too: nothing is booked
            log.info("call %s: no booking on calendar %s: %s", call_id, calendar_id, refused.message)
            return None
        return _booking(appointment, calendar_id, timezone)
