from __future__ import annotations

from typing import Annotated

from dishka import FromDishka
from litestar.params import JSONBody, PathParameter

from application import ai_providers as uc
from application.context import Actor
from application.ports.platform import PageRequest
from domain.parsing import MAX_ID
from entrypoints.http.envelope import Envelope, ListEnvelope, ListMeta
from entrypoints.http.routing import Limit, Offset, endpoint
from entrypoints.http.schemas.ai_providers import AiProviderCreate, AiProviderOut, AiProviderUpdate
from entrypoints.http.validation import require_non_blank, set_fields

TAGS = ["AI providers"]
ProviderId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="AI provider id")]


@endpoint("GET", "/ai-providers", operation_id="listAiProviders",
          summary="List AI providers (the built-in offline provider is always there)", tags=TAGS,
          scopes=("agents:read",))
async def list_providers(actor: FromDishka[Actor], use_case: FromDishka[uc.ListAiProviders], limit: Limit = 25,
                         offset: Offset = 0) -> ListEnvelope[AiProviderOut]:
    page = await use_case.execute(uc.ListAiProvidersCommand(actor, PageRequest(limit, offset)))
    return ListEnvelope([AiProviderOut.of(p) for p in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("POST", "/ai-providers", operation_id="createAiProvider", location="/ai-providers/{id}",
          summary="Add an AI provider: a server speaking OpenAI's API (the key is write-only)", tags=TAGS,
          scopes=("agents:write",), idempotent=True, status_code=201)
async def create_provider(data: JSONBody[AiProviderCreate], actor: FromDishka[Actor],
                          use_case: FromDishka[uc.CreateAiProvider]) -> Envelope[AiProviderOut]:
    created = await use_case.execute(uc.CreateAiProviderCommand(
        actor, require_non_blank(data.name, "name"), data.type, data.base_url, data.api_key))
    return Envelope(AiProviderOut.of(created))


@endpoint("GET", "/ai-providers/{id:int}", operation_id="getAiProvider", summary="Get an AI provider", tags=TAGS,
          scopes=("agents:read",), errors={404: ""})
async def get_provider(id: ProviderId, actor: FromDishka[Actor],
                       use_case: FromDishka[uc.GetAiProvider]) -> Envelope[AiProviderOut]:
    return Envelope(AiProviderOut.of(await use_case.execute(uc.GetAiProviderCommand(actor, id))))


@endpoint("PATCH", "/ai-providers/{id:int}", operation_id="updateAiProvider",
          summary="Update an AI provider (api_key: null removes the key)", tags=TAGS, scopes=("agents:write",),
          errors={404: "", 409: "the built-in offline provider keeps its type"})
async def update_provider(id: ProviderId, data: JSONBody[AiProviderUpdate], actor: FromDishka[Actor],
                          use_case: FromDishka[uc.UpdateAiProvider]) -> Envelope[AiProviderOut]:
    patch = set_fields(data)
    if "name" in patch:
        patch["name"] = require_non_blank(patch["name"], "name")
    return Envelope(AiProviderOut.of(await use_case.execute(uc.UpdateAiProviderCommand(actor, id, patch))))


@endpoint("DELETE", "/ai-providers/{id:int}", operation_id="deleteAiProvider",
          summary="Delete an AI provider (not the built-in one, not one an agent uses)", tags=TAGS,
          scopes=("agents:write",), errors={404: "", 409: "built-in, or an agent uses it"}, status_code=204)
async def delete_provider(id: ProviderId, actor: FromDishka[Actor], use_case: FromDishka[uc.DeleteAiProvider]) -> None:
    await use_case.execute(uc.DeleteAiProviderCommand(actor, id))


ROUTES = [list_providers, create_provider, get_provider, update_provider, delete_provider]
