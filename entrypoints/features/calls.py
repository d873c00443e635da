"""Calls feature: outbound calls on the telephony simulator, call logs and recordings, Do-Not-Call screening,
telephony providers, phone numbers and stats, and the usage hook.

The worker job drives calls: each pass advances the calls whose telephony adapter has news, ends the ones
stuck past their deadline, then dials queued calls while their organization has free lines. Every step
is its own unit of work. ``run_once`` is one pass (tests call it with a manual clock).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from dishka import AsyncContainer, Provider, Scope, provide, provide_all

from adapters.blobs.filesystem import FilesystemBlobStorage
from adapters.memory.blobs import InMemoryBlobStorage
from adapters.memory.calls import InMemoryCallLogRepository, InMemoryCallRepository, InMemoryUsageRecorder
from adapters.memory.dnc import InMemoryDncRepository, InMemoryDncScreener
from adapters.memory.telephony import InMemoryPhoneNumberRepository, InMemoryTelephonyProviderRepository
from adapters.phones.libphonenumber import LibPhoneNumberNormalizer
from adapters.sql.calls import SqlCallLogRepository, SqlCallRepository, SqlUsageRecorder
from adapters.sql.dnc import SqlDncRepository, SqlDncScreener
from adapters.sql.telephony import SqlPhoneNumberRepository, SqlTelephonyProviderRepository
from adapters.telephony.simulator import SimulatedTelephony, SimulatorConfig
from application import calls as call_cases
from application import dnc as dnc_cases
from application import telephony as telephony_cases
from application.ports.blobs import BlobStorage
from application.ports.calls import CallLogRepository, CallRef, CallRepository
from application.ports.dnc import DncRepository, DncScreener
from application.ports.phones import PhoneNormalizer
from application.ports.platform import Clock, UnitOfWork
from application.ports.telephony import PhoneNumberRepository, Telephony, TelephonyProviderRepository
from application.ports.usage import UsageRecorder
from domain.dnc import DncUnavailable
from domain.errors import DomainError
from entrypoints.features import Feature
from entrypoints.settings import Settings

log = logging.getLogger("parley.calls")

POLL_INTERVAL_SECONDS = 0.1
BATCH = 200


@dataclass(frozen=True)
class CallsSettings:
    simulator_speed: float = 1.0
    """PARLEY_SIMULATOR_SPEED: the time factor of the telephony simulator."""


class CallsPlatformProvider(Provider):
    scope = Scope.APP

    @provide
    def simulator_config(self, settings: CallsSettings) -> SimulatorConfig:
        return SimulatorConfig(speed=settings.simulator_speed)

    @provide
    def recording_links(self, settings: Settings) -> call_cases.RecordingLinkSettings:
        return call_cases.RecordingLinkSettings(settings.secret_key)

    phones = provide(LibPhoneNumberNormalizer, provides=PhoneNormalizer)
    telephony = provide(SimulatedTelephony, provides=Telephony)


class SqlCallsProvider(Provider):
    """SQL storage; recordings in files under PARLEY_VAR_DIR."""

    scope = Scope.REQUEST

    @provide(scope=Scope.APP)
    def blobs(self, settings: Settings) -> BlobStorage:
        return FilesystemBlobStorage(settings.var_dir / "blobs")

    calls = provide(SqlCallRepository, provides=CallRepository)
    logs = provide(SqlCallLogRepository, provides=CallLogRepository)
    usage = provide(SqlUsageRecorder, provides=UsageRecorder)
    dnc = provide(SqlDncRepository, provides=DncRepository)
    screener = provide(SqlDncScreener, provides=DncScreener)
    providers = provide(SqlTelephonyProviderRepository, provides=TelephonyProviderRepository)
    numbers = provide(SqlPhoneNumberRepository, provides=PhoneNumberRepository)


class MemoryCallsProvider(Provider):
    scope = Scope.REQUEST

    blobs = provide(InMemoryBlobStorage, provides=BlobStorage, scope=Scope.APP)

    calls = provide(InMemoryCallRepository, provides=CallRepository)
    logs = provide(InMemoryCallLogRepository, provides=CallLogRepository)
    usage = provide(InMemoryUsageRecorder, provides=UsageRecorder)
    dnc = provide(InMemoryDncRepository, provides=DncRepository)
    screener = provide(InMemoryDncScreener, provides=DncScreener)
    providers = provide(InMemoryTelephonyProviderRepository, provides=TelephonyProviderRepository)
    numbers = provide(InMemoryPhoneNumberRepository, provides=PhoneNumberRepository)


class CallsUseCaseProvider(Provider):
    scope = Scope.REQUEST

    helpers = provide_all(dnc_cases.DncGate, call_cases.CallFinisher)
    calls = provide_all(
        call_cases.PlaceCall,
        call_cases.GetCall,
        call_cases.ListCalls,
        call_cases.CancelCall,
        call_cases.DialNextQueuedCall,
        call_cases.AdvanceCall,
        call_cases.SweepOverdueCall,
        call_cases.ListCallLogs,
        call_cases.GetCallLog,
        call_cases.GetRecordingLink,
        call_cases.OpenRecording,
    )
    dnc = provide_all(
        dnc_cases.CreateDncList,
        dnc_cases.ListDncLists,
        dnc_cases.GetDncList,
        dnc_cases.DeleteDncList,
        dnc_cases.AddDncEntries,
        dnc_cases.ImportDncCsv,
        dnc_cases.ListDncEntries,
        dnc_cases.RemoveDncEntry,
        dnc_cases.CheckNumbers,
    )
    telephony = provide_all(
        telephony_cases.ListProviders,
        telephony_cases.GetProvider,
        telephony_cases.CreateProvider,
        telephony_cases.UpdateProvider,
        telephony_cases.DeleteProvider,
        telephony_cases.ReadProviderCredentials,
        telephony_cases.ListPhoneNumbers,
        telephony_cases.GetPhoneNumber,
        telephony_cases.CreatePhoneNumber,
        telephony_cases.UpdatePhoneNumber,
        telephony_cases.DeletePhoneNumber,
        telephony_cases.GetTelephonyStats,
    )


# ------------------------------------------------------------------------------------------------ the worker


@dataclass
class PassReport:
    advanced: int = 0
    swept: int = 0
    dialled: int = 0

    @property
    def total(self) -> int:
        return self.advanced + self.swept + self.dialled


async def _unit(container: AsyncContainer, work: Any) -> Any:
    """One unit of work in its own request scope: committed when ``work`` returns, rolled back if it raises."""
    async with container() as request:
        result = await work(request)
        await (await request.get(UnitOfWork)).commit()
        return result


async def _refs(container: AsyncContainer, method: str, organization_id: int | None) -> list[CallRef]:
    async def work(r: Any) -> list[CallRef]:
        now = (await r.get(Clock)).now()
        return await getattr(await r.get(CallRepository), method)(now, BATCH, organization_id)

    return await _unit(container, work)


async def _advance(container: AsyncContainer, ref: CallRef) -> bool:
    async def step(run_tools: bool) -> Any:
        async def work(r: Any) -> Any:
            return await (await r.get(call_cases.AdvanceCall)).execute(ref, run_tools=run_tools)
        return await _unit(container, work)

    try:
        return await step(True) is not None
    except DomainError as exc:  # a handled fallback: e.g. the agent's calendar is gone, no open slot
        log.warning("advancing call %s: its mid-call tool could not run (%s: %s); the call goes on without it",
                    ref.call_id, exc.code, exc.message)
    except Exception:
        log.exception("advancing call %s failed; retrying without mid-call tools", ref.call_id)
    try:
        return await step(False) is not None
    except Exception:
        log.exception("advancing call %s failed", ref.call_id)
        return False


async def _sweep(container: AsyncContainer, ref: CallRef) -> bool:
    async def work(r: Any) -> Any:
        return await (await r.get(call_cases.SweepOverdueCall)).execute(ref)

    try:
        return await _unit(container, work) is not None
    except Exception:
        log.exception("sweeping call %s failed", ref.call_id)
        return False


async def _dial_queued(container: AsyncContainer, organization_id: int) -> int:
    dialled = 0

    async def work(r: Any) -> Any:
        return await (await r.get(call_cases.DialNextQueuedCall)).execute(organization_id)

    for _ in range(BATCH):
        try:
            call = await _unit(container, work)
        except DncUnavailable:
            log.warning("DNC screening unavailable for organization %s: its queued calls wait", organization_id)
            break
        except Exception:
            log.exception("dialling a queued call of organization %s failed", organization_id)
            break
        if call is None:
            break
        dialled += 1
    return dialled


async def run_once(container: AsyncContainer, settings: Settings | None = None, *,
                   organization_id: int | None = None) -> PassReport:
    """One pass of the telephony worker: advance due calls, sweep overdue ones, dial queued ones.
    ``organization_id`` limits the pass to one organization (tests)."""
    report = PassReport()
    for ref in await _refs(container, "due", organization_id):
        report.advanced += await _advance(container, ref)
    for ref in await _refs(container, "overdue", organization_id):
        report.swept += await _sweep(container, ref)

    async def queued(r: Any) -> list[int]:
        return await (await r.get(CallRepository)).organizations_with_queued(BATCH, organization_id)

    for org in await _unit(container, queued):
        report.dialled += await _dial_queued(container, org)
    return report


async def telephony_worker(container: AsyncContainer, settings: Settings, stop: asyncio.Event) -> None:
    """The simulator and dialler loop: a pass every 100 ms (sooner again while there is work)."""
    while not stop.is_set():
        report = await run_once(container, settings)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=0.01 if report.total else POLL_INTERVAL_SECONDS)


FEATURE = Feature(
    name="calls",
    providers=(CallsPlatformProvider, CallsUseCaseProvider),
    sql=SqlCallsProvider,
    memory=MemoryCallsProvider,
    jobs=[telephony_worker],
    settings=CallsSettings,
)
