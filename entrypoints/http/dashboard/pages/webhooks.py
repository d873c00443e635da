"""Webhooks: the subscriptions with their health, a subscription's delivery log (paged, newest first) and a
redeliver button on each row, through the webhook use cases of the API (``Redeliver`` sends the delivery again
with the same ``X-Webhook-Id``)."""

from __future__ import annotations

from typing import Any

from dishka import FromDishka
from litestar import Request
from litestar.response import Response, Template

from application import webhooks as uc
from application.ports.platform import PageRequest
from application.ports.webhooks import AttemptFilter, SubscriptionFilter
from domain.webhooks import Subscription, WebhookStatus
from entrypoints.http.dashboard.pages import page
from entrypoints.http.dashboard.pages.params import PathId, page_number, pages_of
from entrypoints.http.dashboard.view import View

SUBSCRIPTIONS = 100
LOG_PAGE = 20


def health(subscription: Subscription) -> tuple[str, str]:
    """(css class, words) of a subscription's health."""
    if subscription.status == WebhookStatus.DISABLED:
        return "down", f"disabled: {subscription.disabled_reason or 'no reason given'}"
    if subscription.status == WebhookStatus.PAUSED:
        return "degraded", "paused"
    if subscription.failing_since is not None:
        return "degraded", "failing since " + subscription.failing_since.strftime("%Y-%m-%d %H:%M UTC")
    return "operational", "healthy"


@page("GET", "/webhooks", section="webhooks", scopes=("webhooks:read",))
async def webhooks(request: Request[Any, Any, Any], listing: FromDishka[uc.ListSubscriptions]) -> Template:
    view = View.of(request)
    found = await view.run(listing, lambda actor: uc.ListSubscriptionsCommand(actor, SubscriptionFilter(),
                                                                              PageRequest(SUBSCRIPTIONS)))
    rows = [{"hook": s, "health": health(s)} for s in found.items]
    return view.page("webhooks.html", rows=rows, total=found.total)


async def _log(view: View, getting: uc.GetSubscription, attempts: uc.ListDeliveryAttempts, hook_id: int,
               number: int) -> dict[str, Any]:
    hook = await view.run(getting, lambda actor: uc.GetSubscriptionCommand(actor, hook_id))
    log = await view.run(attempts, lambda actor: uc.ListDeliveryAttemptsCommand(
        actor, hook_id, AttemptFilter(), PageRequest(LOG_PAGE, (number - 1) * LOG_PAGE)))
    return {"hook": hook, "health": health(hook), "attempts": log.items, "total": log.total, "page": number,
            "pages": pages_of(log.total, LOG_PAGE)}


@page("GET", "/webhooks/{hook_id:int}", section="webhooks", scopes=("webhooks:read",))
async def webhook(request: Request[Any, Any, Any], hook_id: PathId, getting: FromDishka[uc.GetSubscription],
                  attempts: FromDishka[uc.ListDeliveryAttempts]) -> Template:
    view = View.of(request)
    return view.page("webhook.html", **await _log(view, getting, attempts, hook_id, page_number(request)))


@page("POST", "/webhooks/{hook_id:int}/logs/{attempt_id:int}/redeliver",
      operation="redeliverWebhook", section="webhooks",
      scopes=("webhooks:manage",))
async def redeliver(request: Request[Any, Any, Any], hook_id: PathId, attempt_id: PathId,
                    use_case: FromDishka[uc.Redeliver], getting: FromDishka[uc.GetSubscription],
                    attempts: FromDishka[uc.ListDeliveryAttempts]) -> Response[Any] | Template:
    view = View.of(request)
    return await view.submit(
        use_case, lambda actor, form: uc.RedeliverCommand(actor, hook_id, attempt_id), template="webhook.html",
        context=lambda: _log(view, getting, attempts, hook_id, 1),
        done=lambda delivery: view.redirect(f"/webhooks/{hook_id}",
                                            f"Delivery {delivery.message_id} queued to be sent again"))


HANDLERS = [webhooks, webhook, redeliver]
