"""Calls feature: outbound calls on the telephony simulator (whose calls run the conversation feature's
``SimulatedConversations``), call logs and recordings, Do-Not-Call screening,
telephony providers, phone numbers and stats.

Its job ``calls.progress`` is the calls' progress pass (``application/call_progress.py``); ``progress`` gives the
pass over a container (tests run one with a manual clock).
"""

from __future__ import annotations

from dataclasses import dataclass

from dishka import AsyncContainer, Provider, Scope, provide, provide_all

from adapters.blobs.filesystem import FilesystemBlobStorage
from adapters.memory.blobs import InMemoryBlobStorage
from adapters.memory.calls import InMemoryCallLogRepository, InMemoryCallRepository, NoReadAhead
from adapters.memory.dnc import InMemoryDncRepository, InMemoryDncScreener
from adapters.memory.telephony import InMemoryPhoneNumberRepository, InMemoryTelephonyProviderRepository
from adapters.phones.libphonenumber import LibPhoneNumberNormalizer
from adapters.sql.call_placement import SqlCallPlacementReads
from adapters.sql.calls import SqlCallLogRepository, SqlCallRepository
from adapters.sql.dnc import SqlDncRepository, SqlDncScreener
from adapters.sql.telephony import SqlPhoneNumberRepository, SqlTelephonyProviderRepository
from adapters.telephony.simulator import OFFER_AGAIN_SECONDS, SimulatedTelephony, SimulatorConfig
from application import calls as call_cases
from application import dnc as dnc_cases
from application import telephony as telephony_cases
from application.call_progress import RunCallProgress, progress_job
from application.jobs import JobKind
from application.ports.blobs import BlobStorage
from application.ports.calls import CallLogRepository, CallPlacementReads, CallRepository
from application.ports.dnc import DncRepository, DncScreener
from application.ports.phones import PhoneNormalizer
from application.ports.telephony import PhoneNumberRepository, Telephony, TelephonyProviderRepository
from entrypoints.features import Feature
from entrypoints.settings import Settings
from entrypoints.units import ScopedUnits


@dataclass(frozen=True)
class CallsSettings:
    simulator_speed: float = 1.0
    """PARLEY_SIMULATOR_SPEED: the time factor of the telephony simulator."""
    simulator_offer_again_seconds: float = OFFER_AGAIN_SECONDS
    """PARLEY_SIMULATOR_OFFER_AGAIN_SECONDS: wall seconds a simulated line waits for its conversation's result
    (the worker that took it may have died) before it asks for the conversation again."""


class CallsPlatformProvider(Provider):
    scope = Scope.APP

    @provide
    def simulator_config(self, settings: CallsSettings) -> SimulatorConfig:
        return SimulatorConfig(speed=settings.simulator_speed,
                               offer_again_seconds=settings.simulator_offer_again_seconds)

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
    dnc = provide(SqlDncRepository, provides=DncRepository)
    screener = provide(SqlDncScreener, provides=DncScreener)
    providers = provide(SqlTelephonyProviderRepository, provides=TelephonyProviderRepository)
    numbers = provide(SqlPhoneNumberRepository, provides=PhoneNumberRepository)
    placement = provide(SqlCallPlacementReads, provides=CallPlacementReads)


class MemoryCallsProvider(Provider):
    scope = Scope.REQUEST

    blobs = provide(InMemoryBlobStorage, provides=BlobStorage, scope=Scope.APP)

    calls = provide(InMemoryCallRepository, provides=CallRepository)
    logs = provide(InMemoryCallLogRepository, provides=CallLogRepository)
    dnc = provide(InMemoryDncRepository, provides=DncRepository)
    screener = provide(InMemoryDncScreener, provides=DncScreener)
    providers = provide(InMemoryTelephonyProviderRepository, provides=TelephonyProviderRepository)
    numbers = provide(InMemoryPhoneNumberRepository, provides=PhoneNumberRepository)
    placement = provide(NoReadAhead, provides=CallPlacementReads, scope=Scope.APP)


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
        call_cases.ResumeCall,
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


def progress(container: AsyncContainer) -> RunCallProgress:
    """The calls' progress pass over the container's units of work."""
    return RunCallProgress(ScopedUnits(container))


def calls_job(container: AsyncContainer, settings: Settings) -> JobKind:
    return progress_job(ScopedUnits(container))


FEATURE = Feature(
    name="calls",
    providers=(CallsPlatformProvider, CallsUseCaseProvider),
    sql=SqlCallsProvider,
    memory=MemoryCallsProvider,
    jobs=[calls_job],
    settings=CallsSettings,
)
