from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

from domain import ai_providers as rules
from domain.ai_providers import AiProvider
from entrypoints.http.schemas import OneLine

ProviderType = Literal["openai_compatible", "offline"]
Name = Annotated[OneLine, Meta(min_length=1, max_length=rules.NAME_MAX_LENGTH)]
BaseUrl = Annotated[str, Meta(min_length=1, max_length=2048, description=(
    "The server's OpenAI-compatible API root, e.g. https://api.openai.com/v1: https (http only to this machine "
    "where the server allows loopback targets); checked again at every request"))]
ApiKey = Annotated[OneLine, Meta(min_length=1, max_length=rules.API_KEY_MAX_LENGTH, description=(
    "Write-only: sent as a Bearer token, encrypted at rest and never returned"))]


class AiProviderCreate(Struct, forbid_unknown_fields=True):
    name: Name
    type: ProviderType
    base_url: BaseUrl | None = None
    api_key: ApiKey | None = None


class AiProviderUpdate(Struct, forbid_unknown_fields=True):
    name: Name | UnsetType = UNSET
    type: ProviderType | UnsetType = UNSET
    base_url: BaseUrl | UnsetType | None = UNSET
    api_key: Annotated[ApiKey | None, Meta(description="Write-only; null removes the key")] | UnsetType = UNSET


class AiProviderOut(Struct):
    id: int
    name: str
    type: ProviderType
    base_url: str | None
    has_api_key: bool
    builtin: Annotated[bool, Meta(description="The organization's built-in offline provider (cannot be deleted)")]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, p: AiProvider) -> AiProviderOut:
        return cls(p.id or 0, p.name, p.type, p.base_url, p.has_api_key, p.builtin,  # type: ignore[arg-type]  # the domain's type is wider
                   p.created_at, p.updated_at)  # type: ignore[arg-type]  # set once stored
