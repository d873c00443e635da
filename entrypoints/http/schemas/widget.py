from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from domain import campaigns as campaign_rules
from domain import metadata as metadata_rules
from domain import widget as rules
from domain.parsing import MAX_ID
from entrypoints.http.schemas import OneLine

Id = Annotated[int, Meta(ge=1, le=MAX_ID)]
ContactStatus = Literal["pending", "dialing", "completed", "retry_wait", "failed", "skipped_dnc", "cancelled"]


class WidgetTokenCreate(Struct, forbid_unknown_fields=True):
    campaign_id: Id
    allowed_origins: Annotated[list[Annotated[str, Meta(max_length=rules.ORIGIN_MAX_LENGTH)]], Meta(
        min_length=1, max_length=rules.MAX_ORIGINS,
        description="1-10 exact origins (scheme, host, optional port; no path), e.g. https://shop.example")]
    ttl_seconds: Annotated[int, Meta(ge=rules.TTL_MIN_SECONDS, le=rules.TTL_MAX_SECONDS,
                                     description="Lifetime of the token (60-3600 seconds)")] = (
        rules.TTL_DEFAULT_SECONDS)


class WidgetTokenOut(Struct):
    token: str
    expires_at: datetime
    campaign_id: int
    allowed_origins: list[str]


class WidgetCampaignOut(Struct):
    name: str
    agent_name: str | None
    status: str
    open_now: bool
    next_open_at: datetime | None


class WidgetContactCreate(Struct, forbid_unknown_fields=True):
    phone: Annotated[str, Meta(min_length=1, max_length=40, description="E.164, e.g. +14155550100")]
    name: Annotated[OneLine, Meta(max_length=campaign_rules.CONTACT_NAME_MAX_LENGTH)] | None = None
    custom_data: dict[str, Any] = msgspec.field(default_factory=dict)


class WidgetContactOut(Struct):
    contact_id: int
    status: ContactStatus
    call_id: str | None


class WidgetWebCallCreate(Struct, forbid_unknown_fields=True):
    custom_data: Annotated[dict[str, Any], Meta(max_length=metadata_rules.MAX_KEYS, description=(
        "Each key fills the matching {{placeholder}} of the agent's prompt and first message"))] | None = None
