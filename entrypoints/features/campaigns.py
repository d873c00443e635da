"""Campaigns feature: outbound campaigns and their contacts (create, edit, start, pause, cancel; contacts added
in bulk or imported from CSV), and the dialer that works through running campaigns.

It uses the calls feature's ports (phone normaliser, phone numbers, calls, DNC gate, ``PlaceCall``), the
schedules feature's schedules and holiday calendars, and the core's agents. It provides ``ScheduleUsage`` to the
schedules feature (a running or paused campaign keeps its schedule); the schedules feature provides
``CampaignSchedules`` (a campaign may name a live schedule).

Its job ``campaigns.dial`` is the dialer's pass (``application/dialer_pass.py``): the composition root only picks
how many campaigns take their turn at once (``TURNS_AT_ONCE`` on PostgreSQL; SQLite has one writer, so 1).
``dial_pass`` gives the pass over a container (tests run one with a manual clock).
"""

from __future__ import annotations

from dishka import AsyncContainer, Provider, Scope, provide, provide_all

from adapters.memory.campaigns import InMemoryCampaignRepository, InMemoryContactRepository
from adapters.memory.dialer import InMemoryDialerStore
from adapters.sql.campaigns import SqlCampaignRepository, SqlContactRepository
from adapters.sql.dialer import SqlDialerStore
from application import campaigns as cases
from application import dialer
from application.dialer_pass import TURNS_AT_ONCE, DialerPolicy, RunDialerPass, dialer_job
from application.jobs import JobKind
from application.ports.business_hours import ScheduleUsage
from application.ports.campaigns import CampaignRepository, ContactRepository
from application.ports.dialer import DialerStore
from entrypoints.features import Feature
from entrypoints.settings import Backend, Settings
from entrypoints.units import ScopedUnits


def dialer_policy(settings: Settings) -> DialerPolicy:
    return DialerPolicy(turns_at_once=TURNS_AT_ONCE if settings.backend == Backend.POSTGRESQL else 1)


class SqlCampaignsProvider(Provider):
    scope = Scope.REQUEST

    campaigns = provide(SqlCampaignRepository, provides=CampaignRepository)
    contacts = provide(SqlContactRepository, provides=ContactRepository)
    dialer = provide(SqlDialerStore, provides=DialerStore)


class MemoryCampaignsProvider(Provider):
    scope = Scope.REQUEST

    campaigns = provide(InMemoryCampaignRepository, provides=CampaignRepository)
    contacts = provide(InMemoryContactRepository, provides=ContactRepository)
    dialer = provide(InMemoryDialerStore, provides=DialerStore)


class CampaignsUseCaseProvider(Provider):
    scope = Scope.REQUEST

    # for the schedules feature: a running or paused campaign keeps its schedule from being deleted
    schedule_usage = provide(cases.CampaignScheduleUsage, provides=ScheduleUsage)

    cases = provide_all(
        cases.CreateCampaign,
        cases.ListCampaigns,
        cases.GetCampaign,
        cases.UpdateCampaign,
        cases.DeleteCampaign,
        cases.StartCampaign,
        cases.PauseCampaign,
        cases.CancelCampaign,
        cases.AddContacts,
        cases.AddContact,
        cases.ImportContacts,
        cases.ListContacts,
        cases.GetContact,
        cases.DeleteContact,
    )
    dialer_cases = provide_all(dialer.CallingWindows, dialer.DialNextContact, dialer.SettleContact,
                               dialer.DialContactNow)


def dial_pass(container: AsyncContainer, settings: Settings) -> RunDialerPass:
    """The dialer's pass over the container's units of work."""
    return RunDialerPass(ScopedUnits(container), dialer_policy(settings))


def dial_job(container: AsyncContainer, settings: Settings) -> JobKind:
    return dialer_job(ScopedUnits(container), dialer_policy(settings))


FEATURE = Feature(
    name="campaigns",
    providers=(CampaignsUseCaseProvider,),
    sql=SqlCampaignsProvider,
    memory=MemoryCampaignsProvider,
    jobs=[dial_job],
)
