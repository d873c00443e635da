"""Agents (voice personas): fields, defaults, the status machine and prompt placeholders."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from domain.errors import InvalidTransition, ValidationFailed
from domain.metadata import KEY_MAX_LENGTH
from domain.state_machine import TransitionTable


class AgentStatus(StrEnum):
    """The status of an agent; the values are the API's."""

    DRAFT = "draft"
    ACTIVE = "active"
    PAUSED = "paused"
    ARCHIVED = "archived"


STATUSES = tuple(AgentStatus)
MODES = ("outbound", "inbound", "bidirectional")
VOICEMAIL_ACTIONS = ("hangup", "leave_message")

AGENT_MACHINE = TransitionTable.of(
    "agent",
    [
        ("draft", "publish", "active"),
        ("active", "publish", "active"),
        ("paused", "publish", "active"),
        ("active", "pause", "paused"),
        ("paused", "activate", "active"),
        ("draft", "archive", "archived"),
        ("active", "archive", "archived"),
        ("paused", "archive", "archived"),
    ],
)
# PATCH {status: X} expressed as a trigger of the machine
_STATUS_TRIGGER = {"active": "activate", "paused": "pause", "archived": "archive", "draft": "draft"}

# The bounds of an agent's fields (the HTTP schemas take theirs from here)
NAME_MAX_LENGTH = 200
DESCRIPTION_MAX_LENGTH = 2000  # also first_message and the voicemail message
PROMPT_MAX_LENGTH = 50_000
MAX_CALL_DURATION_RANGE = (10, 14_400)  # seconds
TEMPERATURE_RANGE = (0.0, 2.0)
TRANSFER_PHONE_MAX_LENGTH = 32
TIMEZONE_MAX_LENGTH = 64

PLACEHOLDER_RE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


END_OF_TURN_SILENCE_RANGE = (200, 3000)  # milliseconds
DEFAULT_END_OF_TURN_SILENCE_MS = 500
TOOL_TIMEOUT_RANGE = (100, 30_000)  # milliseconds
DEFAULT_TOOL_TIMEOUT_MS = 5000
SPEED_RANGE = (0.25, 4.0)
MAX_TOOLS = 20
TOOL_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"
BUILT_IN_TOOLS = ("check_availability", "book_appointment", "transfer_call", "end_call", "send_sms")
"""Implied by the agent's settings (its calendar, its transfer number): a custom tool may not take these names."""


@dataclass(frozen=True, slots=True)
class Voice:
    provider: str = "simulator"
    voice_id: str = "default"
    provider_id: int | None = None
    """The AI provider that synthesizes the voice (None: the organization's built-in offline provider)."""
    speed: float = 1.0


@dataclass(frozen=True, slots=True)
class Llm:
    model: str = "parley-sim-1"
    temperature: float = 0.7
    provider_id: int | None = None
    """The AI provider of the language model (None: the organization's built-in offline provider)."""


@dataclass(frozen=True, slots=True)
class Transcriber:
    """Speech recognition: the provider (None: the built-in offline one), its model, and the language it listens
    for (None: the agent's language)."""

    provider_id: int | None = None
    model: str | None = None
    language: str | None = None


@dataclass(frozen=True, slots=True)
class HttpTool:
    """A custom tool the model may call: its arguments (``parameters``, a JSON Schema object) are POSTed as JSON to
    ``url`` through the egress, signed like webhooks, answered within ``timeout_ms``."""

    name: str
    url: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    timeout_ms: int = DEFAULT_TOOL_TIMEOUT_MS
    type: str = "http"

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "name": self.name, "description": self.description,
                "parameters": self.parameters, "url": self.url, "timeout_ms": self.timeout_ms}


def check_object_schema(name: str, schema: Any) -> None:
    """A JSON Schema for an object: ``{"type": "object", ...}`` with ``properties`` an object when given."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ValidationFailed.field(name, 'must be a JSON Schema object ({"type": "object", ...})')
    if "properties" in schema and not isinstance(schema["properties"], dict):
        raise ValidationFailed.field(name, "properties must be an object")
    if "required" in schema and not (isinstance(schema["required"], list)
                                     and all(isinstance(item, str) for item in schema["required"])):
        raise ValidationFailed.field(name, "required must be a list of property names")


def check_tools(tools: tuple[HttpTool, ...]) -> None:
    """Custom tools: distinct names, none of the built-ins', object schemas for their parameters, a time-out in
    range. (Their URLs are checked against the egress's rules by the use case, which knows its settings.)"""
    if len(tools) > MAX_TOOLS:
        raise ValidationFailed.field("tools", f"at most {MAX_TOOLS} tools")
    seen: set[str] = set()
    for index, tool in enumerate(tools):
        where = f"tools[{index}]"
        if tool.type != "http":
            raise ValidationFailed.field(f"{where}.type", "only http tools can be added")
        if not re.match(TOOL_NAME_PATTERN, tool.name):
            raise ValidationFailed.field(f"{where}.name", "letters, digits, _ and -, starting with a letter, at "
                                                          "most 64")
        if tool.name in BUILT_IN_TOOLS:
            raise ValidationFailed.field(f"{where}.name", f"{tool.name} is a built-in tool")
        if tool.name in seen:
            raise ValidationFailed.field(f"{where}.name", f"{tool.name} is named twice")
        seen.add(tool.name)
        check_object_schema(f"{where}.parameters", tool.parameters)
        low, high = TOOL_TIMEOUT_RANGE
        if not low <= tool.timeout_ms <= high:
            raise ValidationFailed.field(f"{where}.timeout_ms", f"must be between {low} and {high}")


@dataclass(frozen=True, slots=True)
class Voicemail:
    action: str = "hangup"
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Agent:
    id: int | None
    organization_id: int
    name: str
    description: str | None = None
    status: str = "draft"
    agent_mode: str = "outbound"
    language: str = "en-US"
    voice: Voice = field(default_factory=Voice)
    llm: Llm = field(default_factory=Llm)
    prompt: str = ""
    first_message: str | None = None
    max_call_duration_seconds: int = 600
    voicemail: Voicemail = field(default_factory=Voicemail)
    transfer_phone: str | None = None
    calendar_id: int | None = None
    timezone: str = "UTC"
    metadata: dict[str, Any] = field(default_factory=dict)
    transcriber: Transcriber = field(default_factory=Transcriber)
    tools: tuple[HttpTool, ...] = ()
    analysis_schema: dict[str, Any] | None = None
    """A JSON Schema object the after-call analysis' ``data`` follows (None: no structured data)."""
    end_of_turn_silence_ms: int = DEFAULT_END_OF_TURN_SILENCE_MS
    current_version: int | None = None
    """The latest published version (the one calls run); None until the agent is first published."""
    has_unpublished_changes: bool = True
    """Whether the draft (the fields above) differs from the latest published version (True until published)."""
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def published_version(self) -> int | None:
        """The version every new call runs (the API's name for ``current_version``)."""
        return self.current_version

    def publish(self) -> Agent:
        return replace(self, status=AGENT_MACHINE.next(self.status, "publish", target="active"))

    def move_to(self, target: str) -> Agent:
        """A status change requested through PATCH. Same status is a no-op."""
        if target == self.status:
            return self
        trigger = _STATUS_TRIGGER.get(target)
        if trigger is None or not AGENT_MACHINE.can(self.status, trigger):
            raise InvalidTransition("agent", self.status, target)
        return replace(self, status=AGENT_MACHINE.next(self.status, trigger))

    def snapshot(self) -> dict[str, Any]:
        """The configuration a published version freezes."""
        return {
            "name": self.name,
            "description": self.description,
            "agent_mode": self.agent_mode,
            "language": self.language,
            "voice": {"provider": self.voice.provider, "voice_id": self.voice.voice_id,
                      "provider_id": self.voice.provider_id, "speed": self.voice.speed},
            "llm": {"model": self.llm.model, "temperature": self.llm.temperature,
                    "provider_id": self.llm.provider_id},
            "transcriber": {"provider_id": self.transcriber.provider_id, "model": self.transcriber.model,
                            "language": self.transcriber.language},
            "tools": [tool.as_dict() for tool in self.tools],
            "analysis_schema": self.analysis_schema,
            "end_of_turn_silence_ms": self.end_of_turn_silence_ms,
            "prompt": self.prompt,
            "first_message": self.first_message,
            "max_call_duration_seconds": self.max_call_duration_seconds,
            "voicemail": {"action": self.voicemail.action, "message": self.voicemail.message},
            "transfer_phone": self.transfer_phone,
            "calendar_id": self.calendar_id,
            "timezone": self.timezone,
            "metadata": dict(self.metadata),
        }

    def with_snapshot(self, snapshot: dict[str, Any]) -> Agent:
        """This agent configured as ``snapshot`` says (a published version's configuration): identity, status and
        versions stay; a key the snapshot lacks keeps this agent's value."""
        values = {name: snapshot[name] for name in _SNAPSHOT_FIELDS if name in snapshot}
        if isinstance(snapshot.get("voice"), dict):  # provider_id and speed came later: absent, the defaults
            values["voice"] = replace(self.voice, **{"provider_id": None, "speed": 1.0, **snapshot["voice"]})
        if isinstance(snapshot.get("llm"), dict):
            values["llm"] = replace(self.llm, **{"provider_id": None, **snapshot["llm"]})
        if isinstance(snapshot.get("voicemail"), dict):
            values["voicemail"] = replace(self.voicemail, **snapshot["voicemail"])
        if isinstance(snapshot.get("metadata"), dict):
            values["metadata"] = dict(snapshot["metadata"])
        # the engine settings came later: a version published before them ran with their defaults
        values["transcriber"] = Transcriber(**snapshot["transcriber"]) if isinstance(
            snapshot.get("transcriber"), dict) else Transcriber()
        values["tools"] = tuple(HttpTool(**tool) for tool in snapshot.get("tools") or () if isinstance(tool, dict))
        values["analysis_schema"] = snapshot.get("analysis_schema")
        values["end_of_turn_silence_ms"] = snapshot.get("end_of_turn_silence_ms", DEFAULT_END_OF_TURN_SILENCE_MS)
        return replace(self, **values)

    def provider_ids(self) -> set[int]:
        """The AI providers this configuration names (llm, voice, transcriber)."""
        return snapshot_provider_ids(self.snapshot())

    def differs_from(self, snapshot: dict[str, Any] | None) -> bool:
        """Whether this agent's configuration is not the one ``snapshot`` froze (None: nothing is published)."""
        return snapshot is None or self.with_snapshot(snapshot).snapshot() != self.snapshot()


# the plain fields of a snapshot (the nested objects are rebuilt by Agent.with_snapshot)
_SNAPSHOT_FIELDS = ("name", "description", "agent_mode", "language", "prompt", "first_message",
                    "max_call_duration_seconds", "transfer_phone", "calendar_id", "timezone")


def snapshot_provider_ids(snapshot: dict[str, Any]) -> set[int]:
    """The AI providers a configuration (an agent's snapshot) names in llm, voice and transcriber."""
    found: set[int] = set()
    for name in ("llm", "voice", "transcriber"):
        settings = snapshot.get(name)
        if isinstance(settings, dict) and isinstance(settings.get("provider_id"), int):
            found.add(settings["provider_id"])
    return found


@dataclass(frozen=True, slots=True)
class AgentVersion:
    agent_id: int
    version: int
    snapshot: dict[str, Any]
    created_at: datetime
    created_by: int | None


def placeholders(text: str) -> set[str]:
    return set(PLACEHOLDER_RE.findall(text or ""))


def check_placeholders(agent: Agent, changed: frozenset[str] | None = None) -> None:
    """Every ``{{placeholder}}`` of the texts a call fills (``changed``: only those a PATCH sent) is a name a call
    can give a value: at most ``KEY_MAX_LENGTH`` characters, as a ``custom_data`` key is, or no call could ever be
    placed with the agent (400 naming the text)."""
    texts = {"prompt": agent.prompt, "first_message": agent.first_message or "",
             "voicemail.message": (agent.voicemail.message or "") if agent.voicemail.action == "leave_message" else ""}
    for name, text in texts.items():
        if changed is not None and name.split(".")[0] not in changed:
            continue
        for placeholder in sorted(placeholders(text)):
            if len(placeholder) > KEY_MAX_LENGTH:
                raise ValidationFailed.field(name, f"{{{{{placeholder[:KEY_MAX_LENGTH]}...}}}} is longer than a "
                                             f"custom_data key may be ({KEY_MAX_LENGTH} characters): no call could "
                                             "fill it")


BUILT_IN_PLACEHOLDERS = frozenset({"contact_name", "destination_phone"})
"""Filled by the call itself: the contact's name (when the call gives one) and the number dialled."""


def call_placeholders(agent: Agent) -> list[str]:
    """Every placeholder a call with ``agent`` fills, sorted: those of its prompt, its first message and the
    voicemail message it leaves. Those outside ``BUILT_IN_PLACEHOLDERS`` need values in ``custom_data``."""
    texts = [agent.prompt, agent.first_message or ""]
    if agent.voicemail.action == "leave_message":
        texts.append(agent.voicemail.message or "")
    return sorted(set().union(*(placeholders(text) for text in texts)))


def spoken(value: Any) -> str:
    """A placeholder value as it is said (a JSON value from custom_data): a string as it is; true/false;
    a number without a needless fraction (3.0 -> "3", 2.5 -> "2.5"); a list as its items joined with ", "
    (null items left out); an object as compact JSON, its keys sorted (a stored object's key order is the
    database's: PostgreSQL's jsonb keeps its own)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return ", ".join(spoken(item) for item in value if item is not None)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return str(value)


def render(text: str, values: dict[str, Any]) -> tuple[str, set[str]]:
    """Fill ``{{name}}`` placeholders with :func:`spoken` values; returns the text and the names left
    unresolved (absent or null)."""
    missing: set[str] = set()

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in values and values[name] is not None:
            return spoken(values[name])
        missing.add(name)
        return match.group(0)

    return PLACEHOLDER_RE.sub(fill, text or ""), missing


def unresolved_placeholders(agent: Agent, values: dict[str, Any]) -> list[str]:
    """The placeholders a call of ``agent`` with ``values`` would leave unfilled (prompt, first message, and the
    voicemail message when it leaves one), sorted."""
    missing = render(agent.prompt, values)[1] | render(agent.first_message or "", values)[1]
    if agent.voicemail.action == "leave_message" and agent.voicemail.message:
        missing |= render(agent.voicemail.message, values)[1]
    return sorted(missing)


def duplicate_name(original: str, requested: str | None) -> str:
    return requested if requested else f"{original} (Copy)"
