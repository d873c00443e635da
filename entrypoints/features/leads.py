"""Leads feature: leads received over the API (called at once by an agent, or handed to a campaign) and the
outbox consumer that moves each lead as its call or campaign contact ends.

It uses the calls feature's ``PlaceCall``, DNC gate and phone normaliser, and the campaigns feature's contact
intake (``AddContact``). The consumer is the job kind ``leads.follow``: recurring, woken like the webhook
dispatcher by any commit that recorded events; ``follow_once`` is one pass (tests).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from dishka import AsyncContainer, Provider, Scope, provide, provide_all

from adapters.memory.leads import InMemoryLeadRepository
from adapters.sql.leads import SqlLeadRepository
from application import leads as cases
from application.jobs import JobKind
from application.leads import LeadsOfEndedContacts
from application.outbox import CONSUMER_FALLBACK, LEADS
from application.ports.campaigns import ContactEndings
from application.ports.jobs import ClaimedJob
from application.ports.leads import LeadRepository
from application.ports.platform import Clock
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


async def follow_once(container: AsyncContainer, *, limit: int = BATCH) -> int:
    """One pass of the consumer in one unit of work; returns how many events it read."""

    async def work(unit: Any) -> int:
        return await (await unit.get(cases.FollowLeadOutcomes)).execute(cases.FollowLeadOutcomesCommand(limit))

    return int(await ScopedUnits(container).run(work))


def follow_job(container: AsyncContainer, settings: Settings) -> JobKind:
    """The consumer as a recurring job: passes until the outbox is read, then due again after CONSUMER_FALLBACK; a
    commit that recorded events wakes it at once, and the shared recheck (``outbox.recheck``) finds the rest."""

    async def follow(job: ClaimedJob) -> datetime:
        while await follow_once(container) >= BATCH:
            pass
        return (await container.get(Clock)).now() + CONSUMER_FALLBACK

    return JobKind(KIND, follow, on_wake=True, recurring=True)


FEATURE = Feature(
    name="leads",
    providers=(LeadsUseCaseProvider,),
    sql=SqlLeadsProvider,
    memory=MemoryLeadsProvider,
    jobs=[follow_job],
    outbox_consumers={LEADS: KIND},
)
