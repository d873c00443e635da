"""Outbound calls: the status machine, the events each move produces, call logs and outcomes.

Status machine (docs/calls.md)::

    queued ──dial──▶ ringing ──answer──▶ in_progress ──complete──▶ completed
      │                 │                    ├──transfer──▶ transferred
      │                 ├──busy──▶ busy      ├──voicemail─▶ voicemail (answering machine detected late)
      │                 ├──no_answer──▶ no_answer
      │                 ├──voicemail──▶ voicemail
      ├──cancel──▶ cancelled ◀──cancel──┤
      └──fail / time_out──▶ failed ◀────┴── fail / time_out (also from in_progress)

Final states are absorbing. Events, in the order a real call produces them:

* ``call.started`` when the line starts ringing (dial);
* ``call.answered`` when a person picks up;
* ``call.transferred`` when the agent hands the call over (before the leg ends);
* ``call.ended`` exactly once, when the call reaches any final state;
* then one outcome event: ``call.completed`` (completed) or ``call.failed`` (busy, no_answer, failed,
  voicemail, time-out). A transferred call's outcome event is the ``call.transferred`` before ``call.ended``;
  a cancelled call has only ``call.ended``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from domain.errors import InvalidTransition, ValidationFailed
from domain.events import EventType
from domain.rfc3339 import format_utc_or_none
from domain.state_machine import TransitionTable
from domain.timezones import zone_of


class CallStatus(StrEnum):
    """The status of a call; the values are the API's (docs/calls.md)."""

    QUEUED = "queued"
    RINGING = "ringing"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    BUSY = "busy"
    NO_ANSWER = "no_answer"
    FAILED = "failed"
    VOICEMAIL = "voicemail"
    CANCELLED = "cancelled"
    TRANSFERRED = "transferred"


STATUSES = tuple(CallStatus)
FINAL_STATUSES = frozenset(set(CallStatus) - {CallStatus.QUEUED, CallStatus.RINGING, CallStatus.IN_PROGRESS})
ACTIVE_STATUSES = (CallStatus.RINGING, CallStatus.IN_PROGRESS)
CANCELLABLE_STATUSES = (CallStatus.QUEUED, CallStatus.RINGING)


class CallOutcome(StrEnum):
    """A finished call's outcome where it says more than the status (``outcome_of``); otherwise the outcome is the
    status itself (``busy``, ``no_answer``, ``failed``, ``cancelled``, ``transferred``)."""

    APPOINTMENT_BOOKED = "appointment_booked"
    CONVERSATION_COMPLETED = "conversation_completed"
    VOICEMAIL_LEFT = "voicemail_left"
    VOICEMAIL = "voicemail"
    TIMEOUT = "timeout"


CALL_MACHINE = TransitionTable.of(
    "call",
    [
        ("queued", "dial", "ringing"),
        ("queued", "cancel", "cancelled"),
        ("queued", "fail", "failed"),
        ("queued", "time_out", "failed"),
        ("ringing", "answer", "in_progress"),
        ("ringing", "busy", "busy"),
        ("ringing", "no_answer", "no_answer"),
        ("ringing", "voicemail", "voicemail"),
        ("ringing", "fail", "failed"),
        ("ringing", "cancel", "cancelled"),
        ("ringing", "time_out", "failed"),
        ("in_progress", "complete", "completed"),
        ("in_progress", "transfer", "transferred"),
        ("in_progress", "voicemail", "voicemail"),
        ("in_progress", "fail", "failed"),
        ("in_progress", "time_out", "failed"),
    ],
)

# the trigger that ends a call in each final status reported by a carrier
TRIGGER_FOR_FINAL = {
    "completed": "complete",
    "busy": "busy",
    "no_answer": "no_answer",
    "voicemail": "voicemail",
    "failed": "fail",
    "transferred": "transfer",
    "cancelled": "cancel",
}

# how long a call may wait in the queue, and how long the line may ring, beyond which the sweeper ends it
QUEUE_TIMEOUT = timedelta(hours=24)
SINGLE_CALL_PRIORITY = 100
"""The dial queue of an organization: higher priority first, then the earlier ``due_at``. A call placed on its own
(``POST /calls``) has this priority; bulk dialling (a campaign) queues below it, so it never starves single calls."""
RING_ALLOWANCE = timedelta(seconds=120)

# the simulator's fictional test numbers (docs/calls.md), +15550100 followed by two digits
SIMULATOR_TEST_NUMBER = re.compile(r"^\+15550100(\d{2})$")
SIMULATOR_SCENARIOS = {
    "00": "complete",
    "01": "busy",
    "02": "no_answer",
    "03": "failed",
    "04": "voicemail",
    "05": "transfer",
    "06": "book",
}
SIMULATOR_CALLER_ID = "+1555010099"


def simulator_scenario(number: str) -> str:
    """What the simulator does when it dials ``number``: any number outside the table completes."""
    match = SIMULATOR_TEST_NUMBER.match(number)
    return SIMULATOR_SCENARIOS.get(match.group(1), "complete") if match else "complete"


def is_simulator_test_number(number: str) -> bool:
    return SIMULATOR_TEST_NUMBER.match(number) is not None


CALL_ID_PATTERN = r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$(?!\n)"
"""A call's id as a client writes it: a UUID in its hyphenated form (RFC 9562), in either case; stored in lower case
(``canonical_call_id``)."""


def canonical_call_id(written: str) -> str:
    """The stored form of a call id that matched ``CALL_ID_PATTERN``: UUIDs compare without regard to case."""
    return written.lower()


def events_for(trigger: str, target: str) -> list[EventType]:
    """The events a move produces, in emission order."""
    if trigger == "dial":
        return [EventType.CALL_STARTED]
    if trigger == "answer":
        return [EventType.CALL_ANSWERED]
    if target == "transferred":
        return [EventType.CALL_TRANSFERRED, EventType.CALL_ENDED]
    if target == "completed":
        return [EventType.CALL_ENDED, EventType.CALL_COMPLETED]
    if target == "cancelled":
        return [EventType.CALL_ENDED]
    if target in FINAL_STATUSES:
        return [EventType.CALL_ENDED, EventType.CALL_FAILED]
    return []


@dataclass(frozen=True, slots=True)
class Call:
    id: str
    organization_id: int
    agent_id: int
    destination_phone: str
    from_phone: str
    status: str = "queued"
    contact_name: str | None = None
    custom_data: dict[str, Any] = field(default_factory=dict)
    prompt: str = ""
    first_message: str | None = None
    max_duration_seconds: int = 600
    provider_id: int | None = None
    end_reason: str | None = None
    outcome: str | None = None
    duration_seconds: int | None = None
    transferred_to: str | None = None
    call_log_id: int | None = None
    telephony_ref: str | None = None
    telephony_state: dict[str, Any] = field(default_factory=dict)
    next_check_at: datetime | None = None
    deadline_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    started_at: datetime | None = None
    answered_at: datetime | None = None
    ended_at: datetime | None = None
    priority: int = SINGLE_CALL_PRIORITY
    due_at: datetime | None = None
    """When a queued call may be dialled (None: when it was created)."""
    campaign_id: int | None = None
    contact_id: int | None = None
    """A campaign call: its campaign and contact (None for a single call)."""
    idempotency_key: str | None = None
    """A campaign call's attempt key (``campaign-contact-{id}-attempt-{n}``): one call per key."""
    cause_depth: int = 0
    """How deep in a chain of trigger actions the call was placed (0: not by a trigger): every event of the call
    is at least this deep (``DomainEvent.depth``, the triggers' loop guard)."""
    agent_version: int | None = None
    """The agent's published version the call runs (its prompt, voicemail, transfer and calendar); None only for
    calls placed before calls ran published versions."""
    direction: str = "outbound"
    """``outbound`` (placed by Parley), ``inbound`` (a caller rang one of the organization's carrier numbers) or
    ``web`` (a browser talks to the agent: no phone numbers)."""
    end_message: str | None = None
    """Why the call failed, in the carrier's own words (``end_reason: carrier_error``); None otherwise."""

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATUSES

    def move(self, trigger: str, at: datetime, **changes: Any) -> tuple[Call, list[EventType]]:
        """Apply ``trigger`` at ``at``; returns the new call and the event types to emit (in order)."""
        target = CALL_MACHINE.next(self.status, trigger)
        values: dict[str, Any] = {"status": target, "updated_at": at, **changes}
        if trigger == "dial":
            values.setdefault("started_at", at)
        elif trigger == "answer":
            values.setdefault("answered_at", at)
        if target in FINAL_STATUSES:
            values.setdefault("ended_at", at)
            values["next_check_at"] = None
            if values.get("duration_seconds") is None and self.duration_seconds is None:
                values["duration_seconds"] = 0
        return replace(self, **values), events_for(trigger, target)

    def cancel(self, at: datetime) -> tuple[Call, list[EventType]]:
        if self.status not in CANCELLABLE_STATUSES:
            raise InvalidTransition("call", self.status, "cancelled")
        return self.move("cancel", at, end_reason="cancelled", outcome="cancelled", duration_seconds=0)

    def view(self) -> dict[str, Any]:
        """The call record as the API shows it (also the data of call events)."""
        return {
            "id": self.id,
            "agent_id": self.agent_id,
            "bot_id": str(self.agent_id),
            "agent_version": self.agent_version,
            "status": self.status,
            "direction": self.direction,
            "destination_phone": self.destination_phone,
            "from_phone": self.from_phone,
            "contact_name": self.contact_name,
            "custom_data": self.custom_data,
            "end_reason": self.end_reason,
            "end_message": self.end_message,
            "outcome": self.outcome,
            "duration_seconds": self.duration_seconds,
            "transferred_to": self.transferred_to,
            "call_log_id": self.call_log_id,
            "campaign_id": self.campaign_id,
            "contact_id": self.contact_id,
            "created_at": format_utc_or_none(self.created_at),
            "updated_at": format_utc_or_none(self.updated_at),
            "started_at": format_utc_or_none(self.started_at),
            "answered_at": format_utc_or_none(self.answered_at),
            "ended_at": format_utc_or_none(self.ended_at),
        }


@dataclass(frozen=True, slots=True)
class CallLog:
    id: int | None
    organization_id: int
    call_id: str
    agent_id: int
    direction: str
    from_phone: str
    to_phone: str
    status: str
    end_reason: str | None
    outcome: str | None
    duration_seconds: int
    transcript: list[dict[str, Any]]
    summary: str
    contact_name: str | None = None
    recording_key: str | None = None
    started_at: datetime | None = None
    answered_at: datetime | None = None
    ended_at: datetime | None = None
    created_at: datetime | None = None
    agent_version: int | None = None
    """The agent's published version the call ran."""
    turns: list[dict[str, Any]] = field(default_factory=list)
    """One latency breakdown per caller turn the agent answered: end_of_speech_to_first_audio_ms, stt_ms,
    llm_first_token_ms, tts_first_audio_ms, parley_ms. Empty for calls without a conversation runtime."""
    analysis: dict[str, Any] | None = None
    """The after-call analysis ``{summary, successful, data}``; None when the call had none."""

    @property
    def recording_available(self) -> bool:
        return self.recording_key is not None


_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")


def spoken_time(value: datetime, tz_name: str | None) -> str:
    """An instant as an agent says it to a caller, in the zone ``tz_name``: "Tuesday, March 3 at 2:30 PM".
    Without a usable zone it is said in UTC, and says so ("... at 2:30 PM UTC")."""
    try:
        zone = zone_of(tz_name) if tz_name else None
    except ValidationFailed:
        zone = None
    local = value.astimezone(zone or UTC)
    hour = local.hour % 12 or 12
    said = (f"{_WEEKDAYS[local.weekday()]}, {_MONTHS[local.month - 1]} {local.day} at "
            f"{hour}:{local.minute:02d} {'AM' if local.hour < 12 else 'PM'}")
    return said if zone else f"{said} UTC"


def outcome_of(status: str, end_reason: str | None, *, booked: bool = False, message_left: bool = False) -> str:
    """A short machine-readable outcome of a finished call."""
    if end_reason == "timeout":
        return CallOutcome.TIMEOUT
    if status == CallStatus.COMPLETED:
        return CallOutcome.APPOINTMENT_BOOKED if booked else CallOutcome.CONVERSATION_COMPLETED
    if status == CallStatus.VOICEMAIL:
        return CallOutcome.VOICEMAIL_LEFT if message_left else CallOutcome.VOICEMAIL
    return status


def summarize(*, agent_name: str, contact_name: str | None, to_phone: str, status: str, outcome: str,
              duration_seconds: int, turns: int, booking: dict[str, Any] | None = None) -> str:
    who = f"{contact_name} ({to_phone})" if contact_name else to_phone
    if status == CallStatus.COMPLETED:
        text = f"{agent_name} spoke with {who} for {duration_seconds} s ({turns} turns)."
        if booking:
            text += f" An appointment was booked for {booking.get('slot_start')}."
        elif outcome == CallOutcome.TIMEOUT:
            text += " The call was ended at the maximum duration."
        return text
    if status == CallStatus.TRANSFERRED:
        return f"{agent_name} spoke with {who} and transferred the call after {duration_seconds} s."
    if status == CallStatus.VOICEMAIL:
        if outcome == CallOutcome.VOICEMAIL_LEFT:
            return f"{agent_name} reached the voicemail of {who} and left a message."
        return f"{agent_name} reached the voicemail of {who} and hung up."
    if status == CallStatus.BUSY:
        return f"{agent_name} called {who}: the line was busy."
    if status == CallStatus.NO_ANSWER:
        return f"{agent_name} called {who}: nobody answered."
    if status == CallStatus.CANCELLED:
        return f"The call from {agent_name} to {who} was cancelled."
    if outcome == CallOutcome.TIMEOUT:
        return f"The call from {agent_name} to {who} was ended after it exceeded its maximum duration."
    return f"The call from {agent_name} to {who} failed."


def missing_values(names: list[str], name_field: str) -> dict[str, str]:
    """The placeholders a call cannot fill, as validation errors on the client's fields: the contact's name is its
    own field (``name_field``: ``contact_name`` of a call, ``name`` of a lead, a contact or a widget visitor), every
    other one a key of ``custom_data``."""
    errors: dict[str, str] = {}
    if "contact_name" in names:
        errors[name_field] = ("is required: the agent's prompt, first message or voicemail message says "
                              "{{contact_name}}")
    others = [name for name in names if name != "contact_name"]
    if others:
        errors["custom_data"] = f"missing values for: {', '.join(others)}"
    return errors


def unresolved_placeholders_error(names: list[str], name_field: str = "contact_name") -> ValidationFailed:
    """The 400 of a call whose agent's placeholders the request leaves unfilled (``missing_values``)."""
    errors = missing_values(names, name_field)
    hints = [f"send {name_field}"] if name_field in errors else []
    if "custom_data" in errors:
        hints.append("send the others in custom_data" if hints else "send them in custom_data")
    return ValidationFailed(f"Unresolved placeholders: {', '.join(names)}; {'; '.join(hints)}",
                            details={"missing_placeholders": names, "validation_errors": errors})


def render_values(contact_name: str | None, destination_phone: str, custom_data: dict[str, Any]) -> dict[str, Any]:
    """Placeholder values at dial time: custom_data keys plus the built-ins (which win)."""
    values: dict[str, Any] = {k: v for k, v in custom_data.items() if v is not None}
    values["destination_phone"] = destination_phone
    if contact_name is not None:
        values["contact_name"] = contact_name
    return values
