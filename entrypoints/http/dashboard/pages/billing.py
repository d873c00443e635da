"""Billing: the plan and the subscription's status, payment methods (added from a gateway test token, made the
default, removed: a page asks first, ``GET .../remove``, whose form sends ``confirm``; a post without it shows that
page again and changes nothing), invoices (the list, an invoice's lines, "pay now" for an open one) and the
upcoming invoice, through the billing use cases of ``/billing``. Money is integer cents, shown in dollars by the
``dollars`` filter."""

from __future__ import annotations

from typing import Any

from dishka import FromDishka
from litestar import Request
from litestar.response import Response, Template

from application import billing as uc
from application.ports.platform import PageRequest
from domain.billing import PAYABLE, InvoiceStatus
from domain.organizations import PLANS
from entrypoints.http.dashboard.pages import page
from entrypoints.http.dashboard.pages.params import PathId, page_number, pages_of
from entrypoints.http.dashboard.view import View

INVOICES = 12
CONFIRM_FIELD = "confirm"
TEST_TOKENS = (
    ("pm_card_visa", "Visa ending 4242"),
    ("pm_card_mastercard", "Mastercard ending 4444"),
    ("pm_card_chargeDeclined", "Visa ending 0002 (declines charges)"),
    ("pm_card_insufficientFunds", "Visa ending 9995 (insufficient funds)"),
)
"""The payment gateway simulator's test tokens offered by the form (a real gateway's form would tokenise)."""


class BillingPage:
    def __init__(self, subscription: uc.GetSubscription, methods: uc.ListPaymentMethods,
                 invoices: uc.ListInvoices, upcoming: uc.GetUpcomingInvoice) -> None:
        self.subscription, self.methods, self.invoices, self.upcoming = subscription, methods, invoices, upcoming

    async def context(self, view: View, number: int) -> dict[str, Any]:
        invoices = await view.run(self.invoices, lambda actor: uc.ListInvoicesCommand(
            actor, PageRequest(INVOICES, (number - 1) * INVOICES)))
        return {
            "subscription": await view.run(self.subscription, lambda actor: uc.GetSubscriptionCommand(actor)),
            "methods": await view.run(self.methods, lambda actor: uc.ListPaymentMethodsCommand(actor)),
            "invoices": invoices.items, "total": invoices.total, "page": number,
            "pages": pages_of(invoices.total, INVOICES),
            "upcoming": await view.run(self.upcoming, lambda actor: uc.GetUpcomingInvoiceCommand(actor)),
            "tokens": TEST_TOKENS, "payable": PAYABLE, "plans": PLANS,
        }



@page("GET", "/billing", section="billing", scopes=("billing:read",))
async def billing(request: Request[Any, Any, Any], subscription: FromDishka[uc.GetSubscription],
                  methods: FromDishka[uc.ListPaymentMethods], invoices: FromDishka[uc.ListInvoices],
                  upcoming: FromDishka[uc.GetUpcomingInvoice]) -> Template:
    view = View.of(request)
    shown = BillingPage(subscription, methods, invoices, upcoming)
    return view.page("billing.html", **await shown.context(view, page_number(request)))


@page("POST", "/billing/payment-methods",
      operation="createPaymentMethod", section="billing", sudo=True, scopes=("billing:write",))
async def add_method(request: Request[Any, Any, Any], use_case: FromDishka[uc.AddPaymentMethod],
                     subscription: FromDishka[uc.GetSubscription], methods: FromDishka[uc.ListPaymentMethods],
                     invoices: FromDishka[uc.ListInvoices], upcoming: FromDishka[uc.GetUpcomingInvoice]
                     ) -> Response[Any] | Template:
    view = View.of(request)
    shown = BillingPage(subscription, methods, invoices, upcoming)
    return await view.submit(
        use_case, lambda actor, form: uc.AddPaymentMethodCommand(actor, form.get("token", "")),
        template="billing.html", context=lambda: shown.context(view, 1),
        done=lambda added: view.redirect(
            "/billing", f"Added {added.method.brand.capitalize()} ending {added.method.last4}"))


@page("POST", "/billing/payment-methods/{method_id:int}/default",
      operation="setDefaultPaymentMethod", section="billing", sudo=True,
      scopes=("billing:write",))
async def set_default(request: Request[Any, Any, Any], method_id: PathId,
                      use_case: FromDishka[uc.SetDefaultPaymentMethod]) -> Response[Any]:
    view = View.of(request)
    made = await view.run(use_case, lambda actor: uc.PaymentMethodCommand(actor, method_id))
    return view.redirect("/billing", f"{made.method.brand.capitalize()} ending {made.method.last4} is the default")


REMOVE = "remove"
"""The ``confirm`` field's value that removes a payment method (without it the post asks first)."""


async def _removal(view: View, getting: uc.GetPaymentMethod, method_id: int) -> Template:
    """The page that asks before removing a payment method of the organization (404 for another's)."""
    shown = await view.run(getting, lambda actor: uc.PaymentMethodCommand(actor, method_id))
    card = f"{shown.method.brand.capitalize()} ending {shown.method.last4}"
    return view.page(
        "confirm.html", heading=f"Remove the {card}?", back="/billing", back_label="Billing",
        details=f"{card}, expires {shown.method.exp_month:02d}/{shown.method.exp_year}"
                + (" · the default" if shown.is_default else ""),
        warning="The card is detached from the payment gateway and cannot pay invoices any more.",
        note=("The oldest other card becomes the default; with none left, invoices wait until a card is added."
              if shown.is_default else "Add it again to use it again."),
        action=f"/billing/payment-methods/{method_id}/remove", confirm=REMOVE, button="Remove the card")


@page("GET", "/billing/payment-methods/{method_id:int}/remove", section="billing", scopes=("billing:write",))
async def confirm_remove_method(request: Request[Any, Any, Any], method_id: PathId,
                                getting: FromDishka[uc.GetPaymentMethod]) -> Template:
    return await _removal(View.of(request), getting, method_id)


@page("POST", "/billing/payment-methods/{method_id:int}/remove",
      operation="deletePaymentMethod", section="billing", sudo=True,
      scopes=("billing:write",))
async def remove_method(request: Request[Any, Any, Any], method_id: PathId,
                        use_case: FromDishka[uc.DeletePaymentMethod],
                        getting: FromDishka[uc.GetPaymentMethod]) -> Response[Any] | Template:
    view = View.of(request)
    if (await view.form()).get(CONFIRM_FIELD) != REMOVE:
        return await _removal(view, getting, method_id)
    await view.run(use_case, lambda actor: uc.PaymentMethodCommand(actor, method_id))
    return view.redirect("/billing", "Payment method removed")


@page("GET", "/billing/invoices/{invoice_id:int}", section="billing", scopes=("billing:read",))
async def invoice(request: Request[Any, Any, Any], invoice_id: PathId, use_case: FromDishka[uc.GetInvoice]
                  ) -> Template:
    view = View.of(request)
    found = await view.run(use_case, lambda actor: uc.GetInvoiceCommand(actor, invoice_id))
    return view.page("invoice.html", invoice=found, payable=PAYABLE)


@page("GET", "/billing/invoices/{invoice_id:int}/pdf", section="billing", scopes=("billing:read",))
async def invoice_pdf(request: Request[Any, Any, Any], invoice_id: PathId, use_case: FromDishka[uc.GetInvoicePdf]
                      ) -> Response[bytes]:
    """The invoice's PDF (``GET /billing/invoices/{id}/pdf``) of the organization the pages act in: a client's
    while a partner's session works in it."""
    view = View.of(request)
    pdf = await view.run(use_case, lambda actor: uc.GetInvoiceCommand(actor, invoice_id))
    return Response(pdf.content, media_type="application/pdf",
                    headers={"Content-Disposition": f'inline; filename="{pdf.number}.pdf"'})


@page("POST", "/billing/invoices/{invoice_id:int}/pay",
      operation="payInvoice", section="billing", sudo=True, scopes=("billing:write",))
async def pay(request: Request[Any, Any, Any], invoice_id: PathId, use_case: FromDishka[uc.PayInvoice],
              getting: FromDishka[uc.GetInvoice]) -> Response[Any] | Template:
    view = View.of(request)

    async def context() -> dict[str, Any]:
        found = await view.run(getting, lambda actor: uc.GetInvoiceCommand(actor, invoice_id))
        return {"invoice": found, "payable": PAYABLE}

    def done(paid: Any) -> Response[Any] | Template:
        if paid.status == InvoiceStatus.PAID:
            return view.redirect(f"/billing/invoices/{invoice_id}", f"Invoice {paid.number} paid")
        if (paid.next_action_url or "").startswith(("https://", "http://")):
            # 3-D Secure: the holder confirms the charge at the bank (the gateway's page), then pays again
            return view.page("invoice.html", invoice=paid, payable=PAYABLE, next_action_url=paid.next_action_url)
        return view.redirect(f"/billing/invoices/{invoice_id}",
                             f"The payment was declined ({paid.last_payment_error or 'declined'})")

    return await view.submit(use_case, lambda actor, form: uc.PayInvoiceCommand(actor, invoice_id),
                             template="invoice.html", context=context, done=done)


@page("POST", "/billing/subscription/reactivate",
      operation="reactivateSubscription", section="billing", sudo=True, scopes=("billing:write",))
async def reactivate(request: Request[Any, Any, Any], use_case: FromDishka[uc.UpdateSubscription],
                     subscription: FromDishka[uc.GetSubscription], methods: FromDishka[uc.ListPaymentMethods],
                     invoices: FromDishka[uc.ListInvoices], upcoming: FromDishka[uc.GetUpcomingInvoice]
                     ) -> Response[Any] | Template:
    """A canceled subscription back with a plan, charged at once for the rest of the period (the banner's fix)."""
    view = View.of(request)
    shown = BillingPage(subscription, methods, invoices, upcoming)
    return await view.submit(
        use_case, lambda actor, form: uc.UpdateSubscriptionCommand(actor, {"plan": form.get("plan", "")}),
        template="billing.html", context=lambda: shown.context(view, 1),
        done=lambda s: view.redirect("/billing", f"Subscription reactivated on the {s.plan} plan"))


HANDLERS = [billing, add_method, set_default, confirm_remove_method, remove_method, invoice, invoice_pdf, pay,
            reactivate]
