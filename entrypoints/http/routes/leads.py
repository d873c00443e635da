from __future__ import annotations

from typing import Annotated

from dishka import FromDishka
from litestar import Response
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import JSONBody, PathParameter, QueryParameter

from application import leads as uc
from application.context import Actor
from application.ports.leads import LeadFilter
from application.ports.platform import PageRequest
from domain.parsing import MAX_ID
from entrypoints.http.envelope import Envelope, ListEnvelope, ListMeta
from entrypoints.http.routing import BILLING_HOLD, Instant, Limit, Offset, endpoint
from entrypoints.http.schemas.calls import parse_instant
from entrypoints.http.schemas.leads import LeadCreate, LeadOut, LeadStatus

TAGS = ["Leads"]
LeadId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="Lead id")]
DNC_UNAVAILABLE = "dnc_unavailable: Do-Not-Call screening could not be completed, so nothing was stored or dialled"


@endpoint("POST", "/leads", operation_id="createLead", location="/leads/{id}",
          summary="Receive a lead: call it at once (agent_id) or add it to a campaign (campaign_id)", tags=TAGS,
          scopes=("leads:write",), status_code=201,
          responses={200: ResponseSpec(Envelope[LeadOut], description=(
              "A lead with this external_id exists already: that lead, unchanged (nothing was done)"))},
          description=("201 with the new lead. A lead with this external_id exists already: 200 with that lead, "
                       "unchanged (nothing is done), also when two requests race. A number on a Do-Not-Call list: "
                       "201 with status blocked_dnc, no call and no contact."),
          errors={400: "invalid body, phone or email, or unresolved {{placeholders}} (details.missing_placeholders)",
                  402: BILLING_HOLD, 404: "not_found: agent_id or campaign_id is not one of this organization's",
                  409: "invalid_transition: the agent is not active, or the campaign has ended",
                  422: "invalid_target: send exactly one of agent_id and campaign_id", 503: DNC_UNAVAILABLE})
async def create_lead(data: JSONBody[LeadCreate], actor: FromDishka[Actor],
                      use_case: FromDishka[uc.CreateLead]) -> Response[Envelope[LeadOut]]:
    received = await use_case.execute(uc.CreateLeadCommand(
        actor=actor, phone=data.phone, name=data.name, email=data.email, agent_id=data.agent_id,
        campaign_id=data.campaign_id, custom_data=dict(data.custom_data or {}), external_id=data.external_id,
        source=data.source))
    return Response(Envelope(LeadOut.of(received.lead)), status_code=201 if received.created else 200)


@endpoint("GET", "/leads", operation_id="listLeads", summary="List leads (newest first)", tags=TAGS,
          scopes=("leads:read",))
async def list_leads(
    actor: FromDishka[Actor],
    use_case: FromDishka[uc.ListLeads],
    limit: Limit = 25,
    offset: Offset = 0,
    status: Annotated[LeadStatus | None, QueryParameter()] = None,
    source: Annotated[str | None, QueryParameter(max_length=100)] = None,
    created_after: Instant = None,
    created_before: Instant = None,
) -> ListEnvelope[LeadOut]:
    filters = LeadFilter(status, source, parse_instant(created_after, "created_after"),
                         parse_instant(created_before, "created_before"))
    page = await use_case.execute(uc.ListLeadsCommand(actor, filters, PageRequest(limit, offset)))
    return ListEnvelope([LeadOut.of(x) for x in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("GET", "/leads/{id:int}", operation_id="getLead", summary="Get a lead (its status follows its call)",
          tags=TAGS, scopes=("leads:read",), errors={404: ""})
async def get_lead(id: LeadId, actor: FromDishka[Actor], use_case: FromDishka[uc.GetLead]) -> Envelope[LeadOut]:
    return Envelope(LeadOut.of(await use_case.execute(uc.GetLeadCommand(actor, id))))


ROUTES = [create_lead, list_leads, get_lead]
