"""Domain events: the catalogue of every event Parley emits, and the events themselves.

An event is a fact a use case records (``uow.record(EventType.CALL_ENDED(org_id, call.view()))``); the unit of
work writes it to the outbox in the same transaction as the change that caused it, and the outbox's
consumers (webhooks today) read it from there, each at its own pace.

Every event comes from the catalogue below: each member of :class:`EventType` is the one constructor
of its events and carries what ``GET /webhooks/events`` shows (name, group, description, example data).
The catalogue is an enumeration, so it is closed: :class:`DomainEvent` refuses a type that is not
one of its members, and the units of work refuse anything that is not such an event.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any

_CALL: dict[str, Any] = {
    "id": "c8f0a7e2-3b1d-4c55-9a0e-5d2f1b7c9e41", "agent_id": 42, "bot_id": "42", "agent_version": 3,
    "status": "completed",
    "direction": "outbound", "destination_phone": "+14155550123", "from_phone": "+14155550100",
    "contact_name": "Ada Lovelace", "custom_data": {"crm_id": "A-17"}, "end_reason": "completed",
    "outcome": "booked", "duration_seconds": 84, "transferred_to": None, "call_log_id": 311,
    "created_at": "2026-01-05T09:00:00.000Z", "updated_at": "2026-01-05T09:01:29.000Z",
    "started_at": "2026-01-05T09:00:01.000Z", "answered_at": "2026-01-05T09:00:05.000Z",
    "ended_at": "2026-01-05T09:01:29.000Z",
}
_NOT_YET = {"end_reason": None, "outcome": None, "duration_seconds": None, "call_log_id": None, "ended_at": None}
_APPOINTMENT: dict[str, Any] = {
    "id": 77, "calendar_id": 3, "status": "confirmed", "slot_start": "2026-01-06T10:00:00Z",
    "slot_end": "2026-01-06T10:30:00Z", "attendee_name": "Ada Lovelace", "attendee_email": "ada@example.com",
    "attendee_phone": "+14155550123", "notes": None, "cancel_reason": None, "rescheduled_from": None,
    "call_id": None, "sequence": 0, "created_at": "2026-01-05T09:01:10Z", "updated_at": "2026-01-05T09:01:10Z",
}
_CAMPAIGN: dict[str, Any] = {"id": 12, "name": "January follow-ups", "agent_id": 42, "status": "running"}
_CONTACT: dict[str, Any] = {"campaign_id": 12, "contact_id": 501, "phone": "+14155550123", "attempts": 1,
                            "last_call_id": "c8f0a7e2-3b1d-4c55-9a0e-5d2f1b7c9e41", "reason": None}
_KB: dict[str, Any] = {"knowledge_base_id": 5, "agent_id": 42}
_DOCUMENT: dict[str, Any] = {"knowledge_base_id": 5, "document_id": 9}
_LEAD: dict[str, Any] = {
    "id": 88, "status": "queued", "phone": "+14155550123", "name": "Ada Lovelace", "email": "ada@example.com",
    "agent_id": 42, "campaign_id": None, "external_id": "crm-A-17", "source": "website",
    "call_id": "c8f0a7e2-3b1d-4c55-9a0e-5d2f1b7c9e41", "contact_id": None, "reason": None,
    "custom_data": {"crm_id": "A-17"}, "created_at": "2026-01-05T09:00:00Z", "updated_at": "2026-01-05T09:00:00Z",
}

_SMS: dict[str, Any] = {
    "id": 314, "direction": "outbound", "from": "+14155550100", "to": "+14155550123",
    "body": "Your appointment is confirmed for Tuesday at 10:00.", "status": "sent", "encoding": "gsm7",
    "segments": 1, "error_code": None, "from_phone_number_id": 3, "created_at": "2026-01-05T09:00:00.000Z",
    "sent_at": "2026-01-05T09:00:01.000Z", "delivered_at": None,
    "status_events": [{"status": "queued", "at": "2026-01-05T09:00:00.000Z", "applied": True, "error_code": None},
                      {"status": "sent", "at": "2026-01-05T09:00:01.000Z", "applied": True, "error_code": None}],
}

_INVOICE: dict[str, Any] = {
    "id": 41, "organization_id": 7, "number": "PAR-7-202601", "period": "2026-01", "kind": "period",
    "status": "open", "total": 49934, "currency": "usd", "attempt_count": 0, "last_payment_error": None,
    "next_payment_attempt": "2026-02-01T00:00:05Z", "paid_at": None, "created_at": "2026-02-01T00:00:05Z",
}

GROUPS: Mapping[str, str] = MappingProxyType({
    "call": "calls",
    "campaign": "campaigns",
    "contact": "campaigns",
    "appointment": "appointments",
    "knowledge_base": "knowledge_bases",
    "document": "knowledge_bases",
    "lead": "leads",
    "sms": "sms",
    "usage": "usage",
    "subscription": "billing",
    "invoice": "billing",
    "webhook": "webhooks",
    "trigger": "triggers",
})
"""The group ``GET /webhooks/events`` files an event under, by the part of its name before the dot."""


class FieldType(StrEnum):
    """The JSON type of a member of an event's ``data`` (trigger conditions and templates are checked against
    it). Every member may also be null; ``object`` members are free-form below their name."""

    STRING = "string"
    NUMBER = "number"
    BOOLEAN = "boolean"
    OBJECT = "object"
    ARRAY = "array"


_NULL_MEMBER_TYPES: Mapping[str, FieldType] = MappingProxyType({
    "transferred_to": FieldType.STRING, "notes": FieldType.STRING, "cancel_reason": FieldType.STRING,
    "rescheduled_from": FieldType.NUMBER, "call_id": FieldType.STRING, "reason": FieldType.STRING,
    "campaign_id": FieldType.NUMBER, "contact_id": FieldType.NUMBER, "error_code": FieldType.STRING,
    "delivered_at": FieldType.STRING, "sent_at": FieldType.STRING, "end_reason": FieldType.STRING,
    "outcome": FieldType.STRING, "duration_seconds": FieldType.NUMBER, "call_log_id": FieldType.NUMBER,
    "ended_at": FieldType.STRING, "answered_at": FieldType.STRING, "agent_id": FieldType.NUMBER,
    "keyword": FieldType.STRING, "failed_action": FieldType.STRING, "pending_plan": FieldType.STRING,
    "last_payment_error": FieldType.STRING, "paid_at": FieldType.STRING, "next_payment_attempt": FieldType.STRING,
})
"""The type of the members whose example value is null (the example cannot say it)."""


def _type_of(name: str, value: Any) -> FieldType:
    if value is None:
        return _NULL_MEMBER_TYPES[name]
    if isinstance(value, bool):
        return FieldType.BOOLEAN
    if isinstance(value, int | float):
        return FieldType.NUMBER
    if isinstance(value, str):
        return FieldType.STRING
    if isinstance(value, list | tuple):
        return FieldType.ARRAY
    return FieldType.OBJECT


class EventType(StrEnum):
    """The catalogue: every event Parley emits, in the order ``GET /webhooks/events`` lists them.

    A member is its name (``EventType.CALL_ENDED == "call.ended"``) and the constructor of its events
    (``EventType.CALL_ENDED(organization_id, data)``)."""

    description: str
    example: Mapping[str, Any]
    """Example ``data`` of the event, as a subscriber receives it."""
    subject: str
    """The member of ``data`` (dotted for a nested one) naming what the event is about: a subscriber
    receives one subject's events in the order they happened. Empty: no subject."""
    emitted: bool
    """False for ``webhook.test``: listed and subscribable, but sent directly, never through the outbox."""
    fields: Mapping[str, FieldType]
    """The declared members of ``data`` and their types: the example's members, each typed by its value (or by
    ``_NULL_MEMBER_TYPES`` when the example's value is null)."""

    def __new__(cls, value: str, description: str, example: Mapping[str, Any], subject: str = "id",
                emitted: bool = True) -> EventType:
        member = str.__new__(cls, value)
        member._value_ = value
        member.description = description
        member.example = MappingProxyType(dict(example))
        member.subject = subject
        member.emitted = emitted
        member.fields = MappingProxyType({k: _type_of(k, v) for k, v in example.items()})
        return member

    CALL_STARTED = ("call.started", "A call was placed (outbound) or received (inbound) and is ringing.",
                    {**_CALL, **_NOT_YET, "status": "ringing", "answered_at": None})
    CALL_ANSWERED = ("call.answered", "The other party picked up the call.",
                     {**_CALL, **_NOT_YET, "status": "in_progress"})
    CALL_ENDED = ("call.ended", "A call ended, whatever the reason; carries the end reason and the duration.", _CALL)
    CALL_COMPLETED = ("call.completed",
                      "A call finished with a conversation; its call log (transcript, summary) is ready.", _CALL)
    CALL_FAILED = ("call.failed", "A call could not be connected (busy, no answer, failed).",
                   {**_CALL, "status": "busy", "end_reason": "busy", "outcome": None, "duration_seconds": 0,
                    "call_log_id": None, "answered_at": None})
    CALL_TRANSFERRED = ("call.transferred", "The agent transferred the call to a human.",
                        {**_CALL, "status": "transferred", "end_reason": "transferred", "outcome": None,
                         "transferred_to": "+14155550199"})
    CAMPAIGN_STARTED = ("campaign.started", "A campaign started dialing its contacts.", _CAMPAIGN)
    CAMPAIGN_PAUSED = ("campaign.paused", "A running campaign was paused.", {**_CAMPAIGN, "status": "paused"})
    CAMPAIGN_COMPLETED = ("campaign.completed", "A campaign has dialed every contact.",
                          {**_CAMPAIGN, "status": "completed"})
    CAMPAIGN_FAILED = ("campaign.failed", "A campaign stopped because of an error.", {**_CAMPAIGN, "status": "failed"})
    CONTACT_COMPLETED = ("contact.completed", "A campaign contact was reached and the call completed.", _CONTACT,
                         "contact_id")
    CONTACT_FAILED = ("contact.failed", "A campaign contact could not be reached (after every retry) or was skipped.",
                      {**_CONTACT, "attempts": 3, "reason": "no_answer"}, "contact_id")
    APPOINTMENT_BOOKED = ("appointment.booked",
                          "An appointment was confirmed: booked directly, approved, or booked by an agent mid-call.",
                          _APPOINTMENT)
    APPOINTMENT_CANCELLED = ("appointment.cancelled", "An appointment was cancelled or a pending request was declined.",
                             {**_APPOINTMENT, "status": "cancelled", "cancel_reason": "cancelled"})
    APPOINTMENT_RESCHEDULED = (
        "appointment.rescheduled",
        "An appointment was moved: the old one is cancelled and a new one replaces it (data: the new one, with the "
        "old one as previous_appointment).",
        {**_APPOINTMENT, "id": 78, "slot_start": "2026-01-07T10:00:00Z", "slot_end": "2026-01-07T10:30:00Z",
         "rescheduled_from": 77, "sequence": 1,
         "previous_appointment": {**_APPOINTMENT, "status": "rescheduled", "cancel_reason": "rescheduled"}},
        "previous_appointment.id")
    KNOWLEDGE_BASE_CREATED = ("knowledge_base.created", "A knowledge base was created.",
                              {**_KB, "name": "Product FAQ"}, "knowledge_base_id")
    KNOWLEDGE_BASE_UPDATED = ("knowledge_base.updated",
                              "A knowledge base was changed; fields names the members that changed.",
                              {**_KB, "fields": ["name"]}, "knowledge_base_id")
    KNOWLEDGE_BASE_DELETED = ("knowledge_base.deleted", "A knowledge base and its documents were deleted.", _KB,
                              "knowledge_base_id")
    KNOWLEDGE_BASE_ATTACHED = ("knowledge_base.attached", "A knowledge base was attached to an agent.",
                               {**_KB, "attached_agent_id": 42}, "knowledge_base_id")
    KNOWLEDGE_BASE_DETACHED = ("knowledge_base.detached", "A knowledge base was detached from an agent.",
                               {**_KB, "agent_id": None, "detached_agent_id": 42}, "knowledge_base_id")
    DOCUMENT_READY = ("document.ready",
                      "A document (file, text or scraped page) was extracted and indexed: it is searchable.",
                      {**_DOCUMENT, "file_type": "pdf", "source": "upload", "chunk_count": 14}, "document_id")
    DOCUMENT_DELETED = ("document.deleted", "A document was removed from its knowledge base.", _DOCUMENT,
                        "document_id")
    LEAD_CREATED = ("lead.created",
                    "A lead was received: its call is queued, it joined a campaign, or its number is on a "
                    "Do-Not-Call list (status blocked_dnc, never called).", _LEAD)
    SMS_SENT = ("sms.sent", "An outbound SMS was handed to the carrier network (its receipt said sent).", _SMS)
    SMS_DELIVERED = ("sms.delivered", "An outbound SMS reached the recipient's phone (delivery receipt).",
                     {**_SMS, "status": "delivered", "delivered_at": "2026-01-05T09:00:03.000Z",
                      "status_events": [*_SMS["status_events"], {
                          "status": "delivered", "at": "2026-01-05T09:00:03.000Z", "applied": True,
                          "error_code": None}]})
    SMS_FAILED = ("sms.failed",
                  "An outbound SMS could not be delivered: the carrier refused it (failed) or could not reach the "
                  "phone (undelivered); error_code says why.",
                  {**_SMS, "status": "undelivered", "error_code": "30003",
                   "status_events": [*_SMS["status_events"], {
                       "status": "undelivered", "at": "2026-01-05T09:00:03.000Z", "applied": True,
                       "error_code": "30003"}]})
    SMS_RECEIVED = ("sms.received",
                    "An inbound SMS arrived on one of the organization's numbers; keyword is stop or start when it "
                    "opted the sender out or back in (null otherwise).",
                    {**_SMS, "id": 315, "direction": "inbound", "from": "+14155550123", "to": "+14155550100",
                     "body": "STOP", "status": "received", "sent_at": None, "from_phone_number_id": 3,
                     "keyword": "stop",
                     "status_events": [{"status": "received", "at": "2026-01-05T09:05:00.000Z", "applied": True,
                                        "error_code": None}]})
    USAGE_THRESHOLD = ("usage.threshold",
                       "Usage of an included amount (call_minutes or sms_segments) reached 80 % or 100 % in the "
                       "billing period (a UTC calendar month); sent once per period, metric and threshold. "
                       "hard_stop is true when the plan refuses usage past 100 % (quota_exceeded).",
                       {"metric": "call_minutes", "threshold_percent": 80, "period": "2026-01",
                        "period_start": "2026-01-01T00:00:00Z", "period_end": "2026-02-01T00:00:00Z",
                        "used": 80.5, "included": 100, "plan": "starter", "hard_stop": True}, "metric")
    SUBSCRIPTION_UPDATED = ("subscription.updated",
                            "The subscription changed: an upgrade (in force at once), a downgrade scheduled for the "
                            "period's end or cancelled (pending_plan), a downgrade or cancellation applied when the "
                            "period closed, cancel_at_period_end set or cleared, or a canceled subscription "
                            "reactivated. plan is the plan in force (null once canceled).",
                            {"organization_id": 7, "plan": "enterprise", "previous_plan": "business",
                             "pending_plan": None, "status": "active", "cancel_at_period_end": False,
                             "current_period_start": "2026-01-01T00:00:00Z",
                             "current_period_end": "2026-02-01T00:00:00Z"}, "organization_id")
    INVOICE_CREATED = ("invoice.created",
                       "An invoice was issued: a closed period's invoice (open, to be charged now; paid at once when "
                       "its total is 0) or an upgrade's own invoice (kind proration, charged as it was made). "
                       "Amounts are integer cents.", _INVOICE)
    INVOICE_PAID = ("invoice.paid",
                    "An invoice was paid: its charge succeeded (the worker's collection, POST .../pay, an upgrade, "
                    "or the holder's authentication at the gateway), or it was issued with nothing to pay.",
                    {**_INVOICE, "status": "paid", "attempt_count": 1, "next_payment_attempt": None,
                     "paid_at": "2026-02-01T00:00:05Z"})
    INVOICE_PAYMENT_FAILED = ("invoice.payment_failed",
                              "A charge of an invoice was declined (or there was no default payment method): "
                              "last_payment_error says why, next_payment_attempt when the worker tries again "
                              "(null once uncollectible, status uncollectible). The subscription is past_due.",
                              {**_INVOICE, "attempt_count": 1, "last_payment_error": "insufficient_funds",
                               "next_payment_attempt": "2026-02-02T00:00:05Z"})
    TRIGGER_FAILED = ("trigger.failed",
                      "A trigger's run failed: one of its actions failed for the last time (after its retries, or "
                      "at once when it can never succeed, e.g. a number on a Do-Not-Call list): reason "
                      "action_failed; or the trigger ran more than 100 times in a minute and was disabled: reason "
                      "run_rate (failed_action null).",
                      {"trigger_id": 7, "trigger_name": "Slack on bookings", "run_id": 1201,
                       "event": "appointment.booked", "event_id": 9001, "reason": "action_failed",
                       "failed_action": "chat_message", "error": "the receiver answered HTTP 500", "attempts": 5},
                      "trigger_id")
    WEBHOOK_TEST = ("webhook.test", "A sample event sent by POST /webhooks/{id}/test.",
                    {"subscription_id": 3, "subscription_name": "CRM",
                     "message": "This is a test event from Parley. No action is needed.",
                     "sent_at": "2026-01-05T09:00:00.000Z"}, "", False)

    @property
    def prefix(self) -> str:
        return self.value.split(".", 1)[0]

    @property
    def group(self) -> str:
        return GROUPS[self.prefix]

    def __call__(self, organization_id: int, data: Mapping[str, Any] | None = None) -> DomainEvent:
        """The event of this type that happened in ``organization_id``, with ``data``."""
        return DomainEvent(self, organization_id, dict(data or {}))


CATALOGUE: Mapping[str, EventType] = MappingProxyType({e.value: e for e in EventType})
"""Every event of the catalogue by name."""


@dataclass(frozen=True, slots=True)
class DomainEvent:
    """An event of the catalogue, ready for ``uow.record(...)``: made by its :class:`EventType`."""

    kind: EventType
    organization_id: int
    data: dict[str, Any] = field(default_factory=dict)
    depth: int = 0
    """How many trigger actions led to it: 0 for what happened on its own, n + 1 for an event a trigger's action
    caused while handling an event of depth n (the triggers' loop guard)."""

    def __post_init__(self) -> None:
        if not isinstance(self.kind, EventType):
            raise TypeError(f"{self.kind!r} is not an event of the catalogue (domain.events.EventType)")
        if not self.kind.emitted:
            raise ValueError(f"{self.kind.value!r} is never recorded in the outbox")

    @property
    def type(self) -> str:
        return self.kind.value


def require_catalogued(event: object) -> DomainEvent:
    """``event`` when it is an event of the catalogue; TypeError otherwise (the units of work call this)."""
    if type(event) is not DomainEvent or not isinstance(event.kind, EventType) or not event.kind.emitted:
        raise TypeError(f"not an event of the catalogue: {event!r}")
    return event


class PendingEvents:
    """What a unit of work recorded and has not committed yet: events of the catalogue only."""

    __slots__ = ("_events",)

    def __init__(self) -> None:
        self._events: list[DomainEvent] = []

    def add(self, event: DomainEvent, depth: int) -> None:
        """Keep ``event`` (an event of the catalogue: anything else is a TypeError), at least ``depth`` deep (the
        depth of the trigger action the unit's work was caused by, the loop guard's)."""
        event = require_catalogued(event)
        if depth > event.depth:
            event = replace(event, depth=depth)
        self._events.append(event)

    def __bool__(self) -> bool:
        return bool(self._events)

    def __iter__(self) -> Iterator[DomainEvent]:
        return iter(self._events)

    def clear(self) -> None:
        self._events.clear()


@dataclass(frozen=True, slots=True)
class EventRecord:
    """An event read back from the outbox by one of its consumers."""

    id: int
    organization_id: int
    type: str
    data: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    depth: int = 0
    """See ``DomainEvent.depth``."""


def event(organization_id: int, name: str, data: Mapping[str, Any] | None = None) -> DomainEvent:
    """The catalogue's event called ``name`` (for tests and tools that pick events by name; use cases
    call the members). ValueError for a name outside the catalogue, or one never recorded."""
    kind = CATALOGUE.get(name)
    if kind is None or not kind.emitted:
        raise ValueError(f"{name!r} is not an event of the catalogue")
    return kind(organization_id, data)


def subject_of(kind: EventType, data: Mapping[str, Any]) -> str | None:
    """What an event is about (``"call:abc"``, ``"appointment:42"``): its prefix and the identifier at
    ``kind.subject`` in its data; None when there is none (no ordering)."""
    if not kind.subject:
        return None
    value: Any = data
    for part in kind.subject.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if value is None or isinstance(value, bool | dict | list):
        return None
    return f"{kind.prefix}:{value}"[:160]
