"""Webhooks feature: subscriptions API, the outbox dispatcher and the delivery worker."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from dishka import Provider, Scope, provide, provide_all

from adapters.egress import HttpxSafeHttp, SystemResolver
from adapters.memory.webhooks import InMemoryDeliveryRepository, InMemoryOutboxReader, InMemorySubscriptionRepository
from adapters.sql.webhooks import SqlDeliveryRepository, SqlOutboxReader, SqlSubscriptionRepository
from application import webhooks as uc
from application.jobs import JobKind
from application.ports.webhooks import DeliveryRepository, OutboxReader, SubscriptionRepository, WebhookHttp
from domain.webhooks import USER_AGENT
from entrypoints.http.routes import webhooks as routes
from entrypoints.runtime import JOB_WAKE_UPS
from entrypoints.settings import Settings
from entrypoints.webhook_jobs import (
    WorkerOptions,
    deliver_once,
    delivery_loop,
    dispatch_kind,
    dispatch_once,
    drain,
)

if TYPE_CHECKING:
    from entrypoints.worker import JobContext

_MEMORY = "memory://"


class WebhookPlatformProvider(Provider):
    scope = Scope.APP

    @provide
    def policy(self, settings: Settings) -> uc.WebhookPolicy:
        return uc.WebhookPolicy(allow_loopback=settings.allow_loopback_targets,
                                retry_scale=settings.webhook_retry_scale)

    @provide
    def http(self, settings: Settings) -> WebhookHttp:
        return HttpxSafeHttp(SystemResolver(), allow_loopback=settings.allow_loopback_targets, user_agent=USER_AGENT)

    send = provide(uc.SendDelivery)


class SqlWebhookProvider(Provider):
    scope = Scope.REQUEST

    subscriptions = provide(SqlSubscriptionRepository, provides=SubscriptionRepository)
    deliveries = provide(SqlDeliveryRepository, provides=DeliveryRepository)
    outbox = provide(SqlOutboxReader, provides=OutboxReader)


class MemoryWebhookProvider(Provider):
    scope = Scope.REQUEST

    subscriptions = provide(InMemorySubscriptionRepository, provides=SubscriptionRepository)
    deliveries = provide(InMemoryDeliveryRepository, provides=DeliveryRepository)
    outbox = provide(InMemoryOutboxReader, provides=OutboxReader)


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


def providers(settings: Settings) -> list[Provider]:
    storage = MemoryWebhookProvider() if settings.database_url == _MEMORY else SqlWebhookProvider()
    return [WebhookPlatformProvider(), storage, WebhookUseCaseProvider()]


def dispatcher(context: JobContext) -> JobKind:
    return dispatch_kind(context.container, WorkerOptions.from_env())


async def delivery_pump(context: JobContext, stop: asyncio.Event) -> None:
    wake = JOB_WAKE_UPS.subscribe()
    try:
        await delivery_loop(context.container, context.settings, stop, WorkerOptions.from_env(), wake)
    finally:
        JOB_WAKE_UPS.unsubscribe(wake)


ROUTES = routes.ROUTES
JOBS = [dispatcher]
RESIDENT = [delivery_pump]

# one pass of each step, for tests and benchmarks: dispatch_once(container) -> events dispatched,
# deliver_once(container) -> deliveries handled, drain(container) -> both until nothing is due
__all__ = ["JOBS", "RESIDENT", "ROUTES", "deliver_once", "dispatch_once", "drain", "providers"]
