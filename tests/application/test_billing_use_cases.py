"""Billing on the memory backend, besides plan changes (tests/application/test_plan_changes_use_cases.py): payment
methods from gateway tokens (the first is the default, deleting the default hands it to the oldest left), the
period close invoicing each organization once and canceling subscriptions set to end, and collection: a decline
makes the subscription past_due and is retried after 1, 3 and 5 days, then uncollectible; a payment settles it;
paying needs a payable invoice."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.memory.store import InMemoryStore
from application import billing as uc
from application.context import Actor
from domain.errors import InvalidTransition, NotFound, ValidationFailed
from tests.application.test_plan_changes_use_cases import Billing, make_billing

FEB_1 = datetime(2026, 2, 1, tzinfo=UTC)


@pytest.fixture
async def billing(tmp_path: Path) -> Any:
    made = make_billing(tmp_path, datetime(2026, 1, 20, 9, tzinfo=UTC))
    yield made
    await made.container.close()


async def methods(billing: Billing, actor: Actor) -> list[tuple[str, bool]]:
    return [(m.method.brand, m.is_default)
            for m in await billing.run(uc.ListPaymentMethods, uc.ListPaymentMethodsCommand(actor))]


async def collect(billing: Billing) -> int:
    return await billing.run(uc.CollectDueInvoices, uc.CollectDueInvoicesCommand())  # type: ignore[no-any-return]


async def subscription_status(billing: Billing, actor: Actor) -> str:
    return (await billing.run(uc.GetSubscription, uc.GetSubscriptionCommand(actor))).status  # type: ignore[no-any-return]


async def january_invoice(billing: Billing, actor: Actor) -> Any:
    """The period closes on February 1st and its invoice is charged at once, as the worker does."""
    billing.clock.set(FEB_1)
    await billing.close()
    await collect(billing)
    [invoice] = await billing.invoices(actor)
    return invoice


async def test_the_first_method_is_the_default_and_deleting_the_default_hands_it_on(billing: Billing) -> None:
    actor = await billing.organization("business")
    await billing.card(actor)
    await billing.card(actor, "pm_card_mastercard")
    assert await methods(billing, actor) == [("visa", True), ("mastercard", False)]
    [visa, master] = await billing.run(uc.ListPaymentMethods, uc.ListPaymentMethodsCommand(actor))
    made = await billing.run(uc.SetDefaultPaymentMethod, uc.PaymentMethodCommand(actor, master.method.id))
    assert made.is_default and await methods(billing, actor) == [("visa", False), ("mastercard", True)]
    await billing.run(uc.DeletePaymentMethod, uc.PaymentMethodCommand(actor, master.method.id))
    assert await methods(billing, actor) == [("visa", True)]
    assert (await billing.run(uc.GetSubscription, uc.GetSubscriptionCommand(actor))).default_payment_method_id == (
        visa.method.id)
    other = await billing.organization("business")
    for case in (uc.GetPaymentMethod, uc.SetDefaultPaymentMethod, uc.DeletePaymentMethod):
        with pytest.raises(NotFound):  # another organization's method, or a deleted one
            await billing.run(case, uc.PaymentMethodCommand(other, visa.method.id))
        with pytest.raises(NotFound):
            await billing.run(case, uc.PaymentMethodCommand(actor, master.method.id))


async def test_a_decline_is_past_due_and_retried_after_1_3_and_5_days_then_uncollectible(billing: Billing) -> None:
    actor = await billing.organization("starter")
    await billing.card(actor, "pm_card_insufficientFunds")
    invoice = await january_invoice(billing, actor)
    assert (invoice.status, invoice.attempt_count, invoice.last_payment_error) == ("open", 1, "insufficient_funds")
    assert await subscription_status(billing, actor) == "past_due"
    attempts = []
    for days in (1, 3, 5):
        attempts.append(invoice.next_payment_attempt)
        billing.clock.advance(days=days)
        assert await collect(billing) == 1
        [invoice] = await billing.invoices(actor)
    assert attempts == [FEB_1 + timedelta(days=1), FEB_1 + timedelta(days=4), FEB_1 + timedelta(days=9)]
    assert (invoice.status, invoice.attempt_count, invoice.next_payment_attempt) == ("uncollectible", 4, None)
    billing.clock.advance(days=10)
    assert await collect(billing) == 0  # nothing retries an uncollectible invoice by itself

    await billing.card(actor)
    [_, visa] = await billing.run(uc.ListPaymentMethods, uc.ListPaymentMethodsCommand(actor))
    await billing.run(uc.SetDefaultPaymentMethod, uc.PaymentMethodCommand(actor, visa.method.id))
    paid = await billing.run(uc.PayInvoice, uc.PayInvoiceCommand(actor, invoice.id))
    assert (paid.status, paid.attempt_count, paid.last_payment_error) == ("paid", 5, None)
    assert await subscription_status(billing, actor) == "active"
    with pytest.raises(InvalidTransition):  # a paid invoice is not paid again
        await billing.run(uc.PayInvoice, uc.PayInvoiceCommand(actor, invoice.id))
    assert len([c for c in billing.gateway.charges if c.idempotency_key.startswith(f"invoice_{invoice.id}_")]) == 5


async def test_a_retry_on_a_working_card_pays_and_the_subscription_is_active_again(billing: Billing) -> None:
    actor = await billing.organization("business")
    await billing.card(actor, "pm_card_chargeDeclined")
    invoice = await january_invoice(billing, actor)
    assert invoice.last_payment_error == "card_declined"
    await billing.card(actor)
    [_, visa] = await billing.run(uc.ListPaymentMethods, uc.ListPaymentMethodsCommand(actor))
    await billing.run(uc.SetDefaultPaymentMethod, uc.PaymentMethodCommand(actor, visa.method.id))
    billing.clock.advance(hours=23)
    assert await collect(billing) == 0  # not due yet
    billing.clock.advance(hours=1)
    assert await collect(billing) == 1
    [paid] = await billing.invoices(actor)
    assert (paid.status, paid.paid_at, paid.attempt_count) == ("paid", FEB_1 + timedelta(days=1), 2)
    assert await subscription_status(billing, actor) == "active"


async def test_paying_without_a_method_keeps_the_invoice_open_on_its_schedule(billing: Billing) -> None:
    actor = await billing.organization("enterprise")
    invoice = await january_invoice(billing, actor)
    assert (invoice.status, invoice.last_payment_error) == ("open", "no_payment_method")
    again = await billing.run(uc.PayInvoice, uc.PayInvoiceCommand(actor, invoice.id))
    assert (again.status, again.attempt_count) == ("open", 2)
    assert again.next_payment_attempt == invoice.next_payment_attempt  # a manual attempt keeps the schedule
    with pytest.raises(NotFound):
        await billing.run(uc.PayInvoice, uc.PayInvoiceCommand(await billing.organization("business"), invoice.id))


async def test_the_close_invoices_once_and_cancels_subscriptions_set_to_end(billing: Billing) -> None:
    actor = await billing.organization("business")
    await billing.card(actor)
    await billing.change(actor, cancel_at_period_end=True)
    with pytest.raises(ValidationFailed):  # January has not ended
        await billing.close()
    billing.clock.set(FEB_1)
    await billing.close()
    await billing.close()  # a second closer finds nothing left to invoice
    await collect(billing)
    assert [i.status for i in await billing.invoices(actor)] == ["paid"]
    assert await subscription_status(billing, actor) == "canceled"
    assert (await billing.events(actor))[-1]["status"] == "canceled"  # subscription.updated
    with pytest.raises(InvalidTransition):  # only a plan reactivates it
        await billing.change(actor, cancel_at_period_end=False)
    billing.clock.set(datetime(2026, 3, 1, tzinfo=UTC))
    await billing.close("2026-02")  # a canceled subscription is not invoiced again
    assert len(await billing.invoices(actor)) == 1


async def invoice_events(billing: Billing, actor: Actor) -> list[tuple[str, str, int, str | None]]:
    """(type, status, attempt_count, last_payment_error) of the organization's invoice.* events, in order."""
    store = await billing.container.get(InMemoryStore)
    return [(e.type, e.data["status"], e.data["attempt_count"], e.data["last_payment_error"])
            for _, e, _ in store.outbox
            if e.organization_id == actor.organization_id and e.type.startswith("invoice.")]


async def test_invoices_announce_their_creation_payment_and_failed_payments(billing: Billing) -> None:
    actor = await billing.organization("business")
    await billing.card(actor, "pm_card_chargeDeclined")
    invoice = await january_invoice(billing, actor)
    await billing.close()  # a second close of the period inserts nothing and announces nothing
    assert await invoice_events(billing, actor) == [
        ("invoice.created", "open", 0, None), ("invoice.payment_failed", "open", 1, "card_declined")]
    await billing.card(actor)
    [_, visa] = await billing.run(uc.ListPaymentMethods, uc.ListPaymentMethodsCommand(actor))
    await billing.run(uc.SetDefaultPaymentMethod, uc.PaymentMethodCommand(actor, visa.method.id))
    await billing.run(uc.PayInvoice, uc.PayInvoiceCommand(actor, invoice.id))
    store = await billing.container.get(InMemoryStore)
    [paid] = [e.data for _, e, _ in store.outbox if e.type == "invoice.paid" and e.organization_id ==
              actor.organization_id]
    assert (paid["id"], paid["number"], paid["total"], paid["kind"]) == (invoice.id, invoice.number, invoice.total,
                                                                         "period")
    assert paid["paid_at"] == "2026-02-01T00:00:00Z" and paid["currency"] == "usd"

    upgraded = await billing.organization("business")  # an upgrade's invoice: created and paid at once
    billing.clock.set(datetime(2026, 2, 20, 9, tzinfo=UTC))
    await billing.card(upgraded)
    await billing.run(uc.UpdateSubscription, uc.UpdateSubscriptionCommand(upgraded, {"plan": "enterprise"}))
    assert [(t, s) for t, s, _, _ in await invoice_events(billing, upgraded)] == [
        ("invoice.created", "paid"), ("invoice.paid", "paid")]
