"""The whole delivery path also runs on the in-memory adapters (memory://), as the use cases see it."""

from __future__ import annotations

import json
from pathlib import Path

from application.accounts import CreateOrganization, CreateOrganizationCommand
from application.context import Actor
from application.ports.platform import PageRequest, UnitOfWork
from application.ports.webhooks import AttemptFilter
from application.webhooks import (
    CreateSubscription,
    CreateSubscriptionCommand,
    ListDeliveryAttempts,
    ListDeliveryAttemptsCommand,
)
from domain.events import event
from domain.webhooks import verify_signature
from entrypoints.features.webhooks import WebhookSettings
from entrypoints.ioc import build_container
from entrypoints.settings import Settings
from tests.support.receiver import Receiver, Reply
from tests.support.webhooks import drain


async def test_events_are_delivered_and_retried_on_the_memory_backend(receiver: Receiver, tmp_path: Path) -> None:
    settings = Settings(database_url="memory://", secret_key="k", allow_loopback_targets=True, var_dir=tmp_path,
                        sections=(WebhookSettings(retry_scale=0.0),))
    container = build_container(settings)
    try:
        async with container() as r:
            org = await (await r.get(CreateOrganization)).execute(
                CreateOrganizationCommand("M", "business", "standard"))
            actor = Actor.system(org.id or 0)
            made = await (await r.get(CreateSubscription)).execute(
                CreateSubscriptionCommand(actor, receiver.url(), ["call.completed"]))
            await (await r.get(UnitOfWork)).commit()
        receiver.script("/hook", Reply(500))
        async with container() as r:
            uow = await r.get(UnitOfWork)
            uow.record(event(actor.organization_id, "call.completed", {"call_id": "m-1"}))
            await uow.commit()
        await drain(container)  # a zero retry scale makes the retry due at once
        first, second = receiver.requests
        assert first.webhook_id == second.webhook_id and json.loads(second.body)["data"] == {"call_id": "m-1"}
        assert verify_signature(made.secret, second.headers["x-webhook-timestamp"], second.body,
                                second.headers["x-webhook-signature"], now=int(second.headers["x-webhook-timestamp"]))
        async with container() as r:
            page = await (await r.get(ListDeliveryAttempts)).execute(ListDeliveryAttemptsCommand(
                actor, made.subscription.id or 0, AttemptFilter(), PageRequest()))
        assert [(a.attempt, a.status) for a in page.items] == [(2, "succeeded"), (1, "failed")]
    finally:
        await container.close()
