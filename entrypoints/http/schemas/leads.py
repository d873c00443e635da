from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

from domain import leads as rules
from domain.identity import persisted
from domain.leads import Lead
from domain.parsing import MAX_ID
from entrypoints.http.schemas import OneLine

LeadStatus = Literal["queued", "called", "blocked_dnc", "failed"]
Id = Annotated[int, Meta(ge=1, le=MAX_ID)]


# A "type: ignore[arg-type]" below marks a field whose domain type is wider than the documented one: a status
# the domain keeps as a str where the schema lists its values, or a field that is None only before the row is stored.

class LeadCreate(Struct, forbid_unknown_fields=True):
    """Exactly one of agent_id (the call is placed at once) and campaign_id (the lead joins the campaign)."""

    phone: Annotated[str, Meta(min_length=1, max_length=40, description="E.164, e.g. +14155550100")]
    name: Annotated[OneLine, Meta(max_length=rules.NAME_MAX_LENGTH)] | None = None
    email: Annotated[OneLine, Meta(max_length=rules.EMAIL_MAX_LENGTH)] | None = None
    agent_id: Id | None = None
    campaign_id: Id | None = None
    custom_data: Annotated[dict[str, Any], Meta(max_length=rules.MAX_CUSTOM_FIELDS, description=(
        "Fills the agent's {{placeholders}}; kept on the lead and its call or contact"))] | None = None
    external_id: Annotated[OneLine, Meta(max_length=rules.EXTERNAL_ID_MAX_LENGTH, description=(
        "Your id for the lead: sending it again returns the existing lead (200)"))] | None = None
    source: Annotated[OneLine, Meta(max_length=rules.SOURCE_MAX_LENGTH,
                                    description="Where the lead came from")] | None = None


class LeadOut(Struct):
    id: int
    status: LeadStatus
    phone: str
    name: str | None
    email: str | None
    agent_id: int | None
    campaign_id: int | None
    custom_data: dict[str, Any]
    external_id: str | None
    source: str | None
    reason: str | None
    call_id: str | None
    contact_id: int | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, x: Lead) -> LeadOut:
        return cls(
            id=persisted(x.id), status=x.status, phone=x.phone, name=x.name, email=x.email,  # type: ignore[arg-type]  # the domain's type is wider
            agent_id=x.agent_id, campaign_id=x.campaign_id, custom_data=x.custom_data, external_id=x.external_id,
            source=x.source, reason=x.reason, call_id=x.call_id, contact_id=x.contact_id,
            created_at=x.created_at, updated_at=x.updated_at,  # type: ignore[arg-type]  # the domain's type is wider
        )
