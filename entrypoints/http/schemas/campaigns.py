from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from domain import campaigns as rules
from domain.campaigns import Campaign, CampaignStats, Contact, ContactAttempt
from domain.destinations import MAX_ALLOWED_COUNTRIES
from domain.identity import persisted
from entrypoints.http.schemas import OneLine, within

Name = Annotated[OneLine, Meta(min_length=1, max_length=rules.NAME_MAX_LENGTH)]
Id = Annotated[int, Meta(ge=1)]
TimeZone = Annotated[str, Meta(max_length=rules.TIMEZONE_MAX_LENGTH, description="IANA time zone name")]
TimezoneMode = Literal["recipient", "campaign"]
Completion = Annotated[Literal["when_empty", "manual"], Meta(description=(
    "when_empty: the campaign completes once every contact is final (it needs a contact to start); manual: it may "
    "start empty and runs until paused or cancelled (a campaign fed by the widget or leads)"))]
Status = Literal["draft", "running", "paused", "completed", "cancelled", "failed"]
ContactStatus = Literal["pending", "dialing", "retry_wait", "completed", "failed", "skipped_dnc", "cancelled"]
# the format is the domain's rule (CallingHours.validate), which names the field in its words
LocalTime = Annotated[str, Meta(max_length=5, description='Local wall-clock time "HH:MM" ("24:00" as an end)')]
Concurrency = Annotated[int, within(rules.MAX_CONCURRENT_CALLS_RANGE)]
MaxAttempts = Annotated[int, within(rules.MAX_ATTEMPTS_RANGE, description="Attempts in all, the first included")]
DelayMinutes = Annotated[int, within(rules.DELAY_MINUTES_RANGE, description="Wait before the next attempt")]
CountryCodes = Annotated[list[Annotated[str, Meta(max_length=2, description="ISO 3166 alpha-2 country code")]],
                         Meta(max_length=MAX_ALLOWED_COUNTRIES)]
WidgetCap = Annotated[int, within(rules.WIDGET_MAX_CONTACTS_PER_HOUR_RANGE,
                                  description="Contacts the widget may add per hour")]


# A "type: ignore[arg-type]" below marks a field whose domain type is wider than the documented one: a status
# the domain keeps as a str where the schema lists its values, or a field that is None only before the row is stored.

class CallingHoursSchema(Struct, forbid_unknown_fields=True):
    start: LocalTime = "08:00"
    end: LocalTime = "21:00"


# retry rules as merge patches over the defaults (a create sends only what differs from them)
class RetryRulePatch(Struct, forbid_unknown_fields=True):
    max_attempts: MaxAttempts | UnsetType = UNSET
    delay_minutes: DelayMinutes | UnsetType = UNSET


class RetryPatch(Struct, forbid_unknown_fields=True):
    busy: RetryRulePatch | UnsetType = UNSET
    no_answer: RetryRulePatch | UnsetType = UNSET
    voicemail: RetryRulePatch | UnsetType = UNSET
    failed: RetryRulePatch | UnsetType = UNSET


class CallingHoursPatch(Struct, forbid_unknown_fields=True):
    start: LocalTime | UnsetType = UNSET
    end: LocalTime | UnsetType = UNSET


class CampaignCreate(Struct, forbid_unknown_fields=True):
    name: Name
    agent_id: Id
    schedule_id: Id | None = None
    timezone: TimeZone = "UTC"
    timezone_mode: TimezoneMode = "recipient"
    calling_hours: CallingHoursSchema = msgspec.field(default_factory=CallingHoursSchema)
    max_concurrent_calls: Concurrency = rules.DEFAULT_MAX_CONCURRENT_CALLS
    retry: RetryPatch | None = None
    from_phone_number_id: Id | None = None
    completion: Completion = "when_empty"
    allowed_countries: CountryCodes | None = None
    """Narrows the organization's dialing policy (ISO 3166 alpha-2 codes); null: the organization's."""
    widget_max_contacts_per_hour: WidgetCap = rules.WIDGET_MAX_CONTACTS_PER_HOUR_DEFAULT


class CampaignUpdate(Struct, forbid_unknown_fields=True):
    name: Name | UnsetType = UNSET
    agent_id: Id | UnsetType = UNSET
    schedule_id: Id | UnsetType | None = UNSET
    timezone: TimeZone | UnsetType = UNSET
    timezone_mode: TimezoneMode | UnsetType = UNSET
    calling_hours: CallingHoursPatch | UnsetType = UNSET
    max_concurrent_calls: Concurrency | UnsetType = UNSET
    retry: RetryPatch | UnsetType = UNSET
    from_phone_number_id: Id | UnsetType | None = UNSET
    completion: Completion | UnsetType = UNSET
    allowed_countries: CountryCodes | UnsetType | None = UNSET
    widget_max_contacts_per_hour: WidgetCap | UnsetType = UNSET


class RetryRuleOut(Struct):
    max_attempts: int
    delay_minutes: int


class RetryOut(Struct):
    busy: RetryRuleOut
    no_answer: RetryRuleOut
    voicemail: RetryRuleOut
    failed: RetryRuleOut


class CampaignStatsOut(Struct):
    total: int
    pending: int
    dialing: int
    retry_wait: int
    completed: int
    failed: int
    skipped_dnc: int
    cancelled: int

    @classmethod
    def of(cls, s: CampaignStats) -> CampaignStatsOut:
        return cls(s.total, s.pending, s.dialing, s.retry_wait, s.completed, s.failed, s.skipped_dnc, s.cancelled)


class CampaignOut(Struct):
    id: int
    name: str
    agent_id: int
    schedule_id: int | None
    timezone: str
    timezone_mode: TimezoneMode
    calling_hours: CallingHoursSchema
    max_concurrent_calls: int
    retry: RetryOut
    from_phone_number_id: int | None
    completion: Literal["when_empty", "manual"]
    allowed_countries: list[str] | None
    widget_max_contacts_per_hour: int
    status: Status
    status_reason: str | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    next_dial_at: datetime | None = None
    """With ``status_reason`` (``outside_calling_hours``, ``waiting_for_retry``): when the dialer dials next."""
    stats: CampaignStatsOut | UnsetType = UNSET
    """Only on GET /campaigns/{id}."""

    @classmethod
    def of(cls, c: Campaign, stats: CampaignStats | None = None) -> CampaignOut:
        retry = RetryOut(**{o: RetryRuleOut(r.max_attempts, r.delay_minutes)
                            for o, r in ((o, c.retry.rule(o)) for o in rules.RETRY_OUTCOMES)})
        return cls(
            id=persisted(c.id), name=c.name, agent_id=c.agent_id, schedule_id=c.schedule_id, timezone=c.timezone,
            timezone_mode=c.timezone_mode,  # type: ignore[arg-type]  # the domain's type is wider
            calling_hours=CallingHoursSchema(c.calling_hours.start, c.calling_hours.end),
            max_concurrent_calls=c.max_concurrent_calls, retry=retry, from_phone_number_id=c.from_phone_number_id,
            completion=c.completion,  # type: ignore[arg-type]  # the domain's type is wider
            allowed_countries=list(c.allowed_countries) if c.allowed_countries is not None else None,
            widget_max_contacts_per_hour=c.widget_max_contacts_per_hour,
            status=c.status,  # type: ignore[arg-type]  # the domain's type is wider
            status_reason=c.status_reason, created_at=c.created_at,  # type: ignore[arg-type]  # the domain's type is wider
            updated_at=c.updated_at,  # type: ignore[arg-type]  # the domain's type is wider
            started_at=c.started_at, ended_at=c.ended_at, next_dial_at=c.next_dial_at,
            stats=CampaignStatsOut.of(stats) if stats is not None else UNSET,
        )


class ContactIn(Struct, forbid_unknown_fields=True):
    """One contact; a bad value here (a phone that is no number, an unknown zone) rejects the row, not the
    request."""

    phone: str
    name: str | None = None
    timezone: str | None = None
    custom_data: dict[str, Any] = msgspec.field(default_factory=dict)


class ContactsAdd(Struct, forbid_unknown_fields=True):
    contacts: Annotated[list[ContactIn], Meta(min_length=1, max_length=rules.MAX_CONTACTS_PER_REQUEST)]


class RejectedRow(Struct):
    row: int
    field: str
    message: str


class ContactsAdded(Struct):
    accepted: int
    duplicates: int
    rejected: list[RejectedRow]
    rejected_count: int


class AttemptOut(Struct):
    attempt: int
    call_id: str | None
    status: str
    started_at: datetime | None
    ended_at: datetime | None

    @classmethod
    def of(cls, a: ContactAttempt) -> AttemptOut:
        return cls(a.attempt, a.call_id, a.status, a.started_at, a.ended_at)


class ContactOut(Struct):
    id: int
    campaign_id: int
    phone: str
    name: str | None
    timezone: str | None
    custom_data: dict[str, Any]
    status: ContactStatus
    attempt_count: int
    next_attempt_at: datetime | None
    last_call_id: str | None
    reason: str | None
    created_at: datetime
    updated_at: datetime
    attempts: list[AttemptOut] | UnsetType = UNSET
    """Only on GET /campaigns/{id}/contacts/{contactId}."""

    @classmethod
    def of(cls, c: Contact, attempts: list[ContactAttempt] | None = None) -> ContactOut:
        return cls(
            id=persisted(c.id), campaign_id=c.campaign_id, phone=c.phone, name=c.name, timezone=c.timezone,
            custom_data=c.custom_data, status=c.status,  # type: ignore[arg-type]  # the domain's type is wider
            attempt_count=c.attempts, next_attempt_at=c.next_attempt_at, last_call_id=c.last_call_id,
            reason=c.reason, created_at=c.created_at, updated_at=c.updated_at,  # type: ignore[arg-type]  # the domain's type is wider
            attempts=[AttemptOut.of(a) for a in attempts] if attempts is not None else UNSET,
        )


class DialIn(Struct, forbid_unknown_fields=True):
    """``{contact_id}`` or ``{phone, name?, custom_data?}`` (the contact is added first)."""

    contact_id: Id | None = None
    phone: str | None = None
    name: Annotated[OneLine, Meta(max_length=rules.CONTACT_NAME_MAX_LENGTH)] | None = None
    custom_data: dict[str, Any] = msgspec.field(default_factory=dict)


class DialedOut(Struct):
    contact_id: int
    call_id: str
