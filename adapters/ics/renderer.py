"""A calendar's appointments as an RFC 5545 VCALENDAR (icalendar library)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import icalendar

from application.ports.scheduling import Invitation
from domain.identity import persisted
from domain.scheduling.feeds import ICS_STATUS, ics_uid
from domain.scheduling.model import Appointment, AppointmentStatus, Calendar
from domain.scheduling.notifications import IcsMethod

PRODID = "-//Parley//Scheduling//EN"


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def _summary(appointment: Appointment) -> str:
    who = appointment.attendee_name or appointment.attendee_email or appointment.attendee_phone
    return f"Appointment with {who}" if who else "Appointment"


def _description(appointment: Appointment) -> str:
    lines = [f"Status: {appointment.status}" + (f" ({appointment.cancel_reason})" if appointment.cancel_reason
                                                 else "")]
    for label, value in (("Name", appointment.attendee_name), ("Email", appointment.attendee_email),
                         ("Phone", appointment.attendee_phone), ("Notes", appointment.notes)):
        if value:
            lines.append(f"{label}: {value}")
    if appointment.rescheduled_from is not None:
        lines.append(f"Rescheduled from appointment {appointment.rescheduled_from}")
    return "\n".join(lines)


class ICalendarRenderer:
    """One VEVENT per appointment: UID ``appointment-<id>@parley`` (stable), every time in UTC, SEQUENCE
    from the appointment (bumped on every change), STATUS TENTATIVE (pending), CONFIRMED (confirmed,
    completed, no_show) or CANCELLED; DTSTAMP and LAST-MODIFIED are the appointment's last change, so an
    unchanged feed renders byte for byte the same."""

    def render(self, calendar: Calendar, appointments: Sequence[Appointment]) -> bytes:
        feed = icalendar.Calendar()
        feed.add("prodid", PRODID)
        feed.add("version", "2.0")
        feed.add("calscale", "GREGORIAN")
        feed.add("method", "PUBLISH")
        feed.add("name", calendar.name)
        feed.add("x-wr-calname", calendar.name)
        feed.add("x-wr-timezone", calendar.timezone)
        for appointment in appointments:
            changed = _utc(appointment.updated_at or appointment.created_at or appointment.slot_start)
            event = icalendar.Event()
            event.add("uid", ics_uid(persisted(appointment.id)))
            event.add("dtstamp", changed)
            event.add("dtstart", _utc(appointment.slot_start))
            event.add("dtend", _utc(appointment.slot_end))
            event.add("sequence", appointment.sequence)
            event.add("status", ICS_STATUS.get(appointment.status, "CONFIRMED"))
            event.add("summary", _summary(appointment))
            event.add("description", _description(appointment))
            if appointment.created_at is not None:
                event.add("created", _utc(appointment.created_at))
            event.add("last-modified", changed)
            event.add("transp", "TRANSPARENT" if appointment.status == AppointmentStatus.CANCELLED else "OPAQUE")
            feed.add_component(event)
        return feed.to_ical()

    def invitation(self, invite: Invitation) -> bytes:
        """RFC 5546 iTIP: METHOD REQUEST (STATUS CONFIRMED) or CANCEL (STATUS CANCELLED), one VEVENT whose UID is
        the thread's and whose SEQUENCE grows with every message, so a calendar app updates or removes the event
        it imported first."""
        message = icalendar.Calendar()
        message.add("prodid", PRODID)
        message.add("version", "2.0")
        message.add("calscale", "GREGORIAN")
        message.add("method", str(invite.method))
        event = icalendar.Event()
        event.add("uid", invite.uid)
        event.add("dtstamp", _utc(invite.stamp))
        event.add("dtstart", _utc(invite.start))
        event.add("dtend", _utc(invite.end))
        event.add("sequence", invite.sequence)
        event.add("status", "CANCELLED" if invite.method == IcsMethod.CANCEL else "CONFIRMED")
        event.add("summary", invite.summary)
        event.add("description", invite.description)
        event.add("organizer", icalendar.vCalAddress(f"mailto:{invite.organizer}"))
        attendee = icalendar.vCalAddress(f"mailto:{invite.attendee}")
        if invite.attendee_name:
            attendee.params["cn"] = icalendar.vText(invite.attendee_name)
        attendee.params["role"] = icalendar.vText("REQ-PARTICIPANT")
        attendee.params["partstat"] = icalendar.vText("ACCEPTED")
        event.add("attendee", attendee)
        event.add("transp", "TRANSPARENT" if invite.method == IcsMethod.CANCEL else "OPAQUE")
        message.add_component(event)
        return message.to_ical()
