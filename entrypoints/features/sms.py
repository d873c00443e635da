"""SMS feature: messages sent through the carrier port (the simulator today), their receipts, the history, and
inbound messages whose STOP / START keywords keep the organization's opt-out list.

It uses the calls feature's DNC gate and lists, phone numbers, phone normaliser and simulator settings. The
receipts job (``sms.receipts``) polls the carrier for the messages that have news and applies the receipts
forward-only, each message in its own unit of work (``application/sms.receipts_job``); it is due again when the
next message is, and a commit that sent a message wakes it.
"""

from __future__ import annotations

from dishka import AsyncContainer, Provider, Scope, provide, provide_all

from adapters.memory.sms import InMemorySmsRepository
from adapters.sql.sms import SqlSmsRepository
from adapters.telephony.sms_simulator import SimulatedSmsCarrier
from application import sms as cases
from application.jobs import JobKind
from application.ports.sms import SmsCarrier, SmsRepository
from entrypoints.features import Feature
from entrypoints.settings import Settings
from entrypoints.units import ScopedUnits

KIND = cases.RECEIPTS_JOB


class SmsPlatformProvider(Provider):
    scope = Scope.APP

    carrier = provide(SimulatedSmsCarrier, provides=SmsCarrier)


class SqlSmsProvider(Provider):
    messages = provide(SqlSmsRepository, provides=SmsRepository, scope=Scope.REQUEST)


class MemorySmsProvider(Provider):
    messages = provide(InMemorySmsRepository, provides=SmsRepository, scope=Scope.REQUEST)


class SmsUseCaseProvider(Provider):
    scope = Scope.REQUEST

    cases = provide_all(
        cases.SendSms,
        cases.GetSms,
        cases.ListSms,
        cases.ApplySmsReceipt,
        cases.PollSmsCarrier,
        cases.ReceiveSms,
    )


def receipts_job(container: AsyncContainer, settings: Settings) -> JobKind:
    return cases.receipts_job(ScopedUnits(container))


FEATURE = Feature(
    name="sms",
    providers=(SmsPlatformProvider, SmsUseCaseProvider),
    sql=SqlSmsProvider,
    memory=MemorySmsProvider,
    jobs=[receipts_job],
)
