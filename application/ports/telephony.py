"""Ports for the phone network (a carrier or the simulator) and the organization's telephony resources.

A carrier adapter turns what its network reports (status callbacks, media events) into
:class:`CallSignal` values; the call use cases move the call's state machine with them. The adapter's
own per-call state is opaque JSON kept on the call row (``DialHandle.state``), so any worker process can
continue a call another process dialled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from application.ports.media import ConversationOutcome
from domain.telephony import PhoneNumber, TelephonyProvider


@dataclass(frozen=True, slots=True)
class DialRequest:
    call_id: str
    organization_id: int
    from_phone: str
    to_phone: str
    agent_name: str
    prompt: str
    first_message: str | None
    contact_name: str | None
    custom_data: dict[str, Any]
    max_duration_seconds: int
    voicemail_action: str = "hangup"
    voicemail_message: str | None = None
    transfer_phone: str | None = None
    calendar_id: int | None = None


@dataclass(frozen=True, slots=True)
class DialHandle:
    reference: str
    state: dict[str, Any]
    next_check_at: datetime | None


@dataclass(frozen=True, slots=True)
class ScriptedCaller:
    """The simulator's caller: its ``lines``, in order, each said once the agent's audio has played; then it hangs
    up (``hangs_up``) or stays silent until the agent ends the call. ``answered_by`` ``machine`` is a voicemail box,
    whose greeting and beep take ``start_ms`` before the agent can speak."""

    lines: tuple[str, ...] = ()
    hangs_up: bool = True
    answered_by: Literal["human", "machine"] = "human"
    start_ms: int = 0
    max_duration_seconds: int = 600


CONVERSATION = "conversation"
"""The ``tool`` a simulated line waits for: the agent's conversation with its :class:`ScriptedCaller`."""


@dataclass(frozen=True, slots=True)
class CallSignal:
    """One thing that happened on the line.

    kind: ``answered``; ``conversation`` (the simulator's line is up: the use case runs the agent's conversation
    with ``caller`` and hands its result back with :meth:`Telephony.resume` (``tool`` ``conversation``, the
    ``attempt`` of ``details`` in the result); the adapter reports nothing further until then); ``ended``
    (``status`` is the final status, with duration, transcript and recording; ``details``: ``booking``,
    ``message_left``, ``turns``, ``analysis``).
    """

    kind: str
    at: datetime
    tool: str | None = None
    caller: ScriptedCaller | None = None
    status: str | None = None
    end_reason: str | None = None
    duration_seconds: int = 0
    transcript: list[dict[str, Any]] = field(default_factory=list)
    recording_key: str | None = None
    transferred_to: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PollResult:
    signals: list[CallSignal]
    handle: DialHandle


@dataclass(frozen=True, slots=True)
class TelephonyHealth:
    """What a telephony provider answers to a health check (the cloud status)."""

    ok: bool
    provider: str
    detail: str | None = None


class Telephony(Protocol):
    async def dial(self, request: DialRequest, now: datetime) -> DialHandle:
        """Place the call; the line is ringing when this returns."""
        ...

    async def poll(self, handle: DialHandle, now: datetime) -> PollResult:
        """What happened on the line up to ``now`` since the last poll, in order."""
        ...

    async def resume(self, handle: DialHandle, tool: str, result: dict[str, Any] | None) -> DialHandle:
        """Hand what the line waited for back to it (``conversation``: the conversation's result)."""
        ...

    async def hang_up(self, handle: DialHandle, now: datetime) -> DialHandle:
        """End the call from our side (cancel while ringing, or a time-out)."""
        ...

    async def health(self) -> TelephonyHealth:
        """Whether calls can be placed now (a cheap check; raising counts as not ok)."""
        ...


class SimulatedConversations(Protocol):
    """The agent's side of a simulated call: its conversation (the one of live media sessions) with a scripted
    caller, on virtual time (``application/simulated_call.py``)."""

    async def converse(self, organization_id: int, call_id: str, answered_at: datetime,
                       caller: ScriptedCaller) -> ConversationOutcome: ...


class TelephonyProviderRepository(Protocol):
    async def ensure_default(self, organization_id: int, now: datetime) -> TelephonyProvider:
        """The organization's built-in simulator provider, created on first use (exactly one, under any
        concurrency)."""
        ...

    async def add(self, provider: TelephonyProvider) -> TelephonyProvider: ...

    async def get(self, organization_id: int, provider_id: int) -> TelephonyProvider | None: ...

    async def find(self, provider_id: int) -> TelephonyProvider | None:
        """A provider by its id alone, whatever its organization (a carrier's webhook names only the provider; it
        is verified with that provider's credentials before anything else is read)."""
        ...

    async def list(self, organization_id: int) -> list[TelephonyProvider]: ...

    async def update(self, provider: TelephonyProvider) -> TelephonyProvider: ...

    async def clear_default(self, organization_id: int, except_id: int) -> None: ...

    async def default(self, organization_id: int) -> TelephonyProvider | None: ...

    async def for_new_call(self, organization_id: int, now: datetime) -> TelephonyProvider:
        """The provider a new call goes out through: the organization's default, else its built-in simulator
        (``ensure_default``: created on first use)."""
        ...

    async def delete(self, organization_id: int, provider_id: int) -> None: ...


class PhoneNumberRepository(Protocol):
    async def add(self, number: PhoneNumber) -> PhoneNumber:
        """Raises Conflict when the organization already has this number."""
        ...

    async def get(self, organization_id: int, number_id: int) -> PhoneNumber | None: ...

    async def list(self, organization_id: int, provider_id: int | None = None) -> list[PhoneNumber]: ...

    async def update(self, number: PhoneNumber) -> PhoneNumber: ...

    async def delete(self, organization_id: int, number_id: int) -> None: ...

    async def count_for_provider(self, organization_id: int, provider_id: int) -> int: ...

    async def outbound_for_agent(self, organization_id: int, agent_id: int) -> PhoneNumber | None:
        """The caller id for an agent: a voice number assigned to it, else the first voice number."""
        ...
