"""Webhooks: the subscriptions with their health and a form that subscribes a URL (its signing secret shown once,
on the page that answers the form), editing one (name, URL, events, paused or active), deleting one (it asks
first: ``GET .../delete`` says what happens, its form sends ``confirm``; a post without it changes nothing), a
subscription's delivery log (paged, newest first) and a redeliver button on each row, through the webhook use
cases of the API (``Redeliver`` sends the delivery again with the same ``X-Webhook-Id``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dishka import FromDishka
from litestar import Request
from litestar.response import Response, Template

from application import webhooks as uc
from application.context import Actor
from application.ports.platform import PageRequest
from application.ports.webhooks import AttemptFilter, SubscriptionFilter
from domain.events import EventType
from domain.webhooks import Subscription, WebhookStatus
from entrypoints.http.dashboard.pages import page
from entrypoints.http.dashboard.pages.params import PathId, page_number, pages_of
from entrypoints.http.dashboard.view import View, convert
from entrypoints.http.schemas.webhooks import WebhookCreate, WebhookUpdate
from entrypoints.http.validation import require_non_blank

SUBSCRIPTIONS = 100
LOG_PAGE = 20
CONFIRM_FIELD = "confirm"


def catalogue() -> list[tuple[str, list[EventType]]]:
    """The events a subscription can ask for, by group, in the catalogue's order."""
    groups: dict[str, list[EventType]] = {}
    for event in EventType:
        groups.setdefault(event.group, []).append(event)
    return list(groups.items())


async def _events(view: View) -> list[str]:
    """The events ticked on the form (a checkbox per event: every value of the field)."""
    form = await view.request.form()
    return [v for v in form.getall("events", []) if isinstance(v, str)]


def health(subscription: Subscription) -> tuple[str, str]:
    """(css class, words) of a subscription's health."""
    if subscription.status == WebhookStatus.DISABLED:
        return "down", f"disabled: {subscription.disabled_reason or 'no reason given'}"
    if subscription.status == WebhookStatus.PAUSED:
        return "degraded", "paused"
    if subscription.failing_since is not None:
        return "degraded", "failing since " + subscription.failing_since.strftime("%Y-%m-%d %H:%M UTC")
    return "operational", "healthy"


async def _listing(view: View, listing: uc.ListSubscriptions) -> dict[str, Any]:
    found = await view.run(listing, lambda actor: uc.ListSubscriptionsCommand(actor, SubscriptionFilter(),
                                                                              PageRequest(SUBSCRIPTIONS)))
    rows = [{"hook": s, "health": health(s)} for s in found.items]
    return {"rows": rows, "total": found.total, "catalogue": catalogue()}


@page("GET", "/webhooks", section="webhooks", scopes=("webhooks:read",))
async def webhooks(request: Request[Any, Any, Any], listing: FromDishka[uc.ListSubscriptions]) -> Template:
    view = View.of(request)
    return view.page("webhooks.html", chosen=[], **await _listing(view, listing))


@page("POST", "/webhooks", operation="createWebhook", section="webhooks", scopes=("webhooks:write",))
async def create_webhook(request: Request[Any, Any, Any], use_case: FromDishka[uc.CreateSubscription],
                         listing: FromDishka[uc.ListSubscriptions]) -> Template:
    view = View.of(request)
    chosen = await _events(view)

    def command(actor: Actor, form: Mapping[str, str]) -> uc.CreateSubscriptionCommand:
        body: dict[str, Any] = {"url": form.get("url", ""), "events": chosen}
        if form.get("name", "").strip():
            body["name"] = form["name"]
        data = convert(body, WebhookCreate)
        name = require_non_blank(data.name, "name") if data.name is not None else None
        return uc.CreateSubscriptionCommand(actor, data.url.strip(), data.events, name)

    async def again() -> dict[str, Any]:
        return {"chosen": chosen, **await _listing(view, listing)}

    result = await view.submit(use_case, command, template="webhooks.html", context=again, done=lambda r: r)
    if not isinstance(result, uc.SubscriptionWithSecret):
        return result
    return view.page("webhooks.html", status=201, secret=result.secret, secret_for=result.subscription.name,
                     chosen=[], **await _listing(view, listing))


async def _hook(view: View, getting: uc.GetSubscription, hook_id: int) -> Subscription:
    return await view.run(getting, lambda actor: uc.GetSubscriptionCommand(actor, hook_id))


@page("GET", "/webhooks/{hook_id:int}/edit", section="webhooks", scopes=("webhooks:write",))
async def edit_webhook_page(request: Request[Any, Any, Any], hook_id: PathId,
                            getting: FromDishka[uc.GetSubscription]) -> Template:
    view = View.of(request)
    hook = await _hook(view, getting, hook_id)
    return view.page("webhook_edit.html", hook=hook, catalogue=catalogue(), chosen=list(hook.events),
                     form={"name": hook.name, "url": hook.url, "status": hook.status})


@page("POST", "/webhooks/{hook_id:int}/edit",
      operation="updateWebhook", section="webhooks", scopes=("webhooks:write",))
async def edit_webhook(request: Request[Any, Any, Any], hook_id: PathId, use_case: FromDishka[uc.UpdateSubscription],
                       getting: FromDishka[uc.GetSubscription]) -> Response[Any] | Template:
    view = View.of(request)
    hook = await _hook(view, getting, hook_id)
    chosen = await _events(view)

    def command(actor: Actor, form: Mapping[str, str]) -> uc.UpdateSubscriptionCommand:
        body: dict[str, Any] = {"name": form.get("name", ""), "url": form.get("url", ""), "events": chosen}
        if form.get("status") in ("active", "paused") and form["status"] != hook.status:
            body["status"] = form["status"]
        data = convert(body, WebhookUpdate)
        return uc.UpdateSubscriptionCommand(actor, hook_id, {
            "name": require_non_blank(str(data.name), "name"), "url": str(data.url).strip(), "events": data.events,
            **({"status": data.status} if "status" in body else {})})

    async def again() -> dict[str, Any]:
        return {"hook": hook, "catalogue": catalogue(), "chosen": chosen}

    return await view.submit(use_case, command, template="webhook_edit.html", context=again,
                             done=lambda saved: view.redirect(f"/webhooks/{hook_id}", "Subscription saved"))


@page("GET", "/webhooks/{hook_id:int}/delete", section="webhooks", scopes=("webhooks:delete",))
async def confirm_delete(request: Request[Any, Any, Any], hook_id: PathId,
                         getting: FromDishka[uc.GetSubscription]) -> Template:
    view = View.of(request)
    return view.page("webhook_delete.html", hook=await _hook(view, getting, hook_id))


@page("POST", "/webhooks/{hook_id:int}/delete",
      operation="deleteWebhook", section="webhooks", scopes=("webhooks:delete",))
async def delete_webhook(request: Request[Any, Any, Any], hook_id: PathId, use_case: FromDishka[uc.DeleteSubscription],
                         getting: FromDishka[uc.GetSubscription]) -> Response[Any] | Template:
    view = View.of(request)
    hook = await _hook(view, getting, hook_id)
    if (await view.form()).get(CONFIRM_FIELD) != "delete":
        return view.page("webhook_delete.html", hook=hook)
    await view.run(use_case, lambda actor: uc.DeleteSubscriptionCommand(actor, hook_id))
    return view.redirect("/webhooks", f"Subscription {hook.name} deleted")


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


HANDLERS = [webhooks, create_webhook, edit_webhook_page, edit_webhook, confirm_delete, delete_webhook, webhook,
            redeliver]
