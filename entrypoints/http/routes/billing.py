from __future__ import annotations

from typing import Annotated, Any

from dishka import FromDishka
from litestar import Request, Response
from litestar.params import JSONBody, PathParameter

from application import billing as uc
from application.context import Actor
from application.ports.platform import PageRequest
from domain.parsing import MAX_ID
from entrypoints.http.envelope import Envelope, ListEnvelope, ListMeta
from entrypoints.http.routing import AuthMode, Limit, Offset, endpoint
from entrypoints.http.schemas.billing import (
    GatewayEventOut,
    InvoiceOut,
    PaymentMethodCreate,
    PaymentMethodOut,
    StripeEvent,
    SubscriptionOut,
    SubscriptionUpdate,
)
from entrypoints.http.validation import set_fields

TAGS = ["Billing"]
READ, WRITE = ("billing:read",), ("billing:write",)
EITHER = AuthMode.KEY_OR_SESSION
ACCESS = "A Bearer key with {scope}, or a dashboard session. "
MethodId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="Payment method id")]
InvoiceId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="Invoice id")]


@endpoint("GET", "/billing/subscription", operation_id="getSubscription", tags=TAGS, scopes=READ, auth=EITHER,
          summary="The organization's subscription: plan, status and current period",
          description=ACCESS.format(scope="billing:read") + (
              "status is active, past_due (an invoice's charge was declined) or canceled. The period is the UTC "
              "calendar month. service_hold says why new work is refused (402 payment_required) and how to lift "
              "it; billing_mode how a partner's sub-organization is billed."))
async def get_subscription(actor: FromDishka[Actor], use_case: FromDishka[uc.GetSubscription]
                           ) -> Envelope[SubscriptionOut]:
    return Envelope(SubscriptionOut.of(await use_case.execute(uc.GetSubscriptionCommand(actor))))


@endpoint("PATCH", "/billing/subscription", operation_id="updateSubscription", tags=TAGS, scopes=WRITE, auth=EITHER,
          sudo=True,
          summary="Upgrade (at once), downgrade (at the period's end), reactivate, or cancel at the period's end",
          description=ACCESS.format(scope="billing:write") + (
              "An upgrade applies at once: it needs a default payment method, and the price difference for the "
              "days left in the period (today included) is charged at once on an invoice of its own; the new "
              "plan's limits and quotas apply from the next request. A downgrade applies when the current period "
              "ends (pending_plan); until then the plan in force, its limits and quotas stay; PATCH the plan in "
              "force to cancel it. A plan reactivates a canceled subscription (charged at once for the rest of the "
              "period). A sub-organization's plan never exceeds its parent's; a partner's plan never drops below "
              "a sub-organization's. cancel_at_period_end: the subscription is canceled when the current period "
              "closes (its invoice is still issued). billing_mode (a sub-organization's, set by its partner with "
              "X-Sub-Org-Id): partner (billed on the partner's invoice) or direct."),
          errors={400: "invalid body; billing_mode for an organization without a partner",
                  402: "payment_method_required: an upgrade or reactivation without a default payment method; "
                       "card_declined: the charge was declined (details.decline_code; authentication_required "
                       "with details.next_action_url for 3-D Secure), nothing changed",
                  403: "plan_required: the plan exceeds the parent organization's; sub_org_forbidden: billing_mode "
                       "sent by the sub-organization itself",
                  409: "invalid_transition: the subscription is canceled (send a plan to reactivate it); "
                       "children_above_plan: a sub-organization is on a higher plan"})
async def update_subscription(data: JSONBody[SubscriptionUpdate], actor: FromDishka[Actor],
                              use_case: FromDishka[uc.UpdateSubscription]) -> Envelope[SubscriptionOut]:
    subscription = await use_case.execute(uc.UpdateSubscriptionCommand(actor, set_fields(data)))
    return Envelope(SubscriptionOut.of(subscription))


@endpoint("POST", "/billing/payment-methods", operation_id="createPaymentMethod", tags=TAGS, scopes=WRITE,
          auth=EITHER, sudo=True, status_code=201, location="/billing/payment-methods/{id}",
          summary="Add a card from a payment-gateway token",
          description=ACCESS.format(scope="billing:write") + (
              "The token comes from the gateway's client-side library, so card numbers never reach Parley. The "
              "organization's first method becomes its default."),
          errors={400: "bad_request naming token: not a token the gateway knows"})
async def create_payment_method(data: JSONBody[PaymentMethodCreate], actor: FromDishka[Actor],
                                use_case: FromDishka[uc.AddPaymentMethod]) -> Response[Envelope[PaymentMethodOut]]:
    view = await use_case.execute(uc.AddPaymentMethodCommand(actor, data.token))
    return Response(Envelope(PaymentMethodOut.of(view)), status_code=201)


@endpoint("GET", "/billing/payment-methods", operation_id="listPaymentMethods", tags=TAGS, scopes=READ,
          auth=EITHER, summary="List the organization's payment methods (oldest first)",
          description=ACCESS.format(scope="billing:read") + "Brand, last four digits and expiry; never a number.")
async def list_payment_methods(actor: FromDishka[Actor], use_case: FromDishka[uc.ListPaymentMethods],
                               limit: Limit = 25, offset: Offset = 0) -> ListEnvelope[PaymentMethodOut]:
    page = PageRequest(limit, offset).slice(await use_case.execute(uc.ListPaymentMethodsCommand(actor)))
    return ListEnvelope([PaymentMethodOut.of(v) for v in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("GET", "/billing/payment-methods/{id:int}", operation_id="getPaymentMethod", tags=TAGS, scopes=READ,
          auth=EITHER, summary="Get a payment method", description=ACCESS.format(scope="billing:read"),
          errors={404: ""})
async def get_payment_method(id: MethodId, actor: FromDishka[Actor], use_case: FromDishka[uc.GetPaymentMethod]
                             ) -> Envelope[PaymentMethodOut]:
    return Envelope(PaymentMethodOut.of(await use_case.execute(uc.PaymentMethodCommand(actor, id))))


@endpoint("DELETE", "/billing/payment-methods/{id:int}", operation_id="deletePaymentMethod", tags=TAGS,
          scopes=WRITE, auth=EITHER, sudo=True, status_code=204, summary="Remove a payment method",
          description=ACCESS.format(scope="billing:write") + (
              "The card is detached at the gateway. When it was the default, the oldest remaining method becomes "
              "the default (none when it was the last)."),
          errors={404: ""})
async def delete_payment_method(id: MethodId, actor: FromDishka[Actor],
                                use_case: FromDishka[uc.DeletePaymentMethod]) -> None:
    await use_case.execute(uc.PaymentMethodCommand(actor, id))


@endpoint("POST", "/billing/payment-methods/{id:int}/default", operation_id="setDefaultPaymentMethod", tags=TAGS,
          scopes=WRITE, auth=EITHER, sudo=True, status_code=200, summary="Make a payment method the default",
          description=ACCESS.format(scope="billing:write") + "Invoices are charged on the default method.",
          errors={404: ""})
async def set_default_payment_method(id: MethodId, actor: FromDishka[Actor],
                                     use_case: FromDishka[uc.SetDefaultPaymentMethod]) -> Envelope[PaymentMethodOut]:
    return Envelope(PaymentMethodOut.of(await use_case.execute(uc.PaymentMethodCommand(actor, id))))


@endpoint("GET", "/billing/invoices", operation_id="listInvoices", tags=TAGS, scopes=READ, auth=EITHER,
          summary="List the organization's invoices (newest period first)",
          description=ACCESS.format(scope="billing:read") + "Amounts are integer cents.")
async def list_invoices(actor: FromDishka[Actor], use_case: FromDishka[uc.ListInvoices], limit: Limit = 25,
                        offset: Offset = 0) -> ListEnvelope[InvoiceOut]:
    page = await use_case.execute(uc.ListInvoicesCommand(actor, PageRequest(limit, offset)))
    return ListEnvelope([InvoiceOut.of(i) for i in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("GET", "/billing/invoices/upcoming", operation_id="getUpcomingInvoice", tags=TAGS, scopes=READ,
          auth=EITHER, summary="The current period's invoice so far (a draft, not issued)",
          description=ACCESS.format(scope="billing:read") + (
              "The plan's price and, on plans with overage, the call minutes and SMS segments used past the "
              "included amounts so far this period. id is null."))
async def get_upcoming_invoice(actor: FromDishka[Actor], use_case: FromDishka[uc.GetUpcomingInvoice]
                               ) -> Envelope[InvoiceOut]:
    return Envelope(InvoiceOut.of(await use_case.execute(uc.GetUpcomingInvoiceCommand(actor))))


@endpoint("GET", "/billing/invoices/{id:int}", operation_id="getInvoice", tags=TAGS, scopes=READ, auth=EITHER,
          summary="Get an invoice with its lines", description=ACCESS.format(scope="billing:read"),
          errors={404: ""})
async def get_invoice(id: InvoiceId, actor: FromDishka[Actor], use_case: FromDishka[uc.GetInvoice]
                      ) -> Envelope[InvoiceOut]:
    return Envelope(InvoiceOut.of(await use_case.execute(uc.GetInvoiceCommand(actor, id))))


@endpoint("GET", "/billing/invoices/{id:int}/pdf", operation_id="getInvoicePdf", tags=TAGS, scopes=READ,
          auth=EITHER, summary="An invoice as a PDF document", media_type="application/pdf",
          description=ACCESS.format(scope="billing:read") + (
              "The invoice (number, organization, period, status, dates, its lines and total, in dollars and "
              "cents) as application/pdf, with Content-Disposition naming the file <number>.pdf."),
          errors={404: ""})
async def get_invoice_pdf(id: InvoiceId, actor: FromDishka[Actor], use_case: FromDishka[uc.GetInvoicePdf]
                          ) -> Response[bytes]:
    pdf = await use_case.execute(uc.GetInvoiceCommand(actor, id))
    return Response(pdf.content, media_type="application/pdf", headers={
        "Content-Disposition": f'inline; filename="{pdf.number}.pdf"', "Cache-Control": "private, max-age=0"})


@endpoint("POST", "/billing/invoices/{id:int}/pay", operation_id="payInvoice", tags=TAGS, scopes=WRITE,
          auth=EITHER, sudo=True, status_code=200, summary="Charge an open or uncollectible invoice now",
          description=ACCESS.format(scope="billing:write") + (
              "Charges the default payment method at once. 200 with the invoice either way: paid (and the "
              "subscription active again once nothing is unpaid), or still unpaid with last_payment_error saying "
              "why (the worker's retry schedule is unchanged)."),
          errors={404: "", 409: "invalid_transition: the invoice is paid or void"})
async def pay_invoice(id: InvoiceId, actor: FromDishka[Actor], use_case: FromDishka[uc.PayInvoice]
                      ) -> Envelope[InvoiceOut]:
    return Envelope(InvoiceOut.of(await use_case.execute(uc.PayInvoiceCommand(actor, id))))


@endpoint("POST", "/billing/stripe/webhook", operation_id="receiveStripeWebhook", tags=TAGS, auth="public",
          status_code=200,
          summary="Stripe's webhook: charges settled at Stripe (3-D Secure completed) mark invoices paid",
          description=(
              "For Stripe to call (PARLEY_BILLING_GATEWAY=stripe with PARLEY_BILLING_STRIPE_WEBHOOK_SECRET set; "
              "404 otherwise). The Stripe-Signature header is verified against the endpoint's signing secret "
              "(Stripe's SDK, 5 minutes of tolerance). payment_intent.succeeded for an invoice's charge marks the "
              "invoice paid (the subscription active again once nothing is unpaid); other events are acknowledged "
              "and ignored; a redelivered event changes nothing."),
          errors={400: "bad_request naming Stripe-Signature: missing, or it does not verify",
                  404: "not_found: no Stripe webhook is configured"})
async def receive_stripe_webhook(data: JSONBody[StripeEvent], request: Request[Any, Any, Any],
                                 use_case: FromDishka[uc.HandleGatewayEvent]) -> Envelope[GatewayEventOut]:
    handled = await use_case.execute(uc.HandleGatewayEventCommand(await request.body(),
                                                                  request.headers.get("stripe-signature")))
    return Envelope(GatewayEventOut(received=True, event_id=handled.event_id, invoice_id=handled.invoice_id))


ROUTES = [get_subscription, update_subscription, create_payment_method, list_payment_methods, get_payment_method,
          delete_payment_method, set_default_payment_method, list_invoices, get_upcoming_invoice, get_invoice,
          get_invoice_pdf,
          pay_invoice, receive_stripe_webhook]
