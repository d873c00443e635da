from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

from domain.api_keys import DEFAULT_GRACE_HOURS, MAX_GRACE_HOURS, MIN_GRACE_HOURS, ApiKey
from domain.destinations import MAX_ALLOWED_COUNTRIES
from domain.identity import persisted
from domain.organizations import Organization
from entrypoints.http.schemas import OneLine

Plan = Literal["starter", "business", "enterprise"]


# A "type: ignore[arg-type]" below marks a field whose domain type is wider than the documented one: a status
# the domain keeps as a str where the schema lists its values, or a field that is None only before the row is stored.

class ScopeInfo(Struct):
    scope: str
    description: str


class ScopeCatalogue(Struct):
    scopes: list[ScopeInfo]
    wildcards: list[ScopeInfo]
    presets: dict[str, list[str]]


class ApiKeyCreate(Struct, forbid_unknown_fields=True):
    name: Annotated[OneLine, Meta(min_length=1, max_length=200)]
    scopes: Annotated[list[Annotated[str, Meta(max_length=64)]], Meta(min_length=1, max_length=100)]
    expires_at: Annotated[datetime, Meta(tz=True, description="RFC 3339 with offset or Z")] | None = None


class ApiKeyRotate(Struct, forbid_unknown_fields=True):
    grace_period_hours: Annotated[int, Meta(ge=MIN_GRACE_HOURS, le=MAX_GRACE_HOURS)] = DEFAULT_GRACE_HOURS


class ApiKeyOut(Struct):
    id: int
    name: str
    prefix: str
    last_four: str
    scopes: list[str]
    status: Literal["active", "revoked", "expired"]
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None

    @classmethod
    def of(cls, key: ApiKey, now: datetime) -> ApiKeyOut:
        return cls(persisted(key.id), key.name, key.prefix, key.last_four, list(key.scopes),
                   key.display_status(now), key.created_at, key.expires_at, key.last_used_at)  # type: ignore[arg-type]  # the domain's type is wider


class ApiKeyCreated(Struct):
    id: int
    name: str
    key: str
    prefix: str
    last_four: str
    scopes: list[str]
    status: Literal["active"]
    created_at: datetime
    expires_at: datetime | None


class ApiKeyRotated(Struct):
    id: int
    key: str
    previous_key_id: int
    previous_key_expires_at: datetime


class OrganizationCreate(Struct, forbid_unknown_fields=True):
    name: Annotated[OneLine, Meta(min_length=1, max_length=200)]
    plan: Plan | None = None


CountryCode = Annotated[str, Meta(max_length=2, description="ISO 3166 alpha-2 country code, e.g. \"US\"")]


class DialingPolicyPatch(Struct, forbid_unknown_fields=True):
    allowed_countries: Annotated[list[CountryCode], Meta(max_length=MAX_ALLOWED_COUNTRIES)] | UnsetType = UNSET
    block_premium: bool | UnsetType = UNSET


class OrganizationUpdate(Struct, forbid_unknown_fields=True):
    name: Annotated[OneLine, Meta(min_length=1, max_length=200)] | UnsetType = UNSET
    plan: Plan | UnsetType = UNSET
    dialing_policy: DialingPolicyPatch | UnsetType = UNSET
    """Which numbers the organization's calls and messages may reach."""


class DialingPolicyOut(Struct):
    allowed_countries: list[str]
    """ISO 3166 alpha-2 codes of the countries that may be called or texted."""
    block_premium: bool
    """Premium-rate, shared-cost and UAN numbers (and North American 900 and 976 numbers) are refused."""


class OrganizationOut(Struct):
    id: int
    name: str
    plan: Plan
    org_type: Literal["standard", "partner"]
    parent_id: int | None
    created_at: datetime
    updated_at: datetime
    dialing_policy: DialingPolicyOut

    @classmethod
    def of(cls, org: Organization) -> OrganizationOut:
        policy = org.dialing_policy
        return cls(persisted(org.id), org.name, org.plan, org.org_type, org.parent_id,  # type: ignore[arg-type]  # the domain's type is wider
                   org.created_at, org.updated_at,
                   DialingPolicyOut(list(policy.allowed_countries), policy.block_premium))
