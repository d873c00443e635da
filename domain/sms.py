"""SMS: encoding detection and segment counting, the message status machine, and STOP/START keywords.

Encoding (GSM 03.38): a body written only with the GSM 7-bit default alphabet (:data:`GSM7_BASIC`) and its
extension table (:data:`GSM7_EXTENSION`, each extension character takes two septets: escape + code) is sent as
``gsm7``: one segment holds 160 septets, a concatenated message 153 per part. Anything else is sent as ``ucs2``:
one segment holds 70 UTF-16 code units, a concatenated message 67 per part; a character outside the Basic
Multilingual Plane (most emoji) takes two code units. A part never splits an escape sequence nor a surrogate pair.

Status machine (docs/sms.md), as data::

    queued ──▶ sent ──▶ delivered | undelivered
       │         └────▶ failed
       └──▶ delivered | undelivered | failed   (a receipt may arrive before the "sent" one)

Status only moves forward: a receipt that would move it backward, sideways or out of a final state is kept
in ``status_events`` (``applied: false``) and changes nothing.

Standard library only.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from domain.errors import Unprocessable
from domain.rfc3339 import format_utc_or_none
from domain.state_machine import TransitionTable

# GSM 03.38 default alphabet, in code order 0x00-0x7F (0x1B is the escape to the extension table, not a character)
GSM7_BASIC = frozenset(
    "@£$¥èéùìòÇ\nØø\rÅå"
    "Δ_ΦΓΛΩΠΨΣΘΞ" "ÆæßÉ"
    " !\"#¤%&'()*+,-./"
    "0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNO"
    "PQRSTUVWXYZÄÖÑÜ§"
    "¿abcdefghijklmno"
    "pqrstuvwxyzäöñüà"
)
GSM7_EXTENSION = frozenset("\f^{}\\[~]|€")
"""The extension table (reached through the escape code 0x1B): each of these takes two septets."""

GSM7_SINGLE, GSM7_MULTI = 160, 153
UCS2_SINGLE, UCS2_MULTI = 70, 67
BODY_MAX_LENGTH = 1600
ERROR_CODE_MAX_LENGTH = 50
"""A failed or undelivered message's ``error_code`` (a carrier's code, or Parley's own) is kept to this length."""

DIRECTIONS = ("outbound", "inbound")


class SmsStatus(StrEnum):
    """The status of a text message; ``received`` is an inbound message (it has no delivery life)."""

    QUEUED = "queued"
    SENT = "sent"
    DELIVERED = "delivered"
    UNDELIVERED = "undelivered"
    FAILED = "failed"
    RECEIVED = "received"


OUTBOUND_STATUSES = tuple(s for s in SmsStatus if s is not SmsStatus.RECEIVED)
STATUSES = tuple(SmsStatus)
FINAL_STATUSES = frozenset({SmsStatus.DELIVERED, SmsStatus.UNDELIVERED, SmsStatus.FAILED, SmsStatus.RECEIVED})

SMS_MACHINE = TransitionTable.of(
    "sms",
    [
        ("queued", "sent", "sent"),
        ("queued", "delivered", "delivered"),
        ("queued", "undelivered", "undelivered"),
        ("queued", "failed", "failed"),
        ("sent", "delivered", "delivered"),
        ("sent", "undelivered", "undelivered"),
        ("sent", "failed", "failed"),
    ],
)
"""Moves of an outbound message: the trigger is the status a carrier receipt reports."""

RECEIPT_STATUSES = (SmsStatus.SENT, SmsStatus.DELIVERED, SmsStatus.UNDELIVERED, SmsStatus.FAILED)

OPT_OUT_KEYWORDS = frozenset({"STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT"})
OPT_IN_KEYWORDS = frozenset({"START", "UNSTOP"})
OPT_OUT_LIST_NAME = "SMS opt-outs"
"""The organization's Do-Not-Call list of senders who opted out (made on first STOP)."""
OPT_OUT_PURPOSE = "sms_opt_out"
"""What marks that list among the organization's DNC lists: at most one list per organization has it."""

# Simulator test numbers (docs/sms.md); every other number is delivered
SIMULATOR_FAILED = "+1555010003"
SIMULATOR_UNDELIVERED = "+1555010007"


class SmsNotEnabled(Unprocessable):
    """An inbound text to a number of the organization whose ``sms`` capability is off (422 sms_not_enabled)."""

    code = "sms_not_enabled"


class RecipientOptedOut(Unprocessable):
    """The recipient replied STOP (is on the organization's SMS opt-out list): 422 recipient_opted_out."""

    code = "recipient_opted_out"


@dataclass(frozen=True, slots=True)
class Segmentation:
    encoding: str
    """``gsm7`` or ``ucs2``."""
    segments: int
    units: int
    """Septets (gsm7) or UTF-16 code units (ucs2)."""


def is_gsm7(text: str) -> bool:
    return all(ch in GSM7_BASIC or ch in GSM7_EXTENSION for ch in text)


def _pack(sizes: list[int], single: int, multi: int) -> int:
    """Segments for units of ``sizes`` (a character is 1 or 2 units, never split across parts)."""
    total = sum(sizes)
    if total <= single:
        return 1
    parts, used = 1, 0
    for size in sizes:
        if used + size > multi:
            parts, used = parts + 1, 0
        used += size
    return parts


def segment(text: str) -> Segmentation:
    """The encoding a carrier uses for ``text`` and how many segments it is billed as."""
    if is_gsm7(text):
        sizes = [2 if ch in GSM7_EXTENSION else 1 for ch in text]
        return Segmentation("gsm7", _pack(sizes, GSM7_SINGLE, GSM7_MULTI), sum(sizes))
    sizes = [2 if ord(ch) > 0xFFFF else 1 for ch in text]
    return Segmentation("ucs2", _pack(sizes, UCS2_SINGLE, UCS2_MULTI), sum(sizes))


def keyword_text(body: str) -> str:
    """The message as keywords are matched: NFKC-normalised (``STOP`` in full-width letters reads ``STOP``), without
    invisible format characters (zero-width spaces and joiners, the BOM, bidi marks), trimmed, in upper case."""
    folded = unicodedata.normalize("NFKC", body)
    return "".join(c for c in folded if unicodedata.category(c) != "Cf").strip().upper()


def keyword(body: str) -> str | None:
    """``stop`` or ``start`` when the whole message (as ``keyword_text`` reads it) is an opt-out or opt-in
    keyword."""
    word = keyword_text(body)
    if word in OPT_OUT_KEYWORDS:
        return "stop"
    if word in OPT_IN_KEYWORDS:
        return "start"
    return None


@dataclass(frozen=True, slots=True)
class StatusEvent:
    """One status report as it came (the creation, a carrier receipt), applied or not."""

    status: str
    at: datetime
    applied: bool = True
    error_code: str | None = None

    def view(self) -> dict[str, Any]:
        return {"status": self.status, "at": format_utc_or_none(self.at), "applied": self.applied,
                "error_code": self.error_code}


@dataclass(frozen=True, slots=True)
class SmsMessage:
    id: int | None
    organization_id: int
    direction: str
    from_phone: str
    to_phone: str
    body: str
    status: str
    encoding: str
    segments: int
    created_at: datetime
    updated_at: datetime
    from_phone_number_id: int | None = None
    error_code: str | None = None
    sent_at: datetime | None = None
    delivered_at: datetime | None = None
    status_events: tuple[StatusEvent, ...] = ()
    carrier_id: str | None = None
    carrier_state: dict[str, Any] = field(default_factory=dict)
    """The carrier adapter's own state (the simulator's pending receipts)."""
    next_check_at: datetime | None = None
    """When the carrier adapter has news for this message (None: nothing pending)."""
    cause_depth: int = 0
    """How deep in a chain of trigger actions the message was sent (0: not by a trigger): the events of its
    receipts, recorded later, are at least this deep (``DomainEvent.depth``, the triggers' loop guard)."""

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATUSES

    def receive(self, status: str, at: datetime, error_code: str | None = None) -> tuple[SmsMessage, bool]:
        """The message after a carrier receipt reporting ``status`` at ``at``, and whether the status moved.

        The receipt is always kept in ``status_events``; the status moves only forward (:data:`SMS_MACHINE`)."""
        applied = SMS_MACHINE.can(self.status, status)
        event = StatusEvent(status, at, applied, error_code)
        changes: dict[str, Any] = {"status_events": (*self.status_events, event), "updated_at": at}
        if applied:
            changes["status"] = SMS_MACHINE.next(self.status, status)
            if status == SmsStatus.SENT or (self.sent_at is None and status == SmsStatus.DELIVERED):
                changes["sent_at"] = self.sent_at or at
            if status == SmsStatus.DELIVERED:
                changes["delivered_at"] = at
            if status in (SmsStatus.FAILED, SmsStatus.UNDELIVERED):
                changes["error_code"] = error_code[:ERROR_CODE_MAX_LENGTH] if error_code else error_code
        return replace(self, **changes), applied

    def view(self) -> dict[str, Any]:
        """The message as the API and events show it."""
        return {
            "id": self.id, "direction": self.direction, "from": self.from_phone, "to": self.to_phone,
            "body": self.body, "status": self.status, "encoding": self.encoding, "segments": self.segments,
            "error_code": self.error_code, "from_phone_number_id": self.from_phone_number_id,
            "created_at": format_utc_or_none(self.created_at), "sent_at": format_utc_or_none(self.sent_at),
            "delivered_at": format_utc_or_none(self.delivered_at),
            "status_events": [e.view() for e in self.status_events],
        }
