"""Calls feature: outbound calls on the telephony simulator, call logs and recordings, Do-Not-Call screening,
telephony providers, phone numbers and stats, and the usage hook.

The worker job (``calls.progress``) drives calls: each pass advances the calls whose telephony adapter has news,
ends the ones stuck past their deadline, then dials queued calls while their organization has free lines. Every
step is its own unit of work. The job is due again when the next call is; a commit that created work wakes it.
``run_once`` is one pass (tests call it with a manual clock).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
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
from application.jobs import JobKind, next_beat
from application.ports.blobs import BlobStorage
from application.ports.calls import CallLogRepository, CallRef, CallRepository
from application.ports.dnc import DncRepository, DncScreener
from application.ports.jobs import ClaimedJob
from application.ports.phones import PhoneNormalizer
from application.ports.platform import Clock
from application.ports.telephony import PhoneNumberRepository, Telephony, TelephonyProviderRepository
from application.ports.usage import UsageRecorder
from domain.dnc import DncUnavailable
from domain.errors import DomainError
from entrypoints.features import Feature
from entrypoints.settings import Settings
from entrypoints.worker import in_unit

log = logging.getLogger("parley.calls")

BATCH = 200
KIND = "calls.progress"


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
    return await in_unit(container, lambda unit: work(unit.request))


async def _refs(container: AsyncContainer, method: str, organization_id: int | None) -> list[CallRef]:
    async def work(r: Any) -> list[CallRef]:
        now = (await r.get(Clock)).now()
        return await getattr(await r.get(CallRepository), method)(now, BATCH, organization_id)

    return await _unit(container, work)


async def _advance(container: AsyncContainer, ref: CallRef) -> bool:
    async def step(run_tools: bool) -> Any:
        async def work(r: Any) -> Any:
            return await (await r.get(call_cases.AdvanceCall)).execute(call_cases.AdvanceCallCommand(ref, run_tools))
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
        return await (await r.get(call_cases.SweepOverdueCall)).execute(call_cases.SweepOverdueCallCommand(ref))

    try:
        return await _unit(container, work) is not None
    except Exception:
        log.exception("sweeping call %s failed", ref.call_id)
        return False


async def _dial_queued(container: AsyncContainer, organization_id: int) -> int:
    dialled = 0

    async def work(r: Any) -> Any:
        return await (await r.get(call_cases.DialNextQueuedCall)).execute(
            call_cases.DialNextQueuedCallCommand(organization_id))

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


IDLE_RECHECK = timedelta(seconds=15)
"""With no call due, the job looks again after this (a call placed through another process on SQLite, which has no
cross-process notifications)."""


def calls_job(container: AsyncContainer, settings: Settings) -> JobKind:
    """The simulator and dialler as one recurring job: a pass, then due again when the earliest active call
    has news or passes its deadline; a commit that creates work (a call placed, an event) runs it at once."""

    async def progress(job: ClaimedJob) -> datetime:
        await run_once(container, settings)

        async def next_due(r: Any) -> tuple[datetime | None, datetime]:
            return await (await r.get(CallRepository)).next_due(), (await r.get(Clock)).now()

        due, now = await _unit(container, next_due)
        return min(due, next_beat(now, IDLE_RECHECK)) if due is not None else next_beat(now, IDLE_RECHECK)

    # a short lease: calls of a killed worker move on within it; passes that overlap are safe (row and
    # organization locks), as concurrent run_once passes are
    return JobKind(KIND, progress, on_wake=True, recurring=True, lease=timedelta(seconds=30))


FEATURE = Feature(
    name="calls",
    providers=(CallsPlatformProvider, CallsUseCaseProvider),
    sql=SqlCallsProvider,
    memory=MemoryCallsProvider,
    jobs=[calls_job],
    settings=CallsSettings,
)
