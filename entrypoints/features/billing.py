"""Billing feature: the subscription (the organization's plan), payment methods held by the ``PaymentGateway``
(the simulator by default), invoices from the plan price and the usage ledger's period counters, and two jobs on
the worker's job runner:

- ``billing.close`` (recurring, due at the start of every month, UTC): invoices the period that just ended, in
  batches of PARLEY_BILLING_CLOSE_BATCH organizations per transaction. One invoice per (organization, period) is a
  unique constraint, so two workers (or a run whose lease was taken over) never invoice a period twice.
- ``billing.collect`` (recurring, due when the earliest open invoice's next attempt is): charges due invoices on
  their organization's default method, PARLEY_BILLING_COLLECT_BATCH per transaction with their rows locked
  (``FOR UPDATE SKIP LOCKED``), each charge with an idempotency key derived from the invoice and attempt.
  Declines are retried 1, 3 and 5 days later, then the invoice is uncollectible. The close schedules it at once.

It uses the core's organizations and the usage feature's ledger (``UsageLedger.used_by_organization``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal

from dishka import AsyncContainer, Provider, Scope, provide, provide_all

from adapters.memory.billing import InMemoryBillingRepository
from adapters.payments.simulator import SimulatedPaymentGateway
from adapters.pdf.invoices import FpdfInvoiceRenderer
from adapters.sql.billing import SqlBillingRepository
from application import billing as cases
from application.jobs import JobKind
from application.ports.billing import BillingRepository, InvoiceRenderer, PaymentGateway
from entrypoints.features import Feature
from entrypoints.settings import Settings
from entrypoints.units import ScopedUnits

CLOSE = cases.CLOSE_JOB
COLLECT = cases.COLLECT_JOB


@dataclass(frozen=True)
class BillingSettings:
    """PARLEY_BILLING_*: how much the period close and the collection take per transaction."""

    ENV_PREFIX = "BILLING_"

    close_batch: int = cases.CLOSE_BATCH
    """Organizations invoiced per transaction by the period close."""
    collect_batch: int = 100
    """Due invoices charged per transaction by the collection."""
    gateway: Literal["simulator", "stripe"] = "simulator"
    """PARLEY_BILLING_GATEWAY: the payment gateway (the simulator by default; ``stripe`` needs the key below)."""
    stripe_api_key: str = field(default="", repr=False)
    """PARLEY_BILLING_STRIPE_API_KEY: the Stripe secret key (``sk_live_...``, ``sk_test_...``)."""
    stripe_api_base: str = ""
    """PARLEY_BILLING_STRIPE_API_BASE: Stripe's API (empty: https://api.stripe.com)."""
    stripe_webhook_secret: str = field(default="", repr=False)
    """PARLEY_BILLING_STRIPE_WEBHOOK_SECRET: the signing secret (``whsec_...``) of POST /v2/billing/stripe/webhook
    (empty: the route answers 404)."""
    stripe_return_url: str = ""
    """PARLEY_BILLING_STRIPE_RETURN_URL: where a card holder lands after authenticating a charge (3-D Secure),
    e.g. https://parley.example.com/dashboard/billing (empty: Stripe's own page is not offered)."""


class GatewayProvider(Provider):
    scope = Scope.APP

    @provide
    async def gateway(self, section: BillingSettings) -> AsyncIterator[PaymentGateway]:
        """The gateway PARLEY_BILLING_GATEWAY names: the simulator, or Stripe (its HTTP client closed at exit)."""
        if section.gateway != "stripe":
            yield SimulatedPaymentGateway()
            return
        if not section.stripe_api_key:
            raise ValueError("PARLEY_BILLING_GATEWAY=stripe needs PARLEY_BILLING_STRIPE_API_KEY")
        # imported here: the SDK (and the ``requests`` it loads) takes about 0.15 s to import, which every process,
        # each CLI command included, would pay with the simulator configured
        from adapters.payments.stripe_gateway import StripePaymentGateway

        stripe = StripePaymentGateway(section.stripe_api_key, api_base=section.stripe_api_base or None,
                                      webhook_secret=section.stripe_webhook_secret or None,
                                      return_url=section.stripe_return_url or None)
        try:
            yield stripe
        finally:
            await stripe.close()


class BillingProvider(Provider):
    scope = Scope.REQUEST
    renderer = provide(FpdfInvoiceRenderer, provides=InvoiceRenderer, scope=Scope.APP)
    cases = provide_all(cases.GetSubscription, cases.GetServiceHold, cases.UpdateSubscription, cases.AddPaymentMethod,
                        cases.ListPaymentMethods, cases.GetPaymentMethod, cases.DeletePaymentMethod,
                        cases.SetDefaultPaymentMethod,
                        cases.ListInvoices, cases.GetInvoice, cases.GetInvoicePdf, cases.GetUpcomingInvoice,
                        cases.InvoiceCharger,
                        cases.PayInvoice, cases.HandleGatewayEvent, cases.CloseBillingPeriod,
                        cases.CollectDueInvoices, cases.NextCollection)


class SqlBillingProvider(Provider):
    repository = provide(SqlBillingRepository, provides=BillingRepository, scope=Scope.REQUEST)


class MemoryBillingProvider(Provider):
    repository = provide(InMemoryBillingRepository, provides=BillingRepository, scope=Scope.REQUEST)


def close_job(container: AsyncContainer, settings: Settings) -> JobKind:
    return cases.close_job(ScopedUnits(container), settings.section(BillingSettings).close_batch)


def collect_job(container: AsyncContainer, settings: Settings) -> JobKind:
    return cases.collect_job(ScopedUnits(container), settings.section(BillingSettings).collect_batch)


FEATURE = Feature(
    name="billing",
    providers=(GatewayProvider, BillingProvider),
    sql=SqlBillingProvider,
    memory=MemoryBillingProvider,
    jobs=[close_job, collect_job],
    settings=BillingSettings,
)
