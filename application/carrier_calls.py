"""Carrier voice webhooks and live-call commands: status callbacks, inbound calls, hang-up and transfer.

Every webhook is verified first (``CarrierWebhooks.verify``: 403 and nothing read otherwise), then applied forward
only: a callback about an unknown call, a replay, a late ``ringing`` after the end change nothing and are answered
2xx (carriers retry anything else). What a callback moves goes through the call's state machine and the
``CallFinisher``, with the call's events in the same transaction.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from application.agents import as_published
from application.calls import CallFinisher, CarrierVoiceUpdates, record_call_events
from application.carriers import (
    CALLBACK_SAFETY_CHECK,
    CarrierCalls,
    CarrierLinks,
    CarrierRefused,
    CarrierWebhooks,
    VerifiedWebhook,
    carrier_state,
)
from application.context import CauseContext
from application.ports.agents import AgentRepository
from application.ports.calls import CallRepository
from application.ports.carriers import (
    CallbackUrls,
    CarrierAmbiguous,
    CarrierError,
    InboundCall,
    VoiceUpdate,
    WebhookReply,
    WebhookRequest,
)
from application.ports.media import MediaStreamTokens
from application.ports.platform import Clock, Random, UnitOfWork, Units
from application.ports.telephony import PhoneNumberRepository
from application.ports.usage import CALL_SECONDS, QuotaGate
from domain.agents import Agent, AgentStatus, render
from domain.calls import RING_ALLOWANCE, SINGLE_CALL_PRIORITY, Call, CallStatus, render_values
from domain.errors import DomainError, InvalidTransition, NotFound
from domain.identity import persisted
from domain.telephony import PhoneNumberStatus

log = logging.getLogger("parley.carriers")


@dataclass(frozen=True, slots=True)
class ReceiveVoiceStatusCommand:
    provider_id: int
    request: WebhookRequest
    call_id: str | None = None
    """Parley's call id, from the status URL Parley gave the carrier (absent on a number's own status callback)."""


class ReceiveVoiceStatus:
    """POST /carriers/{provider_id}/voice/status: a call's status at the carrier, applied forward only. Returns
    the call when the callback concerned one (changed or not), None when it names no call of this provider."""

    def __init__(self, webhooks: CarrierWebhooks, calls: CallRepository, updates: CarrierVoiceUpdates,
                 cause: CauseContext, clock: Clock) -> None:
        self.webhooks, self.calls, self.updates, self.cause, self.clock = webhooks, calls, updates, cause, clock

    async def execute(self, command: ReceiveVoiceStatusCommand) -> Call | None:
        now = self.clock.now()
        verified = await self.webhooks.verify(command.provider_id, command.request, now)
        event = verified.carrier.read_voice_webhook(command.request)
        if not isinstance(event, VoiceUpdate):
            return None
        return await apply_status(self.calls, self.updates, self.cause, verified, event, command.call_id, now)


async def apply_status(calls: CallRepository, updates: CarrierVoiceUpdates, cause: CauseContext,
                       verified: VerifiedWebhook, event: VoiceUpdate, call_id: str | None, now: datetime
                       ) -> Call | None:
    org = verified.provider.organization_id
    call = (await calls.get_for_update(org, call_id) if call_id
            else await calls.find_by_telephony_ref(org, event.carrier_call_id))
    if call is None or call.provider_id != verified.provider.id:
        log.info("carrier status for an unknown call (provider %s, call %s): nothing to change",
                 verified.provider.id, call_id or event.carrier_call_id)
        return None
    if call.telephony_ref and event.carrier_call_id and call.telephony_ref != event.carrier_call_id:
        return call  # another leg (a transfer's), not this call's
    if call.cause_depth:
        cause.depth = call.cause_depth
    return await updates.apply(call, event, now)


@dataclass(frozen=True, slots=True)
class ReceiveInboundCallCommand:
    provider_id: int
    request: WebhookRequest


class ReceiveInboundCall:
    """POST /carriers/{provider_id}/voice/inbound: a caller rang one of the organization's numbers of this provider.
    A number with an ``inbound_agent_id`` whose agent is active answers: the call is stored (``direction:
    inbound``, the agent's published version, events ``call.started`` and ``call.answered``) and connected to its
    media stream; otherwise the caller is turned away politely (busy). A repeated webhook for a call already taken
    answers it again, with a fresh stream token, and creates nothing."""

    def __init__(self, uow: UnitOfWork, webhooks: CarrierWebhooks, calls: CallRepository, agents: AgentRepository,
                 numbers: PhoneNumberRepository, updates: CarrierVoiceUpdates, tokens: MediaStreamTokens,
                 links: CarrierLinks, quota: QuotaGate, finisher: CallFinisher, cause: CauseContext, clock: Clock,
                 random: Random) -> None:
        self.uow, self.webhooks, self.calls, self.agents, self.numbers = uow, webhooks, calls, agents, numbers
        self.updates, self.tokens, self.links, self.quota, self.finisher = updates, tokens, links, quota, finisher
        self.cause, self.clock, self.random = cause, clock, random

    async def execute(self, command: ReceiveInboundCallCommand) -> WebhookReply:
        now = self.clock.now()
        verified = await self.webhooks.verify(command.provider_id, command.request, now)
        event = verified.carrier.read_voice_webhook(command.request)
        if isinstance(event, VoiceUpdate):  # a carrier that sends every event to one URL
            await apply_status(self.calls, self.updates, self.cause, verified, event, None, now)
            return WebhookReply()
        if not isinstance(event, InboundCall):
            return WebhookReply()
        org = verified.provider.organization_id
        existing = await self.calls.find_by_telephony_ref(org, event.carrier_call_id)
        if existing is not None:
            if existing.is_final:
                return await verified.carrier.reject_inbound(verified.account, event)
            return await self._connect(verified, event, existing, now)
        agent = await self._agent(org, persisted(verified.provider.id), event.to_phone)
        if agent is None:
            log.info("inbound call to %s (provider %s): no active agent answers it; turned away", event.to_phone,
                     verified.provider.id)
            return await verified.carrier.reject_inbound(verified.account, event)
        call_id = self.random.uuid()
        try:
            await self.quota.admit(org, CALL_SECONDS, f"call:{call_id}", agent.max_call_duration_seconds, now)
        except DomainError as refused:
            log.info("inbound call to %s turned away: %s", event.to_phone, refused.message)
            return await verified.carrier.reject_inbound(verified.account, event)
        values = render_values(None, event.from_phone, {})
        call = Call(
            id=call_id, organization_id=org, agent_id=persisted(agent.id), destination_phone=event.to_phone,
            from_phone=event.from_phone, status="queued", prompt=render(agent.prompt, values)[0],
            first_message=render(agent.first_message, values)[0] if agent.first_message else None,
            max_duration_seconds=agent.max_call_duration_seconds, provider_id=verified.provider.id,
            created_at=now, updated_at=now, priority=SINGLE_CALL_PRIORITY, due_at=now,
            agent_version=agent.current_version, direction="inbound",
        )
        call, started = call.move("dial", event.at, telephony_ref=event.carrier_call_id,
                                  telephony_state=carrier_state(verified.provider, inbound=True),
                                  next_check_at=now + CALLBACK_SAFETY_CHECK,
                                  deadline_at=now + timedelta(seconds=agent.max_call_duration_seconds)
                                  + RING_ALLOWANCE)
        call, answered = call.move("answer", event.at)
        await self.calls.add(call)
        record_call_events(self.uow, call, [*started, *answered])
        return await self._connect(verified, event, call, now)

    async def _agent(self, org: int, provider_id: int, to_phone: str) -> Agent | None:
        number = next((n for n in await self.numbers.list(org, provider_id)
                       if n.phone_number == to_phone and n.status == PhoneNumberStatus.ACTIVE and n.voice), None)
        if number is None or number.inbound_agent_id is None:
            return None
        live = await self.agents.get(org, number.inbound_agent_id)
        if live is None or live.status != AgentStatus.ACTIVE:
            return None
        return await as_published(self.agents, live, live.current_version)

    async def _connect(self, verified: VerifiedWebhook, event: InboundCall, call: Call, now: datetime
                       ) -> WebhookReply:
        try:
            token = await self.tokens.issue(call.id, call.organization_id, now)
        except Exception as exc:  # the media endpoint cannot take a stream: the caller is turned away
            log.warning("no media stream for inbound call %s: %s", call.id, exc)
            failed = replace(call, end_message="media streams are not available")
            await self.finisher.finish(failed, "fail", now, end_reason="media_unavailable")
            return await verified.carrier.reject_inbound(verified.account, event)
        try:
            urls = CallbackUrls(status_url=self.links.voice_status(persisted(verified.provider.id), call.id),
                                stream_url=self.links.stream(token), direction="inbound")
            return await verified.carrier.answer_inbound(verified.account, event, urls)
        except (CarrierError, CarrierAmbiguous) as exc:
            log.warning("answering inbound call %s failed: %s", call.id, exc)
            failed = replace(call, end_message=str(exc)[:500])
            await self.finisher.finish(failed, "fail", now, end_reason="carrier_error")
            return WebhookReply()


# ------------------------------------------------------------------------------------------------- live commands


@dataclass(frozen=True, slots=True)
class TransferCarrierCallCommand:
    organization_id: int
    call_id: str
    to_phone: str
    finish: bool = True
    """End the call ``transferred`` in this transaction (the API). False: the call's live media session ends it with
    its transcript and recording; the call keeps ``ending: transferred`` meanwhile (what its carrier's ``completed``
    callback ends it with should the session never finish)."""


class TransferCarrierCall:
    """Move a live carrier call to ``to_phone`` (the agent's ``transfer_phone`` or the ``transfer_call`` tool): the
    carrier bridges the caller there and the call ends ``transferred`` (``call.transferred``, then ``call.ended``)
    in this transaction. Only an answered call (409 invalid_transition); a carrier that refuses: 502
    ``carrier_error`` and the call goes on."""

    def __init__(self, calls: CallRepository, carrier_calls: CarrierCalls, finisher: CallFinisher,
                 cause: CauseContext, clock: Clock) -> None:
        self.calls, self.carrier_calls, self.finisher, self.cause, self.clock = (
            calls, carrier_calls, finisher, cause, clock)

    async def execute(self, command: TransferCarrierCallCommand) -> Call:
        call = await self.calls.get_for_update(command.organization_id, command.call_id)
        if call is None:
            raise NotFound("call", command.call_id)
        if call.status != CallStatus.IN_PROGRESS or not call.telephony_ref or call.provider_id is None:
            raise InvalidTransition("call", call.status, "transferred")
        if call.cause_depth:
            self.cause.depth = call.cause_depth
        try:
            await self.carrier_calls.transfer(call.organization_id, call.provider_id, call.telephony_ref,
                                              command.to_phone)
        except (CarrierError, CarrierAmbiguous) as exc:
            raise CarrierRefused(f"carrier_error: the carrier did not transfer the call: {exc}") from None
        now = self.clock.now()
        if not command.finish:
            state = {**call.telephony_state, "ending": "transferred", "transferred_to": command.to_phone}
            return await self.calls.update(replace(call, telephony_state=state, updated_at=now))
        duration = int((now - call.answered_at).total_seconds()) if call.answered_at else 0
        return await self.finisher.finish(call, "transfer", now, end_reason="transferred",
                                          transferred_to=command.to_phone, duration_seconds=duration)


@dataclass(frozen=True, slots=True)
class HangUpCarrierCallCommand:
    organization_id: int
    call_id: str
    end_reason: str = "agent_hangup"


class HangUpCarrierCall:
    """End a live carrier call from Parley's side (the agent's ``end_call``, the runtime's limits): the carrier
    hangs up, and its ``completed`` callback ends the call with ``end_reason`` (kept on the call meanwhile)."""

    def __init__(self, calls: CallRepository, carrier_calls: CarrierCalls, clock: Clock) -> None:
        self.calls, self.carrier_calls, self.clock = calls, carrier_calls, clock

    async def execute(self, command: HangUpCarrierCallCommand) -> Call | None:
        call = await self.calls.get_for_update(command.organization_id, command.call_id)
        if call is None or call.is_final or not call.telephony_ref or call.provider_id is None:
            return call
        if "line_ended_at" in call.telephony_state:  # the carrier ended the line already
            return call
        provider_id, carrier_call_id = call.provider_id, call.telephony_ref
        state = {**call.telephony_state, "ending": command.end_reason}
        call = await self.calls.update(replace(call, telephony_state=state, updated_at=self.clock.now()))
        await self.carrier_calls.hang_up(call.organization_id, provider_id, carrier_call_id)
        return call


class CarrierCallLine:
    """:class:`application.ports.media.CallLine` over the call's carrier: a live media session hangs up through
    :class:`HangUpCarrierCall` and transfers through :class:`TransferCarrierCall` (without finishing the call: the
    session finishes it, ``transferred``, with its transcript and recording), each in a unit of its own. A call
    without a carrier (a web call) has no line to hang up, and cannot be transferred."""

    def __init__(self, units: Units) -> None:
        self.units = units

    async def hang_up(self, organization_id: int, call_id: str) -> None:
        await self.units.execute(HangUpCarrierCall, HangUpCarrierCallCommand(organization_id, call_id))

    async def transfer(self, organization_id: int, call_id: str, to_phone: str) -> None:
        await self.units.execute(TransferCarrierCall,
                                 TransferCarrierCallCommand(organization_id, call_id, to_phone, finish=False))
