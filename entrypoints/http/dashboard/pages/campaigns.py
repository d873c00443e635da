"""Campaigns with their progress: the list (status, contacts by status, completed of total) with a form that
creates one, a campaign's page with its stats and ``status_reason`` (live: Server-Sent Events, ``live.py``),
importing contacts from a CSV file (the API's import: each rejected row shown with its field and why), and start,
pause and cancel, all through the campaign use cases of the API. Cancelling asks first (``GET .../cancel`` says
what happens; its form sends ``confirm``; a post without it shows that page again and changes nothing)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Mapping
from typing import Any

from dishka import FromDishka
from litestar import Request
from litestar.datastructures import UploadFile
from litestar.response import Response, ServerSentEvent, Template

from application import agents
from application import campaigns as uc
from application.context import Actor
from application.ports.agents import AgentFilter
from application.ports.campaigns import CampaignFilter
from application.ports.platform import PageRequest, Unit, Units
from domain.campaigns import FINAL_STATUSES, MAX_IMPORT_BYTES
from domain.errors import ValidationFailed
from domain.identity import persisted
from entrypoints.http.dashboard.live import stream
from entrypoints.http.dashboard.pages import page
from entrypoints.http.dashboard.pages.params import PathId, page_number, pages_of
from entrypoints.http.dashboard.view import View, convert
from entrypoints.http.routes.campaigns import MULTIPART_SLACK, create_command
from entrypoints.http.schemas.campaigns import CampaignCreate

PER_PAGE = 20
AGENTS = 200
CONFIRM_FIELD = "confirm"


def progress(stats: Any) -> dict[str, int]:
    total = stats.total
    return {"total": total, "completed": stats.completed,
            "percent": round(100 * stats.completed / total) if total else 0,
            "open": stats.pending + stats.dialing + stats.retry_wait}


async def _agents(view: View, listing: agents.ListAgents) -> list[tuple[str, str]]:
    """The create form's agents: (id, name)."""
    found = await view.run(listing, lambda actor: agents.ListAgentsCommand(actor, AgentFilter(),
                                                                          PageRequest(AGENTS)))
    return [(str(a.id), a.name) for a in found.items]


@page("GET", "/campaigns", section="campaigns", scopes=("campaigns:read",))
async def campaigns(request: Request[Any, Any, Any], listing: FromDishka[uc.ListCampaigns],
                    getting: FromDishka[uc.GetCampaign], agent_list: FromDishka[agents.ListAgents]) -> Template:
    view = View.of(request)
    return view.page("campaigns.html", agents=await _agents(view, agent_list),
                     form={"timezone": "UTC", "calling_hours.start": "08:00", "calling_hours.end": "21:00",
                           "max_concurrent_calls": "5"},
                     **await _listed(view, listing, getting))


def _campaign_body(form: Mapping[str, str]) -> dict[str, Any]:
    """The create form as the API's POST body (an empty field: the API's default)."""
    body: dict[str, Any] = {}
    for name, value in form.items():
        if name in ("name", "agent_id", "timezone", "timezone_mode", "max_concurrent_calls", "completion",
                    "schedule_id", "from_phone_number_id") and (value.strip() or name == "name"):
            body[name] = value if name == "name" else value.strip()
        elif name in ("calling_hours.start", "calling_hours.end") and value.strip():
            body.setdefault("calling_hours", {})[name.split(".")[1]] = value.strip()
    return body


@page("POST", "/campaigns", operation="createCampaign", section="campaigns", scopes=("campaigns:write",))
async def create_campaign(request: Request[Any, Any, Any], use_case: FromDishka[uc.CreateCampaign],
                          listing: FromDishka[uc.ListCampaigns], getting: FromDishka[uc.GetCampaign],
                          agent_list: FromDishka[agents.ListAgents]) -> Response[Any] | Template:
    view = View.of(request)

    def command(actor: Actor, form: Mapping[str, str]) -> uc.CreateCampaignCommand:
        return create_command(actor, convert(_campaign_body(form), CampaignCreate))

    async def again() -> dict[str, Any]:
        return {"agents": await _agents(view, agent_list), **await _listed(view, listing, getting)}

    return await view.submit(use_case, command, template="campaigns.html", context=again,
                             done=lambda c: view.redirect(f"/campaigns/{c.id}", f"Campaign {c.name} created: "
                                                          "import its contacts"))


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


@page("GET", "/campaigns/{campaign_id:int}/cancel", section="campaigns", scopes=("campaigns:execute",))
async def confirm_cancel(request: Request[Any, Any, Any], campaign_id: PathId,
                         getting: FromDishka[uc.GetCampaign]) -> Template:
    view = View.of(request)
    return view.page("campaign_cancel.html", **await _detail(view, getting, campaign_id))


@page("POST", "/campaigns/{campaign_id:int}/cancel",
      operation="cancelCampaign", section="campaigns", scopes=("campaigns:execute",))
async def cancel(request: Request[Any, Any, Any], campaign_id: PathId, use_case: FromDishka[uc.CancelCampaign],
                 getting: FromDishka[uc.GetCampaign]) -> Response[Any] | Template:
    view = View.of(request)
    if (await view.form()).get(CONFIRM_FIELD) != "cancel":
        return view.page("campaign_cancel.html", **await _detail(view, getting, campaign_id))
    return await _act(view, use_case, uc.CancelCampaignCommand, getting, campaign_id, "Campaign cancelled")


@page("GET", "/campaigns/{campaign_id:int}/import", section="campaigns", scopes=("campaigns:write",))
async def import_form(request: Request[Any, Any, Any], campaign_id: PathId, getting: FromDishka[uc.GetCampaign]
                      ) -> Template:
    view = View.of(request)
    return view.page("campaign_import.html", **await _detail(view, getting, campaign_id))


@page("POST", "/campaigns/{campaign_id:int}/import",
      operation="importCampaignContacts", section="campaigns", scopes=("campaigns:write",),
      upload=MAX_IMPORT_BYTES + MULTIPART_SLACK)
async def import_contacts(request: Request[Any, Any, Any], campaign_id: PathId,
                          use_case: FromDishka[uc.ImportContacts], getting: FromDishka[uc.GetCampaign]) -> Template:
    """The CSV import of the API (``ImportContacts``): the page answers with what was added, the duplicates and
    each rejected row (its line, field and why); a file with no valid row changes nothing."""
    view = View.of(request)
    detail = await _detail(view, getting, campaign_id)
    form = await request.form()
    upload = next((v for v in form.getall("file") if isinstance(v, UploadFile)), None) if "file" in form else None
    if upload is None or not upload.filename:
        return view.page("campaign_import.html", status=400, errors={"file": "choose a CSV file"},
                         error="Choose a CSV file to import.", **detail)
    file = upload.file
    file.seek(0, io.SEEK_END)
    size = file.tell()
    file.seek(0)
    if size > MAX_IMPORT_BYTES:
        return view.page("campaign_import.html", status=413, errors={"file": "is larger than 10 MB"},
                         error="The file is larger than 10 MB.", **detail)
    text = io.TextIOWrapper(file, encoding="utf-8-sig", newline="")
    try:
        result = await view.run(use_case, lambda actor: uc.ImportContactsCommand(actor, campaign_id, text))
    except ValidationFailed as exc:
        details = exc.details or {}
        return view.page("campaign_import.html", status=400, error=exc.message, file_name=upload.filename,
                         rejected=details.get("rejected", []), rejected_count=details.get("rejected_count", 0),
                         errors={"file": str((details.get("validation_errors") or {}).get("file", exc.message))},
                         **detail)
    finally:
        text.detach()
        with contextlib.suppress(Exception):
            await upload.close()
    rejected = [{"row": r.row, "field": r.field, "message": r.message} for r in result.rejected]
    return view.page("campaign_import.html", status=201, result=result, rejected=rejected,
                     rejected_count=result.rejected_count, file_name=upload.filename,
                     **await _detail(view, getting, campaign_id))


HANDLERS = [campaigns, create_campaign, campaigns_live, campaign, campaign_live, start, pause, confirm_cancel,
            cancel, import_form, import_contacts]


def _get_campaign(campaign_id: int) -> Callable[[Actor], uc.GetCampaignCommand]:
    return lambda actor: uc.GetCampaignCommand(actor, campaign_id)
