from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from domain import metadata as metadata_rules
from domain import rfc3339
from domain.calls import Call, CallLog
from domain.identity import persisted
from entrypoints.http.schemas import OneLine

CallStatus = Literal["queued", "ringing", "in_progress", "completed", "busy", "no_answer", "failed", "voicemail",
                     "cancelled", "transferred"]


# A "type: ignore[arg-type]" below marks a field whose domain type is wider than the documented one: a status
# the domain keeps as a str where the schema lists its values, or a field that is None only before the row is stored.

class CallCreate(Struct, forbid_unknown_fields=True):
    bot_id: Annotated[str, Meta(min_length=1, max_length=20, description="The agent id, sent as text")] | Annotated[
        int, Meta(ge=1)]
    destination_phone: Annotated[str, Meta(min_length=1, max_length=40, description="E.164, e.g. +14155550100")]
    contact_name: Annotated[OneLine, Meta(min_length=1, max_length=200)] | None = None
    custom_data: Annotated[dict[str, Any], Meta(max_length=metadata_rules.MAX_KEYS, description=(
        "Each key fills the matching {{placeholder}} of the agent's prompt and first message (at most 50 keys of "
        "40 characters, values of 500)"))] | None = None


class CallOut(Struct):
    id: str
    agent_id: int
    bot_id: str
    status: CallStatus
    direction: Annotated[Literal["outbound", "inbound", "web"], Meta(description=(
        "outbound: placed to a phone; inbound: a caller rang one of the organization's carrier numbers "
        "(destination_phone is that number, from_phone the caller); web: a browser talks to the agent "
        "(POST /calls/web), no phone numbers"))]
    destination_phone: str
    from_phone: str
    contact_name: str | None
    custom_data: dict[str, Any]
    end_reason: str | None
    outcome: str | None
    duration_seconds: int | None
    transferred_to: str | None
    call_log_id: int | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    answered_at: datetime | None
    ended_at: datetime | None
    campaign_id: int | None = None
    """A campaign's call: its campaign and contact (campaigns.md); null for a single call."""
    contact_id: int | None = None
    agent_version: Annotated[int | None, Meta(description=(
        "The agent's published version this call runs (its latest when the call was placed)"))] = None
    end_message: Annotated[str | None, Meta(description=(
        "Why the call failed, in the carrier's own words (end_reason carrier_error), or what was missing "
        "(no_phone_number, public_url_required); null otherwise"))] = None

    @classmethod
    def of(cls, c: Call) -> CallOut:
        return cls(
            id=c.id, agent_id=c.agent_id, bot_id=str(c.agent_id), status=c.status,  # type: ignore[arg-type]  # the domain's type is wider
            direction=c.direction,  # type: ignore[arg-type]  # the domain's type is wider
            destination_phone=c.destination_phone, from_phone=c.from_phone,
            contact_name=c.contact_name, custom_data=c.custom_data, end_reason=c.end_reason, outcome=c.outcome,
            duration_seconds=c.duration_seconds, transferred_to=c.transferred_to, call_log_id=c.call_log_id,
            created_at=c.created_at, updated_at=c.updated_at,  # type: ignore[arg-type]  # the domain's type is wider
            started_at=c.started_at, answered_at=c.answered_at, ended_at=c.ended_at,
            campaign_id=c.campaign_id, contact_id=c.contact_id, agent_version=c.agent_version,
            end_message=c.end_message,
        )


class TurnOut(Struct, omit_defaults=True):
    role: Literal["agent", "user"]
    text: str
    at_ms: int
    knowledge_documents: Annotated[list[int], Meta(description=(
        "The knowledge documents whose passages the agent was given to answer this caller turn; absent otherwise"))] = \
        msgspec.field(default_factory=list)

    @classmethod
    def of(cls, entry: dict[str, Any]) -> TurnOut:
        return cls(entry["role"], entry["text"], entry["at_ms"],
                   [int(d) for d in entry.get("knowledge_documents") or []])


class TurnLatencyOut(Struct):
    """One caller turn the agent answered, in milliseconds (engine parts null when the turn did not use them)."""

    end_of_speech_to_first_audio_ms: Annotated[int, Meta(description=(
        "From the end of the caller's turn (end_of_turn_silence_ms after their last speech) to the agent's first "
        "audio"))]
    stt_ms: int | None = None
    llm_first_token_ms: int | None = None
    tts_first_audio_ms: int | None = None
    parley_ms: Annotated[int, Meta(description="Parley's own share: the total less the time spent waiting on "
                                               "engines and custom tools")] = 0


class AnalysisOut(Struct):
    summary: str
    successful: bool | None
    data: Annotated[dict[str, Any], Meta(description="Follows the agent's analysis_schema; {} when the model's "
                                                      "answer did not")]


class CallLogOut(Struct):
    id: int
    call_id: str
    agent_id: int
    direction: str
    from_: str = msgspec.field(name="from")
    to: str = ""
    contact_name: str | None = None
    status: str = ""
    end_reason: str | None = None
    outcome: str | None = None
    duration_seconds: int = 0
    summary: str = ""
    transcript: list[TurnOut] = msgspec.field(default_factory=list)
    recording_available: bool = False
    started_at: datetime | None = None
    answered_at: datetime | None = None
    ended_at: datetime | None = None
    created_at: datetime | None = None
    agent_version: Annotated[int | None, Meta(description="The agent's published version the call ran")] = None
    turns: Annotated[list[TurnLatencyOut], Meta(description=(
        "The latency of each caller turn the agent answered; empty for calls without a conversation"))] = \
        msgspec.field(default_factory=list)
    analysis: Annotated[AnalysisOut | None, Meta(description="The after-call analysis; null when there is none")] = \
        None

    @classmethod
    def of(cls, log: CallLog) -> CallLogOut:
        return cls(
            id=persisted(log.id), call_id=log.call_id, agent_id=log.agent_id, direction=log.direction,
            from_=log.from_phone, to=log.to_phone, contact_name=log.contact_name, status=log.status,
            end_reason=log.end_reason, outcome=log.outcome, duration_seconds=log.duration_seconds,
            summary=log.summary, transcript=[TurnOut.of(t) for t in log.transcript],
            recording_available=log.recording_available, started_at=log.started_at, answered_at=log.answered_at,
            ended_at=log.ended_at, created_at=log.created_at, agent_version=log.agent_version,
            turns=[TurnLatencyOut(
                end_of_speech_to_first_audio_ms=int(t.get("end_of_speech_to_first_audio_ms") or 0),
                stt_ms=t.get("stt_ms"), llm_first_token_ms=t.get("llm_first_token_ms"),
                tts_first_audio_ms=t.get("tts_first_audio_ms"), parley_ms=int(t.get("parley_ms") or 0))
                for t in log.turns],
            analysis=AnalysisOut(str(log.analysis.get("summary") or ""), log.analysis.get("successful"),
                                 dict(log.analysis.get("data") or {})) if log.analysis else None,
        )


class RecordingLinkOut(Struct):
    url: str
    expires_at: datetime


def parse_instant(value: str | None, field: str) -> datetime | None:
    """An optional RFC 3339 query value (``domain.rfc3339.parse_instant``); absent or empty is None."""
    if value is None or value == "":
        return None
    return rfc3339.parse_instant(value, field)


class WebCallCreate(Struct, forbid_unknown_fields=True):
    agent_id: Annotated[int, Meta(ge=1, description="The agent to talk to (active, with a published version)")]
    custom_data: Annotated[dict[str, Any], Meta(max_length=metadata_rules.MAX_KEYS, description=(
        "Each key fills the matching {{placeholder}} of the agent's prompt and first message (at most 50 keys of "
        "40 characters, values of 500)"))] | None = None


class WebCallOut(Struct):
    call_id: Annotated[str, Meta(description="The call (GET /calls/{id}); direction web")]
    token: Annotated[str, Meta(description="The single-use media-stream token (it is in websocket_url)")]
    websocket_url: Annotated[str, Meta(description=(
        "Where the browser opens the call's audio: wss://<public host>/v2/media-streams/<token>, the web protocol "
        "(docs/calls.md, Web calls)"))]
    expires_at: Annotated[datetime, Meta(description=(
        "The token is refused after this instant (and after its first use)"))]
