"""The calls' progress pass (the job ``calls.progress``): the telephony simulator's and the dial queue's worker.

One pass advances the calls whose telephony adapter has news (``AdvanceCall``), ends the ones stuck past their
deadline (``SweepOverdueCall``), then dials queued calls while their organization has free lines
(``DialNextQueuedCall``). Every step is its own unit of work (``Units``): a failing call never holds back the
others, and a killed worker loses at most the step it was in. A simulator line that is up asks for the agent's
conversation: the pass runs it (``SimulatedConversations``: the conversation of live media sessions with a
scripted caller, ``application/simulated_call.py``) outside any unit of work, its tools each in a unit of their
own, then hands the result back (``ResumeCall``). A conversation that fails is asked for again by the line.

The job is due again when the next call has news or passes its deadline (or on the next ``IDLE_RECHECK`` beat); a
commit that created work (a call placed, an event) runs it at once. Its lease is short: the calls of a killed
worker move on within it, and passes that overlap are safe (each call's row lock, the organization's dial lock).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from application.calls import (
    AdvanceCall,
    AdvanceCallCommand,
    DialNextQueuedCall,
    DialNextQueuedCallCommand,
    ResumeCall,
    ResumeCallCommand,
    SweepOverdueCall,
    SweepOverdueCallCommand,
)
from application.jobs import JobKind, due_or_beat
from application.ports.calls import CallRef, CallRepository
from application.ports.jobs import ClaimedJob
from application.ports.platform import Clock, Unit, Units
from application.ports.telephony import CONVERSATION, CallSignal, SimulatedConversations
from application.simulated_call import conversation_result
from domain.dnc import DncUnavailable

log = logging.getLogger("parley.calls")

KIND = "calls.progress"
BATCH = 200
"""Calls advanced, swept, and dialled per organization, per pass (at most)."""
IDLE_RECHECK = timedelta(seconds=15)
"""With no call due, the job looks again after this (a call placed through another process on SQLite, which has no
cross-process notifications)."""
LEASE = timedelta(seconds=30)


@dataclass
class PassReport:
    advanced: int = 0
    swept: int = 0
    dialled: int = 0

    @property
    def total(self) -> int:
        return self.advanced + self.swept + self.dialled


@dataclass(frozen=True, slots=True)
class RunCallProgressCommand:
    organization_id: int | None = None
    """Only this organization's calls (tests); None: every organization's."""


class RunCallProgress:
    """One pass of the calls' worker (module docstring)."""

    def __init__(self, units: Units) -> None:
        self.units = units

    async def execute(self, command: RunCallProgressCommand) -> PassReport:
        org = command.organization_id
        report = PassReport()

        async def due(unit: Unit) -> list[CallRef]:
            return await (await unit.get(CallRepository)).due((await unit.get(Clock)).now(), BATCH, org)

        async def overdue(unit: Unit) -> list[CallRef]:
            return await (await unit.get(CallRepository)).overdue((await unit.get(Clock)).now(), BATCH, org)

        async def queued(unit: Unit) -> list[int]:
            return await (await unit.get(CallRepository)).organizations_with_queued(BATCH, org)

        for ref in await self.units.read(due):
            report.advanced += await self.advance(ref)
        for ref in await self.units.read(overdue):
            report.swept += await self._sweep(ref)
        for organization_id in await self.units.read(queued):
            report.dialled += await self._dial_queued(organization_id)
        return report

    async def advance(self, ref: CallRef) -> bool:
        """One call's step: what its line reported applied, and its conversation run when the line asks for it."""
        try:
            advanced = await self.units.execute(AdvanceCall, AdvanceCallCommand(ref))
        except Exception:
            log.exception("advancing call %s failed", ref.call_id)
            return False
        if advanced is None:
            return False
        if advanced.conversation is not None:
            await self._converse(ref, advanced.conversation)
        return True

    async def _converse(self, ref: CallRef, signal: CallSignal) -> None:
        """The agent's conversation on a simulator line, outside any unit of work (its tools, knowledge searches
        and configuration take units of their own), then its result handed back to the line."""
        assert signal.caller is not None

        async def conversations(unit: Unit) -> SimulatedConversations:
            return await unit.get(SimulatedConversations)

        try:
            runner = await self.units.run(conversations)
            outcome = await runner.converse(ref.organization_id, ref.call_id, signal.at, signal.caller)
            result = conversation_result(outcome, int(signal.details.get("attempt") or 0))
            await self.units.execute(ResumeCall, ResumeCallCommand(ref, CONVERSATION, result))
        except Exception:  # the line asks again (a carrier's stream would be retried the same way)
            log.exception("the conversation of simulated call %s failed", ref.call_id)

    async def _sweep(self, ref: CallRef) -> bool:
        try:
            return await self.units.execute(SweepOverdueCall, SweepOverdueCallCommand(ref)) is not None
        except Exception:
            log.exception("sweeping call %s failed", ref.call_id)
            return False

    async def _dial_queued(self, organization_id: int) -> int:
        dialled = 0
        for _ in range(BATCH):
            try:
                call = await self.units.execute(DialNextQueuedCall, DialNextQueuedCallCommand(organization_id))
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


def progress_job(units: Units) -> JobKind:
    """The simulator and dialler as one recurring job: a pass, then due again when the earliest active call has news
    or passes its deadline; a commit that creates work (a call placed, an event) runs it at once."""
    run = RunCallProgress(units)

    async def next_due(unit: Unit) -> tuple[datetime | None, datetime]:
        return await (await unit.get(CallRepository)).next_due(), (await unit.get(Clock)).now()

    async def progress(job: ClaimedJob) -> datetime:
        await run.execute(RunCallProgressCommand())
        due, now = await units.read(next_due)
        return due_or_beat(due, now, IDLE_RECHECK)

    return JobKind(KIND, progress, on_wake=True, recurring=True, lease=LEASE)
