"""Usage feature: the append-only usage ledger with its period and day counters, the one quota gate every dial
and send passes, ``usage.threshold`` events, and the usage reports.

It provides ``UsageRecorder`` over the ledger, so the call finisher and the SMS sender write usage in the transaction
of what they measure, and the ``QuotaGate``. It uses the core's
organizations and the calls and knowledge features' phone numbers and knowledge bases.
"""

from __future__ import annotations

from dishka import Provider, Scope, provide, provide_all

from adapters.memory.usage import InMemoryChildrenUsage, InMemoryUsageLedger
from adapters.sql.usage import SqlChildrenUsage, SqlUsageLedger
from application import usage as cases
from application.ports.usage import ChildrenUsage, QuotaGate, UsageLedger, UsageRecorder
from entrypoints.features import Feature


class SqlUsageProvider(Provider):
    ledger = provide(SqlUsageLedger, provides=UsageLedger, scope=Scope.REQUEST)
    children = provide(SqlChildrenUsage, provides=ChildrenUsage, scope=Scope.REQUEST)


class MemoryUsageProvider(Provider):
    ledger = provide(InMemoryUsageLedger, provides=UsageLedger, scope=Scope.REQUEST)
    children = provide(InMemoryChildrenUsage, provides=ChildrenUsage, scope=Scope.REQUEST)


class UsageUseCaseProvider(Provider):
    scope = Scope.REQUEST

    # the one usage recorder and the one quota gate (the call finisher, PlaceCall, SendSms)
    recorder = provide(cases.LedgerUsageRecorder, provides=UsageRecorder)
    quota = provide(cases.LedgerQuotaGate, provides=QuotaGate)
    cases = provide_all(cases.GetUsage, cases.GetUsageMetrics, cases.GetUsageBreakdown, cases.ListClients)


FEATURE = Feature(
    name="usage",
    providers=(UsageUseCaseProvider,),
    sql=SqlUsageProvider,
    memory=MemoryUsageProvider,
)
