"""Leads: a person an outside system (a CRM, a form, an automation) hands over to be called, either at once by
an agent or as a contact of a campaign; its status follows that call.

Status machine (docs/leads.md)::

    queued ──reach──▶ called     (the call connected: completed, voicemail, transferred)
       └────fail───▶ failed     (busy, no answer, failed, cancelled; or the campaign gave up on the contact)
    blocked_dnc                  (the number is on a Do-Not-Call list: kept, never called)

Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from domain.errors import Unprocessable, ValidationFailed
from domain.rfc3339 import format_utc_or_none
from domain.state_machine import TransitionTable
from domain.text import check_one_line


class LeadStatus(StrEnum):
    """The status of a lead; the values are the API's."""

    QUEUED = "queued"
    CALLED = "called"
    BLOCKED_DNC = "blocked_dnc"
    FAILED = "failed"


STATUSES = tuple(LeadStatus)
FINAL_STATUSES = frozenset({LeadStatus.CALLED, LeadStatus.BLOCKED_DNC, LeadStatus.FAILED})

LEAD_MACHINE = TransitionTable.of(
    "lead",
    [
        ("queued", "reach", "called"),
        ("queued", "fail", "failed"),
    ],
)

REACHED_CALL_STATUSES = frozenset({"completed", "voicemail", "transferred"})
"""A call that ended in one of these reached the lead (called); any other end is a failure."""

CONTACT_OUTCOMES: Mapping[str, str] = {
    "completed": "reach",
    "failed": "fail",
    "skipped_dnc": "fail",
    "cancelled": "fail",
}
"""The lead's move when its campaign contact is final (an existing contact may already be)."""

NAME_MAX_LENGTH = 200
EMAIL_MAX_LENGTH = 320
EXTERNAL_ID_MAX_LENGTH = 255
SOURCE_MAX_LENGTH = 100
MAX_CUSTOM_FIELDS = 50
REASON_MAX_LENGTH = 100
DNC_REASON = "dnc_blocked"

_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


class LeadTargetInvalid(Unprocessable):
    """A lead goes to exactly one of an agent or a campaign (422, naming the field)."""

    code = "invalid_target"


def check_target(agent_id: int | None, campaign_id: int | None) -> None:
    """Exactly one of ``agent_id`` and ``campaign_id``; LeadTargetInvalid naming the field otherwise."""
    if agent_id is not None and campaign_id is not None:
        message = "send either agent_id or campaign_id, not both"
        raise LeadTargetInvalid(f"campaign_id: {message}", details={"validation_errors": {"campaign_id": message}})
    if agent_id is None and campaign_id is None:
        message = "send agent_id (call at once) or campaign_id (add to a campaign)"
        raise LeadTargetInvalid(f"agent_id: {message}", details={
            "validation_errors": {"agent_id": message, "campaign_id": message}})


def check_email(email: str | None) -> str | None:
    """The address stripped (None when absent or blank); ValidationFailed naming ``email`` when it is not one."""
    if email is None or not email.strip():
        return None
    value = email.strip()
    if len(value) > EMAIL_MAX_LENGTH or not _EMAIL.fullmatch(value):
        raise ValidationFailed.field("email", "must be an email address such as ada@example.com")
    return value


def check_text(value: str | None, name: str, limit: int) -> str | None:
    """Optional one-line text (``domain.text``) stripped (None when blank), at most ``limit`` characters."""
    if value is None or not value.strip():
        return None
    value = check_one_line(value.strip(), name)
    if len(value) > limit:
        raise ValidationFailed.field(name, f"must be at most {limit} characters")
    return value


def call_trigger(call_status: str) -> str:
    """The lead's move when its call ended with ``call_status``."""
    return "reach" if call_status in REACHED_CALL_STATUSES else "fail"


@dataclass(frozen=True, slots=True)
class Lead:
    id: int | None
    organization_id: int
    phone: str
    """E.164."""
    name: str | None = None
    email: str | None = None
    agent_id: int | None = None
    campaign_id: int | None = None
    custom_data: dict[str, Any] = field(default_factory=dict)
    external_id: str | None = None
    """The sender's own id: one lead per external id in an organization."""
    source: str | None = None
    status: str = "queued"
    reason: str | None = None
    """Why it failed or was blocked (the call's end reason, the contact's reason, ``dnc_blocked``)."""
    call_id: str | None = None
    contact_id: int | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATUSES

    def move(self, trigger: str, at: datetime, **changes: Any) -> Lead:
        """Apply ``trigger`` at ``at`` (InvalidTransition if the machine has no such move)."""
        return replace(self, status=LEAD_MACHINE.next(self.status, trigger), updated_at=at, **changes)

    def view(self) -> dict[str, Any]:
        """The lead as events carry it."""
        return {
            "id": self.id, "status": self.status, "phone": self.phone, "name": self.name, "email": self.email,
            "agent_id": self.agent_id, "campaign_id": self.campaign_id, "external_id": self.external_id,
            "source": self.source, "call_id": self.call_id, "contact_id": self.contact_id, "reason": self.reason,
            "custom_data": dict(self.custom_data),
            "created_at": format_utc_or_none(self.created_at), "updated_at": format_utc_or_none(self.updated_at),
        }
