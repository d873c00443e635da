"""Webhooks: the events a subscription asks for, subscriptions and their status machine, deliveries, the retry
schedule, the delivery body and its signature (including a receiver's verification)."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from enum import StrEnum
from typing import Any

from domain.addresses import LOOPBACK_MESSAGE, check_url, ensure_public
from domain.errors import BlockedAddress, InvalidTransition, ValidationFailed
from domain.events import CATALOGUE, EventType, subject_of
from domain.rfc3339 import format_utc_millis
from domain.state_machine import TransitionTable

# -- events a subscription can ask for (the catalogue is domain.events) -------------------------

TEST_EVENT = EventType.WEBHOOK_TEST.value


def resource_of(event_type: str, data: Mapping[str, Any]) -> str | None:
    """The resource an event is about (``"call:abc"``, ``"appointment:42"``): the events of one
    resource reach one subscription in the order they happened. It is the catalogue's subject of
    the event (``domain.events.subject_of``; a rescheduling is about the appointment it moves).
    None (no ordering) for the test event and for data without its subject."""
    kind = CATALOGUE.get(event_type)
    return subject_of(kind, data) if kind is not None else None


def normalize_events(events: Iterable[str]) -> tuple[str, ...]:
    """The subscribed event names, validated, without duplicates, in the order given."""
    names: list[str] = []
    unknown: list[str] = []
    for name in events:
        if name not in CATALOGUE:
            unknown.append(name)
        elif name not in names:
            names.append(name)
    if unknown:
        raise ValidationFailed.field("events", f"unknown event(s): {', '.join(sorted(set(unknown)))}; "
                                               "see GET /webhooks/events")
    if not names:
        raise ValidationFailed.field("events", "at least one event is required")
    return tuple(names)


# -- subscription URLs -------------------------------------------------------------------------

def check_target(url: str, *, allow_loopback: bool) -> str:
    """A subscription URL, checked as far as it can be without resolving it, in canonical form.

    Raises ``ValidationFailed`` (field ``url``) for a malformed URL and ``BlockedAddress`` (field ``url``; a caller
    whose field has another name renames it: ``BlockedAddress.on``) for a literal private/reserved address or a
    ``localhost`` name (unless loopback is allowed). Host names are resolved, and their addresses checked, at every
    send."""
    try:
        target = check_url(url, allow_loopback=allow_loopback)
        if target.ip is not None:
            ensure_public(target.ip, allow_loopback=allow_loopback)
        elif (target.host == "localhost" or target.host.endswith(".localhost")) and not allow_loopback:
            raise BlockedAddress(LOOPBACK_MESSAGE)
    except BlockedAddress as exc:
        raise exc.on("url") from None
    return target.url


def default_name(url: str) -> str:
    """A subscription's name when none is given: the URL without scheme and query."""
    rest = url.split("://", 1)[-1].split("?", 1)[0].rstrip("/")
    return rest[:200] or url[:200]


# -- subscriptions -----------------------------------------------------------------------------

class WebhookStatus(StrEnum):
    """The status of a webhook subscription."""

    ACTIVE = "active"
    PAUSED = "paused"
    DISABLED = "disabled"


SUBSCRIPTION_STATUSES = tuple(WebhookStatus)

SUBSCRIPTION_MACHINE = TransitionTable.of(
    "webhook",
    [
        ("active", "pause", "paused"),
        ("paused", "activate", "active"),
        ("active", "disable", "disabled"),
        ("disabled", "activate", "active"),
        ("disabled", "pause", "paused"),
    ],
)
_STATUS_TRIGGER = {"active": "activate", "paused": "pause"}

FAILURE_WINDOW = timedelta(days=5)
"""A subscription whose deliveries fail without a single success for this long is disabled."""

MAX_GRACE_HOURS = 168


@dataclass(frozen=True, slots=True)
class Subscription:
    id: int | None
    organization_id: int
    name: str
    url: str
    events: tuple[str, ...]
    status: str = "active"
    sealed_secret: str = ""
    """The signing secret as the SecretBox sealed it (never stored in clear)."""
    previous_sealed_secret: str | None = None
    previous_secret_expires_at: datetime | None = None
    failing_since: datetime | None = None
    disabled_reason: str | None = None
    disabled_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def receives(self) -> bool:
        return self.status == WebhookStatus.ACTIVE

    def wants(self, event_type: str) -> bool:
        return self.status == WebhookStatus.ACTIVE and event_type in self.events

    def move_to(self, target: str, now: datetime) -> Subscription:
        """A status change asked for through PATCH (active or paused). Same status: no change."""
        if target == self.status:
            return self
        trigger = _STATUS_TRIGGER.get(target)
        if trigger is None or not SUBSCRIPTION_MACHINE.can(self.status, trigger):
            raise InvalidTransition("webhook", self.status, target)
        moved = replace(self, status=SUBSCRIPTION_MACHINE.next(self.status, trigger), updated_at=now)
        if self.status == WebhookStatus.DISABLED:
            moved = replace(moved, disabled_reason=None, disabled_at=None, failing_since=None)
        return moved

    def signing_secrets(self, now: datetime) -> tuple[str, ...]:
        """The sealed secrets a delivery is signed with now: the current one, and the previous one
        while its rotation grace period lasts."""
        if self.previous_sealed_secret and self.previous_secret_expires_at and self.previous_secret_expires_at > now:
            return (self.sealed_secret, self.previous_sealed_secret)
        return (self.sealed_secret,)

    def rotated(self, new_sealed: str, grace: timedelta, now: datetime) -> Subscription:
        if grace > timedelta(0):
            return replace(self, sealed_secret=new_sealed, previous_sealed_secret=self.sealed_secret,
                           previous_secret_expires_at=now + grace, updated_at=now)
        return replace(self, sealed_secret=new_sealed, previous_sealed_secret=None,
                       previous_secret_expires_at=None, updated_at=now)


# -- deliveries ----------------------------------------------------------------------------------

class DeliveryStatus(StrEnum):
    """The status of a webhook delivery."""

    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


DELIVERY_STATUSES = tuple(DeliveryStatus)
ATTEMPT_STATUSES = (DeliveryStatus.SUCCEEDED, DeliveryStatus.FAILED)

RETRY_DELAYS: tuple[timedelta, ...] = (
    timedelta(seconds=5),
    timedelta(minutes=5),
    timedelta(minutes=30),
    timedelta(hours=2),
    timedelta(hours=5),
    timedelta(hours=10),
    timedelta(hours=10),
)
"""The wait after the 1st, 2nd, ... failed attempt; after the last, the delivery has failed."""
MAX_ATTEMPTS = len(RETRY_DELAYS) + 1
JITTER = 0.1
"""Each wait is stretched or shrunk by up to this fraction."""
MAX_RETRY_AFTER = timedelta(hours=10)
DELIVERY_TIMEOUT_SECONDS = 10.0
RESPONSE_BODY_LOG_BYTES = 2048


@dataclass(frozen=True, slots=True)
class Delivery:
    """One event on its way to one subscription. ``message_id`` is what the receiver sees as
    ``X-Webhook-Id``: the same on every attempt and on a manual redelivery."""

    id: int | None
    organization_id: int
    subscription_id: int
    event_type: str
    data: dict[str, Any]
    occurred_at: datetime
    message_id: str
    event_id: int | None = None
    resource: str | None = None
    """What the event is about (see :func:`resource_of`): while a delivery of a resource to a
    subscription is pending, the later ones of that resource to it wait (in event order)."""
    status: str = "pending"
    attempts: int = 0
    next_attempt_at: datetime | None = None
    auto_retry: bool = True
    created_at: datetime | None = None
    updated_at: datetime | None = None

    def body(self) -> bytes:
        return delivery_body(self.event_type, self.occurred_at, self.data)


@dataclass(frozen=True, slots=True)
class DeliveryAttempt:
    """A row of the delivery log: one attempt to send one delivery."""

    id: int | None
    organization_id: int
    subscription_id: int
    delivery_id: int
    event_type: str
    message_id: str
    attempt: int
    status: str
    response_status: int | None
    response_body: str | None
    duration_ms: int
    error: str | None
    created_at: datetime
    next_retry_at: datetime | None = None


def delivery_body(event_type: str, occurred_at: datetime, data: Mapping[str, Any],
                  extra: Mapping[str, Any] | None = None) -> bytes:
    """The JSON body of a delivery: ``{"event", "timestamp", "data"}`` (compact, UTF-8), then the ``extra``
    members of its sender (a trigger's webhook action adds its own: the same envelope, one parser)."""
    document = {"event": event_type, "timestamp": format_utc_millis(occurred_at), "data": data, **(extra or {})}
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def retry_delay(attempts_made: int, *, scale: float = 1.0, jitter: float = 0.0) -> timedelta | None:
    """How long to wait after ``attempts_made`` failed attempts, or None when none are left.

    ``jitter`` in [-1, 1] stretches the wait by up to ±10 %; ``scale`` compresses the whole
    schedule (tests and benchmarks)."""
    if attempts_made < 1 or attempts_made > len(RETRY_DELAYS):
        return None
    factor = 1.0 + JITTER * max(-1.0, min(1.0, jitter))
    return RETRY_DELAYS[attempts_made - 1] * (scale * factor)


def parse_retry_after(value: str | None, now: datetime) -> timedelta | None:
    """A Retry-After header (delta seconds or an HTTP date), capped at MAX_RETRY_AFTER."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        delay = timedelta(seconds=int(text))
    else:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        delay = when - now
    if delay <= timedelta(0):
        return None
    return min(delay, MAX_RETRY_AFTER)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one attempt's result means for its delivery and its subscription."""

    succeeded: bool
    delivery_status: str
    next_attempt_at: datetime | None
    error: str | None
    disable_reason: str | None = None


def judge(
    *,
    attempt: int,
    auto_retry: bool,
    status: int | None,
    error: str | None,
    retry_after: str | None,
    now: datetime,
    scale: float,
    jitter: float,
) -> Verdict:
    """Decide the fate of a delivery after an attempt.

    Only a 2xx is a success. 410 Gone fails it for good and disables the subscription. Every
    other outcome (no response, timeout, 3xx, 4xx, 5xx) is retried on the schedule, unless the
    attempt was a one-off (test send, manual redelivery) or the last one; 429 and 503 with
    Retry-After wait at least that long.
    """
    if status is not None and 200 <= status < 300:
        return Verdict(True, "succeeded", None, None)
    if error is None:
        error = f"the receiver answered HTTP {status}" if status is not None else "no response"
        if status is not None and 300 <= status < 400:
            error += " (redirects are not followed)"
    if status == 410:
        return Verdict(False, "failed", None, error, disable_reason="the receiver answered 410 Gone")
    delay = retry_delay(attempt, scale=scale, jitter=jitter) if auto_retry else None
    if delay is None:
        return Verdict(False, "failed", None, error)
    if status in (429, 503):
        asked = parse_retry_after(retry_after, now)
        if asked is not None and asked > delay:
            delay = asked
    return Verdict(False, "pending", now + delay, error)


def failing_too_long(failing_since: datetime | None, now: datetime) -> bool:
    return failing_since is not None and now - failing_since >= FAILURE_WINDOW


def failure_reason(failing_since: datetime, last_error: str | None) -> str:
    reason = f"deliveries have failed without a success since {format_utc_millis(failing_since)} (5 days)"
    return f"{reason}; last error: {last_error}" if last_error else reason


# -- signatures ------------------------------------------------------------------------------

SIGNATURE_HEADER = "X-Webhook-Signature"
TIMESTAMP_HEADER = "X-Webhook-Timestamp"
ID_HEADER = "X-Webhook-Id"
EVENT_HEADER = "X-Webhook-Event"
USER_AGENT = "Parley-Webhooks/2.0"
DEFAULT_TOLERANCE_SECONDS = 300


def sign(secret: str, timestamp: int | str, body: bytes) -> str:
    """Lowercase hex HMAC-SHA256 keyed with the secret (UTF-8) over ``f"{timestamp}."`` + body."""
    message = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_header(secrets: Sequence[str], timestamp: int | str, body: bytes) -> str:
    """The X-Webhook-Signature value: one signature per secret, comma-separated (newest first)."""
    return ",".join(sign(secret, timestamp, body) for secret in secrets)


def verify_signature(
    secret: str,
    timestamp: str | int,
    raw_body: bytes,
    header: str,
    *,
    tolerance_seconds: float = DEFAULT_TOLERANCE_SECONDS,
    now: float | datetime,
) -> bool:
    """A receiver's check of one delivery, before it parses the body.

    ``timestamp`` is the X-Webhook-Timestamp header, ``header`` the X-Webhook-Signature header
    (one or more comma-separated hex signatures: during a secret rotation both are sent),
    ``raw_body`` the bytes exactly as received, ``now`` the receiver's clock (Unix seconds or an
    aware datetime). True only when the timestamp is within ``tolerance_seconds`` of now and one
    of the signatures matches, compared in constant time.
    """
    try:
        sent_at = int(str(timestamp).strip())
    except ValueError:
        return False
    current = now.timestamp() if isinstance(now, datetime) else float(now)
    if abs(current - sent_at) > tolerance_seconds:
        return False
    expected = sign(secret, sent_at, raw_body)
    found = False
    for candidate in header.split(","):
        candidate = candidate.strip().removeprefix("v1=").lower()
        if hmac.compare_digest(candidate.encode(), expected.encode()):
            found = True  # keep comparing: the time taken does not depend on which one matched
    return found


# -- identifiers ---------------------------------------------------------------------------------

WEBHOOK_ID_PREFIX = "msg_"
SECRET_BYTES = 32  # 64 hex characters


def sample_event_data(subscription: Subscription, now: datetime) -> dict[str, Any]:
    return {
        "subscription_id": subscription.id,
        "subscription_name": subscription.name,
        "message": "This is a test event from Parley. No action is needed.",
        "sent_at": format_utc_millis(now),
    }
