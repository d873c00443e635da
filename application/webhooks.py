"""Webhook use cases: subscriptions (create, read, change, delete, test, rotate the secret, read
the log, redeliver) and the worker's steps (dispatch the outbox, claim, send, record, release).

Other features emit events with ``uow.record(EventType.APPOINTMENT_BOOKED(org_id, data))``
(``domain.events``) inside their use case; nothing else is needed to reach subscribers: the
dispatcher is the outbox's ``webhooks`` consumer (application/outbox.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from application.context import Actor
from application.outbox import WEBHOOKS
from application.ports.events import OutboxReader
from application.ports.platform import Clock, Page, PageRequest, Random, UnitOfWork
from application.ports.secrets import SecretBox, SecretUnreadable
from application.ports.webhooks import (
    AttemptFilter,
    ClaimedDelivery,
    DeliveryRepository,
    DeliveryUpdate,
    SubscriptionFilter,
    SubscriptionRepository,
    WebhookHttp,
)
from domain import webhooks as wh
from domain.errors import BlockedAddress, Conflict, DomainError, NotFound, ValidationFailed
from domain.identity import persisted
from domain.patching import MergePatch, apply_patch
from domain.rfc3339 import format_utc_millis
from domain.webhooks import Delivery, DeliveryAttempt, DeliveryStatus, Subscription, Verdict

log = logging.getLogger("parley.webhooks")


@dataclass(frozen=True, slots=True)
class WebhookPolicy:
    """Operator settings the webhook use cases follow."""

    allow_loopback: bool = False
    retry_scale: float = 1.0
    timeout_seconds: float = wh.DELIVERY_TIMEOUT_SECONDS


def _new_message_id(random: Random) -> str:
    return wh.WEBHOOK_ID_PREFIX + random.token(18)  # 24 URL-safe characters, 144 random bits


async def _load(subscriptions: SubscriptionRepository, actor: Actor, subscription_id: int, *,
                lock: bool = False) -> Subscription:
    getter = subscriptions.get_for_update if lock else subscriptions.get
    found = await getter(actor.organization_id, subscription_id)
    if found is None:
        raise NotFound("webhook", subscription_id)
    return found


# -- subscriptions -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateSubscriptionCommand:
    actor: Actor
    url: str
    events: Sequence[str]
    name: str | None = None


@dataclass(frozen=True, slots=True)
class SubscriptionWithSecret:
    """A subscription with its signing secret in clear: only right after create or rotate."""

    subscription: Subscription
    secret: str
    previous_secret_expires_at: datetime | None = None


class CreateSubscription:
    def __init__(self, subscriptions: SubscriptionRepository, box: SecretBox, random: Random, clock: Clock,
                 policy: WebhookPolicy) -> None:
        self.subscriptions, self.box = subscriptions, box
        self.random, self.clock, self.policy = random, clock, policy

    async def execute(self, command: CreateSubscriptionCommand) -> SubscriptionWithSecret:
        url = wh.check_target(command.url, allow_loopback=self.policy.allow_loopback)
        events = wh.normalize_events(command.events)
        secret = self.random.hex(wh.SECRET_BYTES)
        now = self.clock.now()
        subscription = await self.subscriptions.add(Subscription(
            id=None, organization_id=command.actor.organization_id,
            name=command.name or wh.default_name(url), url=url, events=events, status="active",
            sealed_secret=self.box.seal(secret), created_at=now, updated_at=now,
        ))
        return SubscriptionWithSecret(subscription, secret)


@dataclass(frozen=True, slots=True)
class GetSubscriptionCommand:
    actor: Actor
    subscription_id: int


class GetSubscription:
    def __init__(self, subscriptions: SubscriptionRepository) -> None:
        self.subscriptions = subscriptions

    async def execute(self, command: GetSubscriptionCommand) -> Subscription:
        return await _load(self.subscriptions, command.actor, command.subscription_id)


@dataclass(frozen=True, slots=True)
class ListSubscriptionsCommand:
    actor: Actor
    filters: SubscriptionFilter
    page: PageRequest


class ListSubscriptions:
    def __init__(self, subscriptions: SubscriptionRepository) -> None:
        self.subscriptions = subscriptions

    async def execute(self, command: ListSubscriptionsCommand) -> Page[Subscription]:
        return await self.subscriptions.list(command.actor.organization_id, command.filters, command.page)


@dataclass(frozen=True, slots=True)
class UpdateSubscriptionCommand:
    actor: Actor
    subscription_id: int
    patch: MergePatch
    """Any of name, url, events, status (active or paused)."""


class UpdateSubscription:
    def __init__(self, subscriptions: SubscriptionRepository, clock: Clock, policy: WebhookPolicy) -> None:
        self.subscriptions, self.clock, self.policy = subscriptions, clock, policy

    async def execute(self, command: UpdateSubscriptionCommand) -> Subscription:
        changes = dict(command.patch)
        if "url" in changes:
            changes["url"] = wh.check_target(changes["url"], allow_loopback=self.policy.allow_loopback)
        if "events" in changes:
            changes["events"] = wh.normalize_events(changes["events"])
        current = await _load(self.subscriptions, command.actor, command.subscription_id, lock=True)
        now = self.clock.now()
        target = changes.pop("status", None)
        subscription = current.move_to(target, now) if target is not None else current
        subscription = apply_patch(subscription, changes)
        if subscription == current:  # a PATCH that changes nothing leaves updated_at alone
            return current
        return await self.subscriptions.update(replace(subscription, updated_at=now))


@dataclass(frozen=True, slots=True)
class DeleteSubscriptionCommand:
    actor: Actor
    subscription_id: int


class DeleteSubscription:
    def __init__(self, subscriptions: SubscriptionRepository, clock: Clock) -> None:
        self.subscriptions, self.clock = subscriptions, clock

    async def execute(self, command: DeleteSubscriptionCommand) -> None:
        actor, subscription_id = command.actor, command.subscription_id
        await _load(self.subscriptions, actor, subscription_id, lock=True)
        await self.subscriptions.delete(actor.organization_id, subscription_id, self.clock.now())


@dataclass(frozen=True, slots=True)
class RotateSecretCommand:
    actor: Actor
    subscription_id: int
    grace_period_hours: int
    """How long the previous secret keeps signing alongside the new one (0 to MAX_GRACE_HOURS)."""


class RotateSecret:
    """A new signing secret; the old one keeps signing (alongside) for the grace period."""

    def __init__(self, subscriptions: SubscriptionRepository, box: SecretBox, random: Random, clock: Clock) -> None:
        self.subscriptions, self.box, self.random, self.clock = subscriptions, box, random, clock

    async def execute(self, command: RotateSecretCommand) -> SubscriptionWithSecret:
        actor, subscription_id, grace_period_hours = command.actor, command.subscription_id, command.grace_period_hours
        if not 0 <= grace_period_hours <= wh.MAX_GRACE_HOURS:
            raise ValidationFailed.field("grace_period_hours", f"must be between 0 and {wh.MAX_GRACE_HOURS}")
        subscription = await _load(self.subscriptions, actor, subscription_id, lock=True)
        secret = self.random.hex(wh.SECRET_BYTES)
        rotated = subscription.rotated(self.box.seal(secret), timedelta(hours=grace_period_hours), self.clock.now())
        stored = await self.subscriptions.update(rotated)
        return SubscriptionWithSecret(stored, secret, stored.previous_secret_expires_at)


def _require_active(subscription: Subscription) -> None:
    if not subscription.receives:
        raise Conflict(f"the webhook is {subscription.status}; set its status to active first",
                       details={"status": subscription.status})


@dataclass(frozen=True, slots=True)
class SendTestEventCommand:
    actor: Actor
    subscription_id: int


class SendTestEvent:
    """Queue a ``webhook.test`` delivery to one subscription (one attempt, no retries) and wake the delivery
    senders once it is committed, as a dispatched event does, so it leaves at once instead of at their next
    poll."""

    def __init__(self, uow: UnitOfWork, subscriptions: SubscriptionRepository, deliveries: DeliveryRepository,
                 random: Random, clock: Clock) -> None:
        self.uow, self.subscriptions, self.deliveries = uow, subscriptions, deliveries
        self.random, self.clock = random, clock

    async def execute(self, command: SendTestEventCommand) -> Delivery:
        actor, subscription_id = command.actor, command.subscription_id
        subscription = await _load(self.subscriptions, actor, subscription_id)
        _require_active(subscription)
        now = self.clock.now()
        delivery = await self.deliveries.add(Delivery(
            id=None, organization_id=actor.organization_id, subscription_id=subscription_id,
            event_type=wh.TEST_EVENT, data=wh.sample_event_data(subscription, now), occurred_at=now,
            message_id=_new_message_id(self.random), next_attempt_at=now, auto_retry=False,
            created_at=now, updated_at=now,
        ))
        self.uow.created_work()  # wakes the delivery senders once committed
        return delivery


@dataclass(frozen=True, slots=True)
class ListDeliveryAttemptsCommand:
    actor: Actor
    subscription_id: int
    filters: AttemptFilter
    page: PageRequest


class ListDeliveryAttempts:
    def __init__(self, subscriptions: SubscriptionRepository, deliveries: DeliveryRepository) -> None:
        self.subscriptions, self.deliveries = subscriptions, deliveries

    async def execute(self, command: ListDeliveryAttemptsCommand) -> Page[DeliveryAttempt]:
        actor, subscription_id = command.actor, command.subscription_id
        await _load(self.subscriptions, actor, subscription_id)
        return await self.deliveries.list_attempts(actor.organization_id, subscription_id, command.filters,
                                                   command.page)


@dataclass(frozen=True, slots=True)
class RedeliverCommand:
    actor: Actor
    subscription_id: int
    attempt_id: int
    """The delivery log row whose delivery is sent again."""


class Redeliver:
    """Send the delivery a log row belongs to once more, with the same X-Webhook-Id.

    A delivery still waiting for an automatic retry is simply made due now (its schedule goes
    on); a finished one (succeeded, failed, cancelled) gets one more attempt, without retries. The delivery
    senders are woken once it is committed, so it leaves at once."""

    def __init__(self, uow: UnitOfWork, subscriptions: SubscriptionRepository, deliveries: DeliveryRepository,
                 clock: Clock) -> None:
        self.uow, self.subscriptions, self.deliveries, self.clock = uow, subscriptions, deliveries, clock

    async def execute(self, command: RedeliverCommand) -> Delivery:
        actor, subscription_id, attempt_id = command.actor, command.subscription_id, command.attempt_id
        subscription = await _load(self.subscriptions, actor, subscription_id)
        attempt = await self.deliveries.get_attempt(actor.organization_id, subscription_id, attempt_id)
        if attempt is None:
            raise NotFound("delivery log", attempt_id)
        _require_active(subscription)
        delivery = await self.deliveries.get(actor.organization_id, attempt.delivery_id)
        if delivery is None:
            raise NotFound("delivery", attempt.delivery_id)
        now = self.clock.now()
        keep_schedule = delivery.status == DeliveryStatus.PENDING and delivery.auto_retry
        requeued = await self.deliveries.requeue(actor.organization_id, persisted(delivery.id), now,
                                                 auto_retry=keep_schedule)
        if not requeued:
            raise Conflict("this delivery is being sent right now; try again in a moment")
        self.uow.created_work()  # wakes the delivery senders once committed
        return replace(delivery, status="pending", next_attempt_at=now, auto_retry=keep_schedule, updated_at=now)


# -- the worker's steps ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DispatchOutboxCommand:
    limit: int = 500
    """At most this many events per pass."""


class DispatchOutbox:
    """The outbox's ``webhooks`` consumer: fan the events after its cursor out to the subscriptions
    that are active and want them now, one delivery per (event, subscription), and move the cursor
    past them, in one transaction."""

    def __init__(self, uow: UnitOfWork, outbox: OutboxReader, subscriptions: SubscriptionRepository,
                 deliveries: DeliveryRepository, random: Random, clock: Clock) -> None:
        self.uow, self.outbox, self.subscriptions, self.deliveries = uow, outbox, subscriptions, deliveries
        self.random, self.clock = random, clock

    async def execute(self, command: DispatchOutboxCommand) -> int:
        """Returns how many events were dispatched (0: nothing new)."""
        events = await self.outbox.pending(WEBHOOKS, command.limit)
        if not events:
            return 0
        organizations = sorted({e.organization_id for e in events})
        by_org: dict[int, list[Subscription]] = {}
        for subscription in await self.subscriptions.active_for(organizations):
            by_org.setdefault(subscription.organization_id, []).append(subscription)
        now = self.clock.now()
        deliveries = [
            Delivery(id=None, organization_id=e.organization_id, subscription_id=persisted(s.id), event_type=e.type,
                     data=e.data, occurred_at=e.created_at or now, message_id=_new_message_id(self.random),
                     event_id=e.id, resource=wh.resource_of(e.type, e.data), next_attempt_at=now, created_at=now,
                     updated_at=now)
            for e in events for s in by_org.get(e.organization_id, ()) if s.wants(e.type)
        ]
        if deliveries:
            await self.deliveries.add_many(deliveries)
            self.uow.created_work()  # wakes the delivery pumps once committed
        await self.outbox.advance(WEBHOOKS, events[-1].id, now)
        return len(events)


@dataclass(frozen=True, slots=True)
class ClaimDeliveriesCommand:
    worker: str
    limit: int
    lease: timedelta


class ClaimDeliveries:
    def __init__(self, deliveries: DeliveryRepository, clock: Clock) -> None:
        self.deliveries, self.clock = deliveries, clock

    async def execute(self, command: ClaimDeliveriesCommand) -> list[ClaimedDelivery]:
        now = self.clock.now()
        return await self.deliveries.claim_due(now, command.limit, command.worker, now + command.lease)


@dataclass(frozen=True, slots=True)
class DeliveryOutcome:
    claimed: ClaimedDelivery
    verdict: Verdict
    attempt: DeliveryAttempt | None
    """The log row; None when nothing was sent (the subscription is no longer active)."""
    finished_at: datetime

    @property
    def delivery(self) -> Delivery:
        return self.claimed.delivery


@dataclass(frozen=True, slots=True)
class SendDeliveryCommand:
    claimed: ClaimedDelivery


class SendDelivery:
    """One attempt: sign the body anew, POST it through the SSRF-safe client, judge the answer.
    Touches no database (the worker records outcomes in batches)."""

    _CACHE_LIMIT = 10_000

    def __init__(self, http: WebhookHttp, box: SecretBox, clock: Clock, random: Random,
                 policy: WebhookPolicy) -> None:
        self.http, self.box, self.clock, self.random, self.policy = http, box, clock, random, policy
        self._opened: dict[str, str] = {}

    def _open(self, sealed: str) -> str:
        plain = self._opened.get(sealed)
        if plain is None:
            plain = self.box.open(sealed)
            if len(self._opened) >= self._CACHE_LIMIT:
                self._opened.clear()
            self._opened[sealed] = plain
        return plain

    async def execute(self, command: SendDeliveryCommand) -> DeliveryOutcome:
        claimed = command.claimed
        try:
            return await self._attempt(claimed)
        except Exception:
            log.exception("webhook delivery %s failed unexpectedly", claimed.delivery.message_id)
            now = self.clock.now()
            verdict = wh.judge(attempt=claimed.delivery.attempts, auto_retry=claimed.delivery.auto_retry, status=None,
                               error="internal error while sending", retry_after=None, now=now,
                               scale=self.policy.retry_scale, jitter=self.random.uniform(-1.0, 1.0))
            return DeliveryOutcome(claimed, verdict, None, now)

    async def _attempt(self, claimed: ClaimedDelivery) -> DeliveryOutcome:
        delivery, subscription = claimed.delivery, claimed.subscription
        now = self.clock.now()
        if subscription is None or not subscription.receives:
            why = "the webhook was deleted" if subscription is None else f"the webhook is {subscription.status}"
            return DeliveryOutcome(claimed, Verdict(False, "cancelled", None, why), None, now)
        status: int | None = None
        headers: dict[str, str] = {}
        body_prefix = b""
        duration_ms = 0
        error: str | None = None
        try:
            secrets = [self._open(s) for s in subscription.signing_secrets(now)]
        except SecretUnreadable:
            secrets = []
            error = "the signing secret could not be decrypted (was PARLEY_SECRET_KEY changed?)"
        if secrets:
            body = delivery.body()
            timestamp = int(now.timestamp())
            request_headers = {
                "Content-Type": "application/json",
                "User-Agent": wh.USER_AGENT,
                wh.ID_HEADER: delivery.message_id,
                wh.EVENT_HEADER: delivery.event_type,
                wh.TIMESTAMP_HEADER: str(timestamp),
                wh.SIGNATURE_HEADER: wh.signature_header(secrets, timestamp, body),
            }
            try:
                result = await self.http.post(subscription.url, body=body, headers=request_headers,
                                              timeout=self.policy.timeout_seconds)
                status, headers, body_prefix = result.status, result.headers, result.body_prefix
                duration_ms, error = result.duration_ms, result.error
            except BlockedAddress as exc:
                error = f"blocked_address: {exc.message}"
            except ValidationFailed as exc:
                error = f"invalid URL: {exc.message}"
            except DomainError as exc:
                error = exc.message
            except Exception:
                log.exception("webhook delivery %s raised", delivery.message_id)
                error = "internal error while sending"
        verdict = wh.judge(
            attempt=delivery.attempts, auto_retry=delivery.auto_retry, status=status, error=error,
            retry_after=headers.get("retry-after"), now=now, scale=self.policy.retry_scale,
            jitter=self.random.uniform(-1.0, 1.0),
        )
        attempt = DeliveryAttempt(
            id=None, organization_id=delivery.organization_id, subscription_id=delivery.subscription_id,
            delivery_id=persisted(delivery.id), event_type=delivery.event_type, message_id=delivery.message_id,
            attempt=delivery.attempts, status="succeeded" if verdict.succeeded else "failed",
            response_status=status,
            response_body=body_prefix[: wh.RESPONSE_BODY_LOG_BYTES].decode("utf-8", "replace") if status else None,
            duration_ms=duration_ms, error=verdict.error, created_at=now, next_retry_at=verdict.next_attempt_at,
        )
        if not verdict.succeeded:
            # one line per failed attempt; never the secret, the signature or the body
            log.warning("webhook delivery failed: webhook %s, event %s, delivery %s, attempt %d, status %s: %s; %s",
                        subscription.id, delivery.event_type, delivery.id, delivery.attempts, status or "-",
                        verdict.error,
                        f"next attempt at {format_utc_millis(verdict.next_attempt_at)}" if verdict.next_attempt_at
                        else "no further automatic attempt")
        return DeliveryOutcome(claimed, verdict, attempt, self.clock.now())


@dataclass(frozen=True, slots=True)
class RecordDeliveryOutcomesCommand:
    worker: str
    outcomes: Sequence[DeliveryOutcome]


class RecordDeliveryOutcomes:
    """Store a batch of outcomes: each delivery's new state, the log rows, and each
    subscription's health (a success clears the failure streak; 410, or 5 days of failures
    without a success, disables it with a reason)."""

    def __init__(self, deliveries: DeliveryRepository, subscriptions: SubscriptionRepository, clock: Clock) -> None:
        self.deliveries, self.subscriptions, self.clock = deliveries, subscriptions, clock

    async def execute(self, command: RecordDeliveryOutcomesCommand) -> None:
        worker, outcomes = command.worker, command.outcomes
        if not outcomes:
            return
        await self.deliveries.finish(worker, [
            DeliveryUpdate(persisted(o.delivery.id), o.verdict.delivery_status, o.verdict.next_attempt_at,
                           o.finished_at)
            for o in outcomes
        ])
        attempts = [o.attempt for o in outcomes if o.attempt is not None]
        if attempts:
            await self.deliveries.add_attempts(attempts)
        by_subscription: dict[tuple[int, int], list[DeliveryOutcome]] = {}
        for o in outcomes:
            if o.attempt is not None:
                by_subscription.setdefault((o.delivery.organization_id, o.delivery.subscription_id), []).append(o)
        healthy: dict[int, list[int]] = {}
        for (organization_id, subscription_id), group in by_subscription.items():
            group.sort(key=lambda o: (o.finished_at, persisted(o.delivery.id)))
            gone = next((o.verdict.disable_reason for o in group if o.verdict.disable_reason), None)
            if gone is not None:
                await self.subscriptions.disable(organization_id, subscription_id, gone, group[-1].finished_at)
                continue
            last = group[-1]
            if last.verdict.succeeded:
                healthy.setdefault(organization_id, []).append(subscription_id)
                continue
            successes = [i for i, o in enumerate(group) if o.verdict.succeeded]
            if successes:  # the streak restarts after this batch's last success
                await self.subscriptions.mark_healthy(organization_id, [subscription_id])
            first_failure = group[successes[-1] + 1 if successes else 0]
            streak_start = first_failure.attempt.created_at if first_failure.attempt else first_failure.finished_at
            since = await self.subscriptions.mark_failing(organization_id, subscription_id, streak_start)
            if wh.failing_too_long(since, last.finished_at):
                await self.subscriptions.disable(organization_id, subscription_id,
                                                 wh.failure_reason(since, last.verdict.error), last.finished_at)
        for organization_id, subscription_ids in healthy.items():
            await self.subscriptions.mark_healthy(organization_id, subscription_ids)


@dataclass(frozen=True, slots=True)
class ReleaseDeliveriesCommand:
    worker: str
    delivery_ids: Sequence[int]


class ReleaseDeliveries:
    def __init__(self, deliveries: DeliveryRepository) -> None:
        self.deliveries = deliveries

    async def execute(self, command: ReleaseDeliveriesCommand) -> None:
        if command.delivery_ids:
            await self.deliveries.release(command.worker, command.delivery_ids)
