"""Campaigns feature: outbound campaigns and their contacts (create, edit, start, pause, cancel; contacts added
in bulk or imported from CSV). The dialer that works through running campaigns is not part of it yet.

It uses the calls feature's ports (phone normaliser, phone numbers) and the core's agents. Whether a
``schedule_id`` names a schedule is the ``CampaignSchedules`` port: the core's default knows no schedule; the
schedules feature provides its own. This feature provides ``ScheduleUsage`` to the schedules feature: a running
or paused campaign keeps its schedule from being deleted.
"""

from __future__ import annotations

from dishka import Provider, Scope, provide, provide_all

from adapters.memory.campaigns import InMemoryCampaignRepository, InMemoryContactRepository
from adapters.sql.campaigns import SqlCampaignRepository, SqlContactRepository
from application import campaigns as cases
from application.ports.campaigns import CampaignRepository, ContactRepository
from application.ports.schedules import ScheduleUsage
from entrypoints.features import Feature


class SqlCampaignsProvider(Provider):
    scope = Scope.REQUEST

    campaigns = provide(SqlCampaignRepository, provides=CampaignRepository)
    contacts = provide(SqlContactRepository, provides=ContactRepository)


class MemoryCampaignsProvider(Provider):
    scope = Scope.REQUEST

    campaigns = provide(InMemoryCampaignRepository, provides=CampaignRepository)
    contacts = provide(InMemoryContactRepository, provides=ContactRepository)


class CampaignsUseCaseProvider(Provider):
    scope = Scope.REQUEST

    # overrides the core's NoScheduleUsage: a running or paused campaign keeps its schedule from being deleted
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


FEATURE = Feature(
    name="campaigns",
    providers=(CampaignsUseCaseProvider,),
    sql=SqlCampaignsProvider,
    memory=MemoryCampaignsProvider,
)
