"""The outbox as a platform service: who consumes it, and how long processed events are kept.

Every use case records its events with ``uow.record(...)`` (constructors: ``domain.events``); each
consumer below reads them all, in id order, behind its own cursor (``OutboxReader``). A new
consumer (triggers, usage) adds its name here; housekeeping purges an event only once every
consumer here has processed it and the retention window has passed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from application.jobs import JobKind, clock_now, drain_batches
from application.ports.events import OutboxReader
from application.ports.jobs import ClaimedJob, JobQueue, NewJob
from application.ports.platform import Clock, Units, UseCase

C = TypeVar("C")

WEBHOOKS = "webhooks"
"""The webhook dispatcher: fans events out to subscriptions (application/webhooks.DispatchOutbox)."""

LEADS = "leads"
"""Leads follow their calls: each lead's status moves when its call or campaign contact ends
(application/leads.FollowLeadOutcomes)."""

TRIGGERS = "triggers"
"""Triggers: every event is evaluated against the organization's automation rules on it
(application/triggers.EvaluateTriggers)."""

ATTENDEES = "attendees"
"""Attendee notifications: appointment events become the emails, ICS invitations and reminders an appointment's
attendee is sent (application/scheduling/notifications.PlanAttendeeNotifications)."""

CONSUMERS: tuple[str, ...] = (WEBHOOKS, LEADS, TRIGGERS, ATTENDEES)
"""Every consumer of the outbox."""


RECHECK = timedelta(seconds=15)
"""How often the consumers' shared safety recheck (``RecheckConsumers``) asks the outbox whether one is behind."""

CONSUMER_FALLBACK = timedelta(minutes=5)
"""An idle consumer's own next look at the outbox. New events wake it (in-process after the commit that recorded
them; NOTIFY on PostgreSQL), and the shared recheck makes it due within ``RECHECK`` when events reached the outbox
some other way (another process on SQLite): this is only the last resort."""


def consumer_job(kind: str, units: Units, case: type[UseCase[C, int]], command: Callable[[int], C],
                 batch: int) -> JobKind:
    """An outbox consumer as a recurring job: passes of ``case`` (``command(batch)``: at most ``batch`` events, each
    pass a unit of work of its own) until the outbox is read, then due again after ``CONSUMER_FALLBACK``; a commit
    that recorded events wakes it at once, and the shared recheck (``outbox.recheck``) finds the rest."""

    async def consume(job: ClaimedJob) -> datetime:
        await drain_batches(lambda: units.execute(case, command(batch)), batch)
        return await clock_now(units) + CONSUMER_FALLBACK

    return JobKind(kind, consume, on_wake=True, recurring=True)


@dataclass(frozen=True, slots=True)
class RecheckConsumersCommand:
    jobs: tuple[tuple[str, str], ...]
    """(consumer, the job kind that runs it) for every consumer to look after."""


class RecheckConsumers:
    """The consumers' shared safety recheck: one question to the outbox for all of them (``OutboxReader.behind``)
    instead of an idle pass of each; the job of each consumer with events past its cursor is made due now
    (scheduling wakes the runners). Returns the consumers that were behind. A consumer whose pass fails is so tried
    again within ``RECHECK`` while events wait for it, as a wake-up would run it."""

    def __init__(self, outbox: OutboxReader, jobs: JobQueue, clock: Clock) -> None:
        self.outbox, self.jobs, self.clock = outbox, jobs, clock

    async def execute(self, command: RecheckConsumersCommand) -> list[str]:
        kinds = dict(command.jobs)
        lagging = await self.outbox.behind(list(kinds))
        for consumer in lagging:
            await self.jobs.schedule(NewJob(kinds[consumer], self.clock.now()))
        return lagging


@dataclass(frozen=True, slots=True)
class OutboxPolicy:
    retention: timedelta = timedelta(days=7)
    """How long a processed event stays in the outbox (for inspection and replays)."""


@dataclass(frozen=True, slots=True)
class PurgeConsumedEventsCommand:
    """Purge what every consumer has processed, older than the retention (by the clock's now)."""


class PurgeConsumedEvents:
    """Delete the outbox events every consumer has processed and that are older than the retention."""

    def __init__(self, outbox: OutboxReader, clock: Clock, policy: OutboxPolicy) -> None:
        self.outbox, self.clock, self.policy = outbox, clock, policy

    async def execute(self, command: PurgeConsumedEventsCommand) -> int:
        return await self.outbox.purge(CONSUMERS, self.clock.now() - self.policy.retention)
