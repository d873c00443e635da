from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from msgspec import Meta, Struct

from domain.audit import AuditEvent
from domain.identity import persisted

ActorKind = Literal["api_key", "user"]


class AuditActorOut(Struct, kw_only=True):
    type: ActorKind
    id: Annotated[int, Meta(description="The API key's id or the user's id")]
    label: Annotated[str, Meta(description=(
        "As it was then: the key's name and visible prefix (name (parley_sk_Ab…wxyz)), or the user's email"))]


class AuditResourceOut(Struct, kw_only=True):
    type: Annotated[str, Meta(description="The action's resource, e.g. agent, api_key, campaign_contacts")]
    id: Annotated[str | None, Meta(description=(
        "The resource's id, as text: what a 201 created, else the last id in the path; null when none"))]


class AuditEventOut(Struct, kw_only=True):
    id: int
    actor: AuditActorOut
    action: Annotated[str, Meta(description=(
        "<resource>.<verb in the past tense>, from the operation performed: updateAgent is agent.updated"))]
    resource: AuditResourceOut
    method: Literal["POST", "PUT", "PATCH", "DELETE"]
    path: Annotated[str, Meta(description="The request's path, without its query")]
    status: Annotated[int, Meta(description=(
        "The answer's HTTP status: below 400 when the change was carried out, 4xx when it was refused"))]
    ip: Annotated[str, Meta(description="The client's address as the server saw it")]
    request_id: Annotated[str, Meta(description="The request's X-Request-ID")]
    fields: Annotated[list[str], Meta(description=(
        "The top-level field names a PATCH or PUT carried out sent (never their values); otherwise empty"))]
    created_at: datetime

    @classmethod
    def of(cls, x: AuditEvent) -> AuditEventOut:
        return cls(id=persisted(x.id), actor=AuditActorOut(type=x.actor.type.value, id=x.actor.id,
                                                           label=x.actor.label),
                   action=x.action, resource=AuditResourceOut(type=x.resource_type, id=x.resource_id),
                   method=x.method, path=x.path, status=x.status, ip=x.ip,  # type: ignore[arg-type]  # the domain's type is wider
                   request_id=x.request_id, fields=list(x.fields), created_at=x.created_at)
