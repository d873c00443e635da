"""Outbound campaigns and their contacts: fields, defaults, the two status machines, the retry decision and
the reading of contact rows (JSON items or CSV records).

Campaign status machine (docs/campaigns.md)::

    draft ──start──▶ running ──pause──▶ paused ──start──▶ running
      │                 ├──complete──▶ completed   (every contact is final)
      │                 ├──fail──▶ failed          (the agent can no longer call)
      └──cancel──▶ cancelled ◀──cancel── running | paused

Contact status machine::

    pending ──dial──▶ dialing ──complete──▶ completed
       │                 ├──retry──▶ retry_wait ──dial──▶ dialing
       │                 └──fail──▶ failed
       └── pending | retry_wait ──skip_dnc──▶ skipped_dnc,  ──cancel──▶ cancelled

Standard library only.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from domain.errors import InvalidTransition, Unprocessable, ValidationFailed
from domain.metadata import KEY_MAX_LENGTH, MAX_KEYS, VALUE_MAX_LENGTH, metadata_problem
from domain.state_machine import TransitionTable
from domain.text import ONE_LINE_WORDS, is_one_line

# ---------------------------------------------------------------------------------------------- campaigns

class CampaignStatus(StrEnum):
    """The status of a campaign; the values are the API's."""

    DRAFT = "draft"
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    FAILED = "failed"


class CampaignStatusReason(StrEnum):
    """Why a running campaign is not dialling (with its ``next_dial_at``), or why it failed; the values are the
    API's ``status_reason``."""

    OUTSIDE_CALLING_HOURS = "outside_calling_hours"
    """Its next contact waits for its calling window."""
    WAITING_FOR_RETRY = "waiting_for_retry"
    """Its next contact waits for a retry delay."""
    WAITING_FOR_CONTACTS = "waiting_for_contacts"
    """A ``manual`` campaign with no contact left to dial."""
    AGENT_NOT_ACTIVE = "agent_not_active"
    PAYMENT_REQUIRED = "payment_required"
    QUOTA_EXCEEDED = "quota_exceeded"
    AGENT_ARCHIVED = "agent_archived"
    """A failed campaign's: its agent was archived."""
    AGENT_DELETED = "agent_deleted"
    """A failed campaign's: its agent was deleted."""


STATUSES = tuple(CampaignStatus)
FINAL_STATUSES = frozenset({CampaignStatus.COMPLETED, CampaignStatus.CANCELLED, CampaignStatus.FAILED})
TIMEZONE_MODES = ("recipient", "campaign")
COMPLETIONS = ("when_empty", "manual")
"""``when_empty``: a running campaign completes once every contact is final (it needs a contact to start).
``manual``: it may start empty and runs until paused or cancelled (a campaign fed by the widget or leads)."""
EDITABLE_STATUSES = (CampaignStatus.DRAFT, CampaignStatus.PAUSED)
"""PATCH is accepted only in these states."""
SCHEDULED_STATUSES = (CampaignStatus.RUNNING, CampaignStatus.PAUSED)
"""A campaign in these states uses its schedule: the schedule cannot be deleted meanwhile."""
DELETABLE_STATUSES = (CampaignStatus.DRAFT, CampaignStatus.COMPLETED, CampaignStatus.CANCELLED, CampaignStatus.FAILED)
"""DELETE is accepted only in these states (never while the campaign may be dialling)."""

CAMPAIGN_MACHINE = TransitionTable.of(
    "campaign",
    [
        ("draft", "start", "running"),
        ("paused", "start", "running"),
        ("running", "pause", "paused"),
        ("running", "complete", "completed"),
        ("running", "fail", "failed"),
        ("draft", "cancel", "cancelled"),
        ("running", "cancel", "cancelled"),
        ("paused", "cancel", "cancelled"),
    ],
)

NAME_MAX_LENGTH = 200
MAX_CONCURRENT_CALLS_RANGE = (1, 50)
DEFAULT_MAX_CONCURRENT_CALLS = 5
WIDGET_MAX_CONTACTS_PER_HOUR_DEFAULT = 60
WIDGET_MAX_CONTACTS_PER_HOUR_RANGE = (1, 10_000)
MAX_ATTEMPTS_RANGE = (1, 10)
DELAY_MINUTES_RANGE = (1, 10_080)  # one minute to one week
RETRY_OUTCOMES = ("busy", "no_answer", "voicemail", "failed")
"""The call outcomes the retry policy covers (a completed or transferred call completes its contact)."""

_HHMM = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9])$")


def minutes_of(value: str, field_name: str, *, allow_24: bool = False) -> int:
    """Minutes after midnight of ``"HH:MM"`` (``"24:00"`` only where ``allow_24``), else ValidationFailed."""
    if allow_24 and value == "24:00":
        return 24 * 60
    match = _HHMM.match(value) if isinstance(value, str) else None
    if match is None:
        accepted = "00:00 to 23:59" + (" or 24:00" if allow_24 else "")
        raise ValidationFailed.field(field_name, f"must be a local time HH:MM ({accepted})")
    return int(match.group(1)) * 60 + int(match.group(2))


@dataclass(frozen=True, slots=True)
class CallingHours:
    """The local wall-clock window in which contacts may be dialled (``end`` may be ``24:00``)."""

    start: str = "08:00"
    end: str = "21:00"

    def validate(self) -> CallingHours:
        start = minutes_of(self.start, "calling_hours.start")
        end = minutes_of(self.end, "calling_hours.end", allow_24=True)
        if end <= start:
            raise ValidationFailed.field("calling_hours.end", "must be after calling_hours.start")
        return self


@dataclass(frozen=True, slots=True)
class RetryRule:
    """How often a contact is tried in all (first attempt included) after an outcome, and the wait between."""

    max_attempts: int
    delay_minutes: int

    def validate(self, where: str) -> RetryRule:
        low, high = MAX_ATTEMPTS_RANGE
        if not low <= self.max_attempts <= high:
            raise ValidationFailed.field(f"{where}.max_attempts", f"must be from {low} to {high}")
        low, high = DELAY_MINUTES_RANGE
        if not low <= self.delay_minutes <= high:
            raise ValidationFailed.field(f"{where}.delay_minutes", f"must be from {low} to {high}")
        return self


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """One rule per retryable outcome. Defaults: busy 3 x 10 min, no_answer 3 x 60 min, voicemail 1 (no
    retry), failed 2 x 30 min."""

    busy: RetryRule = field(default_factory=lambda: RetryRule(3, 10))
    no_answer: RetryRule = field(default_factory=lambda: RetryRule(3, 60))
    voicemail: RetryRule = field(default_factory=lambda: RetryRule(1, 60))
    failed: RetryRule = field(default_factory=lambda: RetryRule(2, 30))

    def rule(self, outcome: str) -> RetryRule:
        if outcome not in RETRY_OUTCOMES:
            raise ValueError(f"{outcome!r} is not a retryable outcome ({', '.join(RETRY_OUTCOMES)})")
        rule: RetryRule = getattr(self, outcome)
        return rule

    def validate(self) -> RetryPolicy:
        for outcome in RETRY_OUTCOMES:
            self.rule(outcome).validate(f"retry.{outcome}")
        return self

    def view(self) -> dict[str, dict[str, int]]:
        return {o: {"max_attempts": self.rule(o).max_attempts, "delay_minutes": self.rule(o).delay_minutes}
                for o in RETRY_OUTCOMES}


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """What becomes of a contact after an unsuccessful attempt: ``retry_wait`` until ``next_attempt_at``, or
    ``failed`` (``reason``: the last outcome)."""

    status: str
    next_attempt_at: datetime | None
    reason: str


def decide_retry(outcome: str, attempts: int, policy: RetryPolicy, now: datetime) -> RetryDecision:
    """The retry decision after attempt number ``attempts`` (1 for the first) ended with ``outcome`` (one of
    RETRY_OUTCOMES): another attempt ``delay_minutes`` after ``now`` while fewer than ``max_attempts`` were
    made, else ``failed``. Pure: no clock, no storage."""
    if attempts < 1:
        raise ValueError("attempts counts the attempts made, the one that just ended included (>= 1)")
    rule = policy.rule(outcome)
    if attempts < rule.max_attempts:
        return RetryDecision("retry_wait", now + timedelta(minutes=rule.delay_minutes), outcome)
    return RetryDecision("failed", None, outcome)


@dataclass(frozen=True, slots=True)
class Campaign:
    id: int | None
    organization_id: int
    name: str
    agent_id: int
    schedule_id: int | None = None
    timezone: str = "UTC"
    timezone_mode: str = "recipient"
    calling_hours: CallingHours = field(default_factory=CallingHours)
    max_concurrent_calls: int = DEFAULT_MAX_CONCURRENT_CALLS
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    from_phone_number_id: int | None = None
    completion: str = "when_empty"
    """One of COMPLETIONS: whether the campaign completes by itself when its queue drains."""
    allowed_countries: tuple[str, ...] | None = None
    """Narrows the organization's dialing policy for this campaign (None: the organization's countries)."""
    widget_max_contacts_per_hour: int = WIDGET_MAX_CONTACTS_PER_HOUR_DEFAULT
    """Contacts the embeddable widget may add to it per hour (429 beyond)."""
    status: str = "draft"
    status_reason: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    next_dial_at: datetime | None = None
    """Set by the dialer with ``status_reason`` (e.g. ``outside_calling_hours``): when it dials next."""

    def move(self, trigger: str, at: datetime, *, reason: str | None = None) -> Campaign:
        """Apply ``trigger`` at ``at`` (InvalidTransition if the machine has no such move)."""
        target = CAMPAIGN_MACHINE.next(self.status, trigger)
        changes: dict[str, Any] = {"status": target, "status_reason": reason, "updated_at": at,
                                   "next_dial_at": None}
        if target == "running" and self.started_at is None:
            changes["started_at"] = at
        if target in FINAL_STATUSES:
            changes["ended_at"] = at
        return replace(self, **changes)

    def ensure_editable(self) -> None:
        if self.status not in EDITABLE_STATUSES:
            raise InvalidTransition("campaign", self.status, "updated", action="update",
                                    allowed_from=EDITABLE_STATUSES)

    def ensure_deletable(self) -> None:
        if self.status not in DELETABLE_STATUSES:
            raise InvalidTransition("campaign", self.status, "deleted", action="delete",
                                    allowed_from=DELETABLE_STATUSES)

    def validate(self) -> Campaign:
        """Checks the rules a schema cannot (calling hours order, retry bounds, concurrency, mode)."""
        low, high = MAX_CONCURRENT_CALLS_RANGE
        if not low <= self.max_concurrent_calls <= high:
            raise ValidationFailed.field("max_concurrent_calls", f"must be from {low} to {high}")
        if self.timezone_mode not in TIMEZONE_MODES:
            raise ValidationFailed.field("timezone_mode", f"must be one of {', '.join(TIMEZONE_MODES)}")
        if self.completion not in COMPLETIONS:
            raise ValidationFailed.field("completion", f"must be one of {', '.join(COMPLETIONS)}")
        self.calling_hours.validate()
        self.retry.validate()
        low, high = WIDGET_MAX_CONTACTS_PER_HOUR_RANGE
        if not low <= self.widget_max_contacts_per_hour <= high:
            raise ValidationFailed.field("widget_max_contacts_per_hour", f"must be from {low} to {high}")
        return self

    def view(self) -> dict[str, Any]:
        """The data of campaign events."""
        return {"id": self.id, "name": self.name, "agent_id": self.agent_id, "status": self.status}


class CampaignEmpty(Unprocessable):
    """A campaign without contacts cannot start (422 campaign_empty), unless its completion is ``manual``."""

    code = "campaign_empty"


class CampaignContactLimit(Unprocessable):
    """A request that would take a campaign past MAX_CONTACTS_PER_CAMPAIGN contacts (422 campaign_contact_limit);
    nothing of it is kept."""

    code = "campaign_contact_limit"


@dataclass(frozen=True, slots=True)
class CampaignStats:
    """Contacts of a campaign by status."""

    pending: int = 0
    dialing: int = 0
    retry_wait: int = 0
    completed: int = 0
    failed: int = 0
    skipped_dnc: int = 0
    cancelled: int = 0

    @property
    def total(self) -> int:
        return (self.pending + self.dialing + self.retry_wait + self.completed + self.failed + self.skipped_dnc
                + self.cancelled)

    @classmethod
    def of(cls, counts: Mapping[str, int]) -> CampaignStats:
        return cls(**{status: int(counts.get(status, 0)) for status in CONTACT_STATUSES})


# ----------------------------------------------------------------------------------------------- contacts

class CampaignContactStatus(StrEnum):
    """The status of one contact of a campaign; the values are the API's."""

    PENDING = "pending"
    DIALING = "dialing"
    RETRY_WAIT = "retry_wait"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED_DNC = "skipped_dnc"
    CANCELLED = "cancelled"


CONTACT_STATUSES = tuple(CampaignContactStatus)
FINAL_CONTACT_STATUSES = frozenset({CampaignContactStatus.COMPLETED, CampaignContactStatus.FAILED,
                                    CampaignContactStatus.SKIPPED_DNC, CampaignContactStatus.CANCELLED})
OPEN_CONTACT_STATUSES = (CampaignContactStatus.PENDING, CampaignContactStatus.RETRY_WAIT)
"""Contacts not yet (or not again) dialled: cancelling the campaign cancels these."""

CONTACT_MACHINE = TransitionTable.of(
    "contact",
    [
        ("pending", "dial", "dialing"),
        ("retry_wait", "dial", "dialing"),
        ("dialing", "complete", "completed"),
        ("dialing", "retry", "retry_wait"),
        ("dialing", "fail", "failed"),
        ("pending", "skip_dnc", "skipped_dnc"),
        ("retry_wait", "skip_dnc", "skipped_dnc"),
        ("pending", "cancel", "cancelled"),
        ("retry_wait", "cancel", "cancelled"),
    ],
)

MAX_CONTACTS_PER_REQUEST = 10_000
MAX_CONTACTS_PER_CAMPAIGN = 100_000
"""Contacts a campaign holds at most, whatever their status (a request that would pass it adds nothing)."""
MAX_IMPORT_BYTES = 10 * 1024 * 1024
CONTACT_NAME_MAX_LENGTH = 200
TIMEZONE_MAX_LENGTH = 64
CUSTOM_KEY_MAX_LENGTH = KEY_MAX_LENGTH
CUSTOM_VALUE_MAX_LENGTH = VALUE_MAX_LENGTH
MAX_CUSTOM_FIELDS = MAX_KEYS
"""custom_data follows the ceilings of every client key-value object (``domain.metadata``)."""
MAX_REJECTIONS_REPORTED = 1_000
"""At most this many rejected rows are listed in a response (``rejected_total`` counts them all)."""


@dataclass(frozen=True, slots=True)
class Contact:
    id: int | None
    organization_id: int
    campaign_id: int
    phone: str
    name: str | None = None
    timezone: str | None = None
    custom_data: dict[str, Any] = field(default_factory=dict)
    status: str = "pending"
    attempts: int = 0
    next_attempt_at: datetime | None = None
    last_call_id: str | None = None
    reason: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    cause_depth: int = 0
    """The depth of the trigger action that added the contact (0: added otherwise): its calls and its events,
    however much later the dialer makes them, are that deep (the triggers' loop guard). Fixed when added."""

    def move(self, trigger: str, at: datetime, **changes: Any) -> Contact:
        """Apply ``trigger`` at ``at`` (InvalidTransition if the machine has no such move)."""
        target = CONTACT_MACHINE.next(self.status, trigger)
        if trigger == "dial":
            changes.setdefault("attempts", self.attempts + 1)
        if target != "retry_wait":
            changes.setdefault("next_attempt_at", None)
        return replace(self, status=target, updated_at=at, **changes)

    def ensure_deletable(self) -> None:
        if self.status != CampaignContactStatus.PENDING:
            raise InvalidTransition("contact", self.status, "deleted", action="delete", allowed_from=("pending",))


@dataclass(frozen=True, slots=True)
class ContactAttempt:
    """One dial of a contact: its number (1, 2, ...) and the call that carried it."""

    contact_id: int
    attempt: int
    call_id: str | None
    status: str
    started_at: datetime | None = None
    ended_at: datetime | None = None


# ------------------------------------------------------------------------------------------ reading rows


@dataclass(frozen=True, slots=True)
class ContactDraft:
    """A row as the client sent it, before its phone is normalised (the application's port does that)."""

    row: int
    phone: str
    name: str | None = None
    timezone: str | None = None
    custom_data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RowRejection:
    """A row left out: ``row`` (the item's position in ``contacts`` from 0, or the CSV line as a spreadsheet
    numbers it: the header is row 1), the field at fault and why."""

    row: int
    field: str
    message: str


def check_row(draft: ContactDraft) -> RowRejection | None:
    """The first rule a row breaks (besides its phone, which the normaliser judges), or None. Its phone, name and
    time zone are one line each (``domain.text``: a CSV cell may hold a quoted line break)."""
    for name, value in (("phone", draft.phone), ("name", draft.name), ("timezone", draft.timezone)):
        if isinstance(value, str) and not is_one_line(value):
            return RowRejection(draft.row, name, ONE_LINE_WORDS)
    if draft.name is not None and len(draft.name) > CONTACT_NAME_MAX_LENGTH:
        return RowRejection(draft.row, "name", f"must be at most {CONTACT_NAME_MAX_LENGTH} characters")
    problem = metadata_problem("custom_data", draft.custom_data)
    if problem is not None:
        return RowRejection(draft.row, *problem)
    for key, value in draft.custom_data.items():
        if "\x00" in key or (isinstance(value, str) and "\x00" in value):
            return RowRejection(draft.row, "custom_data", "must not contain NUL characters")
    return None


KNOWN_COLUMNS = ("phone", "name", "timezone")


class CsvUnreadable(ValidationFailed):
    """The file as a whole cannot be read as contacts (400 naming ``file``)."""

    def __init__(self, message: str) -> None:
        super().__init__(f"file: {message}", details={"validation_errors": {"file": message}})


def csv_contacts(lines: Iterable[str]) -> Iterator[ContactDraft | RowRejection]:
    """The rows of a contacts CSV file, one at a time (never the whole file in memory): a header row names the
    columns; ``phone`` is required, ``name`` and ``timezone`` are optional (matched without regard to case or
    surrounding spaces), every other column goes to ``custom_data`` under its header (empty cells left out).
    Values are kept as written, formula-looking ones included (``=cmd|...`` is text). Blank lines are
    skipped. A row with more cells than the header, or one the csv module cannot read, is rejected.

    Raises CsvUnreadable for a file without a header, without a ``phone`` column, with duplicate column
    names, or not UTF-8."""
    reader = csv.reader(_decoded(lines), strict=False)
    header: list[str] | None = None
    row_number = 0
    while True:
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            row_number += 1
            if header is None:
                raise CsvUnreadable(f"the header row cannot be read as CSV ({exc})") from None
            yield RowRejection(row_number, "row", f"cannot be read as CSV ({exc})")
            continue
        row_number += 1
        if header is None:
            if not any(cell.strip() for cell in record):
                continue  # blank lines before the header
            header = _header(record)
            continue
        if not any(cell.strip() for cell in record):
            continue
        yield _row(row_number, header, record)
    if header is None:
        raise CsvUnreadable("the file is empty: send a header row naming the columns (phone, name, timezone, ...)")


def _decoded(lines: Iterable[str]) -> Iterator[str]:
    try:
        # not ``yield from``: closing this generator must not close the caller's file
        for line in lines:  # noqa: UP028
            yield line
    except UnicodeDecodeError:
        raise CsvUnreadable("must be UTF-8 text (with or without a byte order mark)") from None


def _header(record: list[str]) -> list[str]:
    names = [cell.strip() for cell in record]
    if any("\x00" in name for name in names):
        raise CsvUnreadable("the header row must not contain NUL characters")
    canonical = [name.lower() if name.lower() in KNOWN_COLUMNS else name for name in names]
    if "phone" not in canonical:
        raise CsvUnreadable("the header row has no phone column (comma-separated: phone,name,timezone,...)")
    seen: set[str] = set()
    for name in canonical:
        if name and name in seen:
            raise CsvUnreadable(f"the header row names the column {name[:100]!r} twice")
        if len(name) > CUSTOM_KEY_MAX_LENGTH:
            raise CsvUnreadable(f"column names must be at most {CUSTOM_KEY_MAX_LENGTH} characters")
        seen.add(name)
    return canonical


def _row(row_number: int, header: list[str], record: list[str]) -> ContactDraft | RowRejection:
    if len(record) > len(header):
        return RowRejection(row_number, "row", f"has {len(record)} values but the header names {len(header)} "
                                                 "columns")
    values: dict[str, str] = {}
    custom: dict[str, Any] = {}
    for name, cell in zip(header, record, strict=False):
        if not name:
            continue  # a column without a name is ignored
        if name in KNOWN_COLUMNS:
            values[name] = cell.strip()
        elif cell != "":
            custom[name] = cell
    draft = ContactDraft(row_number, values.get("phone", ""), values.get("name") or None,
                         values.get("timezone") or None, custom)
    return check_row(draft) or draft
