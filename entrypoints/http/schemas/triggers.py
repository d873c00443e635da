from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

from application.triggers import TestedRun, TriggerWithSecret
from domain import triggers as rules
from domain.identity import persisted
from domain.triggers import Trigger, TriggerRun
from entrypoints.http.schemas import OneLine

ActionType = Literal["webhook", "email", "sms", "chat_message", "call", "campaign_contact"]
RunStatus = Literal["not_matched", "skipped", "running", "succeeded", "failed"]
Name = Annotated[OneLine, Meta(min_length=1, max_length=rules.NAME_MAX_LENGTH)]
EventName = Annotated[str, Meta(min_length=1, max_length=100, description="An event of the catalogue "
                                                                          "(GET /webhooks/events)")]
Conditions = Annotated[dict[str, Any], Meta(description=(
    "A group {all: [...]} or {any: [...]} of conditions {field: \"data.status\", op: eq|neq|gt|gte|lt|lte|in|"
    "contains|exists, value} or nested groups (at most 3 deep), checked against the event's declared fields"))]


# A "type: ignore[arg-type]" below marks a field whose domain type is wider than the documented one: a status
# the domain keeps as a str where the schema lists its values, or a field that is None only before the row is stored.

class ActionIn(Struct, forbid_unknown_fields=True):
    type: ActionType
    config: Annotated[dict[str, Any], Meta(description=(
        "webhook {url}; email {to: [...], subject, body}; sms {to, body}; chat_message {url, text}; "
        "call {agent_id, phone, custom_data?}; campaign_contact {campaign_id, phone, name?}. Texts may hold "
        "{{data.member}} placeholders naming fields of the event"))]


Actions = Annotated[list[ActionIn], Meta(min_length=1, max_length=rules.MAX_ACTIONS)]


class TriggerCreate(Struct, forbid_unknown_fields=True):
    name: Name
    event: EventName
    actions: Actions
    conditions: Conditions | None = None
    enabled: bool = True


class TriggerUpdate(Struct, forbid_unknown_fields=True):
    name: Name | UnsetType = UNSET
    event: EventName | UnsetType = UNSET
    actions: Actions | UnsetType = UNSET
    conditions: Conditions | UnsetType | None = UNSET
    enabled: bool | UnsetType = UNSET


class ActionOut(Struct):
    type: ActionType
    config: dict[str, Any]


class TriggerOut(Struct):
    id: int
    name: str
    event: str
    conditions: dict[str, Any] | None
    actions: list[ActionOut]
    enabled: bool
    disabled_reason: Annotated[Literal["run_rate"] | None, Meta(description=(
        "Why Parley disabled the trigger: run_rate (it ran more than 100 times in a minute). null when it is "
        "enabled or its owner disabled it; PATCH enabled: true clears it"))]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, t: Trigger) -> TriggerOut:
        return cls(**_fields(t))


class TriggerCreated(TriggerOut):
    secret: str
    """Signs this trigger's webhook actions (X-Webhook-Signature): shown only in this response."""

    @classmethod
    def created(cls, made: TriggerWithSecret) -> TriggerCreated:
        return cls(**_fields(made.trigger), secret=made.secret)


def _fields(t: Trigger) -> dict[str, Any]:
    return {"id": persisted(t.id), "name": t.name, "event": t.event, "conditions": rules.conditions_view(t.conditions),
            "actions": [ActionOut(a.type, dict(a.config)) for a in t.actions],  # type: ignore[arg-type]  # the domain's type is wider
            "enabled": t.enabled, "disabled_reason": t.disabled_reason, "created_at": t.created_at,
            "updated_at": t.updated_at}


class TraceStepOut(Struct):
    field: str
    op: str
    expected: Any
    actual: Any
    result: bool


class ActionResultOut(Struct):
    type: ActionType
    status: Literal["pending", "succeeded", "failed", "retrying"]
    attempts: int
    error: str | None
    started_at: datetime | None
    finished_at: datetime | None
    next_attempt_at: datetime | None


class RunOut(Struct):
    id: int
    trigger_id: int
    event: str
    event_id: int
    depth: int
    matched: bool
    status: RunStatus
    reason: str | None
    condition_trace: list[TraceStepOut]
    actions: list[ActionResultOut]
    created_at: datetime
    finished_at: datetime | None

    @classmethod
    def of(cls, r: TriggerRun) -> RunOut:
        return cls(
            id=persisted(r.id), trigger_id=r.trigger_id, event=r.event, event_id=persisted(r.event_id), depth=r.depth,
            matched=r.matched, status=r.status, reason=r.reason,  # type: ignore[arg-type]  # the domain's type is wider
            condition_trace=[TraceStepOut(**s.view()) for s in r.condition_trace],
            actions=[ActionResultOut(**a.view()) for a in r.actions],
            created_at=r.created_at, finished_at=r.finished_at)  # type: ignore[arg-type]  # the domain's type is wider


class TriggerTest(Struct, forbid_unknown_fields=True):
    data: Annotated[dict[str, Any], Meta(description="A sample of the event's data; left out: the catalogue's "
                                                     "example")] | None = None


class TestResultOut(Struct):
    matched: bool
    condition_trace: list[TraceStepOut]
    actions: list[ActionOut]
    """What each action would send, its templates filled from the sample (empty when it does not match)."""

    @classmethod
    def of(cls, tested: TestedRun) -> TestResultOut:
        run = tested.run
        return cls(matched=run.matched,
                   condition_trace=[TraceStepOut(**s.view()) for s in run.condition_trace],
                   actions=[ActionOut(a["type"], a["config"]) for a in tested.rendered])
