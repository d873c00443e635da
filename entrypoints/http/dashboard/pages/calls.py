"""Calls: the list, placing a call from an agent's page (its placeholders' fields are the call's custom_data), a
call's page with its log (transcript) and an audio player for its recording (a signed recording URL, as
``GET /call-logs/{id}/recording`` hands out)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dishka import FromDishka
from litestar import Request
from litestar.response import Response, ServerSentEvent, Template

from application import agents as agents_uc
from application import calls as uc
from application.context import Actor
from application.ports.agents import AgentFilter
from application.ports.calls import CallFilter
from application.ports.platform import PageRequest, Unit, Units
from domain.calls import FINAL_STATUSES
from domain.errors import NotFound
from entrypoints.http.dashboard.live import stream
from entrypoints.http.dashboard.pages import PathText, page
from entrypoints.http.dashboard.pages.call_form import published_call_form
from entrypoints.http.dashboard.view import View, decode
from entrypoints.http.schemas.calls import CallCreate

LIST_SIZE = 50
AGENT_NAMES = 100  # the agents named in the list (others show their id)
MAX_CALL_ID = 64
CUSTOM_FIELD = "custom."
"""The prefix of the "Place a call" form's placeholder fields: ``custom.<name>`` fills ``{{name}}``."""


async def _listed(view: View, calls: uc.ListCalls, agents: agents_uc.ListAgents) -> dict[str, Any]:
    found = await view.run(calls, lambda actor: uc.ListCallsCommand(actor, CallFilter(), PageRequest(LIST_SIZE)))
    named = await view.run(agents, lambda actor: agents_uc.ListAgentsCommand(actor, AgentFilter(),
                                                                             PageRequest(AGENT_NAMES)))
    return {"calls": found.items, "total": found.total, "agent_names": {agent.id: agent.name for agent in named.items}}


@page("GET", "/calls", section="calls", scopes=("calls:read",))
async def calls_page(request: Request[Any, Any, Any], calls: FromDishka[uc.ListCalls],
                     agents: FromDishka[agents_uc.ListAgents]) -> Template:
    view = View.of(request)
    return view.page("calls.html", **await _listed(view, calls, agents))


@page("GET", "/live/calls", section="calls", stream=True, scopes=("calls:read",))
async def calls_live(request: Request[Any, Any, Any], units: FromDishka[Units]) -> ServerSentEvent:
    """The calls page's list, live (``live.py``): a new call, a status or an outcome shows without a reload."""
    view = View.of(request)

    async def values(unit: Unit) -> dict[str, Any]:
        return await _listed(view, await unit.get(uc.ListCalls), await unit.get(agents_uc.ListAgents))

    return await stream(view, units, "calls.html", values)


@page("POST", "/calls", operation="createCall", section="calls", scopes=("calls:schedule",))
async def place_call(request: Request[Any, Any, Any], use_case: FromDishka[uc.PlaceCall],
                     agent: FromDishka[agents_uc.GetAgent],
                     published: FromDishka[agents_uc.GetPublishedAgent]) -> Response[Any] | Template:
    view = View.of(request)
    form = await view.form()

    def command(actor: Actor, form: Mapping[str, str]) -> uc.PlaceCallCommand:
        # one field per placeholder of the agent (``custom.<name>``), a blank one left out: custom_data
        custom = {name.removeprefix(CUSTOM_FIELD): value for name, value in form.items()
                  if name.startswith(CUSTOM_FIELD) and value.strip()}
        data = decode({"bot_id": form.get("agent_id", ""), "destination_phone": form.get("destination_phone", ""),
                       "contact_name": form.get("contact_name", ""), "custom_data": custom or ""}, CallCreate)
        return uc.PlaceCallCommand(actor, str(data.bot_id), data.destination_phone, data.contact_name,
                                   data.custom_data or {})

    async def again() -> dict[str, Any]:
        agent_id = int(form["agent_id"]) if form.get("agent_id", "").isdigit() else 0
        found = await view.run(agent, lambda actor: agents_uc.GetAgentCommand(actor, agent_id))
        return {"agent": found, **await published_call_form(view, published, found)}

    return await view.submit(use_case, command, template="agent.html", context=again,
                             done=lambda call: view.redirect(f"/calls/{call.id}", "Call placed"))


@page("GET", "/calls/{call_id:str}", section="calls", scopes=("calls:read",))
async def call_page(request: Request[Any, Any, Any], call_id: PathText, calls: FromDishka[uc.GetCall],
                    logs: FromDishka[uc.GetCallLog], links: FromDishka[uc.GetRecordingLink]) -> Template:
    view = View.of(request)
    return view.page("call.html", **await _call(view, call_id, calls, logs, links))


@page("GET", "/live/calls/{call_id:str}", section="calls", stream=True, scopes=("calls:read",))
async def call_live(request: Request[Any, Any, Any], call_id: PathText, units: FromDishka[Units]) -> ServerSentEvent:
    """A call's page while the call goes on, live (``live.py``): its status and transcript; once it is over the
    stream ends and the page reloads once (the recording's player)."""
    view = View.of(request)
    if len(call_id) > MAX_CALL_ID:
        raise NotFound("call", call_id)

    async def values(unit: Unit) -> dict[str, Any]:
        return await _call(view, call_id, await unit.get(uc.GetCall), await unit.get(uc.GetCallLog),
                           await unit.get(uc.GetRecordingLink))

    return await stream(view, units, "call.html", values)


async def _call(view: View, call_id: str, calls: uc.GetCall, logs: uc.GetCallLog, links: uc.GetRecordingLink
                ) -> dict[str, Any]:
    if len(call_id) > MAX_CALL_ID:
        raise NotFound("call", call_id)
    call = await view.run(calls, lambda actor: uc.GetCallCommand(actor, call_id))
    log = recording = None
    if call.call_log_id is not None:
        log_id = call.call_log_id
        log = await view.run(logs, lambda actor: uc.GetCallLogCommand(actor, log_id))
        if log.recording_available:
            recording = await view.run(links, lambda actor: uc.GetRecordingLinkCommand(actor, log_id))
    finished = call.status in FINAL_STATUSES
    return {"call": call, "log": log, "recording": recording, "finished": finished, "live": not finished}


HANDLERS = [calls_page, calls_live, place_call, call_page, call_live]
