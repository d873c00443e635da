"""Campaigns with their progress: the list (status, contacts by status, completed of total), a campaign's page
with its stats and ``status_reason`` (live: Server-Sent Events,
``live.py``), and start, pause and cancel, all through the campaign use cases of the API."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dishka import FromDishka
from litestar import Request
from litestar.response import Response, ServerSentEvent, Template

from application import campaigns as uc
from application.context import Actor
from application.ports.campaigns import CampaignFilter
from application.ports.platform import PageRequest, Unit, Units
from domain.campaigns import FINAL_STATUSES
from domain.identity import persisted
from entrypoints.http.dashboard.live import stream
from entrypoints.http.dashboard.pages import page
from entrypoints.http.dashboard.pages.params import PathId, page_number, pages_of
from entrypoints.http.dashboard.view import View

PER_PAGE = 20


def progress(stats: Any) -> dict[str, int]:
    total = stats.total
    return {"total": total, "completed": stats.completed,
            "percent": round(100 * stats.completed / total) if total else 0,
            "open": stats.pending + stats.dialing + stats.retry_wait}


@page("GET", "/campaigns", section="campaigns", scopes=("campaigns:read",))
async def campaigns(request: Request[Any, Any, Any], listing: FromDishka[uc.ListCampaigns],
                    getting: FromDishka[uc.GetCampaign]) -> Template:
    view = View.of(request)
    return view.page("campaigns.html", **await _listed(view, listing, getting))


@page("GET", "/live/campaigns", section="campaigns", stream=True, scopes=("campaigns:read",))
async def campaigns_live(request: Request[Any, Any, Any], units: FromDishka[Units]) -> ServerSentEvent:
    """The campaigns list (its ``?page=N``), live (``live.py``): statuses and progress move without a reload."""
    view = View.of(request)

    async def values(unit: Unit) -> dict[str, Any]:
        return await _listed(view, await unit.get(uc.ListCampaigns), await unit.get(uc.GetCampaign))

    return await stream(view, units, "campaigns.html", values)


async def _listed(view: View, listing: uc.ListCampaigns, getting: uc.GetCampaign) -> dict[str, Any]:
    number = page_number(view.request)
    found = await view.run(listing, lambda actor: uc.ListCampaignsCommand(
        actor, CampaignFilter(), PageRequest(PER_PAGE, (number - 1) * PER_PAGE)))
    rows = []
    for campaign in found.items:
        detail = await view.run(getting, _get_campaign(persisted(campaign.id)))
        rows.append({"campaign": detail.campaign, "stats": detail.stats, "progress": progress(detail.stats)})
    return {"rows": rows, "total": found.total, "page": number, "pages": pages_of(found.total, PER_PAGE)}


async def _detail(view: View, getting: uc.GetCampaign, campaign_id: int) -> dict[str, Any]:
    detail = await view.run(getting, lambda actor: uc.GetCampaignCommand(actor, campaign_id))
    return {"campaign": detail.campaign, "stats": detail.stats, "progress": progress(detail.stats),
            "live": detail.campaign.status not in FINAL_STATUSES}


@page("GET", "/campaigns/{campaign_id:int}", section="campaigns", scopes=("campaigns:read",))
async def campaign(request: Request[Any, Any, Any], campaign_id: PathId, getting: FromDishka[uc.GetCampaign]
                   ) -> Template:
    view = View.of(request)
    return view.page("campaign.html", **await _detail(view, getting, campaign_id))


@page("GET", "/live/campaigns/{campaign_id:int}", section="campaigns", stream=True,
      scopes=("campaigns:read",))
async def campaign_live(request: Request[Any, Any, Any], campaign_id: PathId, units: FromDishka[Units]
                        ) -> ServerSentEvent:
    """The part of the campaign's page that changes while it runs, live (``live.py``); once the campaign is
    finished the stream ends and the page reloads once (its buttons change)."""
    view = View.of(request)

    async def values(unit: Unit) -> dict[str, Any]:
        return await _detail(view, await unit.get(uc.GetCampaign), campaign_id)

    return await stream(view, units, "campaign.html", values)


async def _act(view: View, use_case: Any, command: Any, getting: uc.GetCampaign, campaign_id: int,
               done_message: str) -> Response[Any] | Template:
    """A campaign button: the use case, then back to the campaign's page (or the page again with the error)."""
    return await view.submit(use_case, lambda actor, form: command(actor, campaign_id), template="campaign.html",
                             context=lambda: _detail(view, getting, campaign_id),
                             done=lambda c: view.redirect(f"/campaigns/{c.id}", done_message))


@page("POST", "/campaigns/{campaign_id:int}/start",
      operation="startCampaign", section="campaigns", scopes=("campaigns:execute",))
async def start(request: Request[Any, Any, Any], campaign_id: PathId, use_case: FromDishka[uc.StartCampaign],
                getting: FromDishka[uc.GetCampaign]) -> Response[Any] | Template:
    return await _act(View.of(request), use_case, uc.StartCampaignCommand, getting, campaign_id, "Campaign started")


@page("POST", "/campaigns/{campaign_id:int}/pause",
      operation="pauseCampaign", section="campaigns", scopes=("campaigns:execute",))
async def pause(request: Request[Any, Any, Any], campaign_id: PathId, use_case: FromDishka[uc.PauseCampaign],
                getting: FromDishka[uc.GetCampaign]) -> Response[Any] | Template:
    return await _act(View.of(request), use_case, uc.PauseCampaignCommand, getting, campaign_id, "Campaign paused")


@page("POST", "/campaigns/{campaign_id:int}/cancel",
      operation="cancelCampaign", section="campaigns", scopes=("campaigns:execute",))
async def cancel(request: Request[Any, Any, Any], campaign_id: PathId, use_case: FromDishka[uc.CancelCampaign],
                 getting: FromDishka[uc.GetCampaign]) -> Response[Any] | Template:
    return await _act(View.of(request), use_case, uc.CancelCampaignCommand, getting, campaign_id,
                      "Campaign cancelled")


HANDLERS = [campaigns, campaigns_live, campaign, campaign_live, start, pause, cancel]


def _get_campaign(campaign_id: int) -> Callable[[Actor], uc.GetCampaignCommand]:
    return lambda actor: uc.GetCampaignCommand(actor, campaign_id)
