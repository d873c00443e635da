"""Triggers feature: automation rules on events (the API), the outbox consumer that evaluates every event against
them, and the job that runs each action of a matched run, with retries.

It acts through the other features' use cases: ``SendSms`` (sms), ``PlaceCall`` (calls), ``AddContact``
(campaigns), and sends webhooks and chat messages through the webhooks feature's SSRF-safe egress
(``WebhookHttp``). Email goes out through ``EmailSender`` (SMTP, ``PARLEY_SMTP_URL``).

Jobs: ``triggers.evaluate`` (the consumer: recurring, woken by any commit that recorded events) and
``triggers.action`` (one per action of a matched run, key ``<run id>:<index>``; a failed attempt is due again
after the action's backoff, up to five attempts; ``application/triggers.RunTriggerAction``).
"""

from __future__ import annotations

from dataclasses import dataclass

from dishka import AsyncContainer, Provider, Scope, provide, provide_all

from adapters.mail.smtp import SmtpEmailSender
from adapters.memory.triggers import InMemoryTriggerRepository
from adapters.sql.triggers import SqlTriggerRepository
from application import triggers as cases
from application.jobs import JobKind
from application.outbox import TRIGGERS, consumer_job
from application.ports.triggers import EmailSender, TriggerRepository
from entrypoints.features import Feature
from entrypoints.settings import Settings
from entrypoints.units import ScopedUnits

EVALUATE_KIND = "triggers.evaluate"
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


def evaluate_job(container: AsyncContainer, settings: Settings) -> JobKind:
    """The consumer as a recurring job (``application/outbox.consumer_job``)."""
    return consumer_job(EVALUATE_KIND, ScopedUnits(container), cases.EvaluateTriggers, cases.EvaluateTriggersCommand,
                        BATCH)


def action_job(container: AsyncContainer, settings: Settings) -> JobKind:
    return cases.action_job(ScopedUnits(container))


FEATURE = Feature(
    name="triggers",
    providers=(TriggersPlatformProvider, TriggersUseCaseProvider),
    sql=SqlTriggersProvider,
    memory=MemoryTriggersProvider,
    jobs=[evaluate_job, action_job],
    settings=TriggerSettings,
    outbox_consumers={TRIGGERS: EVALUATE_KIND},
)
