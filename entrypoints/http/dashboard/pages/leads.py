"""Leads: the list (``ListLeads``, newest first, 25 a page, filtered by status), a lead's page (``GetLead``: its
status following its call or campaign contact, the reason of a failure or a block) and a form that receives one
through ``CreateLead``, the use case of ``POST /leads`` with its rules: exactly one target (an agent calls it at
once, or it joins a campaign), the number screened (a listed one kept as ``blocked_dnc``), the destination policy,
the billing hold, and a known ``external_id`` answered with the lead that has it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, get_args

from dishka import FromDishka
from litestar import Request
from litestar.response import Response, Template

from application import agents, campaigns
from application import leads as uc
from application.context import Actor
from application.ports.agents import AgentFilter
from application.ports.campaigns import CampaignFilter
from application.ports.leads import LeadFilter
from application.ports.platform import PageRequest
from domain.campaigns import FINAL_STATUSES
from domain.errors import ValidationFailed
from entrypoints.http.dashboard.pages import page
from entrypoints.http.dashboard.pages.params import PathId, page_number, pages_of
from entrypoints.http.dashboard.view import View, decode
from entrypoints.http.schemas.leads import LeadCreate, LeadStatus

PER_PAGE = 25
TARGETS = 200
STATUSES = get_args(LeadStatus)
TARGET_FIELD = "target"
"""The form's one select of where a lead goes: ``agent:<id>`` (called at once) or ``campaign:<id>``."""


async def _targets(view: View, agent_list: agents.ListAgents, campaign_list: campaigns.ListCampaigns
                   ) -> dict[str, Any]:
    """The form's targets: the agents (a lead is called by an active one) and the campaigns not yet over."""
    found = await view.run(agent_list, lambda actor: agents.ListAgentsCommand(actor, AgentFilter(),
                                                                             PageRequest(TARGETS)))
    running = await view.run(campaign_list, lambda actor: campaigns.ListCampaignsCommand(actor, CampaignFilter(),
                                                                                        PageRequest(TARGETS)))
    return {"agent_targets": [(f"agent:{a.id}", f"Call now with {a.name}") for a in found.items],
            "campaign_targets": [(f"campaign:{c.id}", f"Add to the campaign {c.name}") for c in running.items
                                 if c.status not in FINAL_STATUSES]}


def _status(view: View) -> str:
    chosen = view.request.query_params.get("status", "")
    return chosen if chosen in STATUSES else ""


async def _listed(view: View, listing: uc.ListLeads) -> dict[str, Any]:
    number, status = page_number(view.request), _status(view)
    found = await view.run(listing, lambda actor: uc.ListLeadsCommand(
        actor, LeadFilter(status or None), PageRequest(PER_PAGE, (number - 1) * PER_PAGE)))
    return {"leads": found.items, "total": found.total, "page": number, "pages": pages_of(found.total, PER_PAGE),
            "chosen_status": status, "statuses": STATUSES}


@page("GET", "/leads", section="leads", scopes=("leads:read",))
async def leads(request: Request[Any, Any, Any], listing: FromDishka[uc.ListLeads],
                agent_list: FromDishka[agents.ListAgents], campaign_list: FromDishka[campaigns.ListCampaigns]
                ) -> Template:
    view = View.of(request)
    return view.page("leads.html", **await _listed(view, listing), **await _targets(view, agent_list, campaign_list))


def _body(form: Mapping[str, str]) -> dict[str, Any]:
    """The form as the API's POST /leads body (an empty field left out)."""
    body: dict[str, Any] = {"phone": form.get("phone", "").strip()}
    for name in ("name", "email", "external_id", "source"):
        if form.get(name, "").strip():
            body[name] = form[name].strip()
    kind, _, target = form.get(TARGET_FIELD, "").partition(":")
    if kind not in ("agent", "campaign"):
        raise ValidationFailed.field(TARGET_FIELD, "choose an agent to call it or a campaign to add it to")
    body[f"{kind}_id"] = target
    text = form.get("custom_data", "").strip()
    if text:
        try:
            body["custom_data"] = json.loads(text)
        except ValueError as exc:
            raise ValidationFailed.field("custom_data", f"is not valid JSON ({exc})") from None
        if not isinstance(body["custom_data"], dict):
            raise ValidationFailed.field("custom_data", 'must be a JSON object, such as {"plan": "gold"}')
    return body


def _command(actor: Actor, form: Mapping[str, str]) -> uc.CreateLeadCommand:
    data = decode(_body(form), LeadCreate)
    return uc.CreateLeadCommand(actor=actor, phone=data.phone, name=data.name, email=data.email,
                                agent_id=data.agent_id, campaign_id=data.campaign_id,
                                custom_data=dict(data.custom_data or {}), external_id=data.external_id,
                                source=data.source)


@page("POST", "/leads", operation="createLead", section="leads", scopes=("leads:write",))
async def create_lead(request: Request[Any, Any, Any], use_case: FromDishka[uc.CreateLead],
                      listing: FromDishka[uc.ListLeads], agent_list: FromDishka[agents.ListAgents],
                      campaign_list: FromDishka[campaigns.ListCampaigns]) -> Response[Any] | Template:
    view = View.of(request)

    async def again() -> dict[str, Any]:
        return {**await _listed(view, listing), **await _targets(view, agent_list, campaign_list)}

    def done(received: uc.LeadReceived) -> Response[Any]:
        lead = received.lead
        if not received.created:
            return view.redirect(f"/leads/{lead.id}", "A lead with this external id exists already: nothing was "
                                                      "done")
        said = {"blocked_dnc": "Lead received: its number is on a Do-Not-Call list, so it is not called"}
        return view.redirect(f"/leads/{lead.id}", said.get(lead.status, "Lead received"))

    result = await view.submit(use_case, _command, template="leads.html", context=again, done=done)
    if isinstance(result, Template):  # the target's own errors belong to its one select
        errors = result.context.get("errors", {})
        for name in ("agent_id", "campaign_id"):
            if name in errors:
                errors.setdefault(TARGET_FIELD, errors.pop(name))
    return result


@page("GET", "/leads/{lead_id:int}", section="leads", scopes=("leads:read",))
async def lead(request: Request[Any, Any, Any], lead_id: PathId, getting: FromDishka[uc.GetLead]) -> Template:
    view = View.of(request)
    found = await view.run(getting, lambda actor: uc.GetLeadCommand(actor, lead_id))
    return view.page("lead.html", lead=found, custom=json.dumps(found.custom_data, indent=2, ensure_ascii=False)
                     if found.custom_data else "")


HANDLERS = [leads, create_lead, lead]
