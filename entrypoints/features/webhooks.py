"""Webhooks feature: subscriptions API, the outbox dispatcher (job ``webhooks.dispatch``) and the delivery pump
(resident work ``webhooks.deliver``), both in ``application/webhook_delivery.py``; this module wires them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from dishka import AsyncContainer, Provider, Scope, provide, provide_all

from adapters.egress import HttpxSafeHttp, SystemResolver
from adapters.memory.webhooks import InMemoryDeliveryRepository, InMemorySubscriptionRepository
from adapters.sql.webhooks import SqlDeliveryRepository, SqlSubscriptionRepository
from application import webhooks as uc
from application.jobs import JobKind
from application.outbox import WEBHOOKS
from application.ports.platform import Random
from application.ports.webhooks import DeliveryRepository, SubscriptionRepository, WebhookHttp
from application.webhook_delivery import (
    DELIVER,
    DISPATCH_KIND,
    DeliveryPolicy,
    PumpDeliveries,
    PumpDeliveriesCommand,
    dispatch_job,
)
from domain.webhooks import USER_AGENT
from entrypoints.features import Feature
from entrypoints.observability import DeliveryMetrics
from entrypoints.runtime import JOB_WAKE_UPS, owner_name
from entrypoints.settings import Settings
from entrypoints.units import ScopedUnits

_DEFAULTS = DeliveryPolicy()
"""The delivery defaults live with the pump (``application/webhook_delivery.py``); the section only overrides."""


@dataclass(frozen=True)
class WebhookSettings:
    """PARLEY_WEBHOOK_*: retries and the delivery pump of every worker process."""

    ENV_PREFIX = "WEBHOOK_"

    retry_scale: float = 1.0
    """PARLEY_WEBHOOK_RETRY_SCALE: multiplies the retry delays (tests and demos shorten them)."""
    batch_size: int = _DEFAULTS.batch_size
    """PARLEY_WEBHOOK_BATCH_SIZE: deliveries per claim."""
    concurrency: int = _DEFAULTS.concurrency
    """PARLEY_WEBHOOK_CONCURRENCY: sends in flight per worker process."""
    lease_seconds: float = _DEFAULTS.lease_seconds
    """PARLEY_WEBHOOK_LEASE_SECONDS: the claim's lease; must stay well above the 10 s send timeout."""
    poll_seconds: float = _DEFAULTS.poll_seconds
    """PARLEY_WEBHOOK_POLL_SECONDS: the delivery pump's idle safety poll (wake-ups cover new work)."""
    dispatch_batch: int = field(default=_DEFAULTS.dispatch_batch, metadata={"env": False})
    shutdown_grace_seconds: float = field(default=_DEFAULTS.shutdown_grace_seconds, metadata={"env": False})

    def delivery(self) -> DeliveryPolicy:
        return DeliveryPolicy(batch_size=self.batch_size, concurrency=self.concurrency,
                              lease_seconds=self.lease_seconds, poll_seconds=self.poll_seconds,
                              dispatch_batch=self.dispatch_batch, shutdown_grace_seconds=self.shutdown_grace_seconds)


class WebhookPlatformProvider(Provider):
    scope = Scope.APP

    @provide
    def policy(self, settings: Settings, section: WebhookSettings) -> uc.WebhookPolicy:
        return uc.WebhookPolicy(allow_loopback=settings.allow_loopback_targets, retry_scale=section.retry_scale)

    @provide
    def http(self, settings: Settings) -> WebhookHttp:
        return HttpxSafeHttp(SystemResolver(), allow_loopback=settings.allow_loopback_targets, user_agent=USER_AGENT)

    send = provide(uc.SendDelivery)


class SqlWebhookProvider(Provider):
    scope = Scope.REQUEST

    subscriptions = provide(SqlSubscriptionRepository, provides=SubscriptionRepository)
    deliveries = provide(SqlDeliveryRepository, provides=DeliveryRepository)


class MemoryWebhookProvider(Provider):
    scope = Scope.REQUEST

    subscriptions = provide(InMemorySubscriptionRepository, provides=SubscriptionRepository)
    deliveries = provide(InMemoryDeliveryRepository, provides=DeliveryRepository)


class WebhookUseCaseProvider(Provider):
    scope = Scope.REQUEST

    cases = provide_all(
        uc.CreateSubscription,
        uc.GetSubscription,
        uc.ListSubscriptions,
        uc.UpdateSubscription,
        uc.DeleteSubscription,
        uc.RotateSecret,
        uc.SendTestEvent,
        uc.ListDeliveryAttempts,
        uc.Redeliver,
        uc.DispatchOutbox,
        uc.ClaimDeliveries,
        uc.RecordDeliveryOutcomes,
        uc.ReleaseDeliveries,
    )


def dispatcher(container: AsyncContainer, settings: Settings) -> JobKind:
    return dispatch_job(ScopedUnits(container), settings.section(WebhookSettings).delivery())


async def delivery_pump(container: AsyncContainer, settings: Settings, stop: asyncio.Event) -> None:
    pump = PumpDeliveries(ScopedUnits(container), await container.get(uc.SendDelivery),
                          settings.section(WebhookSettings).delivery(), DeliveryMetrics())
    wake = JOB_WAKE_UPS.subscribe()
    try:
        await pump.execute(PumpDeliveriesCommand(owner_name(await container.get(Random)), stop, wake))
    finally:
        JOB_WAKE_UPS.unsubscribe(wake)


FEATURE = Feature(
    name="webhooks",
    providers=(WebhookPlatformProvider, WebhookUseCaseProvider),
    sql=SqlWebhookProvider,
    memory=MemoryWebhookProvider,
    jobs=[dispatcher],
    resident={DELIVER: delivery_pump},
    settings=WebhookSettings,
    outbox_consumers={WEBHOOKS: DISPATCH_KIND},
)
