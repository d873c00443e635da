"""Call use cases: place, read, cancel; the worker's dial, advance and sweep steps; call logs and recordings.

Use cases never commit. The worker runs each step in its own unit of work (one call, or one dispatch, per
transaction) so one failing call never holds back the others.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from application.agents import as_published
from application.carriers import (
    CALLBACK_SAFETY_CHECK,
    RECONCILE_AFTER,
    CarrierAccounts,
    CarrierCalls,
    CarrierLinks,
    NoPhoneNumber,
    is_carrier,
    voicemail_needs_detection,
)
from application.context import Actor, ApiBaseUrl, CauseContext
from application.dnc import DncGate
from application.phones import e164
from application.ports.accounts import OrganizationRepository
from application.ports.agents import AgentRepository
from application.ports.blobs import BlobStorage
from application.ports.calls import (
    CallFilter,
    CallLogFilter,
    CallLogRepository,
    CallPlacementReads,
    CallRef,
    CallRepository,
)
from application.ports.carriers import CarrierAmbiguous, CarrierError, Carriers, VoiceUpdate
from application.ports.media import LiveCallControl, SessionControl
from application.ports.phones import PhoneNormalizer
from application.ports.platform import Clock, Page, PageRequest, Random, UnitOfWork
from application.ports.telephony import (
    CONVERSATION,
    CallSignal,
    DialHandle,
    DialRequest,
    PhoneNumberRepository,
    Telephony,
    TelephonyProviderRepository,
)
from application.ports.usage import CALL_SECONDS, CALLS, QuotaGate, UsageRecorder
from domain import recordings
from domain.agents import Agent, AgentStatus, render, unresolved_placeholders
from domain.calls import (
    ACTIVE_STATUSES,
    QUEUE_TIMEOUT,
    RING_ALLOWANCE,
    SIMULATOR_CALLER_ID,
    SINGLE_CALL_PRIORITY,
    TRIGGER_FOR_FINAL,
    Call,
    CallLog,
    CallStatus,
    outcome_of,
    render_values,
    summarize,
    unresolved_placeholders_error,
)
from domain.errors import InvalidTransition, NotFound, ValidationFailed
from domain.events import EventType
from domain.identity import persisted
from domain.organizations import PLAN_LIMITS
from domain.parsing import MAX_ID, parse_id
from domain.rfc3339 import check_created_window
from domain.telephony import SIMULATED_PROVIDER_TYPES, PhoneNumberStatus, ProviderStatus, TelephonyProvider

log = logging.getLogger("parley.calls")



class AgentNotCallable(InvalidTransition):
    """Only an active agent can place calls (409 invalid_transition)."""

    def __init__(self, agent_id: int, status: str) -> None:
        super().__init__("agent", status, "calling")
        self.message = f"Only an active agent can place calls; agent {agent_id} is {status}"
        self.args = (self.message,)


def record_call_events(uow: UnitOfWork, call: Call, kinds: list[EventType]) -> None:
    """The call's events, as deep as the trigger action that placed the call (the loop guard's depth)."""
    view = call.view()
    for kind in kinds:
        event = kind(call.organization_id, view)
        uow.record(replace(event, depth=call.cause_depth) if call.cause_depth else event)


def _agent_id(bot_id: str) -> int:
    try:
        return parse_id(bot_id, "bot_id")
    except ValidationFailed:
        raise ValidationFailed.field("bot_id", f"must be the id of an agent, such as \"42\" (1 to {MAX_ID})") from None


# ---------------------------------------------------------------------------------------------- placing


@dataclass(frozen=True, slots=True)
class PlaceCallCommand:
    actor: Actor
    bot_id: str
    destination_phone: str
    contact_name: str | None = None
    custom_data: dict[str, Any] = field(default_factory=dict)
    priority: int = SINGLE_CALL_PRIORITY
    """Its place in the organization's dial queue (a campaign's calls queue below single calls)."""
    campaign_id: int | None = None
    contact_id: int | None = None
    idempotency_key: str | None = None
    """A campaign attempt's key: when a call with it exists, that call is the answer (nothing is placed)."""
    from_phone_number_id: int | None = None
    """The caller id to use (a campaign's ``from_phone_number_id``); when it is gone or not voice-capable, the
    agent's number as for any call."""
    allowed_countries: tuple[str, ...] | None = None
    """A campaign's countries, narrowing the organization's dialing policy."""
    cause_depth: int = 0
    """The depth of the trigger action the call is placed for when it is placed later, outside that action's unit
    of work (a campaign contact the action added); the call keeps the deeper of it and the unit's own depth."""
    contact_name_field: str = "contact_name"
    """The field the client filled ``contact_name`` with (a lead's and a campaign contact's is ``name``): an agent
    whose ``{{contact_name}}`` stays unfilled is a 400 naming it."""
    agent_field: str | None = "bot_id"
    """The field that named the agent (``POST /calls``: ``bot_id``), which a 404 names; None when no client field
    did (a campaign's agent, a trigger action's checked when it was saved)."""


class PlaceCall:
    """Validate, screen (fail closed) and queue an outbound call; the worker dials it when the organization
    has a free line (plan limit ``max_concurrent_calls``)."""

    def __init__(self, uow: UnitOfWork, cause: CauseContext, calls: CallRepository, agents: AgentRepository,
                 providers: TelephonyProviderRepository, numbers: PhoneNumberRepository, dnc: DncGate,
                 phones: PhoneNormalizer, clock: Clock, random: Random, quota: QuotaGate,
                 links: CarrierLinks, reads: CallPlacementReads) -> None:
        self.uow, self.cause, self.calls, self.agents = uow, cause, calls, agents
        self.providers, self.numbers = providers, numbers
        self.dnc, self.phones, self.clock, self.random, self.quota = dnc, phones, clock, random, quota
        self.links, self.reads = links, reads

    async def execute(self, command: PlaceCallCommand) -> Call:
        org = command.actor.organization_id
        if command.idempotency_key is not None:
            placed = await self.calls.get_by_key(org, command.idempotency_key)
            if placed is not None:
                return placed
        agent_id = _agent_id(command.bot_id)
        destination = e164(self.phones, command.destination_phone, "destination_phone")
        found = await self.agents.get_with_current_version(org, agent_id)
        if found is None:
            raise NotFound("agent", agent_id, field=command.agent_field)
        live, published = found
        if live.status != AgentStatus.ACTIVE:
            raise AgentNotCallable(agent_id, live.status)
        # the call runs the latest published version, never the draft (an active agent always has one)
        if published is None:
            raise AgentNotCallable(agent_id, "not published")
        agent = live.with_snapshot(published.snapshot)
        values = render_values(command.contact_name, destination, command.custom_data)
        names = unresolved_placeholders(agent, values)
        if names:
            raise unresolved_placeholders_error(names, command.contact_name_field)
        prompt, first_message = render(agent.prompt, values)[0], render(agent.first_message or "", values)[0]
        # what the gates and the repositories ask next, read at once (the answers are theirs to act on)
        await self.reads.read_ahead(org, agent_id, destination)
        # the one gate: the destination policy (422 destination_not_allowed), then DNC and SMS opt-outs
        await self.dnc.ensure_callable(org, destination, command.allowed_countries)
        now = self.clock.now()
        provider = await self.providers.for_new_call(org, now)
        caller = None
        if command.from_phone_number_id is not None:
            chosen = await self.numbers.get(org, command.from_phone_number_id)
            usable = chosen is not None and chosen.voice and chosen.status == PhoneNumberStatus.ACTIVE
            caller = chosen if usable else None
        caller = caller or await self.numbers.outbound_for_agent(org, agent_id)
        if is_carrier(provider.type):  # a carrier calls back at the public URL, from one of its own numbers
            self.links.require()
            own = [n for n in await self.numbers.list(org, provider.id)
                   if n.voice and n.status == PhoneNumberStatus.ACTIVE]
            if caller is None or caller.provider_id != provider.id:
                caller = own[0] if own else None
            if caller is None:
                raise NoPhoneNumber(
                    f"no_phone_number: the default provider {provider.id} ({provider.type}) has no active voice "
                    "number to call from; add one with POST /telephony/phone-numbers",
                    details={"provider_id": provider.id})
        call_id = self.random.uuid()
        # the one quota gate: a plan without overage reserves the call's longest duration, or 403 quota_exceeded
        await self.quota.admit(org, CALL_SECONDS, f"call:{call_id}", agent.max_call_duration_seconds, now)
        call = Call(
            id=call_id, organization_id=org, agent_id=agent_id, destination_phone=destination,
            from_phone=caller.phone_number if caller else SIMULATOR_CALLER_ID, status="queued",
            contact_name=command.contact_name, custom_data=dict(command.custom_data), prompt=prompt,
            first_message=first_message if agent.first_message else None,
            max_duration_seconds=agent.max_call_duration_seconds, provider_id=provider.id,
            deadline_at=now + QUEUE_TIMEOUT, created_at=now, updated_at=now,
            priority=command.priority, due_at=now, campaign_id=command.campaign_id,
            contact_id=command.contact_id, idempotency_key=command.idempotency_key,
            # a trigger's action (now, or earlier for a campaign contact): the call's events, later, keep its depth
            cause_depth=max(self.cause.depth, command.cause_depth),
            agent_version=agent.current_version,
        )
        self.uow.created_work()  # the worker dials it
        return await self.calls.add(call)


async def _call_agent(agents: AgentRepository, call: Call) -> Agent | None:
    """The agent as the call runs it: the published version it was placed with (None when the agent or that
    version is gone). A call placed before calls recorded their version runs the agent as it is now."""
    found = await agents.get_with_current_version(call.organization_id, call.agent_id)
    if found is None:
        return None
    live, published = found
    if call.agent_version is None:
        return live
    if published is not None and published.version == call.agent_version:  # still the latest: one read
        return live.with_snapshot(published.snapshot)
    return await as_published(agents, live, call.agent_version)


async def _load_call(calls: CallRepository, actor: Actor, call_id: str, *, lock: bool = False) -> Call:
    getter = calls.get_for_update if lock else calls.get
    call = await getter(actor.organization_id, call_id)
    if call is None:
        raise NotFound("call", call_id)
    return call


@dataclass(frozen=True, slots=True)
class GetCallCommand:
    actor: Actor
    call_id: str


class GetCall:
    def __init__(self, calls: CallRepository) -> None:
        self.calls = calls

    async def execute(self, command: GetCallCommand) -> Call:
        return await _load_call(self.calls, command.actor, command.call_id)


@dataclass(frozen=True, slots=True)
class ListCallsCommand:
    actor: Actor
    filters: CallFilter
    page: PageRequest


class ListCalls:
    def __init__(self, calls: CallRepository) -> None:
        self.calls = calls

    async def execute(self, command: ListCallsCommand) -> Page[Call]:
        check_created_window(command.filters.created_after, command.filters.created_before)
        return await self.calls.list(command.actor.organization_id, command.filters, command.page)


# ---------------------------------------------------------------------------------------------- finishing


class CallFinisher:
    """Ends a call: the final move, its call log (for calls that reached the network), usage and events."""

    def __init__(self, uow: UnitOfWork, calls: CallRepository, logs: CallLogRepository, agents: AgentRepository,
                 usage: UsageRecorder) -> None:
        self.uow, self.calls, self.logs, self.agents, self.usage = uow, calls, logs, agents, usage

    async def finish(self, call: Call, trigger: str, at: datetime, *, end_reason: str,
                     duration_seconds: int = 0, transcript: list[dict[str, Any]] | None = None,
                     recording_key: str | None = None, transferred_to: str | None = None,
                     booking: dict[str, Any] | None = None, message_left: bool = False,
                     turns: list[dict[str, Any]] | None = None, analysis: dict[str, Any] | None = None) -> Call:
        target_status = {"complete": "completed", "busy": "busy", "no_answer": "no_answer", "fail": "failed",
                         "voicemail": "voicemail", "transfer": "transferred", "cancel": "cancelled",
                         "time_out": "failed"}[trigger]
        outcome = outcome_of(target_status, end_reason, booked=booking is not None, message_left=message_left)
        duration = max(0, min(int(duration_seconds), call.max_duration_seconds))
        finished, events = call.move(trigger, at, end_reason=end_reason, outcome=outcome,
                                     duration_seconds=duration, transferred_to=transferred_to)
        if finished.started_at is not None:
            agent = await _call_agent(self.agents, call)
            lines = list(transcript or [])
            log = await self.logs.add(CallLog(
                id=None, organization_id=call.organization_id, call_id=call.id, agent_id=call.agent_id,
                direction=call.direction, from_phone=call.from_phone, to_phone=call.destination_phone,
                status=finished.status, end_reason=end_reason, outcome=outcome, duration_seconds=duration,
                transcript=lines,
                summary=summarize(agent_name=agent.name if agent else f"Agent {call.agent_id}",
                                  contact_name=call.contact_name, to_phone=call.destination_phone,
                                  status=finished.status, outcome=outcome, duration_seconds=duration,
                                  turns=len(lines), booking=booking),
                contact_name=call.contact_name, recording_key=recording_key, started_at=finished.started_at,
                answered_at=finished.answered_at, ended_at=finished.ended_at, created_at=at,
                agent_version=call.agent_version, turns=list(turns or []), analysis=analysis,
            ))
            finished = replace(finished, call_log_id=log.id)
        finished = await self.calls.update(finished)
        dimensions = {"agent_id": call.agent_id, "campaign_id": call.campaign_id}
        await self.usage.record(call.organization_id, CALL_SECONDS, duration, at, f"call:{call.id}", **dimensions)
        if finished.started_at is not None:  # a call that reached the network counts as a call
            await self.usage.record(call.organization_id, CALLS, 1, at, f"call:{call.id}", **dimensions)
        record_call_events(self.uow, finished, events)
        return finished


MACHINE = "machine"
MEDIA_LIVE = "live"
"""``telephony_state['media']`` while the call's media stream is live (``application.media_session``)."""
SESSION_FINISH_DEADLINE = timedelta(seconds=60)
"""A call whose carrier reported its end while its media session was live is left to the session to finish (with
its transcript and recording) this long; past it (the process holding the session died), the carrier's word ends
it (the reconciliation asks again then)."""
_FINAL_TRIGGER = {"busy": "busy", "no_answer": "no_answer", "failed": "fail", "canceled": "fail"}


class CarrierVoiceUpdates:
    """Applies what a carrier reports about a call (a status callback, or a reconciliation's answer) to the call:
    forward only, through the call's state machine and the ``CallFinisher`` (so its events are written in the same
    transaction). A report about a call that has ended, or that moves it backwards (``ringing`` after ``answered``),
    changes nothing.

    Answering-machine detection: a machine answers -> the agent's voicemail action. ``hangup``: the call is hung up
    at the carrier and ends ``voicemail`` / ``voicemail_hangup`` at once; ``leave_message``: the call's media session
    plays the message (the call keeps ``answered_by: machine`` in its telephony state, which the session reads) and
    the call ends ``voicemail`` / ``voicemail_message_left`` when the carrier says it is over.

    A live media session (``telephony_state['media'] == 'live'``): the end of the call at the carrier (the caller
    hung up) is sent to the session as ``hang_up`` (:class:`LiveCallControl`) and the session finishes the call;
    the call keeps ``line_ended_at`` and is looked up again after ``SESSION_FINISH_DEADLINE``, when the carrier's
    word ends it should no session have. An answering-machine result that arrives once the stream is live goes to
    the session as ``machine_detected`` (``details.answered_by``), which plays the agent's voicemail action."""

    def __init__(self, uow: UnitOfWork, calls: CallRepository, agents: AgentRepository, finisher: CallFinisher,
                 carrier_calls: CarrierCalls, control: LiveCallControl) -> None:
        self.uow, self.calls, self.agents, self.finisher = uow, calls, agents, finisher
        self.carrier_calls, self.control = carrier_calls, control

    async def apply(self, call: Call, update: VoiceUpdate, now: datetime) -> Call:
        if call.is_final:
            return call
        state = dict(call.telephony_state)
        state.pop("reconcile", None)
        if update.answered_by is not None:
            state["answered_by"] = update.answered_by
        changed = replace(call, telephony_ref=call.telephony_ref or update.carrier_call_id, telephony_state=state,
                          next_check_at=now + CALLBACK_SAFETY_CHECK)
        at = update.at
        kind = update.state
        if kind in ("queued", "initiated", "ringing"):
            return await self._save(call, changed, now)
        live = call.telephony_state.get("media") == MEDIA_LIVE
        if kind == "answered":
            if changed.status == CallStatus.RINGING:
                changed, events = changed.move("answer", at)
                record_call_events(self.uow, changed, events)
            if live and update.answered_by is not None and call.telephony_state.get("answered_by") is None:
                await self.control.send(call.organization_id, call.id, SessionControl(
                    "machine_detected", 0, {"answered_by": update.answered_by}))
                return await self._save(call, changed, now)
            if update.answered_by == MACHINE:
                return await self._machine(changed, at, now)
            return await self._save(call, changed, now)
        if live and not self._session_overdue(call, now):
            return await self._line_ended(call, changed, now)
        if kind == "completed":
            return await self._completed(changed, update, at)
        trigger = _FINAL_TRIGGER[kind]
        if changed.status != CallStatus.RINGING and trigger in ("busy", "no_answer"):
            trigger = "fail"  # an answered call cannot be busy; the carrier says it failed
        end_reason = {"busy": "busy", "no_answer": "no_answer"}.get(trigger, "carrier_error")
        message = update.error or ("the carrier cancelled the call" if kind == "canceled" else None)
        if end_reason == "carrier_error":
            changed = replace(changed, end_message=(message or "the carrier reported the call failed")[:500])
        return await self.finisher.finish(changed, trigger, at, end_reason=end_reason)

    @staticmethod
    def _session_overdue(call: Call, now: datetime) -> bool:
        ended = call.telephony_state.get("line_ended_at")
        return ended is not None and now >= datetime.fromisoformat(str(ended)) + SESSION_FINISH_DEADLINE

    async def _line_ended(self, before: Call, after: Call, now: datetime) -> Call:
        """The carrier ended a call whose session is live: the session finishes it (class docstring)."""
        if "line_ended_at" in before.telephony_state:
            return before  # told already; the session or, past the deadline, the carrier's word ends it
        state = {**after.telephony_state, "line_ended_at": now.isoformat()}
        await self.control.send(before.organization_id, before.id,
                                SessionControl("hang_up", 0, {"end_reason": "hangup", "line": "ended"}))
        return await self.calls.update(replace(after, telephony_state=state,
                                               next_check_at=now + SESSION_FINISH_DEADLINE, updated_at=now))

    async def _save(self, before: Call, after: Call, now: datetime) -> Call:
        if after == before:
            return before
        return await self.calls.update(replace(after, updated_at=now))

    async def _machine(self, call: Call, at: datetime, now: datetime) -> Call:
        agent = await _call_agent(self.agents, call)
        action = agent.voicemail.action if agent is not None else "hangup"
        if action == "leave_message" and agent is not None and agent.voicemail.message:
            return await self._save(call, replace(call, telephony_state={**call.telephony_state,
                                                                           "voicemail": "leave_message"}), now)
        if call.telephony_ref and call.provider_id is not None:
            await self.carrier_calls.hang_up(call.organization_id, call.provider_id, call.telephony_ref)
        return await self.finisher.finish(call, "voicemail", at, end_reason="voicemail_hangup",
                                          duration_seconds=_seconds_since(call.answered_at, at))

    async def _completed(self, call: Call, update: VoiceUpdate, at: datetime) -> Call:
        machine = call.telephony_state.get("answered_by") == MACHINE
        if call.status == CallStatus.RINGING and not machine:  # answered, though the answer's callback never came
            call, events = call.move("answer", call.started_at or at)
            record_call_events(self.uow, call, events)
        duration = update.duration_seconds if update.duration_seconds is not None else _seconds_since(
            call.answered_at, at)
        if machine:
            left = call.telephony_state.get("voicemail") == "leave_message"
            return await self.finisher.finish(call, "voicemail", at, duration_seconds=duration, message_left=left,
                                              end_reason="voicemail_message_left" if left else "voicemail_hangup")
        ending = call.telephony_state.get("ending")
        if ending == "transferred":
            return await self.finisher.finish(call, "transfer", at, end_reason="transferred",
                                              duration_seconds=duration,
                                              transferred_to=call.telephony_state.get("transferred_to"))
        return await self.finisher.finish(call, "complete", at, end_reason=str(ending or "hangup"),
                                          duration_seconds=duration)


def _seconds_since(start: datetime | None, end: datetime) -> int:
    return max(0, int((end - start).total_seconds())) if start is not None else 0


@dataclass(frozen=True, slots=True)
class CancelCallCommand:
    actor: Actor
    call_id: str


class CancelCall:
    """POST /calls/{id}/cancel: while queued or ringing (409 invalid_transition otherwise)."""

    def __init__(self, calls: CallRepository, telephony: Telephony, finisher: CallFinisher, clock: Clock,
                 carrier_calls: CarrierCalls) -> None:
        self.calls, self.telephony, self.finisher, self.clock = calls, telephony, finisher, clock
        self.carrier_calls = carrier_calls

    async def execute(self, command: CancelCallCommand) -> Call:
        call = await _load_call(self.calls, command.actor, command.call_id, lock=True)
        now = self.clock.now()
        call.cancel(now)  # checks the move before anything is hung up
        if call.status == CallStatus.RINGING and call.telephony_state.get("carrier"):
            if call.telephony_ref and call.provider_id is not None:
                await self.carrier_calls.hang_up(call.organization_id, call.provider_id, call.telephony_ref)
        elif call.status == CallStatus.RINGING and call.telephony_ref:
            handle = await self.telephony.hang_up(DialHandle(call.telephony_ref, call.telephony_state,
                                                             call.next_check_at), now)
            call = replace(call, telephony_state=handle.state)
        return await self.finisher.finish(call, "cancel", now, end_reason="cancelled")


# ---------------------------------------------------------------------------------------------- the worker


@dataclass(frozen=True, slots=True)
class DialNextQueuedCallCommand:
    organization_id: int


class DialNextQueuedCall:
    """Dial the organization's oldest queued call if it has a free line. Returns the call, or None when
    there was nothing to do. Raises DncUnavailable (the call stays queued) when screening fails."""

    def __init__(self, uow: UnitOfWork, calls: CallRepository, agents: AgentRepository,
                 organizations: OrganizationRepository, providers: TelephonyProviderRepository,
                 telephony: Telephony, dnc: DncGate, finisher: CallFinisher, clock: Clock,
                 carrier_calls: CarrierCalls) -> None:
        self.uow, self.calls, self.agents, self.organizations = uow, calls, agents, organizations
        self.providers, self.telephony, self.dnc, self.finisher, self.clock = providers, telephony, dnc, finisher, clock
        self.carrier_calls = carrier_calls

    async def execute(self, command: DialNextQueuedCallCommand) -> Call | None:
        organization_id = command.organization_id
        await self.calls.lock_organization(organization_id)
        org = await self.organizations.get(organization_id)
        if org is None:
            return None
        if await self.calls.count_active(organization_id) >= PLAN_LIMITS[org.plan]["max_concurrent_calls"]:
            return None
        queued = await self.calls.oldest_queued(organization_id, 1, lock=True)  # read and locked in one statement
        if not queued:
            return None
        call = queued[0]
        now = self.clock.now()
        agent = await _call_agent(self.agents, call)
        if agent is None or agent.status != AgentStatus.ACTIVE:
            return await self.finisher.finish(call, "fail", now, end_reason="agent_not_active")
        screened = await self.dnc.screen(organization_id, [call.destination_phone])
        if screened.get(call.destination_phone):
            return await self.finisher.finish(call, "fail", now, end_reason="dnc_blocked")
        provider = await self.providers.get(organization_id, call.provider_id) if call.provider_id else None
        if provider is not None and provider.status != ProviderStatus.ACTIVE:
            return await self.finisher.finish(call, "fail", now, end_reason="provider_disabled")
        if provider is not None and is_carrier(provider.type) and self.carrier_calls.supports(provider.type):
            return await self._dial_carrier(call, agent, provider, now)
        if provider is not None and provider.type not in SIMULATED_PROVIDER_TYPES:
            return await self.finisher.finish(call, "fail", now, end_reason="provider_not_supported")
        try:
            handle = await self.telephony.dial(self._request(call, agent), now)
        except Exception:
            return await self.finisher.finish(call, "fail", now, end_reason="dial_error")
        dialled, events = call.move(
            "dial", now, telephony_ref=handle.reference, telephony_state=handle.state,
            next_check_at=handle.next_check_at,
            deadline_at=now + timedelta(seconds=call.max_duration_seconds) + RING_ALLOWANCE,
        )
        dialled = await self.calls.update(dialled)
        record_call_events(self.uow, dialled, events)
        return dialled

    async def _dial_carrier(self, call: Call, agent: Agent, provider: TelephonyProvider, now: datetime) -> Call:
        """Through a carrier: placed (ringing, the carrier's callbacks do the rest), refused (failed, with the
        carrier's words), or sent without an answer (ringing, reconciled with the carrier: never dialled twice)."""
        result = await self.carrier_calls.dial(
            call_id=call.id, organization_id=call.organization_id, to_phone=call.destination_phone,
            preferred_from=call.from_phone, provider=provider,
            machine_detection=voicemail_needs_detection(agent.voicemail.action, agent.voicemail.message),
            time_limit_seconds=call.max_duration_seconds, now=now)
        if result.failure is not None:
            failed = replace(call, end_message=result.message)
            return await self.finisher.finish(failed, "fail", now, end_reason=result.failure)
        dialled, events = call.move(
            "dial", now, from_phone=result.from_phone, telephony_ref=result.carrier_call_id,
            telephony_state=result.state,
            next_check_at=now + (RECONCILE_AFTER if result.ambiguous else CALLBACK_SAFETY_CHECK),
            deadline_at=now + timedelta(seconds=call.max_duration_seconds) + RING_ALLOWANCE,
        )
        dialled = await self.calls.update(dialled)
        record_call_events(self.uow, dialled, events)
        return dialled

    @staticmethod
    def _request(call: Call, agent: Agent) -> DialRequest:
        values = render_values(call.contact_name, call.destination_phone, call.custom_data)
        message = render(agent.voicemail.message, values)[0] if agent.voicemail.message else None
        return DialRequest(
            call_id=call.id, organization_id=call.organization_id, from_phone=call.from_phone,
            to_phone=call.destination_phone, agent_name=agent.name, prompt=call.prompt,
            first_message=call.first_message, contact_name=call.contact_name, custom_data=call.custom_data,
            max_duration_seconds=call.max_duration_seconds, voicemail_action=agent.voicemail.action,
            voicemail_message=message, transfer_phone=agent.transfer_phone, calendar_id=agent.calendar_id,
        )


@dataclass(frozen=True, slots=True)
class AdvanceCallCommand:
    ref: CallRef


@dataclass(frozen=True, slots=True)
class Advanced:
    """The call after the look; ``conversation``: the simulator's line is up and waits for the agent's conversation
    (the calls' pass runs it outside this unit of work, then ``ResumeCall`` hands its result back)."""

    call: Call
    conversation: CallSignal | None = None


class AdvanceCall:
    """Apply what the line reported since the last look: answer, a request for the conversation, the end."""

    def __init__(self, uow: UnitOfWork, cause: CauseContext, calls: CallRepository, agents: AgentRepository,
                 telephony: Telephony, finisher: CallFinisher, clock: Clock, carriers: Carriers,
                 providers: TelephonyProviderRepository, accounts: CarrierAccounts,
                 voice_updates: CarrierVoiceUpdates) -> None:
        self.uow, self.cause, self.calls, self.agents, self.telephony = uow, cause, calls, agents, telephony
        self.finisher, self.clock = finisher, clock
        self.carriers, self.providers, self.accounts, self.voice_updates = carriers, providers, accounts, voice_updates

    async def execute(self, command: AdvanceCallCommand) -> Advanced | None:
        ref = command.ref
        call = await self.calls.get_for_update(ref.organization_id, ref.call_id)
        if call is None or call.status not in ACTIVE_STATUSES:
            return None
        if call.cause_depth:  # what happens during the call is as deep as the action that placed it
            self.cause.depth = call.cause_depth
        now = self.clock.now()
        if call.telephony_state.get("carrier"):
            return Advanced(await self._reconcile(call, now))
        if not call.telephony_ref:
            return None
        result = await self.telephony.poll(DialHandle(call.telephony_ref, call.telephony_state, call.next_check_at),
                                           now)
        handle = result.handle
        conversation: CallSignal | None = None
        for signal in result.signals:
            if signal.kind == "answered" and call.status == CallStatus.RINGING:
                call, events = call.move("answer", signal.at)
                record_call_events(self.uow, call, events)
            elif signal.kind == CONVERSATION and signal.caller is not None:
                conversation = signal
                break
            elif signal.kind == "ended":
                call = replace(call, telephony_state=handle.state)
                details = signal.details
                return Advanced(await self.finisher.finish(
                    call, TRIGGER_FOR_FINAL[signal.status or "failed"], signal.at,
                    end_reason=signal.end_reason or signal.status or "ended",
                    duration_seconds=signal.duration_seconds, transcript=signal.transcript,
                    recording_key=signal.recording_key, transferred_to=signal.transferred_to,
                    booking=details.get("booking"), message_left=bool(details.get("message_left")),
                    turns=details.get("turns"), analysis=details.get("analysis"),
                ))
        call = replace(call, telephony_state=handle.state, next_check_at=handle.next_check_at, updated_at=now)
        return Advanced(await self.calls.update(call), conversation)

    async def _reconcile(self, call: Call, now: datetime) -> Call:
        """A carrier call: ask the carrier how it is (a dial whose answer was lost, or a call not heard of for a
        while) and apply what it says; a call the carrier never created fails ``carrier_error``. A carrier that does
        not answer is asked again later."""
        provider = await self.providers.get(call.organization_id, persisted(call.provider_id))
        if provider is None:
            failed = replace(call, end_message="the call's telephony provider was deleted")
            return await self.finisher.finish(failed, "fail", now, end_reason="carrier_error")
        try:
            update = await self.carriers.get(provider.type).find_call(self.accounts.open(provider), call.id,
                                                                      call.telephony_ref)
        except (CarrierError, CarrierAmbiguous, KeyError) as exc:
            log.warning("reconciling call %s with its carrier: %s; asking again later", call.id, exc)
            return await self.calls.update(replace(call, next_check_at=now + RECONCILE_AFTER, updated_at=now))
        if update is None:
            failed = replace(call, end_message="the carrier has no record of this call: it was never placed")
            return await self.finisher.finish(failed, "fail", now, end_reason="carrier_error")
        return await self.voice_updates.apply(call, update, now)


@dataclass(frozen=True, slots=True)
class ResumeCallCommand:
    ref: CallRef
    tool: str
    result: dict[str, Any] | None


class ResumeCall:
    """Hand the simulator's line what it waited for (the conversation's result); the line moves on from there. A
    call that ended meanwhile, or a line that asked again since (``attempt``), keeps what it has."""

    def __init__(self, calls: CallRepository, telephony: Telephony, clock: Clock) -> None:
        self.calls, self.telephony, self.clock = calls, telephony, clock

    async def execute(self, command: ResumeCallCommand) -> Call | None:
        ref = command.ref
        call = await self.calls.get_for_update(ref.organization_id, ref.call_id)
        if (call is None or call.status not in ACTIVE_STATUSES or not call.telephony_ref
                or call.telephony_state.get("carrier")):
            return None
        handle = await self.telephony.resume(DialHandle(call.telephony_ref, call.telephony_state, call.next_check_at),
                                             command.tool, command.result)
        return await self.calls.update(replace(call, telephony_state=handle.state, next_check_at=handle.next_check_at,
                                               updated_at=self.clock.now()))


@dataclass(frozen=True, slots=True)
class SweepOverdueCallCommand:
    ref: CallRef


class SweepOverdueCall:
    """End a call stuck past its deadline (max duration plus ringing allowance once dialled, or the queue
    time-out): status failed, end_reason ``timeout``, exactly one call.ended and one call.failed."""

    def __init__(self, calls: CallRepository, telephony: Telephony, finisher: CallFinisher, clock: Clock,
                 carrier_calls: CarrierCalls) -> None:
        self.calls, self.telephony, self.finisher, self.clock = calls, telephony, finisher, clock
        self.carrier_calls = carrier_calls

    async def execute(self, command: SweepOverdueCallCommand) -> Call | None:
        ref = command.ref
        call = await self.calls.get_for_update(ref.organization_id, ref.call_id)
        now = self.clock.now()
        if call is None or call.is_final or call.deadline_at is None or call.deadline_at > now:
            return None
        if call.telephony_state.get("carrier"):
            if call.telephony_ref and call.provider_id is not None:
                await self.carrier_calls.hang_up(call.organization_id, call.provider_id, call.telephony_ref)
        elif call.telephony_ref:
            try:
                handle = await self.telephony.hang_up(
                    DialHandle(call.telephony_ref, call.telephony_state, call.next_check_at), now)
                call = replace(call, telephony_state=handle.state)
            except Exception:  # the line is ended on our side whatever the carrier says
                pass
        duration = 0
        if call.answered_at is not None:
            duration = min(call.max_duration_seconds, int((now - call.answered_at).total_seconds()))
        return await self.finisher.finish(call, "time_out", now, end_reason="timeout", duration_seconds=duration)


# ---------------------------------------------------------------------------------------------- call logs


async def _load_log(logs: CallLogRepository, actor: Actor, call_log_id: int) -> CallLog:
    log = await logs.get(actor.organization_id, call_log_id)
    if log is None:
        raise NotFound("call log", call_log_id)
    return log


@dataclass(frozen=True, slots=True)
class ListCallLogsCommand:
    actor: Actor
    filters: CallLogFilter
    page: PageRequest


class ListCallLogs:
    def __init__(self, logs: CallLogRepository) -> None:
        self.logs = logs

    async def execute(self, command: ListCallLogsCommand) -> Page[CallLog]:
        return await self.logs.list(command.actor.organization_id, command.filters, command.page)


@dataclass(frozen=True, slots=True)
class GetCallLogCommand:
    actor: Actor
    call_log_id: int


class GetCallLog:
    def __init__(self, logs: CallLogRepository) -> None:
        self.logs = logs

    async def execute(self, command: GetCallLogCommand) -> CallLog:
        return await _load_log(self.logs, command.actor, command.call_log_id)


@dataclass(frozen=True, slots=True)
class RecordingLinkSettings:
    secret_key: str
    ttl_seconds: int = recordings.LINK_TTL_SECONDS


@dataclass(frozen=True, slots=True)
class RecordingLink:
    url: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class GetRecordingLinkCommand:
    actor: Actor
    call_log_id: int


class GetRecordingLink:
    """A 15-minute signed URL to the call's WAV recording (404 when the call has none)."""

    def __init__(self, logs: CallLogRepository, settings: RecordingLinkSettings, base: ApiBaseUrl,
                 clock: Clock) -> None:
        self.logs, self.settings, self.base, self.clock = logs, settings, base, clock

    async def execute(self, command: GetRecordingLinkCommand) -> RecordingLink:
        call_log_id = command.call_log_id
        log = await _load_log(self.logs, command.actor, call_log_id)
        if not log.recording_available:
            raise NotFound("recording of call log", call_log_id)
        expires = int(self.clock.now().timestamp()) + self.settings.ttl_seconds
        path = recordings.recording_path(call_log_id)
        signature = recordings.sign(self.settings.secret_key, recordings.METHOD, path, expires, log.organization_id)
        query = urlencode({"expires": expires, "signature": signature})
        url = f"{self.base.link(recordings.recording_file(call_log_id))}?{query}"
        return RecordingLink(url, datetime.fromtimestamp(expires, tz=UTC))


@dataclass(frozen=True, slots=True)
class OpenRecordingCommand:
    """What the signed URL carries (no actor: the signature is the credential)."""

    call_log_id: int
    expires: int | None
    signature: str | None


class OpenRecording:
    """The download behind a signed URL: the signature is the credential (403 when tampered or expired)."""

    def __init__(self, logs: CallLogRepository, blobs: BlobStorage, settings: RecordingLinkSettings,
                 clock: Clock) -> None:
        self.logs, self.blobs, self.settings, self.clock = logs, blobs, settings, clock

    async def execute(self, command: OpenRecordingCommand) -> bytes:
        call_log_id, expires, signature = command.call_log_id, command.expires, command.signature
        found = await self.logs.find_recording(call_log_id)
        if found is None:
            raise recordings.RecordingLinkInvalid("This recording link is not valid")
        organization_id, key = found
        recordings.verify(self.settings.secret_key, recordings.METHOD, recordings.recording_path(call_log_id),
                          expires, organization_id, signature, self.clock.now())
        data = await self.blobs.get(key) if key else None
        if data is None:
            raise NotFound("recording of call log", call_log_id)
        return data
