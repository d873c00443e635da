"""The composition root: dishka providers by layer, the core's and every feature's (the registry ``FEATURES``).
The only module (with ``entrypoints/features``) that names adapters. Nothing here knows HTTP: the HTTP app adds its
request providers in ``entrypoints/asgi_app.py`` (``http_container``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from dishka import AsyncContainer, Provider, Scope, alias, make_async_container, provide, provide_all
from sqlalchemy.ext.asyncio import AsyncEngine

from adapters.crypto import Argon2PasswordHasher, FernetSecretBox, PyotpOneTimePasswords
from adapters.memory.accounts import (
    InMemoryApiKeyRepository,
    InMemoryIdempotencyStore,
    InMemoryOrganizationRepository,
    InMemoryRateLimiter,
    InMemoryUserRepository,
)
from adapters.memory.agents import InMemoryAgentRepository
from adapters.memory.audit import InMemoryAuditLog
from adapters.memory.gauges import InMemoryBacklogGauges
from adapters.memory.jobs import InMemoryJobQueue
from adapters.memory.outbox import InMemoryOutboxReader
from adapters.memory.store import InMemoryStore, InMemoryUnitOfWork
from adapters.sql.accounts import (
    SqlApiKeyRepository,
    SqlIdempotencyStore,
    SqlOrganizationRepository,
    SqlUserRepository,
)
from adapters.sql.agents import SqlAgentRepository
from adapters.sql.audit import SqlAuditLog
from adapters.sql.engine import create_engine
from adapters.sql.gauges import SqlBacklogGauges
from adapters.sql.jobs import SqlJobQueue, listen
from adapters.sql.outbox import SqlOutboxReader
from adapters.sql.rate_limits import RateLimitLeases, SqlRateLimiter
from adapters.sql.schema import schema_problem as schema_problem  # the CLI's migrations and their check
from adapters.sql.schema import upgrade as upgrade
from adapters.sql.schema import upgrade_problem as upgrade_problem
from adapters.sql.uow import SqlUnitOfWork
from adapters.system.clock import SystemClock, SystemRandom
from application import accounts, agents, audit
from application.context import ApiBaseUrl, CauseContext
from application.ports.accounts import (
    ApiKeyRepository,
    IdempotencyStore,
    OrganizationRepository,
    RateLimiter,
    UserRepository,
)
from application.ports.agents import AgentRepository
from application.ports.audit import AuditLog
from application.ports.events import OutboxReader
from application.ports.gauges import BacklogGauges
from application.ports.jobs import JobQueue
from application.ports.passwords import OneTimePasswords, PasswordHasher
from application.ports.platform import Clock, Random, UnitOfWork, Units
from application.ports.secrets import SecretBox
from domain.rate_limit import Window, default_windows
from entrypoints.features import (
    Feature,
    OutboxConsumerJobs,
    attendees,
    billing,
    business_hours,
    calls,
    campaigns,
    carriers,
    check_overrides,
    cloud,
    conversation,
    engines,
    housekeeping,
    knowledge,
    leads,
    media,
    scheduling,
    sessions,
    sms,
    triggers,
    usage,
    webhooks,
    widget,
)
from entrypoints.runtime import JOB_WAKE_UPS, AuthFailurePolicy, RateLimitPolicy, TransactionMode
from entrypoints.settings import Settings
from entrypoints.units import ScopedUnits

listen_for_work = listen
"""The worker's LISTEN for new work on PostgreSQL (the composition root names the adapter for it)."""


class PlatformProvider(Provider):
    scope = Scope.APP

    clock = provide(SystemClock, provides=Clock)
    one_time_passwords = provide(PyotpOneTimePasswords, provides=OneTimePasswords)

    @provide
    def passwords(self, settings: Settings) -> PasswordHasher:
        return Argon2PasswordHasher(time_cost=settings.argon2_time_cost, memory_kib=settings.argon2_memory_kib,
                                    parallelism=settings.argon2_parallelism)

    @provide
    def secret_box(self, settings: Settings) -> SecretBox:
        """One box for every stored secret (webhook signing secrets, provider credentials); it still opens what
        the retired keys sealed."""
        return FernetSecretBox(settings.secret_key, previous_keys=settings.previous_secret_keys)
    random = provide(SystemRandom, provides=Random)

    @provide
    def units(self, container: AsyncContainer) -> Units:
        """Units of work outside a request (long-lived work such as a media session): each a scope of this
        container (the HTTP container's carry a stand-in request: ``entrypoints/http/providers.py``)."""
        return ScopedUnits(container)
    memory_limiter = provide(InMemoryRateLimiter)
    cause = provide(CauseContext, scope=Scope.REQUEST)
    """One per unit of work: what caused its work, read by the unit of work as it records events."""

    @provide
    def rate_limit_policy(self, settings: Settings) -> RateLimitPolicy:
        # the organization's ceiling is never below one key's limit (raising the keys' limit raises it too)
        return RateLimitPolicy(default_windows(settings.rate_limit_per_minute, settings.rate_limit_per_hour),
                               organization=default_windows(
                                   max(settings.org_rate_limit_per_minute, settings.rate_limit_per_minute),
                                   max(settings.org_rate_limit_per_hour, settings.rate_limit_per_hour)))

    @provide
    def auth_failure_policy(self, settings: Settings) -> AuthFailurePolicy:
        return AuthFailurePolicy((Window(60, settings.auth_failures_per_minute),))


class DefaultTransactionModeProvider(Provider):
    """Outside HTTP (CLI, worker) every transaction may write."""

    @provide(scope=Scope.REQUEST)
    def mode(self) -> TransactionMode:
        return TransactionMode(write=True)

    @provide(scope=Scope.REQUEST)
    def api_base(self, settings: Settings) -> ApiBaseUrl:
        """Outside HTTP there is no request to take a base URL from: only PARLEY_PUBLIC_BASE_URL."""
        if not settings.public_base_url:
            raise LookupError("links outside a request need PARLEY_PUBLIC_BASE_URL")
        return ApiBaseUrl(settings.public_base_url.rstrip("/") + "/v2")


class SqlProvider(Provider):
    @provide(scope=Scope.APP)
    async def engine(self, settings: Settings) -> AsyncIterator[AsyncEngine]:
        engine = create_engine(settings.database_url, pool_size=settings.db_pool_size)
        yield engine
        await engine.dispose()

    @provide(scope=Scope.REQUEST)
    async def uow(self, engine: AsyncEngine, clock: Clock, mode: TransactionMode,
                  cause: CauseContext) -> AsyncIterator[SqlUnitOfWork]:
        uow = SqlUnitOfWork(engine, clock, write=mode.write, on_work=JOB_WAKE_UPS.notify, cause=cause)
        yield uow
        await uow.close()

    uow_port = alias(source=SqlUnitOfWork, provides=UnitOfWork)

    organizations = provide(SqlOrganizationRepository, provides=OrganizationRepository, scope=Scope.REQUEST)
    api_keys = provide(SqlApiKeyRepository, provides=ApiKeyRepository, scope=Scope.REQUEST)
    users = provide(SqlUserRepository, provides=UserRepository, scope=Scope.REQUEST)
    idempotency = provide(SqlIdempotencyStore, provides=IdempotencyStore, scope=Scope.REQUEST)
    agents = provide(SqlAgentRepository, provides=AgentRepository, scope=Scope.REQUEST)
    audit = provide(SqlAuditLog, provides=AuditLog, scope=Scope.REQUEST)
    jobs = provide(SqlJobQueue, provides=JobQueue, scope=Scope.REQUEST)
    outbox = provide(SqlOutboxReader, provides=OutboxReader, scope=Scope.REQUEST)
    gauges = provide(SqlBacklogGauges, provides=BacklogGauges, scope=Scope.REQUEST)

    @provide(scope=Scope.APP)
    def leases(self) -> RateLimitLeases:
        """This process's leases on the shared rate-limit counters (adapters/sql/rate_limits.py)."""
        return RateLimitLeases()

    @provide(scope=Scope.REQUEST)
    def limiter(self, settings: Settings, memory: InMemoryRateLimiter, uow: SqlUnitOfWork,
                leases: RateLimitLeases) -> RateLimiter:
        return SqlRateLimiter(uow, leases) if settings.shared_rate_limits else memory


class MemoryProvider(Provider):
    store = provide(InMemoryStore, scope=Scope.APP)

    @provide(scope=Scope.REQUEST)
    async def uow(self, store: InMemoryStore, clock: Clock, cause: CauseContext) -> AsyncIterator[InMemoryUnitOfWork]:
        uow = InMemoryUnitOfWork(store, clock, on_work=JOB_WAKE_UPS.notify, cause=cause)
        yield uow
        await uow.close()

    uow_port = alias(source=InMemoryUnitOfWork, provides=UnitOfWork)

    organizations = provide(InMemoryOrganizationRepository, provides=OrganizationRepository, scope=Scope.REQUEST)
    api_keys = provide(InMemoryApiKeyRepository, provides=ApiKeyRepository, scope=Scope.REQUEST)
    users = provide(InMemoryUserRepository, provides=UserRepository, scope=Scope.REQUEST)
    idempotency = provide(InMemoryIdempotencyStore, provides=IdempotencyStore, scope=Scope.REQUEST)
    agents = provide(InMemoryAgentRepository, provides=AgentRepository, scope=Scope.REQUEST)
    audit = provide(InMemoryAuditLog, provides=AuditLog, scope=Scope.REQUEST)
    jobs = provide(InMemoryJobQueue, provides=JobQueue, scope=Scope.REQUEST)
    outbox = provide(InMemoryOutboxReader, provides=OutboxReader, scope=Scope.REQUEST)
    gauges = provide(InMemoryBacklogGauges, provides=BacklogGauges, scope=Scope.REQUEST)

    limiter = alias(source=InMemoryRateLimiter, provides=RateLimiter)


class UseCaseProvider(Provider):
    scope = Scope.REQUEST

    account_cases = provide_all(
        accounts.Authenticate,
        accounts.ResolveActingOrganization,
        accounts.CreateOrganization,
        accounts.CreateSubOrganization,
        accounts.ListSubOrganizations,
        accounts.GetSubOrganization,
        accounts.UpdateSubOrganization,
        accounts.DeleteSubOrganization,
        accounts.IssueApiKey,
        accounts.ListApiKeys,
        accounts.GetApiKey,
        accounts.RevokeApiKey,
        accounts.RotateApiKey,
        accounts.CreateUser,
    )
    agent_cases = provide_all(
        agents.CreateAgent,
        agents.GetAgent,
        agents.ListAgents,
        agents.UpdateAgent,
        agents.DeleteAgent,
        agents.PublishAgent,
        agents.DuplicateAgent,
        agents.ListAgentVersions,
        agents.GetAgentVersion,
        agents.RestoreAgentVersion,
        agents.GetPublishedAgent,
    )
    audit_cases = provide_all(audit.RecordAuditEvent, audit.ListAuditEvents, audit.PurgeAuditEvents)


CORE = Feature(name="core", providers=(PlatformProvider, UseCaseProvider), sql=SqlProvider, memory=MemoryProvider)

FEATURES: tuple[Feature, ...] = (
    engines.FEATURE,
    calls.FEATURE,
    knowledge.FEATURE,
    scheduling.FEATURE,
    business_hours.FEATURE,
    campaigns.FEATURE,
    leads.FEATURE,
    sms.FEATURE,
    usage.FEATURE,
    billing.FEATURE,
    webhooks.FEATURE,
    triggers.FEATURE,
    attendees.FEATURE,
    sessions.FEATURE,
    widget.FEATURE,
    cloud.FEATURE,
    housekeeping.FEATURE,
    media.FEATURE,
    carriers.FEATURE,
    conversation.FEATURE,
)
"""The registry: every feature the application installs, in the order they are installed. A feature providing a
port another one listed before it (or the core) provides must declare it (``Feature.overrides``)."""


def configuration(settings: Settings, features: Sequence[Feature] = FEATURES) -> dict[Any, Any]:
    """The platform settings, every feature's section by type, and the outbox consumers' jobs: the container's
    context. Reading the sections here fails at start-up on a PARLEY_* value that does not parse
    (``SettingsError``)."""
    values: dict[Any, Any] = {Settings: settings}
    for feature in features:
        if feature.settings is not None:
            values[feature.settings] = settings.section(feature.settings)
    values[OutboxConsumerJobs] = OutboxConsumerJobs(tuple(
        pair for feature in features for pair in sorted(feature.outbox_consumers.items())))
    return values


class ConfigurationProvider(Provider):
    scope = Scope.APP

    def __init__(self, sections: list[type[Any]]) -> None:
        super().__init__()
        for section in sections:
            self.from_context(provides=section)


def make_container(settings: Settings, *providers: Provider, features: Sequence[Feature] = FEATURES
                   ) -> AsyncContainer:
    """The core's and the registry's features' providers on ``settings.backend``, then ``providers`` (tests,
    benchmarks, the HTTP side), which override them. ``FeatureConflict`` when two features provide one port and
    the later one did not declare the override."""
    settings = settings.with_secret_key()  # PARLEY_SECRET_KEY, or the one kept under var_dir
    per_feature = [(feature, feature.container_providers(settings.backend)) for feature in (CORE, *features)]
    check_overrides(per_feature)
    context = configuration(settings, features)
    installed: list[Provider] = [ConfigurationProvider(list(context))]
    for _, feature_providers in per_feature:
        installed.extend(feature_providers)
    return make_async_container(*installed, *providers, context=context)


def build_container(settings: Settings, *overrides: Provider) -> AsyncContainer:
    """A container for the CLI and the worker (no HTTP request in scope)."""
    return make_container(settings, DefaultTransactionModeProvider(), *overrides)
