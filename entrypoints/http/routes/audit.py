"""The audit log: ``GET /audit-events``, the organization's state-changing requests by its keys and users."""

from __future__ import annotations

from typing import Annotated, Literal

from dishka import FromDishka
from litestar.params import QueryParameter

from application import audit as uc
from application.context import Actor
from application.ports.audit import AuditFilter
from application.ports.platform import PageRequest
from domain.audit import ActorType
from domain.parsing import MAX_ID
from entrypoints.http.envelope import ListEnvelope, ListMeta
from entrypoints.http.patterns import ACTION_NAME, RESOURCE_TYPE
from entrypoints.http.routing import AuthMode, Instant, Limit, Offset, endpoint
from entrypoints.http.schemas.audit import AuditEventOut
from entrypoints.http.schemas.calls import parse_instant

TAGS = ["Audit"]


@endpoint("GET", "/audit-events", operation_id="listAuditEvents",
          summary="List the audit log: every state-changing request by the organization's keys and users "
                  "(newest first)",
          tags=TAGS, scopes=("organizations:read",), auth=AuthMode.KEY_OR_SESSION,
          description=("A Bearer key with organizations:read, or the session of an owner or an admin. One event per "
                       "POST, PUT, PATCH or DELETE made with an API key or by a signed-in dashboard user, carried "
                       "out (status below 400) or refused after its credential was accepted (the scope check, "
                       "X-Sub-Org-Id, or the operation's own 4xx); not requests whose credential was refused, "
                       "the rate limit's 429, idempotent replays or answers of 500 and above. Request bodies are "
                       "never kept. Events are kept 365 days. A partner reads a sub-organization's log with "
                       "X-Sub-Org-Id."),
          errors={400: "invalid filter (actor_id without actor_type, created_before before created_after)"})
async def list_audit_events(
    actor: FromDishka[Actor],
    use_case: FromDishka[uc.ListAuditEvents],
    limit: Limit = 25,
    offset: Offset = 0,
    actor_type: Annotated[Literal["api_key", "user"] | None, QueryParameter(
        description="Only the events of API keys, or of users")] = None,
    actor_id: Annotated[int | None, QueryParameter(ge=1, le=MAX_ID, description=(
        "Only the events of this key or user (with actor_type)"))] = None,
    action: Annotated[str | None, QueryParameter(min_length=1, max_length=80, pattern=ACTION_NAME,
                                                 description="e.g. agent.updated")] = None,
    resource_type: Annotated[str | None, QueryParameter(min_length=1, max_length=60, pattern=RESOURCE_TYPE,
                                                        description="e.g. agent")] = None,
    resource_id: Annotated[str | None, QueryParameter(min_length=1, max_length=100, description=(
        "The resource's id, as the events give it"))] = None,
    created_after: Instant = None,
    created_before: Instant = None,
) -> ListEnvelope[AuditEventOut]:
    filters = AuditFilter(ActorType(actor_type) if actor_type else None, actor_id, action, resource_type,
                          resource_id, parse_instant(created_after, "created_after"),
                          parse_instant(created_before, "created_before"))
    page = await use_case.execute(uc.ListAuditEventsCommand(actor, filters, PageRequest(limit, offset)))
    return ListEnvelope([AuditEventOut.of(x) for x in page.items], ListMeta(page.total, page.limit, page.offset))


ROUTES = [list_audit_events]
