"""Webhook use cases: subscription validation, the status machine, secret rotation with a grace period,
test events, and the dispatcher fanning the outbox out only to active subscriptions that want the event,
within their own organization."""

from __future__ import annotations

from datetime import timedelta

import pytest

from application.agents import CreateAgent, CreateAgentCommand, PublishAgent, PublishAgentCommand
from application.calls import CancelCall, CancelCallCommand, PlaceCall, PlaceCallCommand
from application.context import Actor
from application.ports.platform import PageRequest
from application.ports.webhooks import SubscriptionFilter
from application.webhooks import (
    ClaimDeliveries,
    ClaimDeliveriesCommand,
    CreateSubscription,
    CreateSubscriptionCommand,
    DeleteSubscription,
    DeleteSubscriptionCommand,
    DispatchOutbox,
    DispatchOutboxCommand,
    GetSubscription,
    GetSubscriptionCommand,
    ListSubscriptions,
    ListSubscriptionsCommand,
    RotateSecret,
    RotateSecretCommand,
    SendTestEvent,
    SendTestEventCommand,
    UpdateSubscription,
    UpdateSubscriptionCommand,
)
from domain.errors import BlockedAddress, Conflict, InvalidTransition, NotFound, ValidationFailed
from tests.application.conftest import App

URL = "https://hooks.example.com/in"
LEASE = timedelta(seconds=60)


async def subscribe(app: App, actor: Actor, *events: str, url: str = URL):  # type: ignore[no-untyped-def]
    return await app.run(CreateSubscription, CreateSubscriptionCommand(actor, url, list(events or ["call.ended"])))


async def update(app: App, actor: Actor, subscription_id: int, **changes: object):  # type: ignore[no-untyped-def]
    return await app.run(UpdateSubscription, UpdateSubscriptionCommand(actor, subscription_id, dict(changes)))


async def call_ended(app: App, actor: Actor) -> str:
    """A call placed and cancelled: one call.ended event committed for the actor's organization."""
    agent = await app.run(CreateAgent, CreateAgentCommand(actor, name="Desk", prompt="Hi"))
    await app.run(PublishAgent, PublishAgentCommand(actor, agent.id))
    call = await app.run(PlaceCall, PlaceCallCommand(actor, str(agent.id), "+1555010000"))
    await app.run(CancelCall, CancelCallCommand(actor, call.id))
    return call.id


async def claimed(app: App) -> list[tuple[int, str, str]]:
    """(subscription id, event type, call id) of every delivery due now."""
    taken = await app.run(ClaimDeliveries, ClaimDeliveriesCommand("test-worker", 100, LEASE))
    return sorted((c.delivery.subscription_id, c.delivery.event_type, c.delivery.data.get("id")) for c in taken)


async def test_a_subscription_needs_a_public_url_and_known_events(app: App) -> None:
    actor = await app.actor()
    for url in ("ftp://hooks.example.com/", "not a url"):
        with pytest.raises(ValidationFailed):
            await subscribe(app, actor, url=url)
    for url in ("http://127.0.0.1:8080/in", "http://10.0.0.8/in", "http://169.254.169.254/"):
        with pytest.raises(BlockedAddress):
            await subscribe(app, actor, url=url)
    with pytest.raises(ValidationFailed):
        await subscribe(app, actor, "call.exploded")
    with pytest.raises(ValidationFailed):
        await app.run(CreateSubscription, CreateSubscriptionCommand(actor, URL, []))
    created = await subscribe(app, actor, "call.ended", "call.completed")
    assert created.subscription.status == "active" and created.secret
    assert created.subscription.sealed_secret != created.secret  # stored sealed, shown once
    assert set(created.subscription.events) == {"call.ended", "call.completed"}


async def test_status_moves_and_patches(app: App) -> None:
    actor = await app.actor()
    sub = (await subscribe(app, actor)).subscription
    app.clock.advance(minutes=1)
    assert (await update(app, actor, sub.id, events=["call.ended"])).updated_at == sub.updated_at  # no change
    paused = await update(app, actor, sub.id, status="paused")
    assert (paused.status, paused.updated_at) == ("paused", app.clock.now())
    with pytest.raises(InvalidTransition):
        await update(app, actor, sub.id, status="disabled")  # only the dispatcher disables
    with pytest.raises(BlockedAddress):
        await update(app, actor, sub.id, url="http://10.0.0.8/in")
    assert (await update(app, actor, sub.id, status="active")).status == "active"
    only_paused = await app.run(ListSubscriptions, ListSubscriptionsCommand(
        actor, SubscriptionFilter(status="paused"), PageRequest()))
    assert only_paused.items == []


async def test_rotation_validates_the_grace_period_and_keeps_the_old_secret_for_it(app: App) -> None:
    actor = await app.actor()
    created = await subscribe(app, actor)
    with pytest.raises(ValidationFailed):
        await app.run(RotateSecret, RotateSecretCommand(actor, created.subscription.id, -1))
    rotated = await app.run(RotateSecret, RotateSecretCommand(actor, created.subscription.id, 24))
    assert rotated.secret != created.secret
    assert rotated.previous_secret_expires_at == app.clock.now() + timedelta(hours=24)
    now = app.clock.now()
    assert len(rotated.subscription.signing_secrets(now)) == 2
    assert len(rotated.subscription.signing_secrets(now + timedelta(hours=25))) == 1


async def test_a_test_event_goes_only_to_an_active_subscription(app: App) -> None:
    actor = await app.actor()
    sub = (await subscribe(app, actor)).subscription
    delivery = await app.run(SendTestEvent, SendTestEventCommand(actor, sub.id))
    assert (delivery.event_type, delivery.subscription_id, delivery.auto_retry) == ("webhook.test", sub.id, False)
    await update(app, actor, sub.id, status="paused")
    with pytest.raises(Conflict):
        await app.run(SendTestEvent, SendTestEventCommand(actor, sub.id))


async def test_the_dispatcher_fans_out_to_active_subscribers_of_the_event_in_the_organization(app: App) -> None:
    actor, other = await app.actor(), await app.actor()
    wants = (await subscribe(app, actor, "call.ended")).subscription
    await subscribe(app, actor, "call.completed")  # not interested
    paused = (await subscribe(app, actor, "call.ended")).subscription
    await update(app, actor, paused.id, status="paused")
    await subscribe(app, other, "call.ended")  # another organization

    call_id = await call_ended(app, actor)
    assert [t for t, _ in await app.events(actor.organization_id)] == ["call.ended"]
    assert await app.run(DispatchOutbox, DispatchOutboxCommand()) == 1
    assert await app.run(DispatchOutbox, DispatchOutboxCommand()) == 0  # each event is fanned out once
    assert await claimed(app) == [(wants.id, "call.ended", call_id)]


async def test_an_event_dispatched_while_paused_is_not_delivered_after_resuming(app: App) -> None:
    actor = await app.actor()
    sub = (await subscribe(app, actor, "call.ended")).subscription
    await update(app, actor, sub.id, status="paused")
    await call_ended(app, actor)
    await app.run(DispatchOutbox, DispatchOutboxCommand())
    await update(app, actor, sub.id, status="active")
    await app.run(DispatchOutbox, DispatchOutboxCommand())
    assert await claimed(app) == []
    later = await call_ended(app, actor)
    await app.run(DispatchOutbox, DispatchOutboxCommand())
    assert await claimed(app) == [(sub.id, "call.ended", later)]


async def test_subscriptions_of_another_organization_do_not_exist(app: App) -> None:
    mine, theirs = await app.actor(), await app.actor()
    sub = (await subscribe(app, theirs)).subscription
    for case, command in [(GetSubscription, GetSubscriptionCommand(mine, sub.id)),
                          (DeleteSubscription, DeleteSubscriptionCommand(mine, sub.id)),
                          (RotateSecret, RotateSecretCommand(mine, sub.id, 1)),
                          (SendTestEvent, SendTestEventCommand(mine, sub.id))]:
        with pytest.raises(NotFound):
            await app.run(case, command)
    with pytest.raises(NotFound):
        await update(app, mine, sub.id, status="paused")
    assert (await app.run(ListSubscriptions, ListSubscriptionsCommand(
        mine, SubscriptionFilter(), PageRequest()))).items == []
    await app.run(DeleteSubscription, DeleteSubscriptionCommand(theirs, sub.id))
    with pytest.raises(NotFound):
        await app.run(GetSubscription, GetSubscriptionCommand(theirs, sub.id))
