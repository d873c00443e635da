"""SMS use cases: send a message (screened by the one DNC gate), read the history, apply carrier receipts
forward-only, and receive inbound messages whose STOP / START keywords keep the organization's opt-out list."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from application.carriers import CarrierAccounts, CarrierLinks, CarrierWebhooks, is_carrier
from application.context import Actor, CauseContext
from application.dnc import DncGate
from application.jobs import JobKind, drain_batches, due_or_beat
from application.phones import e164
from application.ports.carriers import CarrierAmbiguous, CarrierError, Carriers, InboundSms, SmsReceipt, WebhookRequest
from application.ports.dnc import DncRepository
from application.ports.jobs import ClaimedJob
from application.ports.phones import PhoneNormalizer
from application.ports.platform import Clock, Page, PageRequest, Unit, UnitOfWork, Units
from application.ports.sms import CarrierReceipt, MessageRef, OutboundSms, SmsCarrier, SmsFilter, SmsRepository
from application.ports.telephony import PhoneNumberRepository, TelephonyProviderRepository
from application.ports.usage import SMS_SEGMENTS, QuotaGate, UsageRecorder
from domain.calls import SIMULATOR_CALLER_ID
from domain.errors import DomainError, NotFound, ValidationFailed
from domain.events import EventType
from domain.identity import persisted
from domain.rfc3339 import check_created_window
from domain.sms import (
    BODY_MAX_LENGTH,
    OPT_OUT_LIST_NAME,
    SmsMessage,
    SmsNotEnabled,
    SmsStatus,
    StatusEvent,
    keyword,
    keyword_text,
    segment,
)
from domain.telephony import SIMULATED_PROVIDER_TYPES, PhoneNumber, PhoneNumberStatus, TelephonyProvider

log = logging.getLogger("parley.sms")

RECEIPT_EVENTS: dict[str, EventType] = {
    SmsStatus.SENT: EventType.SMS_SENT,
    SmsStatus.DELIVERED: EventType.SMS_DELIVERED,
    SmsStatus.UNDELIVERED: EventType.SMS_FAILED,
    SmsStatus.FAILED: EventType.SMS_FAILED,
}
"""The event a receipt emits when it moves the status (a receipt that changes nothing emits none)."""
OPT_OUT_REASON = "Replied {word} by SMS"


def check_body(body: str) -> str:
    """1 to 1600 characters, not only blanks, without NUL characters (400 naming ``body``)."""
    if not body.strip():
        raise ValidationFailed.field("body", "must not be empty")
    if len(body) > BODY_MAX_LENGTH:
        raise ValidationFailed.field("body", f"must be at most {BODY_MAX_LENGTH} characters")
    if "\x00" in body:
        raise ValidationFailed.field("body", "must not contain NUL characters")
    return body


@dataclass(frozen=True, slots=True)
class SendSmsCommand:
    actor: Actor
    to: str
    body: str
    from_phone_number_id: int | None = None


class SendSms:
    """POST /sms: the recipient checked by the one gate (outside the dialing policy: destination_not_allowed; a DNC
    list: dnc_blocked; the SMS opt-out list: recipient_opted_out; screening impossible: 503 and nothing sent), the
    message stored as queued and handed to the carrier. Its receipts arrive later (the ``sms.receipts`` job)."""

    def __init__(self, uow: UnitOfWork, cause: CauseContext, messages: SmsRepository, numbers: PhoneNumberRepository,
                 carrier: SmsCarrier, dnc: DncGate, phones: PhoneNormalizer, clock: Clock, quota: QuotaGate,
                 usage: UsageRecorder, providers: TelephonyProviderRepository, carriers: Carriers,
                 accounts: CarrierAccounts, links: CarrierLinks) -> None:
        self.uow, self.cause, self.messages, self.numbers, self.carrier = uow, cause, messages, numbers, carrier
        self.dnc, self.phones, self.clock, self.quota, self.usage = dnc, phones, clock, quota, usage
        self.providers, self.carriers, self.accounts, self.links = providers, carriers, accounts, links

    async def execute(self, command: SendSmsCommand) -> SmsMessage:
        org = command.actor.organization_id
        to = e164(self.phones, command.to, "to")
        body = check_body(command.body)
        sender = await self._sender(org, command.from_phone_number_id)
        provider = await self.providers.get(org, sender.provider_id) if sender is not None else None
        # a provider of a type Parley has no adapter for (vonage, sip) sends nothing: the message fails, as its
        # calls do (provider_not_supported), rather than pass through the simulator as if it had gone out
        unsupported = provider is not None and not is_carrier(provider.type) and \
            provider.type not in SIMULATED_PROVIDER_TYPES
        if provider is not None and not is_carrier(provider.type):
            provider = None
        if provider is not None:  # the carrier's receipts come back at the public URL
            self.links.require()
        await self.dnc.ensure_sendable(org, to)  # the destination policy, DNC lists and STOP replies
        seg = segment(body)
        now = self.clock.now()
        message = await self.messages.add(SmsMessage(
            id=None, organization_id=org, direction="outbound",
            from_phone=sender.phone_number if sender else SIMULATOR_CALLER_ID, to_phone=to, body=body,
            status=SmsStatus.QUEUED, encoding=seg.encoding, segments=seg.segments, created_at=now, updated_at=now,
            from_phone_number_id=sender.id if sender else None, status_events=(StatusEvent(SmsStatus.QUEUED, now),),
            cause_depth=self.cause.depth))  # a trigger's action: its receipts' events, later, keep the depth
        if unsupported:  # nothing goes out, so nothing is counted against the quota or billed
            failed = _apply(self.uow, message, [CarrierReceipt("", "failed", now, "provider_not_supported")])
            return await self.messages.update(failed)
        # the one quota gate, then the ledger, in this transaction: refused → nothing stored, nothing sent
        await self.quota.admit(org, SMS_SEGMENTS, f"sms:{message.id}", seg.segments, now)
        await self.usage.record(org, SMS_SEGMENTS, seg.segments, now, f"sms:{message.id}")
        if provider is not None:
            return await self._through_carrier(message, provider, now)
        submitted = await self.carrier.send(OutboundSms(
            org, persisted(message.id), message.from_phone, to, body, seg.encoding, seg.segments), now)
        message = await self.messages.update(replace(
            message, carrier_id=submitted.carrier_id, carrier_state=dict(submitted.state),
            next_check_at=submitted.next_check_at))
        self.uow.created_work()  # the receipts job looks at it
        return message

    async def _through_carrier(self, message: SmsMessage, provider: TelephonyProvider, now: datetime) -> SmsMessage:
        """Hand the message to a carrier provider: its id kept for the receipts its webhook brings; a refusal fails
        the message (``sms.failed``, the carrier's code); a request without an answer leaves it queued (it may have
        gone: it is never sent twice)."""
        try:
            carrier_id = await self.carriers.get(provider.type).send_sms(
                self.accounts.open(provider), message.from_phone, message.to_phone, message.body,
                self.links.sms(persisted(provider.id)))
        except CarrierAmbiguous as exc:
            log.warning("sms %s: no answer from the carrier (%s); it stays queued, never sent twice", message.id, exc)
            return message
        except CarrierError as exc:
            code = exc.code or (str(exc.status) if exc.status else "carrier_error")  # kept to its length by receive
            failed = _apply(self.uow, message, [CarrierReceipt("", "failed", now, code)])
            return await self.messages.update(failed)
        except KeyError:
            raise NotFound("carrier adapter for provider type", provider.type) from None
        return await self.messages.update(replace(message, carrier_id=carrier_id, next_check_at=None))

    async def _sender(self, org: int, number_id: int | None) -> PhoneNumber | None:
        """The number it is sent from: the one asked for (an active SMS number of the organization), else the
        organization's first active SMS number, else None (the simulator's caller id)."""
        if number_id is not None:
            number = await self.numbers.get(org, number_id)
            if number is None:
                raise NotFound("phone number", number_id, field="from_phone_number_id")
            if not number.sms or number.status != PhoneNumberStatus.ACTIVE:
                raise ValidationFailed.field("from_phone_number_id",
                                             "must be an active phone number with sms enabled")
            return number
        return next((n for n in await self.numbers.list(org) if n.sms and n.status == PhoneNumberStatus.ACTIVE), None)


@dataclass(frozen=True, slots=True)
class GetSmsCommand:
    actor: Actor
    message_id: int


class GetSms:
    def __init__(self, messages: SmsRepository) -> None:
        self.messages = messages

    async def execute(self, command: GetSmsCommand) -> SmsMessage:
        found = await self.messages.get(command.actor.organization_id, command.message_id)
        if found is None:
            raise NotFound("sms", command.message_id)
        return found


@dataclass(frozen=True, slots=True)
class ListSmsCommand:
    actor: Actor
    filters: SmsFilter
    page: PageRequest


class ListSms:
    def __init__(self, messages: SmsRepository, phones: PhoneNormalizer) -> None:
        self.messages, self.phones = messages, phones

    async def execute(self, command: ListSmsCommand) -> Page[SmsMessage]:
        filters = command.filters
        check_created_window(filters.created_after, filters.created_before)
        if filters.to is not None:
            filters = replace(filters, to=e164(self.phones, filters.to, "to"))
        return await self.messages.list(command.actor.organization_id, filters, command.page)


# ------------------------------------------------------------------------------------------ carrier receipts


def _apply(uow: UnitOfWork, message: SmsMessage, receipts: list[CarrierReceipt]) -> SmsMessage:
    """The receipts applied; each one that moves the status records its event, as deep as the trigger action that
    sent the message (the loop guard's depth: a trigger on sms.sent that texts stops at the guard)."""
    for receipt in receipts:
        message, moved = message.receive(receipt.status, receipt.at, receipt.error_code)
        if moved:
            event = RECEIPT_EVENTS[receipt.status](message.organization_id, message.view())
            uow.record(replace(event, depth=message.cause_depth) if message.cause_depth else event)
    return message


@dataclass(frozen=True, slots=True)
class ApplySmsReceiptCommand:
    receipt: CarrierReceipt


class ApplySmsReceipt:
    """One carrier receipt, as a carrier's status callback delivers it: kept in the message's status_events,
    and moving its status only forward (an out-of-order or late receipt changes nothing else)."""

    def __init__(self, uow: UnitOfWork, messages: SmsRepository, clock: Clock) -> None:
        self.uow, self.messages, self.clock = uow, messages, clock

    async def execute(self, command: ApplySmsReceiptCommand) -> SmsMessage:
        receipt = command.receipt
        message = await self.messages.find_by_carrier_id(receipt.carrier_id)
        if message is None:
            raise NotFound("sms with carrier id", receipt.carrier_id)
        return await self.messages.update(_apply(self.uow, message, [receipt]))


@dataclass(frozen=True, slots=True)
class PollSmsCarrierCommand:
    ref: MessageRef


class PollSmsCarrier:
    """The ``sms.receipts`` job's step for one message: the receipts its carrier produced by now, applied in the
    order they came."""

    def __init__(self, uow: UnitOfWork, messages: SmsRepository, carrier: SmsCarrier, clock: Clock) -> None:
        self.uow, self.messages, self.carrier, self.clock = uow, messages, carrier, clock

    async def execute(self, command: PollSmsCarrierCommand) -> SmsMessage | None:
        ref = command.ref
        message = await self.messages.get(ref.organization_id, ref.message_id, for_update=True)
        if message is None or message.carrier_id is None or message.next_check_at is None:
            return None
        news = await self.carrier.poll(message.carrier_id, dict(message.carrier_state), self.clock.now())
        message = _apply(self.uow, message, news.receipts)
        return await self.messages.update(replace(message, carrier_state=news.state,
                                                  next_check_at=news.next_check_at))


RECEIPTS_JOB = "sms.receipts"
RECEIPTS_BATCH = 500
"""Messages polled per pass (at most); a full pass is followed by another at once."""
RECEIPTS_RECHECK = timedelta(seconds=15)
"""With nothing due, the job looks again after this (a message sent through another process on SQLite)."""


async def receipts_once(units: Units) -> int:
    """One pass of ``sms.receipts``: every message whose carrier has news by now (``RECEIPTS_BATCH`` at most), each
    polled in a unit of work of its own (a failing one never holds back the others); returns how many were
    polled."""

    async def due(unit: Unit) -> list[MessageRef]:
        return await (await unit.get(SmsRepository)).due((await unit.get(Clock)).now(), RECEIPTS_BATCH)

    polled = 0
    for ref in await units.read(due):
        try:
            await units.execute(PollSmsCarrier, PollSmsCarrierCommand(ref))
            polled += 1
        except Exception:
            log.exception("applying the carrier receipts of sms %s failed", ref.message_id)
    return polled


def receipts_job(units: Units) -> JobKind:
    """The carrier's receipts as a recurring job: passes while a pass came back full, then due again when the next
    message has news (or on the next ``RECEIPTS_RECHECK`` beat); a commit that sent a message wakes it."""

    async def next_due(unit: Unit) -> tuple[datetime | None, datetime]:
        return await (await unit.get(SmsRepository)).next_due(), (await unit.get(Clock)).now()

    async def poll(job: ClaimedJob) -> datetime:
        await drain_batches(lambda: receipts_once(units), RECEIPTS_BATCH)
        due, now = await units.read(next_due)
        return due_or_beat(due, now, RECEIPTS_RECHECK)

    return JobKind(RECEIPTS_JOB, poll, on_wake=True, recurring=True)


# ------------------------------------------------------------------------------------------------- inbound


@dataclass(frozen=True, slots=True)
class ReceiveSmsCommand:
    actor: Actor
    from_phone: str
    to: str
    body: str


@dataclass(frozen=True, slots=True)
class ReceivedSms:
    message: SmsMessage
    keyword: str | None
    """``stop`` (the sender was added to the opt-out list), ``start`` (removed from it) or None."""


class ReceiveSms:
    """An inbound SMS (the simulator's endpoint stands for a carrier's inbound webhook) on one of the
    organization's SMS-capable numbers (another number: 404; one with ``sms`` off: 422 sms_not_enabled), or on the
    simulator's shared sender when the organization is the one that last texted the author from it (so a reply
    to a message sent without a number of its own reaches it): stored as ``received``; a whole-message STOP
    keyword (``domain.sms.keyword``) puts the sender on the organization's "SMS opt-outs" DNC list (made on first
    use), START removes it; ``sms.received``."""

    def __init__(self, uow: UnitOfWork, messages: SmsRepository, numbers: PhoneNumberRepository,
                 dnc: DncRepository, phones: PhoneNormalizer, clock: Clock) -> None:
        self.uow, self.messages, self.numbers, self.dnc = uow, messages, numbers, dnc
        self.phones, self.clock = phones, clock

    async def execute(self, command: ReceiveSmsCommand) -> ReceivedSms:
        org = command.actor.organization_id
        sender = e164(self.phones, command.from_phone, "from")
        to = e164(self.phones, command.to, "to")
        body = check_body(command.body)
        number_id = await self._receiving_number(org, sender, to)
        now = self.clock.now()
        seg = segment(body)
        message = await self.messages.add(SmsMessage(
            id=None, organization_id=org, direction="inbound", from_phone=sender, to_phone=to, body=body,
            status=SmsStatus.RECEIVED, encoding=seg.encoding, segments=seg.segments, created_at=now, updated_at=now,
            from_phone_number_id=number_id, status_events=(StatusEvent(SmsStatus.RECEIVED, now),)))
        word = keyword(body)
        if word == "stop":
            await self._opt_out(org, sender, keyword_text(body), now)
        elif word == "start":
            await self._opt_in(org, sender, now)
        self.uow.record(EventType.SMS_RECEIVED(org, {**message.view(), "keyword": word}))
        return ReceivedSms(message, word)

    async def _receiving_number(self, org: int, sender: str, to: str) -> int | None:
        """The id of the organization's number ``to`` (None: the shared sender), or why it cannot receive."""
        if to == SIMULATOR_CALLER_ID:
            if await self.messages.last_texted_by(to, sender) != org:
                missing = NotFound("message to", sender, field="from")
                missing.message = (f"from: this organization sent no text to {sender} from the shared sender {to}, "
                                   "so a reply from it has nowhere to go")
                missing.args = (missing.message,)
                raise missing
            return None
        number = next((n for n in await self.numbers.list(org) if n.phone_number == to), None)
        if number is None:
            raise NotFound("phone number", to, field="to")
        if not number.sms:
            raise SmsNotEnabled(f"to: {to} is not SMS-capable (sms is false), so it cannot receive text messages; "
                                "enable sms on the number first",
                                details={"phone_number": to, "phone_number_id": number.id,
                                         "validation_errors": {"to": "is not SMS-capable"}})
        return number.id

    async def _opt_out(self, org: int, sender: str, word: str, now: datetime) -> None:
        ids = await self.messages.opt_out_list_ids(org, OPT_OUT_LIST_NAME)
        list_id = ids[0] if ids else await self.messages.ensure_opt_out_list(
            org, OPT_OUT_LIST_NAME, "Senders who replied STOP (kept by inbound SMS)", now)
        if await self.dnc.add_entries(org, list_id, [(sender, OPT_OUT_REASON.format(word=word))], now):
            await self.dnc.touch_list(org, list_id, now)

    async def _opt_in(self, org: int, sender: str, now: datetime) -> None:
        for list_id in await self.messages.opt_out_list_ids(org, OPT_OUT_LIST_NAME):
            if await self.dnc.remove_entry(org, list_id, sender):
                await self.dnc.touch_list(org, list_id, now)


# ------------------------------------------------------------------------------------------------ carrier webhook


@dataclass(frozen=True, slots=True)
class ReceiveCarrierSmsCommand:
    provider_id: int
    request: WebhookRequest


class ReceiveCarrierSms:
    """POST /carriers/{provider_id}/sms: verified first (403 otherwise); a delivery receipt moves its message
    forward only (an unknown message, a replay, a late ``sent`` after ``delivered`` change nothing); an inbound
    message goes to ``ReceiveSms`` (stored, STOP / START keep the opt-out list, ``sms.received``). Whatever the
    body holds, a verified webhook is answered 2xx (a carrier retries anything else)."""

    def __init__(self, uow: UnitOfWork, webhooks: CarrierWebhooks, messages: SmsRepository, receive: ReceiveSms,
                 clock: Clock) -> None:
        self.uow, self.webhooks, self.messages, self.receive, self.clock = uow, webhooks, messages, receive, clock

    async def execute(self, command: ReceiveCarrierSmsCommand) -> SmsMessage | None:
        verified = await self.webhooks.verify(command.provider_id, command.request, self.clock.now())
        update = verified.carrier.read_sms_webhook(command.request)
        org = verified.provider.organization_id
        if isinstance(update, SmsReceipt):
            message = await self.messages.find_by_carrier_id(update.carrier_message_id)
            if message is None or message.organization_id != org:
                log.info("carrier receipt for an unknown message %s: nothing to change", update.carrier_message_id)
                return None
            if SmsStatus(update.status) is SmsStatus.QUEUED:
                return message
            receipt = CarrierReceipt(update.carrier_message_id, update.status, update.at, update.error_code)
            return await self.messages.update(_apply(self.uow, message, [receipt]))
        if isinstance(update, InboundSms):
            seen = await self.messages.find_by_carrier_id(update.carrier_message_id)
            if seen is not None and seen.organization_id == org:  # the carrier sent it again: kept once
                return seen
            try:
                received = await self.receive.execute(ReceiveSmsCommand(
                    Actor.system(org), update.from_phone, update.to_phone, update.body))
            except DomainError as refused:
                log.info("inbound sms to %s not kept: %s", update.to_phone, refused.message)
                return None
            return await self.messages.update(replace(received.message, carrier_id=update.carrier_message_id))
        return None
