"""Telephony resources: providers (carrier accounts), phone numbers and call statistics."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from domain.errors import Conflict

PROVIDER_TYPES = ("twilio", "telnyx", "vonage", "sip", "simulator")


class ProviderStatus(StrEnum):
    """The status of a telephony provider; the values are the API's."""

    ACTIVE = "active"
    DISABLED = "disabled"


PROVIDER_STATUSES = tuple(ProviderStatus)


class PhoneNumberStatus(StrEnum):
    """The status of a phone number (the API has only ``active`` today)."""

    ACTIVE = "active"


DEFAULT_PROVIDER_NAME = "Parley simulator"
BUILTIN_SIMULATOR = "simulator"
SIMULATED_PROVIDER_TYPES = frozenset({BUILTIN_SIMULATOR})
"""The provider types whose calls and texts the simulator carries; a type neither simulated nor a carrier with an
adapter (vonage, sip) ends them failed / provider_not_supported."""
MAX_PROVIDER_KEYS = 20  # keys of a provider's credentials, and of its settings


@dataclass(frozen=True, slots=True)
class TelephonyProvider:
    id: int | None
    organization_id: int
    name: str
    type: str
    status: str = "active"
    is_default: bool = False
    builtin: bool = False
    credentials_sealed: str | None = None  # the encrypted credentials; never leaves the server
    credential_fields: tuple[str, ...] = ()
    settings: dict[str, str] = field(default_factory=dict)
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def has_credentials(self) -> bool:
        return self.credentials_sealed is not None

    def ensure_deletable(self) -> None:
        if self.builtin:
            raise Conflict("The built-in simulator provider cannot be deleted",
                           details={"provider_id": self.id})


@dataclass(frozen=True, slots=True)
class PhoneNumber:
    id: int | None
    organization_id: int
    phone_number: str
    provider_id: int
    label: str | None = None
    inbound_agent_id: int | None = None
    voice: bool = True
    sms: bool = False
    status: str = "active"
    created_at: datetime | None = None
    updated_at: datetime | None = None


class PhoneNumberUnavailable(Conflict):
    """The number is held elsewhere (409 phone_number_unavailable); who holds it is never said."""

    code = "phone_number_unavailable"


def number_taken(phone_number: str, *, mine: bool) -> Conflict:
    """A number belongs to one organization at a time: claiming one of the organization's own numbers again is a
    409 conflict; claiming a number held elsewhere is a 409 phone_number_unavailable that says no more."""
    if mine:
        return Conflict(f"phone_number: {phone_number} is already one of this organization's numbers",
                        details={"field": "phone_number", "phone_number": phone_number})
    return PhoneNumberUnavailable(f"phone_number: {phone_number} is not available; it can be added once it is "
                                  "released", details={"field": "phone_number", "phone_number": phone_number})


@dataclass(frozen=True, slots=True)
class StatusCounts:
    """Aggregates over calls created in a period, as a store computes them."""

    by_status: dict[str, int]
    dialled: int  # calls that reached the phone network (started)
    answered: int
    answered_seconds: int
    total_seconds: int


@dataclass(frozen=True, slots=True)
class CallStats:
    start: datetime
    end: datetime
    total_calls: int
    by_status: dict[str, int]
    total_minutes: float
    answer_rate: float | None
    average_duration_seconds: float | None


def call_stats(start: datetime, end: datetime, counts: StatusCounts) -> CallStats:
    """answer_rate = answered / dialled (calls that never rang are left out); average duration over
    answered calls; minutes = every billable second / 60."""
    total = sum(counts.by_status.values())
    answer_rate = round(counts.answered / counts.dialled, 4) if counts.dialled else None
    average = round(counts.answered_seconds / counts.answered, 2) if counts.answered else None
    return CallStats(start, end, total, dict(sorted(counts.by_status.items())),
                     round(counts.total_seconds / 60, 2), answer_rate, average)
