"""Agents (voice personas): fields, defaults, the status machine and prompt placeholders."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from domain.errors import InvalidTransition
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


@dataclass(frozen=True, slots=True)
class Voice:
    provider: str = "simulator"
    voice_id: str = "default"


@dataclass(frozen=True, slots=True)
class Llm:
    model: str = "parley-sim-1"
    temperature: float = 0.7


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
            "voice": {"provider": self.voice.provider, "voice_id": self.voice.voice_id},
            "llm": {"model": self.llm.model, "temperature": self.llm.temperature},
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
        if isinstance(snapshot.get("voice"), dict):
            values["voice"] = replace(self.voice, **snapshot["voice"])
        if isinstance(snapshot.get("llm"), dict):
            values["llm"] = replace(self.llm, **snapshot["llm"])
        if isinstance(snapshot.get("voicemail"), dict):
            values["voicemail"] = replace(self.voicemail, **snapshot["voicemail"])
        if isinstance(snapshot.get("metadata"), dict):
            values["metadata"] = dict(snapshot["metadata"])
        return replace(self, **values)

    def differs_from(self, snapshot: dict[str, Any] | None) -> bool:
        """Whether this agent's configuration is not the one ``snapshot`` froze (None: nothing is published)."""
        return snapshot is None or self.with_snapshot(snapshot).snapshot() != self.snapshot()


# the plain fields of a snapshot (the nested objects are rebuilt by Agent.with_snapshot)
_SNAPSHOT_FIELDS = ("name", "description", "agent_mode", "language", "prompt", "first_message",
                    "max_call_duration_seconds", "transfer_phone", "calendar_id", "timezone")


@dataclass(frozen=True, slots=True)
class AgentVersion:
    agent_id: int
    version: int
    snapshot: dict[str, Any]
    created_at: datetime
    created_by: int | None


def placeholders(text: str) -> set[str]:
    return set(PLACEHOLDER_RE.findall(text or ""))


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
    (null items left out); an object as compact JSON."""
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
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
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
