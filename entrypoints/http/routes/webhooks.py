from __future__ import annotations

from typing import Annotated, Literal

from dishka import FromDishka
from litestar.params import JSONBody, PathParameter, QueryParameter

from application import webhooks as uc
from application.context import Actor
from application.ports.platform import PageRequest
from application.ports.webhooks import AttemptFilter, SubscriptionFilter
from domain.errors import ValidationFailed
from domain.events import CATALOGUE, EventType
from domain.parsing import MAX_ID
from entrypoints.http.envelope import Envelope, ListEnvelope, ListMeta
from entrypoints.http.routing import Limit, Offset, endpoint
from entrypoints.http.schemas.webhooks import (
    DeliveryLogOut,
    DeliveryQueued,
    EventTypeOut,
    RotateSecretRequest,
    SecretRotated,
    WebhookCreate,
    WebhookCreated,
    WebhookOut,
    WebhookUpdate,
)
from entrypoints.http.validation import require_non_blank, set_fields

TAGS = ["Webhooks"]
WebhookId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="Webhook subscription id")]
LogId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="Delivery log row id")]
_URL_ERRORS = {400: "bad URL, unknown event or blocked_address (a private, loopback or reserved target)"}

_CATALOGUE = [EventTypeOut(e.value, e.group, e.description, dict(e.example)) for e in EventType]


@endpoint("GET", "/webhooks/events", operation_id="listWebhookEvents",
          summary="The event catalogue: every event a subscription can ask for", tags=TAGS,
          scopes=("webhooks:read",))
async def list_events() -> Envelope[list[EventTypeOut]]:
    return Envelope(_CATALOGUE)


@endpoint("GET", "/webhooks", operation_id="listWebhooks", summary="List webhook subscriptions", tags=TAGS,
          scopes=("webhooks:read",))
async def list_webhooks(
    actor: FromDishka[Actor],
    use_case: FromDishka[uc.ListSubscriptions],
    limit: Limit = 25,
    offset: Offset = 0,
    status: Annotated[Literal["active", "paused", "disabled"] | None, QueryParameter()] = None,
) -> ListEnvelope[WebhookOut]:
    page = await use_case.execute(uc.ListSubscriptionsCommand(actor, SubscriptionFilter(status),
                                                              PageRequest(limit, offset)))
    return ListEnvelope([WebhookOut.of(s) for s in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("POST", "/webhooks", operation_id="createWebhook", location="/webhooks/{id}",
          summary="Subscribe a URL to events (the signing secret is shown only in this response)", tags=TAGS,
          scopes=("webhooks:write",), idempotent=True, secret=True, status_code=201, errors=_URL_ERRORS)
async def create_webhook(data: JSONBody[WebhookCreate], actor: FromDishka[Actor],
                         use_case: FromDishka[uc.CreateSubscription]) -> Envelope[WebhookCreated]:
    name = require_non_blank(data.name, "name") if data.name is not None else None
    made = await use_case.execute(uc.CreateSubscriptionCommand(actor, data.url.strip(), data.events, name))
    return Envelope(WebhookCreated.created(made))


@endpoint("GET", "/webhooks/{id:int}", operation_id="getWebhook", summary="Get a webhook subscription (no secret)",
          tags=TAGS, scopes=("webhooks:read",), errors={404: ""})
async def get_webhook(id: WebhookId, actor: FromDishka[Actor],
                      use_case: FromDishka[uc.GetSubscription]) -> Envelope[WebhookOut]:
    return Envelope(WebhookOut.of(await use_case.execute(uc.GetSubscriptionCommand(actor, id))))


@endpoint("PATCH", "/webhooks/{id:int}", operation_id="updateWebhook",
          summary="Change name, URL or events; pause (status paused) or resume (status active)", tags=TAGS,
          scopes=("webhooks:write",), errors={**_URL_ERRORS, 404: "", 409: "invalid_transition"})
async def update_webhook(id: WebhookId, data: JSONBody[WebhookUpdate], actor: FromDishka[Actor],
                         use_case: FromDishka[uc.UpdateSubscription]) -> Envelope[WebhookOut]:
    changes = set_fields(data)
    if "name" in changes:
        changes["name"] = require_non_blank(changes["name"], "name")
    if "url" in changes:
        changes["url"] = changes["url"].strip()
    return Envelope(WebhookOut.of(await use_case.execute(uc.UpdateSubscriptionCommand(actor, id, changes))))


@endpoint("DELETE", "/webhooks/{id:int}", operation_id="deleteWebhook",
          summary="Delete a webhook subscription (pending deliveries are cancelled)", tags=TAGS,
          scopes=("webhooks:delete",), errors={404: ""}, status_code=204)
async def delete_webhook(id: WebhookId, actor: FromDishka[Actor], use_case: FromDishka[uc.DeleteSubscription]) -> None:
    await use_case.execute(uc.DeleteSubscriptionCommand(actor, id))


@endpoint("POST", "/webhooks/{id:int}/test", operation_id="testWebhook",
          summary="Queue a webhook.test event to this subscription (one attempt; see its logs)", tags=TAGS,
          scopes=("webhooks:write",), idempotent=True, status_code=202,
          errors={404: "", 409: "conflict: the subscription is paused or disabled"})
async def test_webhook(id: WebhookId, actor: FromDishka[Actor],
                       use_case: FromDishka[uc.SendTestEvent]) -> Envelope[DeliveryQueued]:
    return Envelope(DeliveryQueued.of(await use_case.execute(uc.SendTestEventCommand(actor, id))))


@endpoint("GET", "/webhooks/{id:int}/logs", operation_id="listWebhookLogs",
          summary="Delivery attempts of this subscription, newest first", tags=TAGS, scopes=("webhooks:read",),
          errors={404: ""})
async def list_logs(
    id: WebhookId,
    actor: FromDishka[Actor],
    use_case: FromDishka[uc.ListDeliveryAttempts],
    limit: Limit = 25,
    offset: Offset = 0,
    event: Annotated[str | None, QueryParameter(max_length=100, description="Only this event type")] = None,
    status: Annotated[Literal["succeeded", "failed"] | None, QueryParameter(description="Attempt outcome")] = None,
) -> ListEnvelope[DeliveryLogOut]:
    if event is not None and event not in CATALOGUE:
        raise ValidationFailed.field("event", "is not an event of GET /webhooks/events")
    page = await use_case.execute(uc.ListDeliveryAttemptsCommand(actor, id, AttemptFilter(event, status),
                                                                 PageRequest(limit, offset)))
    return ListEnvelope([DeliveryLogOut.of(a) for a in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("POST", "/webhooks/{id:int}/logs/{log_id:int}/redeliver", operation_id="redeliverWebhook",
          summary="Send the delivery of this log row again (same X-Webhook-Id)", tags=TAGS,
          scopes=("webhooks:manage", "webhooks:write"), idempotent=True, status_code=202,
          errors={404: "", 409: "conflict: the subscription is paused or disabled, or the delivery is in flight"})
async def redeliver(id: WebhookId, log_id: LogId, actor: FromDishka[Actor],
                    use_case: FromDishka[uc.Redeliver]) -> Envelope[DeliveryQueued]:
    return Envelope(DeliveryQueued.of(await use_case.execute(uc.RedeliverCommand(actor, id, log_id))))


@endpoint("POST", "/webhooks/{id:int}/rotate-secret", operation_id="rotateWebhookSecret",
          summary="New signing secret; the old one also signs deliveries during the grace period", tags=TAGS,
          scopes=("webhooks:manage",), idempotent=True, secret=True, status_code=200, errors={404: ""})
async def rotate_secret(id: WebhookId, actor: FromDishka[Actor], use_case: FromDishka[uc.RotateSecret],
                        data: JSONBody[RotateSecretRequest | None] = None) -> Envelope[SecretRotated]:
    grace = data.grace_period_hours if data is not None else RotateSecretRequest().grace_period_hours
    rotated = await use_case.execute(uc.RotateSecretCommand(actor, id, grace))
    return Envelope(SecretRotated(rotated.subscription.id or id, rotated.secret, rotated.previous_secret_expires_at))


ROUTES = [list_events, list_webhooks, create_webhook, get_webhook, update_webhook, delete_webhook, test_webhook,
          list_logs, redeliver, rotate_secret]
