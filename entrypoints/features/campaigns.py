"""Campaigns feature: outbound campaigns and their contacts (create, edit, start, pause, cancel; contacts added
in bulk or imported from CSV), and the dialer that works through running campaigns.

It uses the calls feature's ports (phone normaliser, phone numbers, calls, DNC gate, ``PlaceCall``), the
schedules feature's schedules and holiday calendars, and the core's agents. It provides ``ScheduleUsage`` to the
schedules feature (a running or paused campaign keeps its schedule); the schedules feature provides
``CampaignSchedules`` (a campaign may name a live schedule).

The worker job (``campaigns.dial``) is one pass: apply the outcomes of finished campaign calls, then give each
running campaign that has something to do a turn (round-robin: the one dialled longest ago first; one statement
lists them with their first open contact, ``dialer.wants_turn`` picks), placing at most ``CAMPAIGN_BUDGET``
calls for it and about ``PASS_BUDGET`` in all; every step is its own unit of work. On PostgreSQL up to
``TURNS_AT_ONCE`` campaigns take their turns at once, started in the round-robin order (a step mostly waits for
the database; each holds its own campaign's row lock, so the cap and the per-attempt key hold as with several
workers); SQLite has one writer, its turns follow one another. It is due again when the next
deferred or retried contact is (or after ``IDLE_RECHECK``); a commit that created work (a call placed or ended,
a campaign started) runs it at once. ``run_once`` is one pass (tests call it with a manual clock).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from dishka import AsyncContainer, Provider, Scope, provide, provide_all

from adapters.memory.campaigns import InMemoryCampaignRepository, InMemoryContactRepository
from adapters.memory.dialer import InMemoryDialerStore
from adapters.sql.campaigns import SqlCampaignRepository, SqlContactRepository
from adapters.sql.dialer import SqlDialerStore
from application import campaigns as cases
from application import dialer
from application.jobs import JobKind, next_beat
from application.ports.campaigns import CampaignRepository, ContactRepository
from application.ports.dialer import CampaignRef, CampaignTurn, ContactRef, DialerStore
from application.ports.jobs import ClaimedJob
from application.ports.platform import Clock
from application.ports.schedules import ScheduleUsage
from domain.dnc import DncUnavailable
from entrypoints.features import Feature
from entrypoints.settings import Backend, Settings
from entrypoints.worker import in_unit

log = logging.getLogger("parley.dialer")

KIND = "campaigns.dial"
BATCH = 500
CAMPAIGN_BUDGET = 10
"""Calls placed for one campaign per pass: campaigns share the line in turns."""
PASS_BUDGET = 200
MAX_STEPS = 100
"""Steps per campaign per pass (deferring contacts outside their window takes steps without dialling)."""
IDLE_RECHECK = timedelta(seconds=15)
TURNS_AT_ONCE = 4
"""Campaigns taking their turn at once in one pass on PostgreSQL (each a connection of the pool while it steps)."""


def turns_at_once(settings: Settings | None) -> int:
    return TURNS_AT_ONCE if settings is not None and settings.backend == Backend.POSTGRESQL else 1


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
    dialer_cases = provide_all(dialer.CallingWindows, dialer.DialNextContact, dialer.SettleContact,
                               dialer.DialContactNow)


# ------------------------------------------------------------------------------------------------ the dialer


@dataclass
class DialerReport:
    settled: int = 0
    dialled: int = 0
    skipped: int = 0
    exhausted: bool = False
    """A budget ran out: more may be due at once."""


async def _unit(container: AsyncContainer, work: Any) -> Any:
    return await in_unit(container, lambda unit: work(unit.request))


async def _settle(container: AsyncContainer, ref: ContactRef) -> bool:
    async def work(r: Any) -> Any:
        return await (await r.get(dialer.SettleContact)).execute(dialer.SettleContactCommand(ref))

    try:
        return await _unit(container, work) is not None
    except Exception:
        log.exception("applying the outcome of contact %s failed", ref.contact_id)
        return False


async def _turn(container: AsyncContainer, ref: CampaignRef, report: DialerReport) -> None:
    async def work(r: Any) -> str:
        return await (await r.get(dialer.DialNextContact)).execute(dialer.DialNextContactCommand(ref))

    dialled = 0
    for _ in range(MAX_STEPS):
        if dialled >= CAMPAIGN_BUDGET or report.dialled >= PASS_BUDGET:
            report.exhausted = True
            return
        try:
            outcome = await _unit(container, work)
        except DncUnavailable:
            log.warning("DNC screening unavailable for campaign %s: its contacts wait", ref.campaign_id)
            return
        except Exception:
            log.exception("dialling a contact of campaign %s failed", ref.campaign_id)
            return
        if outcome == "dialled":
            dialled += 1
            report.dialled += 1
        elif outcome == "skipped":
            report.skipped += 1
        elif outcome != "deferred":
            return
    report.exhausted = True


async def run_once(container: AsyncContainer, settings: Settings | None = None) -> DialerReport:
    """One pass of the dialer: apply finished calls' outcomes, then a turn for each running campaign."""
    report = DialerReport()

    async def settled(r: Any) -> list[ContactRef]:
        return await (await r.get(DialerStore)).settled_contacts(BATCH)

    for ref in await _unit(container, settled):
        report.settled += await _settle(container, ref)

    async def running(r: Any) -> tuple[list[CampaignTurn], datetime]:
        return await (await r.get(DialerStore)).campaign_turns(BATCH), (await r.get(Clock)).now()

    turns, now = await _unit(container, running)
    gate = asyncio.Semaphore(turns_at_once(settings))  # hands its slots out in the order asked: round-robin

    async def turn(ref: CampaignRef) -> None:
        async with gate:
            if report.dialled >= PASS_BUDGET:
                report.exhausted = True
                return
            await _turn(container, ref, report)

    await asyncio.gather(*(turn(t.ref) for t in turns if dialer.wants_turn(t, now)))
    return report


def dialer_job(container: AsyncContainer, settings: Settings) -> JobKind:
    """The dialer as one recurring job, woken by every commit that creates work (calls ending among them)."""

    async def dial(job: ClaimedJob) -> datetime:
        report = await run_once(container, settings)

        async def next_due(r: Any) -> tuple[datetime | None, datetime]:
            now = (await r.get(Clock)).now()
            return await (await r.get(DialerStore)).next_due(now), now

        due, now = await _unit(container, next_due)
        if report.exhausted:
            return now
        return min(due, next_beat(now, IDLE_RECHECK)) if due is not None else next_beat(now, IDLE_RECHECK)

    # a short lease: a killed worker's turn passes to another within it; a pass that outlives it may overlap the
    # next one, which the campaign row lock makes harmless
    return JobKind(KIND, dial, on_wake=True, recurring=True, lease=timedelta(seconds=30))


FEATURE = Feature(
    name="campaigns",
    providers=(CampaignsUseCaseProvider,),
    sql=SqlCampaignsProvider,
    memory=MemoryCampaignsProvider,
    jobs=[dialer_job],
)
