"""The embeddable widget: minting tokens (an API key, scope widget:write), the routes a token opens
(``Authorization: Widget <token>``, from one of its origins only; CORS in ``entrypoints/http/asgi.py``) and
the script partner pages embed."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from dishka import FromDishka
from litestar import Request, Response
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import JSONBody

from application import web_calls
from application import widget as uc
from application.context import Actor, ApiBaseUrl
from domain.metadata import check_metadata
from domain.widget import WidgetGrant
from entrypoints.http.envelope import Envelope
from entrypoints.http.routes.calls import web_call_out
from entrypoints.http.routing import BILLING_HOLD, endpoint
from entrypoints.http.schemas.calls import WebCallOut
from entrypoints.http.schemas.widget import (
    WidgetCampaignOut,
    WidgetContactCreate,
    WidgetContactOut,
    WidgetTokenCreate,
    WidgetTokenOut,
    WidgetWebCallCreate,
)

TAGS = ["Widget"]
SCRIPT_MAX_AGE = 300
"""Browsers and CDNs keep the script this long (seconds): a new release reaches pages within minutes."""


@endpoint("POST", "/widget/tokens", operation_id="createWidgetToken",
          summary="Mint a widget token for one campaign and a few web origins (its secret is shown once)", tags=TAGS,
          scopes=("widget:write",), secret=True, status_code=201,
          errors={400: "invalid allowed_origins (1-10 exact origins, no path) or ttl_seconds (60-3600)",
                  404: "not_found: campaign_id is not one of this organization's campaigns"})
async def create_token(data: JSONBody[WidgetTokenCreate], actor: FromDishka[Actor],
                       mint: FromDishka[uc.MintWidgetToken]) -> Envelope[WidgetTokenOut]:
    minted = await mint.execute(uc.MintWidgetTokenCommand(actor, data.campaign_id, tuple(data.allowed_origins),
                                                          data.ttl_seconds))
    grant = minted.grant
    return Envelope(WidgetTokenOut(minted.token, grant.expires_at, grant.campaign_id, list(grant.origins)))


@endpoint("GET", "/widget/campaign", operation_id="getWidgetCampaign",
          summary="The token's campaign as a visitor sees it: name, agent, status, whether calls go out now",
          tags=TAGS, auth="widget",
          errors={404: "not_found: the token's campaign was deleted"})
async def get_campaign(actor: FromDishka[Actor], grant: FromDishka[WidgetGrant],
                       use_case: FromDishka[uc.GetWidgetCampaign]) -> Envelope[WidgetCampaignOut]:
    found = await use_case.execute(uc.GetWidgetCampaignCommand(actor, grant.campaign_id))
    return Envelope(WidgetCampaignOut(found.name, found.agent_name, found.status, found.open_now, found.next_open_at))


@endpoint("POST", "/widget/contacts", operation_id="createWidgetContact",
          summary="A visitor asks for a call: added to the token's campaign and dialled at once when it can be",
          description=("The contact joins the token's campaign (a number it has already gives back that contact) "
                       "and is dialled at once when the campaign is running, its calling hours are open for the "
                       "number and the campaign is under its concurrency cap: then status is dialing and call_id "
                       "names the call. Otherwise it waits in the queue for the dialer (call_id null). "
                       "Idempotency-Key is scoped to the token."),
          tags=TAGS, auth="widget", status_code=201,
          errors={400: "invalid phone or name", 402: BILLING_HOLD,
                  403: "quota_exceeded: the plan's included call minutes are used up",
                  404: "not_found: the token's campaign was deleted",
                  409: "invalid_transition: the campaign has ended",
                  422: "missing_placeholders: the campaign's agent needs values the form did not send (listed); "
                       "destination_not_allowed: outside the organization's dialing policy; dnc_blocked: the "
                       "number may not be called",
                  429: "widget_intake_limited: the campaign's widget_max_contacts_per_hour, or 5 contacts an hour "
                       "from this client address, are used up; see Retry-After"})
async def create_contact(data: JSONBody[WidgetContactCreate], actor: FromDishka[Actor],
                         grant: FromDishka[WidgetGrant], request: Request[Any, Any, Any],
                         use_case: FromDishka[uc.SubmitWidgetContact]) -> Envelope[WidgetContactOut]:
    address = request.client.host if request.client else "unknown"
    done = await use_case.execute(uc.SubmitWidgetContactCommand(actor, grant.campaign_id, data.phone, data.name,
                                                                dict(data.custom_data), address))
    return Envelope(WidgetContactOut(done.contact_id, done.status, done.call_id))  # type: ignore[arg-type]  # the domain's status is a str; the schema's a Literal


@endpoint("POST", "/widget/web-calls", operation_id="createWidgetWebCall",
          summary="A visitor talks to the campaign's agent from the browser (\"Talk now\"): a web call",
          description=("A web call (POST /calls/web) with the agent of the token's campaign, counted against the "
                       "widget's hourly caps like a contact. The browser opens websocket_url (the web protocol, "
                       "docs/calls.md). Idempotency-Key is scoped to the token."),
          tags=TAGS, auth="widget", status_code=201,
          errors={400: "invalid custom_data or unresolved {{placeholders}} (details.missing_placeholders)",
                  403: "quota_exceeded: the plan's included call minutes are used up",
                  404: "not_found: the token's campaign was deleted",
                  409: "invalid_transition: the campaign's agent is not active",
                  429: "widget_intake_limited: the campaign's widget_max_contacts_per_hour, or 5 an hour from this "
                       "client address, are used up; see Retry-After"})
async def create_web_call(data: JSONBody[WidgetWebCallCreate], actor: FromDishka[Actor],
                          grant: FromDishka[WidgetGrant], request: Request[Any, Any, Any], base: FromDishka[ApiBaseUrl],
                          use_case: FromDishka[web_calls.StartWidgetWebCall]) -> Envelope[WebCallOut]:
    check_metadata("custom_data", data.custom_data)
    address = request.client.host if request.client else "unknown"
    started = await use_case.execute(web_calls.StartWidgetWebCallCommand(
        actor.organization_id, grant.campaign_id, address, dict(data.custom_data or {})))
    return Envelope(web_call_out(started, base))


@cache
def _script(name: str = "widget.js") -> bytes:
    return resources.files("entrypoints.http").joinpath(f"static/{name}").read_bytes()


@endpoint("GET", "/widget.js", operation_id="getWidgetScript",
          summary="The embeddable widget script (plain JavaScript; also served at /widget.js)", tags=TAGS,
          auth="public", media_type="text/javascript",
          responses={200: ResponseSpec(str, description="The script", media_type="text/javascript",
                                       generate_examples=False)})
async def widget_script() -> Response[bytes]:
    return Response(_script(), media_type="text/javascript",  # Litestar adds "; charset=utf-8"
                    headers={"Cache-Control": f"public, max-age={SCRIPT_MAX_AGE}"})


@endpoint("GET", "/webcall.js", operation_id="getWebCallScript",
          summary="The web-call client (plain JavaScript): microphone to 16 kHz PCM over the media stream, and back",
          tags=TAGS, auth="public", media_type="text/javascript",
          responses={200: ResponseSpec(str, description="The script", media_type="text/javascript",
                                       generate_examples=False)})
async def webcall_script() -> Response[bytes]:
    return Response(_script("webcall.js"), media_type="text/javascript",
                    headers={"Cache-Control": f"public, max-age={SCRIPT_MAX_AGE}"})


ROUTES = [create_token, get_campaign, create_contact, create_web_call, widget_script, webcall_script]
