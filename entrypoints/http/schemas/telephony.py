from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

from application.ports.carriers import AvailableNumber
from domain.telephony import MAX_PROVIDER_KEYS, CallStats, PhoneNumber, TelephonyProvider
from entrypoints.http.schemas import OneLine

ProviderType = Literal["twilio", "telnyx", "vonage", "sip", "simulator"]
Name = Annotated[OneLine, Meta(min_length=1, max_length=200)]
Credentials = Annotated[dict[Annotated[str, Meta(min_length=1, max_length=100)],
                             Annotated[str, Meta(max_length=4000)]], Meta(max_length=MAX_PROVIDER_KEYS, description=(
                                 "Write-only: encrypted at rest and never returned"))]
Settings = Annotated[dict[Annotated[str, Meta(max_length=100)], Annotated[str, Meta(max_length=500)]],
                     Meta(max_length=MAX_PROVIDER_KEYS)]
# PATCH merges these into the stored ones: a key sent replaces that key, null removes it
CredentialsPatch = Annotated[dict[Annotated[str, Meta(min_length=1, max_length=100)],
                                  Annotated[str, Meta(max_length=4000)] | None],
                             Meta(max_length=MAX_PROVIDER_KEYS, description=(
                                 "Write-only, merged into the stored credentials: null removes a key"))]
SettingsPatch = Annotated[dict[Annotated[str, Meta(max_length=100)], Annotated[str, Meta(max_length=500)] | None],
                          Meta(max_length=MAX_PROVIDER_KEYS,
                               description="Merged into the stored settings: null removes a key")]


# A "type: ignore[arg-type]" below marks a field whose domain type is wider than the documented one: a status
# the domain keeps as a str where the schema lists its values, or a field that is None only before the row is stored.

class ProviderCreate(Struct, forbid_unknown_fields=True):
    name: Name
    type: ProviderType
    credentials: Credentials | None = None
    settings: Settings | None = None
    is_default: bool = False


class ProviderUpdate(Struct, forbid_unknown_fields=True):
    name: Name | UnsetType = UNSET
    credentials: CredentialsPatch | UnsetType | None = UNSET
    settings: SettingsPatch | UnsetType = UNSET
    is_default: bool | UnsetType = UNSET
    status: Literal["active", "disabled"] | UnsetType = UNSET


class ProviderOut(Struct):
    id: int
    name: str
    type: ProviderType
    status: Literal["active", "disabled"]
    is_default: bool
    builtin: bool
    has_credentials: bool
    credential_fields: list[str]
    settings: dict[str, str]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, p: TelephonyProvider) -> ProviderOut:
        return cls(p.id or 0, p.name, p.type, p.status, p.is_default, p.builtin,  # type: ignore[arg-type]  # the domain's type is wider
                   p.has_credentials, list(p.credential_fields), dict(p.settings),
                   p.created_at, p.updated_at)  # type: ignore[arg-type]  # the domain's type is wider


class Capabilities(Struct, forbid_unknown_fields=True):
    voice: bool = True
    sms: bool = False


class CapabilitiesPatch(Struct, forbid_unknown_fields=True):
    voice: bool | UnsetType = UNSET
    sms: bool | UnsetType = UNSET


class PhoneNumberCreate(Struct, forbid_unknown_fields=True):
    phone_number: Annotated[str, Meta(min_length=1, max_length=40, description="E.164")]
    provider_id: Annotated[int, Meta(ge=1)] | None = None
    label: Annotated[OneLine, Meta(max_length=200)] | None = None
    inbound_agent_id: Annotated[int, Meta(ge=1)] | None = None
    capabilities: Capabilities | None = None
    purchase: Annotated[bool, Meta(description=(
        "Buy the number from the provider's carrier first (one GET /telephony/providers/{id}/available-numbers "
        "found); a twilio or telnyx provider only"))] = False


class PhoneNumberUpdate(Struct, forbid_unknown_fields=True):
    provider_id: Annotated[int, Meta(ge=1)] | UnsetType = UNSET
    label: Annotated[OneLine, Meta(max_length=200)] | UnsetType | None = UNSET
    inbound_agent_id: Annotated[int, Meta(ge=1)] | UnsetType | None = UNSET
    capabilities: CapabilitiesPatch | UnsetType = UNSET


class PhoneNumberOut(Struct):
    id: int
    phone_number: str
    provider_id: int
    label: str | None
    inbound_agent_id: int | None
    capabilities: Capabilities
    status: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, n: PhoneNumber) -> PhoneNumberOut:
        return cls(n.id or 0, n.phone_number, n.provider_id, n.label, n.inbound_agent_id,
                   Capabilities(n.voice, n.sms), n.status, n.created_at, n.updated_at)  # type: ignore[arg-type]  # the domain's type is wider


class CallStatsOut(Struct):
    start: datetime
    end: datetime
    total_calls: int
    by_status: dict[str, int]
    total_minutes: float
    answer_rate: float | None
    average_duration_seconds: float | None

    @classmethod
    def of(cls, s: CallStats) -> CallStatsOut:
        return cls(s.start, s.end, s.total_calls, s.by_status, s.total_minutes, s.answer_rate,
                   s.average_duration_seconds)


class AvailableNumberOut(Struct):
    phone_number: str
    country: str
    region: str | None
    locality: str | None
    capabilities: Capabilities
    details: dict[str, str]

    @classmethod
    def of(cls, n: AvailableNumber) -> AvailableNumberOut:
        return cls(n.phone_number, n.country, n.region, n.locality, Capabilities(n.voice, n.sms), dict(n.details))
