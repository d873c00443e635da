"""SMS use cases on the memory backend: a message sent is stored queued and its carrier receipts move it forward
only (each move one event, an out-of-order receipt kept but changing nothing), the one DNC gate refuses listed
and opted-out recipients with nothing stored, the sender must be an active SMS number of the organization, and
inbound STOP / START keep the organization's opt-out list."""

from __future__ import annotations

from datetime import timedelta

import pytest

from application.context import Actor
from application.dnc import AddDncEntries, AddDncEntriesCommand, CreateDncList, CreateDncListCommand
from application.ports.platform import PageRequest
from application.ports.sms import CarrierReceipt, SmsFilter, SmsRepository
from application.sms import (
    ApplySmsReceipt,
    ApplySmsReceiptCommand,
    GetSms,
    GetSmsCommand,
    ListSms,
    ListSmsCommand,
    PollSmsCarrier,
    PollSmsCarrierCommand,
    ReceiveSms,
    ReceiveSmsCommand,
    SendSms,
    SendSmsCommand,
)
from application.telephony import CreatePhoneNumber, CreatePhoneNumberCommand
from domain.calls import SIMULATOR_CALLER_ID
from domain.errors import DncBlocked, NotFound, ValidationFailed
from domain.sms import SIMULATOR_FAILED, RecipientOptedOut, SmsNotEnabled
from tests.application.conftest import App


async def poll(app: App) -> int:
    """What the ``sms.receipts`` job does on one pass: every message with news at the clock's time, polled."""
    async with app.container() as r:
        due = await (await r.get(SmsRepository)).due(app.clock.now(), 100)
    for ref in due:
        await app.run(PollSmsCarrier, PollSmsCarrierCommand(ref))
    return len(due)


async def sms_events(app: App, actor: Actor) -> list[tuple[str, int, str]]:
    return [(kind, data["id"], data["status"]) for kind, data in await app.events(actor.organization_id)
            if kind.startswith("sms.")]


async def number(app: App, actor: Actor, phone: str, *, sms: bool = True) -> int:
    created = await app.run(CreatePhoneNumber, CreatePhoneNumberCommand(actor, phone, sms=sms))
    return int(created.id)


async def test_a_sent_message_moves_forward_with_its_receipts_one_event_per_move(app: App) -> None:
    actor = await app.actor()
    sent = await app.run(SendSms, SendSmsCommand(actor, "+1 415 555 0123", "Your table is ready."))
    assert (sent.status, sent.to_phone, sent.from_phone, sent.segments) == (
        "queued", "+14155550123", SIMULATOR_CALLER_ID, 1)
    assert await poll(app) == 0  # nothing has happened yet
    app.clock.advance(seconds=1)
    assert await poll(app) == 1
    assert (await app.run(GetSms, GetSmsCommand(actor, sent.id))).status == "sent"
    app.clock.advance(seconds=2)
    await poll(app)
    done = await app.run(GetSms, GetSmsCommand(actor, sent.id))
    assert done.status == "delivered" and [e.status for e in done.status_events] == ["queued", "sent", "delivered"]
    assert await sms_events(app, actor) == [("sms.sent", sent.id, "sent"), ("sms.delivered", sent.id, "delivered")]
    assert await poll(app) == 0  # nothing left to report
    with pytest.raises(NotFound):
        await app.run(GetSms, GetSmsCommand(await app.actor(), sent.id))  # another organization's message


async def test_a_receipt_out_of_order_is_kept_but_never_moves_the_status_back(app: App) -> None:
    actor = await app.actor()
    sent = await app.run(SendSms, SendSmsCommand(actor, "+14155550124", "Hello"))
    async with app.container() as r:
        carrier_id = (await (await r.get(SmsRepository)).get(actor.organization_id, sent.id)).carrier_id
    start = sent.created_at
    await app.run(ApplySmsReceipt, ApplySmsReceiptCommand(
        CarrierReceipt(carrier_id, "delivered", start + timedelta(seconds=3))))
    late = await app.run(ApplySmsReceipt, ApplySmsReceiptCommand(
        CarrierReceipt(carrier_id, "failed", start + timedelta(seconds=4), "30008")))
    assert (late.status, late.error_code) == ("delivered", None)
    assert [(e.status, e.applied) for e in late.status_events] == [
        ("queued", True), ("delivered", True), ("failed", False)]
    assert [kind for kind, _, _ in await sms_events(app, actor)] == ["sms.delivered"]  # only moves emit events
    with pytest.raises(NotFound):
        await app.run(ApplySmsReceipt, ApplySmsReceiptCommand(CarrierReceipt("SMunknown", "sent", start)))


async def test_a_refused_send_by_the_carrier_fails_with_its_error_code(app: App) -> None:
    actor = await app.actor()
    sent = await app.run(SendSms, SendSmsCommand(actor, SIMULATOR_FAILED, "Hello"))
    app.clock.advance(seconds=5)
    await poll(app)
    failed = await app.run(GetSms, GetSmsCommand(actor, sent.id))
    assert (failed.status, failed.error_code) == ("failed", "30008")
    assert await sms_events(app, actor) == [("sms.failed", sent.id, "failed")]


async def test_the_gate_refuses_listed_and_opted_out_recipients_and_nothing_is_stored(app: App) -> None:
    actor = await app.actor()
    dnc = await app.run(CreateDncList, CreateDncListCommand(actor, "Do not text"))
    await app.run(AddDncEntries, AddDncEntriesCommand(actor, dnc.id, ("+14155550130",)))
    with pytest.raises(DncBlocked):
        await app.run(SendSms, SendSmsCommand(actor, "+14155550130", "Hello"))
    own = await number(app, actor, "+14155550140")
    stop = await app.run(ReceiveSms, ReceiveSmsCommand(actor, "+14155550131", "+14155550140", " stop "))
    assert (stop.keyword, stop.message.status, stop.message.from_phone_number_id) == ("stop", "received", own)
    with pytest.raises(RecipientOptedOut):
        await app.run(SendSms, SendSmsCommand(actor, "+14155550131", "Hello again"))
    listed = await app.run(ListSms, ListSmsCommand(actor, SmsFilter(direction="outbound"), PageRequest()))
    assert listed.items == []
    start = await app.run(ReceiveSms, ReceiveSmsCommand(actor, "+14155550131", "+14155550140", "START"))
    assert start.keyword == "start"
    back = await app.run(SendSms, SendSmsCommand(actor, "+14155550131", "Welcome back"))
    assert back.status == "queued" and back.from_phone_number_id == own  # the organization's own SMS number
    assert [kind for kind, _ in await app.events(actor.organization_id) if kind == "sms.received"] == [
        "sms.received", "sms.received"]


async def test_the_sender_must_be_an_active_sms_number_of_the_organization(app: App) -> None:
    actor = await app.actor()
    voice_only = await number(app, actor, "+14155550150", sms=False)
    with pytest.raises(ValidationFailed) as refused:
        await app.run(SendSms, SendSmsCommand(actor, "+14155550151", "Hi", from_phone_number_id=voice_only))
    assert "from_phone_number_id" in str(refused.value)
    other = await number(app, await app.actor(), "+14155550152")
    with pytest.raises(NotFound):
        await app.run(SendSms, SendSmsCommand(actor, "+14155550151", "Hi", from_phone_number_id=other))
    for body in ("   ", "x" * 1601, "a\x00b"):
        with pytest.raises(ValidationFailed):
            await app.run(SendSms, SendSmsCommand(actor, "+14155550151", body))
    assert (await app.run(ListSms, ListSmsCommand(actor, SmsFilter(), PageRequest()))).items == []


async def test_inbound_reaches_only_an_sms_number_or_a_shared_sender_that_texted_the_author(app: App) -> None:
    actor = await app.actor()
    await number(app, actor, "+14155550160", sms=False)
    with pytest.raises(SmsNotEnabled):
        await app.run(ReceiveSms, ReceiveSmsCommand(actor, "+14155550161", "+14155550160", "Hi"))
    with pytest.raises(NotFound):
        await app.run(ReceiveSms, ReceiveSmsCommand(actor, "+14155550161", "+14155550169", "Hi"))
    with pytest.raises(NotFound):  # the shared sender never texted this author for the organization
        await app.run(ReceiveSms, ReceiveSmsCommand(actor, "+14155550161", SIMULATOR_CALLER_ID, "Hi"))
    await app.run(SendSms, SendSmsCommand(actor, "+14155550161", "Your order shipped"))
    reply = await app.run(ReceiveSms, ReceiveSmsCommand(actor, "+14155550161", SIMULATOR_CALLER_ID, "STOP"))
    assert (reply.keyword, reply.message.from_phone_number_id) == ("stop", None)
    with pytest.raises(RecipientOptedOut):
        await app.run(SendSms, SendSmsCommand(actor, "+14155550161", "One more thing"))
