"""Triggers feature: automation rules on events (the API), the outbox consumer that evaluates every event against
them, and the job that runs each action of a matched run, with retries.

It acts through the other features' use cases: ``SendSms`` (sms), ``PlaceCall`` (calls), ``AddContact``
(campaigns), and sends webhooks and chat messages through the webhooks feature's SSRF-safe egress
(``WebhookHttp``). Email goes out through ``EmailSender`` (SMTP, ``PARLEY_SMTP_URL``).

Jobs: ``triggers.evaluate`` (the consumer: recurring, woken by any commit that recorded events) and
``triggers.action`` (one per action of a matched run, key ``<run id>:<index>``; a failed attempt is due again
after the action's backoff, up to five attempts). ``evaluate_once`` and ``act`` are single steps (tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from dishka import AsyncContainer, Provider, Scope, provide, provide_all

from adapters.mail.smtp import SmtpEmailSender
from adapters.memory.triggers import InMemoryTriggerRepository
from adapters.sql.triggers import SqlTriggerRepository
from application import triggers as cases
from application.jobs import JobKind
from application.outbox import CONSUMER_FALLBACK, TRIGGERS
from application.ports.jobs import ClaimedJob
from application.ports.platform import Clock
from application.ports.triggers import EmailSender, TriggerRepository
from entrypoints.features import Feature
from entrypoints.settings import Settings
from entrypoints.units import ScopedUnits

EVALUATE_KIND = "triggers.evaluate"
ACTION_KIND = cases.ACTION_JOB
BATCH = 500


@dataclass(frozen=True)
class TriggerSettings:
    ENV_PREFIX = "SMTP_"

    url: str | None = None
    """PARLEY_SMTP_URL: where email actions go, e.g. smtp://127.0.0.1:1025 (unset: email actions fail)."""
    sender: str = "Parley <parley@localhost>"
    """PARLEY_SMTP_SENDER: the From of email actions."""


class TriggersPlatformProvider(Provider):
    scope = Scope.APP

    @provide
    def policy(self, settings: Settings) -> cases.TriggerPolicy:
        return cases.TriggerPolicy(allow_loopback=settings.allow_loopback_targets)

    @provide
    def email(self, section: TriggerSettings) -> EmailSender:
        return SmtpEmailSender(section.url, section.sender)

    send = provide(cases.SendTriggerAction)


class SqlTriggersProvider(Provider):
    triggers = provide(SqlTriggerRepository, provides=TriggerRepository, scope=Scope.REQUEST)


class MemoryTriggersProvider(Provider):
    triggers = provide(InMemoryTriggerRepository, provides=TriggerRepository, scope=Scope.REQUEST)


class TriggersUseCaseProvider(Provider):
    scope = Scope.REQUEST

    cases = provide_all(
        cases.ActionReferences,
        cases.CreateTrigger,
        cases.GetTrigger,
        cases.ListTriggers,
        cases.UpdateTrigger,
        cases.DeleteTrigger,
        cases.ListTriggerRuns,
        cases.TestTrigger,
        cases.EvaluateTriggers,
        cases.PrepareTriggerAction,
        cases.RecordTriggerAction,
        cases.PerformTriggerAction,
    )


async def evaluate_once(container: AsyncContainer, *, limit: int = BATCH) -> int:
    """One pass of the consumer in one unit of work; returns how many events it read."""

    async def work(unit: Any) -> int:
        return await (await unit.get(cases.EvaluateTriggers)).execute(cases.EvaluateTriggersCommand(limit))

    return int(await ScopedUnits(container).run(work))


def evaluate_job(container: AsyncContainer, settings: Settings) -> JobKind:
    async def evaluate(job: ClaimedJob) -> datetime:
        while await evaluate_once(container) >= BATCH:
            pass
        return (await container.get(Clock)).now() + CONSUMER_FALLBACK  # outbox.recheck finds the rest

    return JobKind(EVALUATE_KIND, evaluate, on_wake=True, recurring=True)


async def act(container: AsyncContainer, ref: cases.ActionRef) -> datetime | None:
    """One attempt of one action: prepared in a unit, sent outside any transaction (webhook, email, chat) or
    performed inside Parley with its record (sms, call, campaign contact), the outcome recorded. Returns when the
    next attempt is due (None: done)."""

    async def prepare(unit: Any) -> cases.ActionWork | None:
        return await (await unit.get(cases.PrepareTriggerAction)).execute(ref)

    work = await ScopedUnits(container).run(prepare)
    if work is None:
        return None
    if work.action.type in cases.EXTERNAL_ACTIONS:
        outcome = await (await container.get(cases.SendTriggerAction)).execute(work)
    else:
        async def perform(unit: Any) -> datetime | None:
            return await (await unit.get(cases.PerformTriggerAction)).execute(work)

        try:
            return await ScopedUnits(container).run(perform)
        except Exception as exc:
            outcome = cases.failure_of(exc)

    async def record(unit: Any) -> datetime | None:
        return await (await unit.get(cases.RecordTriggerAction)).execute(work, outcome)

    return await ScopedUnits(container).run(record)


def action_job(container: AsyncContainer, settings: Settings) -> JobKind:
    async def run(job: ClaimedJob) -> datetime | None:
        payload = job.payload
        return await act(container, cases.ActionRef(int(payload["organization_id"]), int(payload["run_id"]),
                                                    int(payload["index"])))

    return JobKind(ACTION_KIND, run, concurrency=8, lease=timedelta(seconds=60))


FEATURE = Feature(
    name="triggers",
    providers=(TriggersPlatformProvider, TriggersUseCaseProvider),
    sql=SqlTriggersProvider,
    memory=MemoryTriggersProvider,
    jobs=[evaluate_job, action_job],
    settings=TriggerSettings,
    outbox_consumers={TRIGGERS: EVALUATE_KIND},
)
