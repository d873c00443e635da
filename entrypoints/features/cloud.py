"""Cloud status feature: ``GET /cloud/status`` (``application/cloud.py``) and the worker's heartbeat.

The heartbeat (``cloud.heartbeat``) is a recurring job on the worker's job runner, so every worker process, and
the in-process worker of ``parley serve``, runs it: the process that claims it records its name and the time,
then it is due again after PARLEY_CLOUD_STATUS_HEARTBEAT_SECONDS (15 s). It is one small upsert: an idle server
stays idle between beats (``application/cloud.heartbeat_job``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import timedelta

from dishka import AsyncContainer, Provider, Scope, provide, provide_all

from adapters.memory.cloud import InMemoryHeartbeats, InMemoryPlatformHealth
from adapters.sql.cloud import SqlHeartbeats, SqlPlatformHealth
from application import cloud as cases
from application.jobs import JobKind
from application.ports.cloud import Heartbeats, PlatformHealth
from entrypoints.features import Feature
from entrypoints.settings import Settings
from entrypoints.units import ScopedUnits

KIND = cases.HEARTBEAT_JOB

_DEFAULTS = cases.StatusThresholds()
"""The thresholds' defaults live with the rules (``application/cloud.py``); the settings section only overrides."""


@dataclass(frozen=True)
class CloudStatusSettings:
    """PARLEY_CLOUD_STATUS_*: the heartbeat's period and the thresholds of ``GET /cloud/status``."""

    ENV_PREFIX = "CLOUD_STATUS_"

    heartbeat_seconds: float = 15.0
    """How often a worker records its heartbeat."""
    database_degraded_ms: float = _DEFAULTS.database_degraded_ms
    """A database round trip slower than this: degraded (a failed one: down)."""
    worker_degraded_seconds: float = _DEFAULTS.worker_degraded_seconds
    """The newest worker heartbeat older than this: degraded."""
    worker_down_seconds: float = _DEFAULTS.worker_down_seconds
    """The newest worker heartbeat older than this, or none: down."""
    outbox_degraded_seconds: float = _DEFAULTS.outbox_degraded_seconds
    """The oldest event some outbox consumer has not processed is older than this: degraded."""
    outbox_down_seconds: float = _DEFAULTS.outbox_down_seconds
    """... older than this: down."""
    outbox_degraded_pending: int = _DEFAULTS.outbox_degraded_pending
    """More events than this waiting for a consumer: degraded."""

    def thresholds(self) -> cases.StatusThresholds:
        return cases.StatusThresholds(**{f.name: getattr(self, f.name) for f in fields(cases.StatusThresholds)})


class CloudProvider(Provider):
    scope = Scope.REQUEST
    use_cases = provide_all(cases.GetCloudStatus, cases.RecordHeartbeat)

    @provide(scope=Scope.APP)
    def thresholds(self, section: CloudStatusSettings) -> cases.StatusThresholds:
        return section.thresholds()


class SqlCloudProvider(Provider):
    scope = Scope.REQUEST
    heartbeats = provide(SqlHeartbeats, provides=Heartbeats)
    health = provide(SqlPlatformHealth, provides=PlatformHealth)


class MemoryCloudProvider(Provider):
    scope = Scope.REQUEST
    heartbeats = provide(InMemoryHeartbeats, provides=Heartbeats)
    health = provide(InMemoryPlatformHealth, provides=PlatformHealth)


def heartbeat_job(container: AsyncContainer, settings: Settings) -> JobKind:
    return cases.heartbeat_job(ScopedUnits(container),
                               timedelta(seconds=settings.section(CloudStatusSettings).heartbeat_seconds))


FEATURE = Feature(
    name="cloud",
    providers=(CloudProvider,),
    sql=SqlCloudProvider,
    memory=MemoryCloudProvider,
    jobs=[heartbeat_job],
    settings=CloudStatusSettings,
)
