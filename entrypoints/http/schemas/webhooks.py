from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

from application.webhooks import SubscriptionWithSecret
from domain.addresses import MAX_URL_LENGTH
from domain.identity import persisted
from domain.webhooks import MAX_GRACE_HOURS, Delivery, DeliveryAttempt, Subscription
from entrypoints.http.schemas import OneLine

Name = Annotated[OneLine, Meta(min_length=1, max_length=200, description="Defaults to the URL without its scheme")]
Url = Annotated[str, Meta(min_length=1, max_length=MAX_URL_LENGTH, description="An http(s) URL on a public address")]
EventName = Annotated[str, Meta(min_length=1, max_length=100)]
Events = Annotated[list[EventName], Meta(min_length=1, max_length=50,
                                         description="Event names from GET /webhooks/events (at least one)")]
Status = Literal["active", "paused", "disabled"]
GraceHours = Annotated[int, Meta(ge=0, le=MAX_GRACE_HOURS, description=(
    f"Hours the previous secret keeps signing (0-{MAX_GRACE_HOURS})"))]


# A "type: ignore[arg-type]" below marks a field whose domain type is wider than the documented one: a status
# the domain keeps as a str where the schema lists its values, or a field that is None only before the row is stored.

class WebhookCreate(Struct, forbid_unknown_fields=True):
    url: Url
    events: Events
    name: Name | None = None


class WebhookUpdate(Struct, forbid_unknown_fields=True):
    name: Name | UnsetType = UNSET
    url: Url | UnsetType = UNSET
    events: Events | UnsetType = UNSET
    status: Literal["active", "paused"] | UnsetType = UNSET


class RotateSecretRequest(Struct, forbid_unknown_fields=True):
    grace_period_hours: GraceHours = 24


class WebhookOut(Struct):
    id: int
    name: str
    url: str
    events: list[str]
    status: Status
    disabled_reason: str | None
    disabled_at: datetime | None
    failing_since: datetime | None
    previous_secret_expires_at: datetime | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, s: Subscription) -> WebhookOut:
        return cls(**_fields(s))


class WebhookCreated(WebhookOut):
    secret: str

    @classmethod
    def created(cls, made: SubscriptionWithSecret) -> WebhookCreated:
        return cls(**_fields(made.subscription), secret=made.secret)


def _fields(s: Subscription) -> dict[str, Any]:
    return {
        "id": persisted(s.id), "name": s.name, "url": s.url, "events": list(s.events), "status": s.status,
        "disabled_reason": s.disabled_reason, "disabled_at": s.disabled_at, "failing_since": s.failing_since,
        "previous_secret_expires_at": s.previous_secret_expires_at, "created_at": s.created_at,
        "updated_at": s.updated_at,
    }


class SecretRotated(Struct):
    id: int
    secret: str
    previous_secret_expires_at: datetime | None


class EventTypeOut(Struct):
    name: str
    group: str
    description: str
    example: Annotated[dict[str, Any], Meta(description="Example data of the event, as a subscriber receives it")]


WebhookIdField = Annotated[int, Meta(description="The subscription's id")]
MessageIdField = Annotated[str, Meta(description="The delivery's X-Webhook-Id: the same on every attempt and "
                                                 "redelivery (use it to ignore duplicates)")]


class DeliveryQueued(Struct):
    delivery_id: int
    webhook_id: WebhookIdField
    message_id: MessageIdField
    event: str
    status: Literal["pending"]
    next_attempt_at: datetime | None

    @classmethod
    def of(cls, d: Delivery) -> DeliveryQueued:
        return cls(persisted(d.id), d.subscription_id, d.message_id, d.event_type, "pending", d.next_attempt_at)


class DeliveryLogOut(Struct):
    id: int
    delivery_id: int
    event: str
    webhook_id: WebhookIdField
    message_id: MessageIdField
    attempt: int
    status: Literal["succeeded", "failed"]
    response_status: int | None
    response_body: str | None
    duration_ms: int
    error: str | None
    created_at: datetime
    next_retry_at: datetime | None

    @classmethod
    def of(cls, a: DeliveryAttempt) -> DeliveryLogOut:
        return cls(
            id=persisted(a.id), delivery_id=a.delivery_id, event=a.event_type, webhook_id=a.subscription_id,
            message_id=a.message_id, attempt=a.attempt,
            status=a.status,  # type: ignore[arg-type]  # the domain's type is wider
            response_status=a.response_status, response_body=a.response_body, duration_ms=a.duration_ms,
            error=a.error, created_at=a.created_at, next_retry_at=a.next_retry_at,
        )
