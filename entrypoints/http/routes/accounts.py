"""API keys and partner sub-organizations."""

from __future__ import annotations

from typing import Annotated

from dishka import FromDishka
from litestar.params import JSONBody, PathParameter

from application import accounts as uc
from application.context import Actor
from application.ports.platform import Clock, PageRequest
from domain.identity import persisted
from domain.parsing import MAX_ID
from domain.rfc3339 import in_range
from domain.scopes import CATALOGUE, PRESETS
from entrypoints.http.envelope import Envelope, ListEnvelope, ListMeta
from entrypoints.http.routing import Limit, Offset, endpoint
from entrypoints.http.schemas.accounts import (
    ApiKeyCreate,
    ApiKeyCreated,
    ApiKeyOut,
    ApiKeyRotate,
    ApiKeyRotated,
    OrganizationCreate,
    OrganizationOut,
    OrganizationUpdate,
    ScopeCatalogue,
    ScopeInfo,
)
from entrypoints.http.validation import require_non_blank, set_fields

KEY_TAGS = ["API keys"]
ORG_TAGS = ["Organizations"]
Id = Annotated[int, PathParameter(ge=1, le=MAX_ID)]
_PLAN = {403: "plan_required: API key management needs the enterprise plan"}
_BROADER = "INSUFFICIENT_SCOPE: the key holds a scope the calling key does not"
_GRACE = "key_in_grace_period: the calling key was rotated and works only until its grace period ends"
_OUTLIVES = "expires_at: a key never creates a key that outlives it"

_CATALOGUE = ScopeCatalogue(
    scopes=[ScopeInfo(f"{family}:{action}", text) for family, actions in CATALOGUE.items()
            for action, text in actions.items()],
    wildcards=[ScopeInfo("*", "Every scope")] + [ScopeInfo(f"{family}:*", f"Every {family} scope")
                                                 for family in CATALOGUE],
    presets={name: list(scopes) for name, scopes in PRESETS.items()},
)


@endpoint("GET", "/api-keys/scopes", operation_id="listScopes", summary="Scope catalogue with presets",
          tags=KEY_TAGS, scopes=("api-keys:read",))
async def list_scopes() -> Envelope[ScopeCatalogue]:
    return Envelope(_CATALOGUE)


@endpoint("GET", "/api-keys", operation_id="listApiKeys", summary="List API keys", tags=KEY_TAGS,
          scopes=("api-keys:read",), errors=_PLAN)
async def list_keys(actor: FromDishka[Actor], use_case: FromDishka[uc.ListApiKeys], clock: FromDishka[Clock],
                    limit: Limit = 25, offset: Offset = 0) -> ListEnvelope[ApiKeyOut]:
    page = await use_case.execute(uc.ListApiKeysCommand(actor, PageRequest(limit, offset)))
    now = clock.now()
    return ListEnvelope([ApiKeyOut.of(k, now) for k in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("POST", "/api-keys", operation_id="createApiKey", summary="Create an API key (its secret is shown once)",
          location="/api-keys/{id}",
          tags=KEY_TAGS, scopes=("api-keys:write",), idempotent=True, secret=True, status_code=201,
          errors={400: f"bad_request; {_OUTLIVES} (at or before the calling key's expires_at, never unset from "
                       "a key that expires)", 403: f"{_PLAN[403]}; {_GRACE}"})
async def create_key(data: JSONBody[ApiKeyCreate], actor: FromDishka[Actor],
                     issue: FromDishka[uc.IssueApiKey]) -> Envelope[ApiKeyCreated]:
    issued = await issue.execute(uc.IssueApiKeyCommand(
        actor.organization_id, require_non_blank(data.name, "name"), tuple(data.scopes),
        None if data.expires_at is None else in_range(data.expires_at, "expires_at"),
        granted_by=actor.scopes, issuer=actor))
    r = issued.record
    return Envelope(ApiKeyCreated(persisted(r.id), r.name, issued.secret, r.prefix, r.last_four, list(r.scopes),
                                  "active", r.created_at, r.expires_at))


@endpoint("GET", "/api-keys/{id:int}", operation_id="getApiKey", summary="Get an API key", tags=KEY_TAGS,
          scopes=("api-keys:read",), errors={**_PLAN, 404: ""})
async def get_key(id: Id, actor: FromDishka[Actor], use_case: FromDishka[uc.GetApiKey],
                  clock: FromDishka[Clock]) -> Envelope[ApiKeyOut]:
    return Envelope(ApiKeyOut.of(await use_case.execute(uc.GetApiKeyCommand(actor, id)), clock.now()))


@endpoint("DELETE", "/api-keys/{id:int}", operation_id="revokeApiKey", summary="Revoke an API key",
          tags=KEY_TAGS, scopes=("api-keys:delete",), errors={403: f"{_PLAN[403]}; {_BROADER}; {_GRACE}", 404: ""},
          status_code=204)
async def revoke_key(id: Id, actor: FromDishka[Actor], use_case: FromDishka[uc.RevokeApiKey]) -> None:
    await use_case.execute(uc.RevokeApiKeyCommand(actor, id))


@endpoint("POST", "/api-keys/{id:int}/rotate", operation_id="rotateApiKey",
          summary="Rotate an API key; the old secret keeps working for the grace period", tags=KEY_TAGS,
          scopes=("api-keys:write", "api-keys:manage"),
          errors={400: "bad_request: the key expires after the calling key (its successor would outlive it)",
                  403: f"plan_required: rotation needs the business or enterprise plan; {_BROADER}; {_GRACE}",
                  404: "",
                  409: "conflict: the key is revoked, expired or already rotated"}, secret=True, status_code=200)
async def rotate_key(id: Id, actor: FromDishka[Actor], rotate: FromDishka[uc.RotateApiKey],
                     data: JSONBody[ApiKeyRotate | None] = None) -> Envelope[ApiKeyRotated]:
    result = await rotate.execute(uc.RotateApiKeyCommand(actor, id, data.grace_period_hours if data else None))
    return Envelope(ApiKeyRotated(persisted(result.issued.record.id), result.issued.secret, id,
                                  result.previous_key_expires_at))


_PARTNER = {403: "sub_org_forbidden: only partner organizations manage sub-organizations"}


@endpoint("GET", "/organizations", operation_id="listOrganizations", summary="List sub-organizations",
          tags=ORG_TAGS, scopes=("organizations:read",), errors=_PARTNER)
async def list_orgs(actor: FromDishka[Actor], use_case: FromDishka[uc.ListSubOrganizations],
                    limit: Limit = 25, offset: Offset = 0) -> ListEnvelope[OrganizationOut]:
    page = await use_case.execute(uc.ListSubOrganizationsCommand(actor, PageRequest(limit, offset)))
    return ListEnvelope([OrganizationOut.of(o) for o in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("POST", "/organizations", operation_id="createOrganization", summary="Create a sub-organization",
          location="/organizations/{id}",
          tags=ORG_TAGS, scopes=("organizations:write",), errors=_PARTNER, idempotent=True, status_code=201)
async def create_org(data: JSONBody[OrganizationCreate], actor: FromDishka[Actor],
                     use_case: FromDishka[uc.CreateSubOrganization]) -> Envelope[OrganizationOut]:
    command = uc.CreateSubOrganizationCommand(actor, require_non_blank(data.name, "name"), data.plan)
    org = await use_case.execute(command)
    return Envelope(OrganizationOut.of(org))


@endpoint("GET", "/organizations/{id:int}", operation_id="getOrganization",
          summary="Get a sub-organization (or the own organization)",
          tags=ORG_TAGS, scopes=("organizations:read",), errors={**_PARTNER, 404: ""})
async def get_org(id: Id, actor: FromDishka[Actor],
                  use_case: FromDishka[uc.GetSubOrganization]) -> Envelope[OrganizationOut]:
    return Envelope(OrganizationOut.of(await use_case.execute(uc.GetSubOrganizationCommand(actor, id))))


@endpoint("PATCH", "/organizations/{id:int}", operation_id="updateOrganization",
          summary="Update a sub-organization, or the own organization's dialing policy", tags=ORG_TAGS,
          scopes=("organizations:write",),
          errors={**_PARTNER, 404: ""})
async def update_org(id: Id, data: JSONBody[OrganizationUpdate], actor: FromDishka[Actor],
                     use_case: FromDishka[uc.UpdateSubOrganization]) -> Envelope[OrganizationOut]:
    patch = set_fields(data)
    return Envelope(OrganizationOut.of(await use_case.execute(uc.UpdateSubOrganizationCommand(actor, id, patch))))


@endpoint("DELETE", "/organizations/{id:int}", operation_id="deleteOrganization",
          summary="Delete a sub-organization (its keys are revoked)", tags=ORG_TAGS,
          scopes=("organizations:write",), status_code=204,
          errors={**_PARTNER, 404: "", 409: "conflict: the partner's own organization"})
async def delete_org(id: Id, actor: FromDishka[Actor], use_case: FromDishka[uc.DeleteSubOrganization]) -> None:
    await use_case.execute(uc.DeleteSubOrganizationCommand(actor, id))


ROUTES = [list_scopes, list_keys, create_key, get_key, revoke_key, rotate_key,
          list_orgs, create_org, get_org, update_org, delete_org]
