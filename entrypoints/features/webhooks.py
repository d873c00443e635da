"""Webhooks feature: subscriptions API, the outbox dispatcher and the delivery worker."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from dishka import AsyncContainer, Provider, Scope, provide, provide_all

from adapters.egress import HttpxSafeHttp, SystemResolver
from adapters.memory.webhooks import InMemoryDeliveryRepository, InMemorySubscriptionRepository
from adapters.sql.webhooks import SqlDeliveryRepository, SqlSubscriptionRepository
from application import webhooks as uc
from application.jobs import JobKind
from application.outbox import WEBHOOKS
from application.ports.webhooks import DeliveryRepository, SubscriptionRepository, WebhookHttp
from domain.webhooks import USER_AGENT
from entrypoints.features import Feature
from entrypoints.runtime import JOB_WAKE_UPS
from entrypoints.settings import Settings
from entrypoints.webhook_jobs import (
    DISPATCH_KIND,
    WorkerOptions,
    deliver_once,
    delivery_loop,
    dispatch_kind,
    dispatch_once,
    drain,
)


@dataclass(frozen=True)
class WebhookSettings:
    ENV_PREFIX = "WEBHOOK_"

    retry_scale: float = 1.0
    """PARLEY_WEBHOOK_RETRY_SCALE: multiplies the retry delays (tests and demos shorten them)."""


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
    return dispatch_kind(container, WorkerOptions.from_env())


DELIVERY = "webhooks.deliver"
"""The delivery pump's name (``parley worker --jobs`` / ``--exclude-jobs``)."""


async def delivery_pump(container: AsyncContainer, settings: Settings, stop: asyncio.Event) -> None:
    wake = JOB_WAKE_UPS.subscribe()
    try:
        await delivery_loop(container, settings, stop, WorkerOptions.from_env(), wake)
    finally:
        JOB_WAKE_UPS.unsubscribe(wake)


FEATURE = Feature(
    name="webhooks",
    providers=(WebhookPlatformProvider, WebhookUseCaseProvider),
    sql=SqlWebhookProvider,
    memory=MemoryWebhookProvider,
    jobs=[dispatcher],
    resident={DELIVERY: delivery_pump},
    settings=WebhookSettings,
    outbox_consumers={WEBHOOKS: DISPATCH_KIND},
)

# one pass of each step, for tests and benchmarks: dispatch_once(container) -> events dispatched,
# deliver_once(container) -> deliveries handled, drain(container) -> both until nothing is due
__all__ = ["FEATURE", "WebhookSettings", "deliver_once", "dispatch_once", "drain"]
