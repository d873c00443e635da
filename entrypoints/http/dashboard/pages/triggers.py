"""Triggers: the list (event, enabled or disabled with Parley's reason), a form that creates one (name, event,
conditions and actions as JSON text, checked by the API's rules: an error is shown beside its field; the webhook
signing secret shown once, on the page answering the form), editing one, enabling and disabling it, deleting it
(it asks first: ``GET .../delete`` says what happens, its form sends ``confirm``; a post without it changes
nothing), and a trigger's run log (paged, newest first, filtered by status): each run's status, why it matched or
not (the condition trace: each comparison with the value expected, the event's value and the result) and each
action's result, through the trigger use cases of the API."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dishka import FromDishka
from litestar import Request
from litestar.response import Response, Template
from msgspec import UnsetType

from application import triggers as uc
from application.context import Actor
from application.ports.platform import PageRequest
from domain.errors import ValidationFailed
from domain.events import EventType
from domain.triggers import RUN_STATUSES, Trigger, conditions_view
from entrypoints.http.dashboard.pages import page
from entrypoints.http.dashboard.pages.params import PathId, page_number, pages_of
from entrypoints.http.dashboard.view import View, convert
from entrypoints.http.schemas.triggers import TriggerCreate, TriggerUpdate

TRIGGERS = 100
RUNS_PAGE = 20
CONFIRM_FIELD = "confirm"
JSON_FIELDS = ("conditions", "actions")
ACTIONS_EXAMPLE = '[{"type": "chat_message", "config": {"url": "https://hooks.example.com/...", "text": "..."}}]'


def catalogue() -> list[tuple[str, list[EventType]]]:
    """The events a trigger can fire on, by group, in the catalogue's order."""
    groups: dict[str, list[EventType]] = {}
    for event in EventType:
        groups.setdefault(event.group, []).append(event)
    return list(groups.items())


def state(trigger: Trigger) -> tuple[str, str]:
    """(css class, words) of whether the trigger runs."""
    if trigger.enabled:
        return "active", "enabled"
    if trigger.disabled_reason:
        reason = ("it ran more than 100 times in a minute" if trigger.disabled_reason == "run_rate"
                  else trigger.disabled_reason)
        return "disabled", f"disabled by Parley: {reason} ({trigger.disabled_reason})"
    return "paused", "disabled"


def form_of(trigger: Trigger) -> dict[str, str]:
    conditions = conditions_view(trigger.conditions)
    return {"name": trigger.name, "event": trigger.event,
            "conditions": "" if conditions is None else json.dumps(conditions, indent=2),
            "actions": json.dumps([a.view() for a in trigger.actions], indent=2)}


def _json(form: Mapping[str, str], name: str) -> Any:
    text = form.get(name, "").strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValidationFailed.field(name, f"is not valid JSON ({exc})") from None


def _body(form: Mapping[str, str]) -> dict[str, Any]:
    """The form as the API's JSON body: name, event, and the JSON fields parsed (an empty one left out; empty
    conditions are null: none)."""
    body: dict[str, Any] = {"name": form.get("name", ""), "event": form.get("event", "").strip()}
    conditions, actions = _json(form, "conditions"), _json(form, "actions")
    body["conditions"] = conditions
    if actions is not None:
        body["actions"] = actions
    return body


def _actions(actions: list[Any]) -> list[dict[str, Any]]:
    return [{"type": a.type, "config": a.config} for a in actions]


def beside(errors: dict[str, str]) -> dict[str, str]:
    """A member's error (``conditions.all[0].field``, ``actions[1].config.url``) shown beside its JSON field, the
    member named."""
    out: dict[str, str] = {}
    for name, message in errors.items():
        for field in JSON_FIELDS:
            if name != field and name.startswith(field) and name[len(field)] in ".[":
                out.setdefault(field, f"{name}: {message}")
                break
        else:
            out[name] = message
    return out


async def _submit(view: View, use_case: Any, command: Any, *, template: str, done: Any,
                  context: Any) -> Any:
    """``view.submit`` with the members' errors moved beside their JSON field."""
    result = await view.submit(use_case, command, template=template, done=done, context=context)
    if isinstance(result, Template) and isinstance(result.context, dict) and result.context.get("errors"):
        result.context["errors"] = beside(result.context["errors"])
    return result


async def _listing(view: View, listing: uc.ListTriggers) -> dict[str, Any]:
    found = await view.run(listing, lambda actor: uc.ListTriggersCommand(actor, PageRequest(TRIGGERS)))
    rows = [{"trigger": t, "state": state(t)} for t in found.items]
    return {"rows": rows, "total": found.total, "catalogue": catalogue(), "example": ACTIONS_EXAMPLE}


@page("GET", "/triggers", section="triggers", scopes=("triggers:read",))
async def triggers(request: Request[Any, Any, Any], listing: FromDishka[uc.ListTriggers]) -> Template:
    view = View.of(request)
    return view.page("triggers.html", form={"enabled": "on"}, **await _listing(view, listing))


@page("POST", "/triggers", operation="createTrigger", section="triggers", scopes=("triggers:write",))
async def create_trigger(request: Request[Any, Any, Any], use_case: FromDishka[uc.CreateTrigger],
                         listing: FromDishka[uc.ListTriggers]) -> Template:
    view = View.of(request)

    def command(actor: Actor, form: Mapping[str, str]) -> uc.CreateTriggerCommand:
        data = convert({**_body(form), "enabled": form.get("enabled") == "on"}, TriggerCreate)
        return uc.CreateTriggerCommand(actor, data.name, data.event, _actions(data.actions), data.conditions,
                                       data.enabled)

    result = await _submit(view, use_case, command, template="triggers.html", done=lambda made: made,
                           context=lambda: _listing(view, listing))
    if not isinstance(result, uc.TriggerWithSecret):
        return result
    return view.page("triggers.html", status=201, secret=result.secret, secret_for=result.trigger.name,
                     form={"enabled": "on"}, **await _listing(view, listing))


async def _trigger(view: View, getting: uc.GetTrigger, trigger_id: int) -> Trigger:
    return await view.run(getting, lambda actor: uc.GetTriggerCommand(actor, trigger_id))


def _status(request: Request[Any, Any, Any]) -> str | None:
    wanted = request.query_params.get("status", "")
    return wanted if wanted in RUN_STATUSES else None


async def _log(view: View, trigger: Trigger, runs: uc.ListTriggerRuns, number: int,
               status: str | None) -> dict[str, Any]:
    found = await view.run(runs, lambda actor: uc.ListTriggerRunsCommand(
        actor, trigger.id or 0, status, PageRequest(RUNS_PAGE, (number - 1) * RUNS_PAGE)))
    return {"trigger": trigger, "state": state(trigger), "runs": found.items, "total": found.total, "page": number,
            "pages": pages_of(found.total, RUNS_PAGE), "run_status": status or "", "statuses": RUN_STATUSES,
            "conditions": conditions_view(trigger.conditions)}


@page("GET", "/triggers/{trigger_id:int}", section="triggers", scopes=("triggers:read",))
async def trigger_page(request: Request[Any, Any, Any], trigger_id: PathId, getting: FromDishka[uc.GetTrigger],
                       runs: FromDishka[uc.ListTriggerRuns]) -> Template:
    view = View.of(request)
    trigger = await _trigger(view, getting, trigger_id)
    return view.page("trigger.html", **await _log(view, trigger, runs, page_number(request), _status(request)))


@page("GET", "/triggers/{trigger_id:int}/edit", section="triggers", scopes=("triggers:write",))
async def edit_trigger_page(request: Request[Any, Any, Any], trigger_id: PathId,
                            getting: FromDishka[uc.GetTrigger]) -> Template:
    view = View.of(request)
    trigger = await _trigger(view, getting, trigger_id)
    return view.page("trigger_edit.html", trigger=trigger, catalogue=catalogue(), form=form_of(trigger),
                     example=ACTIONS_EXAMPLE)


@page("POST", "/triggers/{trigger_id:int}/edit",
      operation="updateTrigger", section="triggers", scopes=("triggers:write",))
async def edit_trigger(request: Request[Any, Any, Any], trigger_id: PathId, use_case: FromDishka[uc.UpdateTrigger],
                       getting: FromDishka[uc.GetTrigger]) -> Response[Any] | Template:
    view = View.of(request)
    trigger = await _trigger(view, getting, trigger_id)

    def command(actor: Actor, form: Mapping[str, str]) -> uc.UpdateTriggerCommand:
        body = _body(form)
        if "actions" not in body:
            raise ValidationFailed.field("actions", "is required (a JSON list of 1 to 10 actions)")
        data = convert(body, TriggerUpdate)
        changes: dict[str, Any] = {"name": data.name, "event": data.event, "conditions": data.conditions}
        if not isinstance(data.actions, UnsetType):
            changes["actions"] = _actions(data.actions)
        return uc.UpdateTriggerCommand(actor, trigger_id, changes)

    async def again() -> dict[str, Any]:
        return {"trigger": trigger, "catalogue": catalogue(), "example": ACTIONS_EXAMPLE}

    return await _submit(view, use_case, command, template="trigger_edit.html", context=again,
                         done=lambda saved: view.redirect(f"/triggers/{trigger_id}", "Trigger saved"))


async def _switch(view: View, use_case: uc.UpdateTrigger, getting: uc.GetTrigger, runs: uc.ListTriggerRuns,
                  trigger_id: int, enabled: bool) -> Any:
    trigger = await _trigger(view, getting, trigger_id)
    return await view.submit(
        use_case, lambda actor, form: uc.UpdateTriggerCommand(actor, trigger_id, {"enabled": enabled}),
        template="trigger.html", context=lambda: _log(view, trigger, runs, 1, None),
        done=lambda saved: view.redirect(f"/triggers/{trigger_id}",
                                         f"Trigger {saved.name} {'enabled' if enabled else 'disabled'}"))


@page("POST", "/triggers/{trigger_id:int}/enable",
      operation="updateTrigger", section="triggers", scopes=("triggers:write",))
async def enable_trigger(request: Request[Any, Any, Any], trigger_id: PathId, use_case: FromDishka[uc.UpdateTrigger],
                         getting: FromDishka[uc.GetTrigger], runs: FromDishka[uc.ListTriggerRuns]) -> Any:
    return await _switch(View.of(request), use_case, getting, runs, trigger_id, True)


@page("POST", "/triggers/{trigger_id:int}/disable",
      operation="updateTrigger", section="triggers", scopes=("triggers:write",))
async def disable_trigger(request: Request[Any, Any, Any], trigger_id: PathId,
                          use_case: FromDishka[uc.UpdateTrigger], getting: FromDishka[uc.GetTrigger],
                          runs: FromDishka[uc.ListTriggerRuns]) -> Any:
    return await _switch(View.of(request), use_case, getting, runs, trigger_id, False)


@page("GET", "/triggers/{trigger_id:int}/delete", section="triggers", scopes=("triggers:delete",))
async def confirm_delete(request: Request[Any, Any, Any], trigger_id: PathId,
                         getting: FromDishka[uc.GetTrigger]) -> Template:
    view = View.of(request)
    return view.page("trigger_delete.html", trigger=await _trigger(view, getting, trigger_id))


@page("POST", "/triggers/{trigger_id:int}/delete",
      operation="deleteTrigger", section="triggers", scopes=("triggers:delete",))
async def delete_trigger(request: Request[Any, Any, Any], trigger_id: PathId, use_case: FromDishka[uc.DeleteTrigger],
                         getting: FromDishka[uc.GetTrigger]) -> Response[Any] | Template:
    view = View.of(request)
    trigger = await _trigger(view, getting, trigger_id)
    if (await view.form()).get(CONFIRM_FIELD) != "delete":
        return view.page("trigger_delete.html", trigger=trigger)
    await view.run(use_case, lambda actor: uc.DeleteTriggerCommand(actor, trigger_id))
    return view.redirect("/triggers", f"Trigger {trigger.name} deleted")


HANDLERS = [triggers, create_trigger, trigger_page, edit_trigger_page, edit_trigger, enable_trigger, disable_trigger,
            confirm_delete, delete_trigger]
