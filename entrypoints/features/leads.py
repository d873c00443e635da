"""Leads feature: leads received over the API (called at once by an agent, or handed to a campaign) and the
outbox consumer that moves each lead as its call or campaign contact ends.

It uses the calls feature's ``PlaceCall``, DNC gate and phone normaliser, and the campaigns feature's contact
intake (``AddContact``). The consumer is the job kind ``leads.follow``: recurring, woken like the webhook
dispatcher by any commit that recorded events (``application/outbox.consumer_job``).
"""

from __future__ import annotations

from dishka import AsyncContainer, Provider, Scope, provide, provide_all

from adapters.memory.leads import InMemoryLeadRepository
from adapters.sql.leads import SqlLeadRepository
from application import leads as cases
from application.jobs import JobKind
from application.leads import LeadsOfEndedContacts
from application.outbox import LEADS, consumer_job
from application.ports.campaigns import ContactEndings
from application.ports.leads import LeadRepository
from entrypoints.features import Feature
from entrypoints.settings import Settings
from entrypoints.units import ScopedUnits

KIND = "leads.follow"
BATCH = 500


class SqlLeadsProvider(Provider):
    leads = provide(SqlLeadRepository, provides=LeadRepository, scope=Scope.REQUEST)


class MemoryLeadsProvider(Provider):
    leads = provide(InMemoryLeadRepository, provides=LeadRepository, scope=Scope.REQUEST)


class LeadsUseCaseProvider(Provider):
    scope = Scope.REQUEST

    cases = provide_all(
        cases.CreateLead,
        cases.GetLead,
        cases.ListLeads,
        cases.FollowLeadOutcomes,
    )
    # for the campaigns feature: the leads queued on a cancelled or deleted contact fail with it
    contact_endings = provide(LeadsOfEndedContacts, provides=ContactEndings)


def follow_job(container: AsyncContainer, settings: Settings) -> JobKind:
    """The consumer as a recurring job (``application/outbox.consumer_job``)."""
    return consumer_job(KIND, ScopedUnits(container), cases.FollowLeadOutcomes, cases.FollowLeadOutcomesCommand, BATCH)


FEATURE = Feature(
    name="leads",
    providers=(LeadsUseCaseProvider,),
    sql=SqlLeadsProvider,
    memory=MemoryLeadsProvider,
    jobs=[follow_job],
    outbox_consumers={LEADS: KIND},
)
