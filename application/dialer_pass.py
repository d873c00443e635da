"""The campaign dialer's pass (the job ``campaigns.dial``): the policy that shares the line between campaigns.

One pass applies the outcomes of finished campaign calls (``SettleContact``), then gives each running campaign that
has something to do a turn (round-robin: the one dialled longest ago first; one statement lists them with their
first open contact, ``dialer.wants_turn`` picks), placing at most ``campaign_budget`` calls for it and about
``pass_budget`` in all (``DialNextContact``). Every step is its own unit of work (``Units``), so a failing contact
never holds back the others and a killed worker loses at most the step it was in. Up to ``turns_at_once``
campaigns take their turns at once, started in the round-robin order (a step mostly waits for the database; each
holds its own campaign's row lock, so the cap and the per-attempt key hold as with several workers); where the
database has one writer (SQLite) the composition root gives 1, and turns follow one another.

The job is due again when the next deferred or retried contact is (or on the next ``IDLE_RECHECK`` beat), at once
when a budget ran out; a commit that created work (a call placed or ended, a campaign started) runs it at once.
Its lease is short: a killed worker's turn passes to another within it, and passes that overlap are harmless (the
campaign's row lock).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from application.dialer import (
    DialNextContact,
    DialNextContactCommand,
    DialOutcome,
    SettleContact,
    SettleContactCommand,
    wants_turn,
)
from application.jobs import JobKind, due_or_beat
from application.ports.dialer import CampaignRef, CampaignTurn, ContactRef, DialerStore
from application.ports.jobs import ClaimedJob
from application.ports.platform import Clock, Unit, Units
from domain.dnc import DncUnavailable

log = logging.getLogger("parley.dialer")

KIND = "campaigns.dial"
IDLE_RECHECK = timedelta(seconds=15)
LEASE = timedelta(seconds=30)
TURNS_AT_ONCE = 4
"""Campaigns taking their turn at once where the database takes concurrent writers (PostgreSQL)."""


@dataclass(frozen=True, slots=True)
class DialerPolicy:
    """How a pass shares the line."""

    turns_at_once: int = 1
    """Campaigns taking their turn at once (each a connection of the pool while it steps)."""
    campaign_budget: int = 10
    """Calls placed for one campaign per pass: campaigns share the line in turns."""
    pass_budget: int = 200
    """Calls placed per pass, about (campaigns already under way finish their step)."""
    max_steps: int = 100
    """Steps per campaign per pass (deferring contacts outside their window takes steps without dialling)."""
    batch: int = 500
    """Campaigns and settled contacts read per pass."""


@dataclass
class DialerReport:
    settled: int = 0
    dialled: int = 0
    skipped: int = 0
    exhausted: bool = False
    """A budget ran out: more may be due at once."""


@dataclass(frozen=True, slots=True)
class RunDialerPassCommand:
    pass


class RunDialerPass:
    """One pass of the campaign dialer (module docstring)."""

    def __init__(self, units: Units, policy: DialerPolicy) -> None:
        self.units, self.policy = units, policy

    async def execute(self, command: RunDialerPassCommand) -> DialerReport:
        report = DialerReport()
        for ref in await self.units.read(self._settled):
            report.settled += await self._settle(ref)
        turns, now = await self.units.read(self._turns)
        gate = asyncio.Semaphore(self.policy.turns_at_once)  # hands its slots out in the order asked: round-robin

        async def turn(ref: CampaignRef) -> None:
            async with gate:
                if report.dialled >= self.policy.pass_budget:
                    report.exhausted = True
                    return
                await self._turn(ref, report)

        await asyncio.gather(*(turn(t.ref) for t in turns if wants_turn(t, now)))
        return report

    async def _settled(self, unit: Unit) -> list[ContactRef]:
        return await (await unit.get(DialerStore)).settled_contacts(self.policy.batch)

    async def _turns(self, unit: Unit) -> tuple[list[CampaignTurn], datetime]:
        return await (await unit.get(DialerStore)).campaign_turns(self.policy.batch), (await unit.get(Clock)).now()

    async def _settle(self, ref: ContactRef) -> bool:
        try:
            return await self.units.execute(SettleContact, SettleContactCommand(ref)) is not None
        except Exception:
            log.exception("applying the outcome of contact %s failed", ref.contact_id)
            return False

    async def _turn(self, ref: CampaignRef, report: DialerReport) -> None:
        dialled = 0
        for _ in range(self.policy.max_steps):
            if dialled >= self.policy.campaign_budget or report.dialled >= self.policy.pass_budget:
                report.exhausted = True
                return
            try:
                outcome = await self.units.execute(DialNextContact, DialNextContactCommand(ref))
            except DncUnavailable:
                log.warning("DNC screening unavailable for campaign %s: its contacts wait", ref.campaign_id)
                return
            except Exception:
                log.exception("dialling a contact of campaign %s failed", ref.campaign_id)
                return
            if outcome == DialOutcome.DIALLED:
                dialled += 1
                report.dialled += 1
            elif outcome == DialOutcome.SKIPPED:
                report.skipped += 1
            elif outcome != DialOutcome.DEFERRED:
                return
        report.exhausted = True


def dialer_job(units: Units, policy: DialerPolicy) -> JobKind:
    """The dialer as one recurring job, woken by every commit that creates work (calls ending among them)."""
    run = RunDialerPass(units, policy)

    async def next_due(unit: Unit) -> tuple[datetime | None, datetime]:
        now = (await unit.get(Clock)).now()
        return await (await unit.get(DialerStore)).next_due(now), now

    async def dial(job: ClaimedJob) -> datetime:
        report = await run.execute(RunDialerPassCommand())
        due, now = await units.read(next_due)
        if report.exhausted:
            return now
        return due_or_beat(due, now, IDLE_RECHECK)

    return JobKind(KIND, dial, on_wake=True, recurring=True, lease=LEASE)
