from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from dishka import FromDishka
from litestar.params import JSONBody, PathParameter, QueryParameter

from application import agents as uc
from application.context import Actor
from application.phones import e164
from application.ports.agents import AgentFilter
from application.ports.phones import PhoneNormalizer
from application.ports.platform import PageRequest
from domain.agents import HttpTool, Llm, Transcriber, Voice, Voicemail
from domain.parsing import MAX_ID
from domain.patching import MergePatch
from domain.timezones import validate_timezone
from entrypoints.http.envelope import Envelope, ListEnvelope, ListMeta
from entrypoints.http.routing import Limit, Offset, endpoint
from entrypoints.http.schemas.agents import (
    AgentCreate,
    AgentDuplicate,
    AgentOut,
    AgentUpdate,
    PublishResult,
    ToolSchema,
    VersionDetail,
    VersionItem,
)
from entrypoints.http.validation import require_non_blank, set_fields

TAGS = ["Agents"]
AgentId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="Agent id")]
VersionNumber = Annotated[int, PathParameter(ge=1, le=2**31, description="Published version number")]


def create_command(actor: Actor, data: AgentCreate, phones: PhoneNormalizer) -> uc.CreateAgentCommand:
    """The POST body as the use case's command, validated where a library or a rule is needed."""
    return uc.CreateAgentCommand(
        actor=actor,
        name=require_non_blank(data.name, "name"),
        description=data.description,
        agent_mode=data.agent_mode,
        language=data.language,
        voice=Voice(**msgspec.structs.asdict(data.voice)),
        llm=Llm(**msgspec.structs.asdict(data.llm)),
        prompt=data.prompt,
        first_message=data.first_message,
        max_call_duration_seconds=data.max_call_duration_seconds,
        voicemail=Voicemail(**msgspec.structs.asdict(data.voicemail)),
        transfer_phone=None if data.transfer_phone is None else e164(phones, data.transfer_phone, "transfer_phone"),
        calendar_id=data.calendar_id,
        timezone=validate_timezone(data.timezone),
        metadata=data.metadata,
        transcriber=Transcriber(**msgspec.structs.asdict(data.transcriber)),
        tools=_tools(data.tools),
        analysis_schema=data.analysis_schema,
        end_of_turn_silence_ms=data.end_of_turn_silence_ms,
    )


def _tools(tools: list[ToolSchema]) -> tuple[HttpTool, ...]:
    return tuple(HttpTool(**msgspec.structs.asdict(tool)) for tool in tools)


def patch_of(data: AgentUpdate, phones: PhoneNormalizer) -> MergePatch:
    """The PATCH body as a merge patch (``set_fields``: nested objects as the members sent), validated where a
    library or a rule is needed; the use case merges it."""
    out = set_fields(data)
    if "name" in out:
        out["name"] = require_non_blank(out["name"], "name")
    if out.get("transfer_phone") is not None:
        out["transfer_phone"] = e164(phones, out["transfer_phone"], "transfer_phone")
    if "timezone" in out:
        out["timezone"] = validate_timezone(out["timezone"])
    if "tools" in out:
        out["tools"] = _tools(out["tools"])
    return out


@endpoint("GET", "/agents", operation_id="listAgents", summary="List agents", tags=TAGS, scopes=("agents:read",))
async def list_agents(
    actor: FromDishka[Actor],
    use_case: FromDishka[uc.ListAgents],
    limit: Limit = 25,
    offset: Offset = 0,
    status: Annotated[Literal["draft", "active", "paused", "archived"] | None, QueryParameter()] = None,
    agent_mode: Annotated[Literal["outbound", "inbound", "bidirectional"] | None, QueryParameter()] = None,
    search: Annotated[str | None, QueryParameter(max_length=200)] = None,
) -> ListEnvelope[AgentOut]:
    page = await use_case.execute(uc.ListAgentsCommand(actor, AgentFilter(status, agent_mode, search or None),
                                                     PageRequest(limit, offset)))
    return ListEnvelope([AgentOut.of(a) for a in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("POST", "/agents", operation_id="createAgent", location="/agents/{id}", summary="Create an agent",
          tags=TAGS, scopes=("agents:write",), idempotent=True,
          errors={404: "not_found: calendar_id is not a calendar of this organization",
                  422: "unprocessable_entity: llm, voice or transcriber names no AI provider of this organization"})
async def create_agent(data: JSONBody[AgentCreate], actor: FromDishka[Actor],
                       use_case: FromDishka[uc.CreateAgent], phones: FromDishka[PhoneNormalizer]) -> Envelope[AgentOut]:
    agent = await use_case.execute(create_command(actor, data, phones))
    return Envelope(AgentOut.of(agent))


@endpoint("GET", "/agents/{id:int}", operation_id="getAgent", summary="Get an agent", tags=TAGS,
          scopes=("agents:read",), errors={404: ""})
async def get_agent(id: AgentId, actor: FromDishka[Actor], use_case: FromDishka[uc.GetAgent]) -> Envelope[AgentOut]:
    return Envelope(AgentOut.of(await use_case.execute(uc.GetAgentCommand(actor, id))))


@endpoint("PATCH", "/agents/{id:int}", operation_id="updateAgent", summary="Update an agent", tags=TAGS,
          scopes=("agents:write",),
          errors={404: "not_found: unknown agent, or calendar_id is not a calendar of this organization",
                  409: "invalid_transition: the status move is not allowed",
                  422: "unprocessable_entity: llm, voice or transcriber names no AI provider of this organization"})
async def update_agent(id: AgentId, data: JSONBody[AgentUpdate], actor: FromDishka[Actor],
                       use_case: FromDishka[uc.UpdateAgent], phones: FromDishka[PhoneNormalizer]) -> Envelope[AgentOut]:
    agent = await use_case.execute(uc.UpdateAgentCommand(actor, id, patch_of(data, phones)))
    return Envelope(AgentOut.of(agent))


@endpoint("DELETE", "/agents/{id:int}", operation_id="deleteAgent", summary="Delete an agent", tags=TAGS,
          scopes=("agents:delete",), errors={404: ""}, status_code=204)
async def delete_agent(id: AgentId, actor: FromDishka[Actor], use_case: FromDishka[uc.DeleteAgent]) -> None:
    await use_case.execute(uc.DeleteAgentCommand(actor, id))


@endpoint("POST", "/agents/{id:int}/publish", operation_id="publishAgent",
          summary="Publish an agent: snapshot a new version and make it active", tags=TAGS,
          scopes=("agents:write",), errors={404: "", 409: "invalid_transition: an archived agent cannot be published"},
          status_code=200)
async def publish_agent(id: AgentId, actor: FromDishka[Actor],
                        use_case: FromDishka[uc.PublishAgent]) -> Envelope[PublishResult]:
    result = await use_case.execute(uc.PublishAgentCommand(actor, id))
    return Envelope(PublishResult(result.agent.id or id, result.version.version, "active",
                                  result.version.created_at))


@endpoint("POST", "/agents/{id:int}/duplicate", operation_id="duplicateAgent", location="/agents/{id}",
          summary="Duplicate an agent (as a draft)", tags=TAGS, scopes=("agents:write",), errors={404: ""},
          status_code=201)
async def duplicate_agent(id: AgentId, actor: FromDishka[Actor], use_case: FromDishka[uc.DuplicateAgent],
                          data: JSONBody[AgentDuplicate | None] = None) -> Envelope[AgentOut]:
    name = require_non_blank(data.name, "name") if data and data.name is not None else None
    return Envelope(AgentOut.of(await use_case.execute(uc.DuplicateAgentCommand(actor, id, name))))


@endpoint("GET", "/agents/{id:int}/versions", operation_id="listAgentVersions",
          summary="List published versions", tags=TAGS, scopes=("agents:read",), errors={404: ""})
async def list_versions(id: AgentId, actor: FromDishka[Actor], use_case: FromDishka[uc.ListAgentVersions],
                        limit: Limit = 25, offset: Offset = 0) -> ListEnvelope[VersionItem]:
    page = await use_case.execute(uc.ListAgentVersionsCommand(actor, id, PageRequest(limit, offset)))
    return ListEnvelope([VersionItem(v.version, v.created_at, v.created_by) for v in page.items],
                        ListMeta(page.total, page.limit, page.offset))


@endpoint("GET", "/agents/{id:int}/versions/{version:int}", operation_id="getAgentVersion",
          summary="Get a published version's snapshot", tags=TAGS, scopes=("agents:read",), errors={404: ""})
async def get_version(id: AgentId, version: VersionNumber, actor: FromDishka[Actor],
                      use_case: FromDishka[uc.GetAgentVersion]) -> Envelope[VersionDetail]:
    return Envelope(VersionDetail.of(await use_case.execute(uc.GetAgentVersionCommand(actor, id, version))))


@endpoint("POST", "/agents/{id:int}/versions/{version:int}/restore", operation_id="restoreAgentVersion",
          summary="Restore a published version as the agent's draft (publish to make calls use it)", tags=TAGS,
          scopes=("agents:write",), status_code=200,
          errors={404: "not_found: unknown agent or version, or the version's calendar_id was deleted since",
                  422: "unprocessable_entity: an AI provider the version names was deleted since"})
async def restore_version(id: AgentId, version: VersionNumber, actor: FromDishka[Actor],
                          use_case: FromDishka[uc.RestoreAgentVersion]) -> Envelope[AgentOut]:
    return Envelope(AgentOut.of(await use_case.execute(uc.RestoreAgentVersionCommand(actor, id, version))))


ROUTES = [list_agents, create_agent, get_agent, update_agent, delete_agent, publish_agent, duplicate_agent,
          list_versions, get_version, restore_version]
