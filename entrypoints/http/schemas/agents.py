from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from domain import agents as rules
from domain.agents import Agent, AgentVersion
from domain.identity import persisted
from entrypoints.http.schemas import OneLine, within

Name = Annotated[OneLine, Meta(min_length=1, max_length=rules.NAME_MAX_LENGTH)]
Language = Annotated[str, Meta(pattern=r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$", max_length=35,
                               description="BCP 47 language tag")]
Mode = Literal["outbound", "inbound", "bidirectional"]
Status = Literal["draft", "active", "paused", "archived"]
Prompt = Annotated[str, Meta(max_length=rules.PROMPT_MAX_LENGTH,
                             description="System prompt; {{placeholders}} are filled at dial time")]
Duration = Annotated[int, within(rules.MAX_CALL_DURATION_RANGE)]
Temperature = Annotated[float, within(rules.TEMPERATURE_RANGE)]
VoiceProvider = Annotated[OneLine, Meta(min_length=1, max_length=50)]
VoiceId = Annotated[OneLine, Meta(min_length=1, max_length=100)]
Model = Annotated[OneLine, Meta(min_length=1, max_length=100)]
VoicemailAction = Literal["hangup", "leave_message"]
Text = Annotated[str, Meta(max_length=rules.DESCRIPTION_MAX_LENGTH)]
VoicemailMessage = Text
TransferPhone = Annotated[str, Meta(max_length=rules.TRANSFER_PHONE_MAX_LENGTH)]
TimeZone = Annotated[str, Meta(max_length=rules.TIMEZONE_MAX_LENGTH)]
MetadataPatch = Annotated[dict[str, Any], Meta(description=(
    "Merged into the metadata: null removes a key (at most 50 keys of 40 characters, values of 500)"))]
Metadata = Annotated[dict[str, Any], Meta(description=(
    "Your own key-value data, stored as sent: at most 50 keys of 40 characters, values of 500"))]
ProviderId = Annotated[int, Meta(ge=1, description=(
    "An AI provider of the organization (GET /ai-providers); null: the built-in offline provider"))]
Speed = Annotated[float, within(rules.SPEED_RANGE)]
ToolName = Annotated[str, Meta(pattern=rules.TOOL_NAME_PATTERN, description=(
    "Letters, digits, _ and -, starting with a letter; not a built-in tool's name"))]
ToolUrl = Annotated[str, Meta(min_length=1, max_length=2048, description=(
    "Called with POST and the model's arguments as JSON, through the same SSRF-safe egress as webhooks, signed like "
    "them"))]
ObjectSchema = Annotated[dict[str, Any], Meta(description='A JSON Schema object: {"type": "object", ...}')]
EndOfTurn = Annotated[int, within(rules.END_OF_TURN_SILENCE_RANGE, description=(
    "Silence after the caller's speech that ends their turn, in milliseconds"))]


# A "type: ignore[arg-type]" below marks a field whose domain type is wider than the documented one: a status
# the domain keeps as a str where the schema lists its values, or a field that is None only before the row is stored.

class VoiceSchema(Struct, forbid_unknown_fields=True):
    provider: VoiceProvider = "simulator"
    voice_id: VoiceId = "default"
    provider_id: ProviderId | None = None
    speed: Speed = 1.0


class LlmSchema(Struct, forbid_unknown_fields=True):
    model: Model = "parley-sim-1"
    temperature: Temperature = 0.7
    provider_id: ProviderId | None = None


class TranscriberSchema(Struct, forbid_unknown_fields=True):
    provider_id: ProviderId | None = None
    model: Model | None = None
    language: Annotated[Language | None, Meta(description="The language listened for; null: the agent's")] = None


class ToolSchema(Struct, forbid_unknown_fields=True):
    name: ToolName
    url: ToolUrl
    type: Literal["http"] = "http"
    description: Annotated[str, Meta(max_length=1000)] = ""
    parameters: ObjectSchema = msgspec.field(default_factory=lambda: {"type": "object", "properties": {}})
    timeout_ms: Annotated[int, within(rules.TOOL_TIMEOUT_RANGE)] = rules.DEFAULT_TOOL_TIMEOUT_MS


class VoicemailSchema(Struct, forbid_unknown_fields=True):
    action: VoicemailAction = "hangup"
    message: VoicemailMessage | None = None


# PATCH bodies are merge patches at every depth: a nested object changes only the members it sends.
class VoicePatch(Struct, forbid_unknown_fields=True):
    provider: VoiceProvider | UnsetType = UNSET
    voice_id: VoiceId | UnsetType = UNSET
    provider_id: ProviderId | UnsetType | None = UNSET
    speed: Speed | UnsetType = UNSET


class LlmPatch(Struct, forbid_unknown_fields=True):
    model: Model | UnsetType = UNSET
    temperature: Temperature | UnsetType = UNSET
    provider_id: ProviderId | UnsetType | None = UNSET


class TranscriberPatch(Struct, forbid_unknown_fields=True):
    provider_id: ProviderId | UnsetType | None = UNSET
    model: Model | UnsetType | None = UNSET
    language: Language | UnsetType | None = UNSET


class VoicemailPatch(Struct, forbid_unknown_fields=True):
    action: VoicemailAction | UnsetType = UNSET
    message: VoicemailMessage | UnsetType | None = UNSET


class AgentCreate(Struct, forbid_unknown_fields=True):
    name: Name
    description: Text | None = None
    agent_mode: Mode = "outbound"
    language: Language = "en-US"
    voice: VoiceSchema = msgspec.field(default_factory=VoiceSchema)
    llm: LlmSchema = msgspec.field(default_factory=LlmSchema)
    prompt: Prompt = ""
    first_message: Text | None = None
    max_call_duration_seconds: Duration = 600
    voicemail: VoicemailSchema = msgspec.field(default_factory=VoicemailSchema)
    transfer_phone: TransferPhone | None = None
    calendar_id: Annotated[int, Meta(ge=1)] | None = None
    timezone: TimeZone = "UTC"
    metadata: Metadata = msgspec.field(default_factory=dict)
    transcriber: TranscriberSchema = msgspec.field(default_factory=TranscriberSchema)
    tools: Annotated[list[ToolSchema], Meta(max_length=rules.MAX_TOOLS, description=(
        "Custom http tools; the built-ins (check_availability, book_appointment with a calendar, transfer_call with "
        "a transfer_phone, end_call) need no entry"))] = msgspec.field(default_factory=list)
    analysis_schema: Annotated[ObjectSchema | None, Meta(description=(
        "The after-call analysis' data follows this JSON Schema object; null: no structured data"))] = None
    end_of_turn_silence_ms: EndOfTurn = rules.DEFAULT_END_OF_TURN_SILENCE_MS


class AgentUpdate(Struct, forbid_unknown_fields=True):
    name: Name | UnsetType = UNSET
    description: Text | UnsetType | None = UNSET
    status: Status | UnsetType = UNSET
    agent_mode: Mode | UnsetType = UNSET
    language: Language | UnsetType = UNSET
    voice: VoicePatch | UnsetType = UNSET
    llm: LlmPatch | UnsetType = UNSET
    prompt: Prompt | UnsetType = UNSET
    first_message: Text | UnsetType | None = UNSET
    max_call_duration_seconds: Duration | UnsetType = UNSET
    voicemail: VoicemailPatch | UnsetType = UNSET
    transfer_phone: TransferPhone | UnsetType | None = UNSET
    calendar_id: Annotated[int, Meta(ge=1)] | UnsetType | None = UNSET
    timezone: TimeZone | UnsetType = UNSET
    metadata: MetadataPatch | UnsetType = UNSET
    transcriber: TranscriberPatch | UnsetType = UNSET
    tools: Annotated[list[ToolSchema], Meta(max_length=rules.MAX_TOOLS, description=(
        "Replaces the custom tools whole"))] | UnsetType = UNSET
    analysis_schema: Annotated[ObjectSchema | None, Meta(description=(
        "Replaces the analysis schema whole (not merged); null removes it"))] | UnsetType = UNSET
    end_of_turn_silence_ms: EndOfTurn | UnsetType = UNSET


class AgentDuplicate(Struct, forbid_unknown_fields=True):
    name: Name | None = None


class AgentOut(Struct):
    id: int
    name: str
    description: str | None
    status: Status
    agent_mode: Mode
    language: str
    voice: VoiceSchema
    llm: LlmSchema
    prompt: str
    first_message: str | None
    max_call_duration_seconds: int
    voicemail: VoicemailSchema
    transfer_phone: str | None
    calendar_id: int | None
    timezone: str
    metadata: dict[str, Any]
    transcriber: TranscriberSchema
    tools: list[ToolSchema]
    analysis_schema: dict[str, Any] | None
    end_of_turn_silence_ms: int
    current_version: int | None
    published_version: Annotated[int | None, Meta(description=(
        "The version every new call runs (the latest published; null until first published)"))]
    has_unpublished_changes: Annotated[bool, Meta(description=(
        "Whether the fields above differ from the published version: publish to make calls use them"))]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, a: Agent) -> AgentOut:
        # positional, in the order of the fields above (a list page makes 25 of these; keywords cost 2.7x);
        # tests/http/test_agent_schemas.py checks every field against the agent's attribute of its name
        v, llm, vm, tr = a.voice, a.llm, a.voicemail, a.transcriber
        return cls(
            persisted(a.id), a.name, a.description, a.status, a.agent_mode, a.language,  # type: ignore[arg-type]  # the domain's type is wider
            VoiceSchema(v.provider, v.voice_id, v.provider_id, v.speed),
            LlmSchema(llm.model, llm.temperature, llm.provider_id), a.prompt,
            a.first_message, a.max_call_duration_seconds,
            VoicemailSchema(vm.action, vm.message),  # type: ignore[arg-type]  # the domain's type is wider
            a.transfer_phone, a.calendar_id, a.timezone, a.metadata,
            TranscriberSchema(tr.provider_id, tr.model, tr.language),
            [ToolSchema(t.name, t.url, t.type, t.description, t.parameters, t.timeout_ms) for t in a.tools],  # type: ignore[arg-type]  # the domain's type is wider
            a.analysis_schema, a.end_of_turn_silence_ms, a.current_version, a.current_version,
            a.has_unpublished_changes, a.created_at, a.updated_at,  # type: ignore[arg-type]  # the domain's type is wider
        )


class PublishResult(Struct):
    agent_id: int
    version: int | None
    status: Literal["active"]
    published_at: datetime


class VersionItem(Struct):
    version: int | None
    created_at: datetime
    created_by: int | None


class VersionDetail(Struct):
    version: int
    agent_id: int
    created_at: datetime
    created_by: int | None
    snapshot: dict[str, Any]

    @classmethod
    def of(cls, v: AgentVersion) -> VersionDetail:
        return cls(v.version, v.agent_id, v.created_at, v.created_by, v.snapshot)
