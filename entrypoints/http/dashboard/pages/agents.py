"""Agents: the list, creating one (the API's body rules), its page (with a "Place a call" form that has a field for
each ``{{placeholder}}`` a call needs), publishing it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dishka import FromDishka
from litestar import Request
from litestar.response import Response, Template

from application import agents as uc
from application import web_calls
from application.context import Actor, ApiBaseUrl
from application.ports.agents import AgentFilter
from application.ports.phones import PhoneNormalizer
from application.ports.platform import PageRequest
from domain.errors import DomainError
from entrypoints.http.dashboard.pages import PathId, bounded, page
from entrypoints.http.dashboard.pages.call_form import published_call_form
from entrypoints.http.dashboard.view import View, decode
from entrypoints.http.envelope import status_for
from entrypoints.http.routes.agents import create_command
from entrypoints.http.routes.calls import web_call_out
from entrypoints.http.schemas.agents import AgentCreate

LIST_SIZE = 100


async def _listing(view: View, agents: uc.ListAgents) -> dict[str, Any]:
    found = await view.run(agents, lambda actor: uc.ListAgentsCommand(actor, AgentFilter(), PageRequest(LIST_SIZE)))
    return {"agents": found.items, "total": found.total}


@page("GET", "/agents", section="agents", scopes=("agents:read",))
async def agents_page(request: Request[Any, Any, Any], agents: FromDishka[uc.ListAgents]) -> Template:
    view = View.of(request)
    return view.page("agents.html", **await _listing(view, agents))


@page("POST", "/agents", operation="createAgent", section="agents", scopes=("agents:write",))
async def create_agent(request: Request[Any, Any, Any], use_case: FromDishka[uc.CreateAgent],
                       agents: FromDishka[uc.ListAgents], phones: FromDishka[PhoneNormalizer]
                       ) -> Response[Any] | Template:
    view = View.of(request)

    def command(actor: Actor, form: Mapping[str, str]) -> uc.CreateAgentCommand:
        fields = {k: form[k] for k in ("name", "description", "prompt", "first_message", "language") if k in form}
        return create_command(actor, decode(fields, AgentCreate), phones)

    return await view.submit(use_case, command, template="agents.html",
                             context=lambda: _listing(view, agents),
                             done=lambda agent: view.redirect(f"/agents/{agent.id}", f"Agent {agent.name} created"))


@page("GET", "/agents/{agent_id:int}", section="agents", scopes=("agents:read",))
async def agent_page(request: Request[Any, Any, Any], agent_id: PathId, use_case: FromDishka[uc.GetAgent],
                     published: FromDishka[uc.GetPublishedAgent]) -> Template:
    view = View.of(request)
    agent = await view.run(use_case, lambda actor: uc.GetAgentCommand(actor, bounded(agent_id)))
    return view.page("agent.html", agent=agent, **await published_call_form(view, published, agent))


@page("POST", "/agents/{agent_id:int}/publish",
      operation="publishAgent", section="agents", scopes=("agents:write",))
async def publish_agent(request: Request[Any, Any, Any], agent_id: PathId, use_case: FromDishka[uc.PublishAgent],
                        agent: FromDishka[uc.GetAgent],
                        published: FromDishka[uc.GetPublishedAgent]) -> Response[Any] | Template:
    view = View.of(request)

    async def again() -> dict[str, Any]:
        found = await view.run(agent, lambda actor: uc.GetAgentCommand(actor, bounded(agent_id)))
        return {"agent": found, **await published_call_form(view, published, found)}

    return await view.submit(use_case, lambda actor, _: uc.PublishAgentCommand(actor, bounded(agent_id)),
                             template="agent.html", context=again,
                             done=lambda done: view.redirect(f"/agents/{agent_id}",
                                                             f"Published version {done.version.version}"))


@page("POST", "/agents/{agent_id:int}/web-call",
      operation="createWebCall", section="agents", scopes=("calls:schedule",))
async def talk_to_agent(request: Request[Any, Any, Any], agent_id: PathId, use_case: FromDishka[web_calls.StartWebCall],
                        base: FromDishka[ApiBaseUrl]) -> Response[Any]:
    """"Talk to this agent": a web call for the signed-in user's organization, answered as JSON for webcall.js
    (``{websocket_url, call_id, expires_at}``, or ``{message}`` with the error's status)."""
    view = View.of(request)
    try:
        started = await view.run(use_case, lambda actor: web_calls.StartWebCallCommand(actor.organization_id,
                                                                                       bounded(agent_id)))
    except DomainError as exc:
        return Response({"message": exc.message}, status_code=status_for(exc), media_type="application/json")
    out = web_call_out(started, base)
    return Response({"call_id": out.call_id, "websocket_url": out.websocket_url,
                     "expires_at": out.expires_at.isoformat()}, status_code=201, media_type="application/json")


HANDLERS = [agents_page, create_agent, agent_page, publish_agent, talk_to_agent]
