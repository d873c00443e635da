"""SMS feature: messages sent through the carrier port (the simulator today), their receipts, the history, and
inbound messages whose STOP / START keywords keep the organization's opt-out list.

It uses the calls feature's DNC gate and lists, phone numbers, phone normaliser and simulator settings. The
receipts job (``sms.receipts``) polls the carrier for the messages that have news and applies the receipts
forward-only, each message in its own unit of work; it is due again when the next message is, and a commit that
sent a message wakes it. ``receipts_once`` is one pass (tests call it with a manual clock).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from dishka import AsyncContainer, Provider, Scope, provide, provide_all

from adapters.memory.sms import InMemorySmsRepository
from adapters.sql.sms import SqlSmsRepository
from adapters.telephony.sms_simulator import SimulatedSmsCarrier
from application import sms as cases
from application.jobs import JobKind, next_beat
from application.ports.jobs import ClaimedJob
from application.ports.platform import Clock
from application.ports.sms import SmsCarrier, SmsRepository
from entrypoints.features import Feature
from entrypoints.settings import Settings
from entrypoints.units import ScopedUnits

log = logging.getLogger("parley.sms")

KIND = "sms.receipts"
BATCH = 500
IDLE_RECHECK = timedelta(seconds=15)
"""With nothing due, the job looks again after this (a message sent through another process on SQLite)."""


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


async def receipts_once(container: AsyncContainer) -> int:
    """One pass: every message whose carrier has news by now, each in its own unit of work; returns how many
    were polled."""

    async def due(unit: Any) -> Any:
        return await (await unit.get(SmsRepository)).due((await unit.get(Clock)).now(), BATCH)

    polled = 0
    for ref in await ScopedUnits(container).run(due):
        async def step(unit: Any, ref: Any = ref) -> Any:
            return await (await unit.get(cases.PollSmsCarrier)).execute(cases.PollSmsCarrierCommand(ref))
        try:
            await ScopedUnits(container).run(step)
            polled += 1
        except Exception:
            log.exception("applying the carrier receipts of sms %s failed", ref.message_id)
    return polled


async def apply_receipt(container: AsyncContainer, receipt: Any) -> Any:
    """Apply one carrier receipt in its own unit of work (a carrier's status callback; tests)."""

    async def work(unit: Any) -> Any:
        return await (await unit.get(cases.ApplySmsReceipt)).execute(cases.ApplySmsReceiptCommand(receipt))

    return await ScopedUnits(container).run(work)


def receipts_job(container: AsyncContainer, settings: Settings) -> JobKind:
    """The carrier's receipts as a recurring job: a pass, then due again when the next message has news."""

    async def poll(job: ClaimedJob) -> datetime:
        while await receipts_once(container) >= BATCH:
            pass

        async def next_due(unit: Any) -> tuple[datetime | None, datetime]:
            return await (await unit.get(SmsRepository)).next_due(), (await unit.get(Clock)).now()

        due, now = await ScopedUnits(container).run(next_due)
        return min(due, next_beat(now, IDLE_RECHECK)) if due is not None else next_beat(now, IDLE_RECHECK)

    return JobKind(KIND, poll, on_wake=True, recurring=True)


FEATURE = Feature(
    name="sms",
    providers=(SmsPlatformProvider, SmsUseCaseProvider),
    sql=SqlSmsProvider,
    memory=MemorySmsProvider,
    jobs=[receipts_job],
)
