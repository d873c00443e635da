"""Trigger use cases: rules (create, read, change, delete, test), their run log, the outbox consumer that
evaluates every event against the organization's rules, and the steps of an action (prepare, send, perform,
record) that the ``triggers.action`` job runs with retries.

The consumer is the outbox's ``triggers`` consumer (application/outbox.py): it reads events behind its own
cursor, stores one run per (trigger, event) (a unique key: never two, whatever the workers), schedules one job
per action of a matched run and advances its cursor, all in one transaction.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from application.calls import PlaceCall, PlaceCallCommand
from application.campaigns import AddContact, AddContactCommand
from application.context import Actor, CauseContext
from application.jobs import JobKind
from application.outbox import TRIGGERS
from application.phones import e164
from application.ports.agents import AgentRepository
from application.ports.campaigns import CampaignRepository
from application.ports.events import OutboxReader
from application.ports.jobs import ClaimedJob, JobQueue, NewJob
from application.ports.phones import PhoneNormalizer
from application.ports.platform import Clock, Page, PageRequest, Random, Unit, UnitOfWork, Units
from application.ports.secrets import SecretBox, SecretUnreadable
from application.ports.triggers import EmailFailed, EmailMessage, EmailSender, TriggerRepository
from application.ports.webhooks import WebhookHttp
from application.sms import SendSms, SendSmsCommand
from domain import triggers as rules
from domain import webhooks as wh
from domain.campaigns import ContactDraft
from domain.errors import BlockedAddress, DomainError, NotFound, ValidationFailed
from domain.events import EventType
from domain.patching import MergePatch
from domain.triggers import Action, ActionResult, Trigger, TriggerActionStatus, TriggerRun, TriggerRunStatus

log = logging.getLogger("parley.triggers")

ACTION_JOB = "triggers.action"
"""The job kind that runs one action of one run (key ``<run id>:<action index>``)."""
EXTERNAL_ACTIONS = frozenset({"webhook", "email", "chat_message"})
"""Actions that leave Parley (sent outside any transaction); the others act through Parley's own use cases."""
ERROR_MAX = 500
ACTION_FAILED = "action_failed"
"""``trigger.failed``'s reason when an action failed for good (the other: ``run_rate``, the breaker)."""
_UNSETTLED_ACTION = (TriggerActionStatus.PENDING, TriggerActionStatus.RETRYING)
"""An action still to be carried out (again)."""


@dataclass(frozen=True, slots=True)
class TriggerPolicy:
    allow_loopback: bool = False
    timeout_seconds: float = wh.DELIVERY_TIMEOUT_SECONDS


def _check_targets(actions: tuple[Action, ...], phones: PhoneNormalizer, policy: TriggerPolicy) -> tuple[
        Action, ...]:
    """URLs through the egress rules (as subscriptions), literal phone numbers to E.164."""
    checked = []
    for i, action in enumerate(actions):
        config = dict(action.config)
        if "url" in config:
            try:
                config["url"] = wh.check_target(config["url"], allow_loopback=policy.allow_loopback)
            except ValidationFailed as exc:
                raise ValidationFailed.field(f"actions[{i}].config.url", exc.message) from exc
            except BlockedAddress as exc:
                raise exc.on(f"actions[{i}].config.url") from None
        for member in ("phone", "to"):
            value = config.get(member)
            if action.type != "email" and isinstance(value, str) and rules.is_literal(value):
                config[member] = e164(phones, value, f"actions[{i}].config.{member}")
        checked.append(Action(action.type, config))
    return tuple(checked)


def _validated(name: Any, event: Any, conditions: Any, actions: Any, phones: PhoneNormalizer,
               policy: TriggerPolicy) -> tuple[str, EventType, rules.Group | None, tuple[Action, ...]]:
    kind = rules.check_event(event)
    return (rules.check_name(name), kind, rules.parse_conditions(conditions, kind),
            _check_targets(rules.check_actions(actions, kind), phones, policy))


class ActionReferences:
    """The agents and campaigns actions name, checked when a trigger is saved: one of another organization, or
    one that does not exist, is 404 naming the member (``actions[0].config.agent_id``)."""

    def __init__(self, agents: AgentRepository, campaigns: CampaignRepository) -> None:
        self.agents, self.campaigns = agents, campaigns

    async def check(self, organization_id: int, actions: tuple[Action, ...]) -> None:
        for i, action in enumerate(actions):
            if action.type == "call":
                agent_id = int(action.config["agent_id"])
                if await self.agents.get(organization_id, agent_id) is None:
                    raise NotFound("agent", agent_id, field=f"actions[{i}].config.agent_id")
            elif action.type == "campaign_contact":
                campaign_id = int(action.config["campaign_id"])
                if await self.campaigns.get(organization_id, campaign_id) is None:
                    raise NotFound("campaign", campaign_id, field=f"actions[{i}].config.campaign_id")


async def _load(triggers: TriggerRepository, actor: Actor, trigger_id: int) -> Trigger:
    found = await triggers.get(actor.organization_id, trigger_id)
    if found is None:
        raise NotFound("trigger", trigger_id)
    return found


@dataclass(frozen=True, slots=True)
class CreateTriggerCommand:
    actor: Actor
    name: str
    event: str
    actions: list[Any]
    conditions: Any = None
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class TriggerWithSecret:
    """A trigger with its webhook signing secret in clear: only right after it was created."""

    trigger: Trigger
    secret: str


class CreateTrigger:
    def __init__(self, triggers: TriggerRepository, box: SecretBox, random: Random, clock: Clock,
                 phones: PhoneNormalizer, policy: TriggerPolicy, references: ActionReferences) -> None:
        self.triggers, self.box, self.random = triggers, box, random
        self.clock, self.phones, self.policy, self.references = clock, phones, policy, references

    async def execute(self, command: CreateTriggerCommand) -> TriggerWithSecret:
        name, event, conditions, actions = _validated(command.name, command.event, command.conditions,
                                                      command.actions, self.phones, self.policy)
        await self.references.check(command.actor.organization_id, actions)
        secret = self.random.hex(wh.SECRET_BYTES)
        now = self.clock.now()
        trigger = await self.triggers.add(Trigger(
            None, command.actor.organization_id, name, event.value, conditions, actions, command.enabled,
            self.box.seal(secret), now, now))
        return TriggerWithSecret(trigger, secret)


@dataclass(frozen=True, slots=True)
class GetTriggerCommand:
    actor: Actor
    trigger_id: int


class GetTrigger:
    def __init__(self, triggers: TriggerRepository) -> None:
        self.triggers = triggers

    async def execute(self, command: GetTriggerCommand) -> Trigger:
        return await _load(self.triggers, command.actor, command.trigger_id)


@dataclass(frozen=True, slots=True)
class ListTriggersCommand:
    actor: Actor
    page: PageRequest


class ListTriggers:
    def __init__(self, triggers: TriggerRepository) -> None:
        self.triggers = triggers

    async def execute(self, command: ListTriggersCommand) -> Page[Trigger]:
        return await self.triggers.list(command.actor.organization_id, command.page)


@dataclass(frozen=True, slots=True)
class UpdateTriggerCommand:
    actor: Actor
    trigger_id: int
    patch: MergePatch
    """name, event, conditions (null removes them), actions, enabled."""


class UpdateTrigger:
    """PATCH: the trigger as changed is checked as a whole (conditions and templates against its event; the agents
    and campaigns of new actions). Enabling it again clears the reason Parley disabled it for."""

    def __init__(self, triggers: TriggerRepository, clock: Clock, phones: PhoneNormalizer,
                 policy: TriggerPolicy, references: ActionReferences) -> None:
        self.triggers, self.clock, self.phones, self.policy = triggers, clock, phones, policy
        self.references = references

    async def execute(self, command: UpdateTriggerCommand) -> Trigger:
        current = await _load(self.triggers, command.actor, command.trigger_id)
        patch = command.patch
        conditions = patch["conditions"] if "conditions" in patch else rules.conditions_view(current.conditions)
        actions = patch["actions"] if "actions" in patch else [a.view() for a in current.actions]
        name, event, tree, checked = _validated(patch.get("name", current.name), patch.get("event", current.event),
                                                conditions, actions, self.phones, self.policy)
        if "actions" in patch:
            await self.references.check(current.organization_id, checked)
        enabled = patch.get("enabled", current.enabled)
        if not isinstance(enabled, bool):
            raise ValidationFailed.field("enabled", "true or false")
        reason = None if "enabled" in patch else current.disabled_reason
        updated = replace(current, name=name, event=event.value, conditions=tree, actions=checked, enabled=enabled,
                          disabled_reason=reason)
        if updated == current:  # a PATCH that changes nothing leaves updated_at alone
            return current
        return await self.triggers.update(replace(updated, updated_at=self.clock.now()))


@dataclass(frozen=True, slots=True)
class DeleteTriggerCommand:
    actor: Actor
    trigger_id: int


class DeleteTrigger:
    def __init__(self, triggers: TriggerRepository) -> None:
        self.triggers = triggers

    async def execute(self, command: DeleteTriggerCommand) -> None:
        if not await self.triggers.delete(command.actor.organization_id, command.trigger_id):
            raise NotFound("trigger", command.trigger_id)


@dataclass(frozen=True, slots=True)
class ListTriggerRunsCommand:
    actor: Actor
    trigger_id: int
    status: str | None
    page: PageRequest


class ListTriggerRuns:
    def __init__(self, triggers: TriggerRepository) -> None:
        self.triggers = triggers

    async def execute(self, command: ListTriggerRunsCommand) -> Page[TriggerRun]:
        await _load(self.triggers, command.actor, command.trigger_id)
        return await self.triggers.list_runs(command.actor.organization_id, command.trigger_id, command.status,
                                             command.page)


@dataclass(frozen=True, slots=True)
class TestTriggerCommand:
    actor: Actor
    trigger_id: int
    data: Mapping[str, Any] | None = None
    """A sample of the event's data; None: the catalogue's example."""


@dataclass(frozen=True, slots=True)
class TestedRun:
    run: TriggerRun
    rendered: list[dict[str, Any]]
    """Each action's config with its templates filled (what would be sent), for a matched sample."""


class TestTrigger:
    """POST /triggers/{id}/test: the sample evaluated as an event would be; nothing is stored or sent."""

    def __init__(self, triggers: TriggerRepository, clock: Clock) -> None:
        self.triggers, self.clock = triggers, clock

    async def execute(self, command: TestTriggerCommand) -> TestedRun:
        trigger = await _load(self.triggers, command.actor, command.trigger_id)
        data = dict(command.data) if command.data is not None else rules.sample_data(rules.check_event(trigger.event))
        run = rules.decide(trigger, trigger.event, None, data, 0, self.clock.now())
        shown = [{"type": a.type, "config": rules.rendered(a, data)} for a in trigger.actions] if run.matched else []
        return TestedRun(run, shown)


# -- the consumer ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EvaluateTriggersCommand:
    limit: int = 500


class EvaluateTriggers:
    """The outbox's ``triggers`` consumer: every event after its cursor is evaluated against the enabled triggers
    of its organization on that event (looked up by (organization, event) and their conditions compiled, once per
    pass); each gets a run, and each action of a matched run a job. The runs (one statement), the jobs (one
    statement) and the cursor commit together.

    The run-rate breaker: a trigger whose matched runs would number more than ``MAX_RUNS_PER_WINDOW`` within one
    ``RUN_RATE_WINDOW`` (by the times of their events, counted since it was last changed) is disabled with
    ``disabled_reason`` ``run_rate``; its run over the limit, and the rest of the pass's, are skipped, and
    ``trigger.failed`` says so."""

    def __init__(self, uow: UnitOfWork, outbox: OutboxReader, triggers: TriggerRepository, jobs: JobQueue,
                 clock: Clock) -> None:
        self.uow, self.outbox, self.triggers, self.jobs, self.clock = uow, outbox, triggers, jobs, clock

    async def execute(self, command: EvaluateTriggersCommand) -> int:
        """Returns how many events were read (0: nothing new)."""
        events = await self.outbox.pending(TRIGGERS, command.limit)
        if not events:
            return 0
        now = self.clock.now()
        rules_by: dict[tuple[int, str], list[tuple[Trigger, rules.Matcher]]] = {}
        runs: list[TriggerRun] = []
        for event in events:
            key = (event.organization_id, event.type)
            if key not in rules_by:
                rules_by[key] = [(t, rules.matcher(t.conditions)) for t in await self.triggers.for_event(*key)]
            if rules_by[key]:
                data = event.data if isinstance(event.data, dict) else {}
                runs.extend(rules.decide(t, event.type, event.id, data, event.depth, now, match, event.created_at)
                            for t, match in rules_by[key])
        breaker = _RunRateBreaker(self.triggers, {t.id: t for found in rules_by.values() for t, _ in found})
        runs = [await breaker.check(run, now) for run in runs]
        stored = await self.triggers.add_runs(runs) if runs else []
        breaker.trip(self.uow, stored)
        jobs = [NewJob(ACTION_JOB, now, f"{run.id}:{index}", {
            "organization_id": run.organization_id, "run_id": run.id, "index": index})
            for run in stored for index in range(len(run.actions))]
        if jobs:
            await self.jobs.schedule_new(jobs)
            self.uow.created_work()
        await self.outbox.advance(TRIGGERS, events[-1].id, now)
        return len(events)


class _RunRateBreaker:
    """One pass's run-rate checks (EvaluateTriggers). Per trigger: the event times of the pass's matched runs still
    inside the window, and the count of its matched runs stored before the pass (read once, read again only when
    the limit seems passed, as the window has moved since)."""

    def __init__(self, triggers: TriggerRepository, by_id: Mapping[int | None, Trigger]) -> None:
        self.triggers, self.by_id = triggers, by_id
        self.recent: dict[int, deque[datetime]] = {}
        self.stored: dict[int, int] = {}
        self.tripped: dict[int, int | None] = {}
        """Trigger id -> the event of its first run over the limit (the run trigger.failed names)."""

    async def check(self, run: TriggerRun, now: datetime) -> TriggerRun:
        """``run`` as it stays, or skipped when its trigger is over the limit (the trigger is then disabled)."""
        if not run.matched:
            return run
        if run.trigger_id in self.tripped:
            return rules.braked(run, now)
        trigger = self.by_id[run.trigger_id]
        at = run.event_at or now
        since = max(at - rules.RUN_RATE_WINDOW, trigger.updated_at)  # re-enabling starts a new count
        recent = self.recent.setdefault(run.trigger_id, deque())
        while recent and recent[0] < since:
            recent.popleft()
        count = len(recent) + 1 + await self._stored(run, since, again=False)
        if count > rules.MAX_RUNS_PER_WINDOW and self.stored[run.trigger_id]:
            count = len(recent) + 1 + await self._stored(run, since, again=True)
        if count <= rules.MAX_RUNS_PER_WINDOW:
            recent.append(at)
            return run
        self.tripped[run.trigger_id] = run.event_id
        await self.triggers.disable(run.organization_id, run.trigger_id, rules.RUN_RATE, now)
        return rules.braked(run, now)

    async def _stored(self, run: TriggerRun, since: datetime, *, again: bool) -> int:
        if again or run.trigger_id not in self.stored:
            self.stored[run.trigger_id] = await self.triggers.count_matched_runs(
                run.organization_id, run.trigger_id, since)
        return self.stored[run.trigger_id]

    def trip(self, uow: UnitOfWork, stored: list[TriggerRun]) -> None:
        """``trigger.failed`` for each trigger disabled in this pass, naming its first skipped run."""
        for run in stored:
            if self.tripped.get(run.trigger_id, -1) != run.event_id:
                continue
            uow.record(replace(EventType.TRIGGER_FAILED(run.organization_id, {
                "trigger_id": run.trigger_id, "trigger_name": self.by_id[run.trigger_id].name, "run_id": run.id,
                "event": run.event, "event_id": run.event_id, "reason": rules.RUN_RATE, "failed_action": None,
                "error": run.reason, "attempts": 0}), depth=run.depth + 1))
            log.warning("trigger %s disabled: %s", run.trigger_id, run.reason)


# -- actions -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ActionRef:
    organization_id: int
    run_id: int
    index: int


@dataclass(frozen=True, slots=True)
class ActionWork:
    """One attempt of an action, ready to go: its config filled from the event."""

    ref: ActionRef
    run: TriggerRun
    trigger: Trigger
    action: Action
    config: dict[str, Any]
    attempt: int
    secret: str | None = None
    started_at: datetime | None = None
    """When this attempt began."""


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    ok: bool
    error: str | None = None
    final: bool = False
    """True: no retry can help (the number is on a DNC list, the agent is gone, the URL is blocked)."""


class PrepareTriggerAction:
    """The action's next attempt (None when it is done, or its trigger or run is gone)."""

    def __init__(self, triggers: TriggerRepository, box: SecretBox, clock: Clock) -> None:
        self.triggers, self.box, self.clock = triggers, box, clock

    async def execute(self, ref: ActionRef) -> ActionWork | None:
        run = await self.triggers.get_run(ref.organization_id, ref.run_id)
        if run is None or ref.index >= len(run.actions) or run.actions[ref.index].status not in _UNSETTLED_ACTION:
            return None
        trigger = await self.triggers.get(ref.organization_id, run.trigger_id)
        if trigger is None or ref.index >= len(trigger.actions):
            return None
        action = trigger.actions[ref.index]
        secret = None
        if action.type == "webhook":
            try:
                secret = self.box.open(trigger.sealed_secret)
            except SecretUnreadable:
                secret = None
        return ActionWork(ref, run, trigger, action, rules.rendered(action, run.data),
                          run.actions[ref.index].attempts + 1, secret, self.clock.now())


def webhook_body(work: ActionWork) -> bytes:
    """The subscriptions' envelope ``{event, timestamp, data}`` (``timestamp``: when the event happened), with the
    trigger's members added: ``trigger_id``, ``trigger_name``, ``trigger_run_id``, ``event_id``."""
    run = work.run
    occurred = run.event_at or run.created_at  # runs stored before event_at was kept: when the run was made
    if occurred is None:
        raise ValueError("a stored run has its time")
    return wh.delivery_body(run.event, occurred, run.data, {
        "trigger_id": work.trigger.id, "trigger_name": work.trigger.name, "trigger_run_id": run.id,
        "event_id": run.event_id})


class SendTriggerAction:
    """One attempt of an action that leaves Parley (webhook, email, chat message): no database, no transaction."""

    def __init__(self, http: WebhookHttp, email: EmailSender, clock: Clock, policy: TriggerPolicy) -> None:
        self.http, self.email, self.clock, self.policy = http, email, clock, policy

    async def execute(self, work: ActionWork) -> ActionOutcome:
        try:
            if work.action.type == "email":
                await self.email.send(EmailMessage(tuple(work.config["to"]), work.config["subject"],
                                                   work.config["body"]))
                return ActionOutcome(True)
            if work.action.type == "webhook":
                if work.secret is None:
                    return ActionOutcome(False, "the signing secret could not be decrypted", final=True)
                body = webhook_body(work)
                timestamp = int(self.clock.now().timestamp())
                headers = {"Content-Type": "application/json", "User-Agent": wh.USER_AGENT,
                           wh.ID_HEADER: f"trg_{work.run.id}_{work.ref.index}", wh.EVENT_HEADER: work.run.event,
                           wh.TIMESTAMP_HEADER: str(timestamp),
                           wh.SIGNATURE_HEADER: wh.signature_header([work.secret], timestamp, body)}
            else:
                body = json.dumps({"text": work.config["text"]}).encode()
                headers = {"Content-Type": "application/json", "User-Agent": wh.USER_AGENT}
            result = await self.http.post(work.config["url"], body=body, headers=headers,
                                          timeout=self.policy.timeout_seconds)
        except EmailFailed as exc:
            return ActionOutcome(False, f"email not accepted: {exc}"[:ERROR_MAX])
        except BlockedAddress as exc:
            return ActionOutcome(False, f"blocked_address: {exc.message}", final=True)
        except ValidationFailed as exc:
            return ActionOutcome(False, f"invalid URL: {exc.message}", final=True)
        except DomainError as exc:
            return ActionOutcome(False, exc.message[:ERROR_MAX])
        except Exception as exc:  # anything else fails the action for good (a retry would raise it again)
            log.exception("trigger %s run %s: the %s action raised", work.trigger.id, work.run.id, work.action.type)
            return ActionOutcome(False, f"internal error: {type(exc).__name__}: {exc}"[:ERROR_MAX], final=True)
        if result.delivered:
            return ActionOutcome(True)
        error = result.error or f"the receiver answered HTTP {result.status}"
        return ActionOutcome(False, error[:ERROR_MAX])


class RecordTriggerAction:
    """The attempt's outcome on the run: succeeded; retrying (returns when to try again); or failed for good, which
    fails the run and records ``trigger.failed``."""

    def __init__(self, uow: UnitOfWork, cause: CauseContext, triggers: TriggerRepository, clock: Clock,
                 random: Random) -> None:
        self.uow, self.cause, self.triggers, self.clock, self.random = uow, cause, triggers, clock, random

    async def execute(self, work: ActionWork, outcome: ActionOutcome) -> datetime | None:
        run = await self.triggers.get_run(work.ref.organization_id, work.ref.run_id, lock=True)
        if run is None or work.ref.index >= len(run.actions):
            return None
        current = run.actions[work.ref.index]
        if current.status not in _UNSETTLED_ACTION:
            return None  # recorded already (a run past its lease)
        now = self.clock.now()
        started = current.started_at or work.started_at or now
        attempts = current.attempts + 1
        if outcome.ok:
            result = replace(current, status=TriggerActionStatus.SUCCEEDED, attempts=attempts, error=None,
                             started_at=started, finished_at=now, next_attempt_at=None)
            delay = None
        else:
            delay = None if outcome.final else rules.retry_delay(attempts, self.random.uniform(-1.0, 1.0))
            status = TriggerActionStatus.RETRYING if delay else TriggerActionStatus.FAILED
            result = replace(current, status=status, attempts=attempts,
                             error=outcome.error, started_at=started,
                             finished_at=None if delay else now, next_attempt_at=now + delay if delay else None)
        actions = list(run.actions)
        actions[work.ref.index] = result
        updated = rules.settle(replace(run, actions=tuple(actions)), now)
        await self.triggers.update_run(updated)
        if updated.status == TriggerRunStatus.FAILED and run.status != TriggerRunStatus.FAILED:
            self.cause.depth = run.depth + 1
            self.uow.record(EventType.TRIGGER_FAILED(run.organization_id, {
                "trigger_id": run.trigger_id, "trigger_name": work.trigger.name, "run_id": run.id,
                "event": run.event, "event_id": run.event_id, "reason": ACTION_FAILED, "failed_action": result.type,
                "error": result.error, "attempts": result.attempts}))
            log.warning("trigger %s run %s failed: %s action: %s", run.trigger_id, run.id, result.type, result.error)
        return now + delay if delay else None


class PerformTriggerAction:
    """One attempt of an action inside Parley (sms, call, campaign contact) through the use cases the API uses
    (DNC, opt-outs, quotas apply), recorded as succeeded in the same transaction. Raises when it fails (the caller
    records the failure in a unit of its own: nothing of the attempt is kept)."""

    def __init__(self, cause: CauseContext, send_sms: SendSms, place_call: PlaceCall, add_contact: AddContact,
                 record: RecordTriggerAction) -> None:
        self.cause, self.send_sms, self.place_call, self.add_contact = cause, send_sms, place_call, add_contact
        self.record = record

    async def execute(self, work: ActionWork) -> datetime | None:
        self.cause.depth = work.run.depth + 1  # what the action does is one deeper than the event it handles
        actor = Actor.system(work.ref.organization_id)
        config = work.config
        if work.action.type == "sms":
            await self.send_sms.execute(SendSmsCommand(actor, config["to"], config["body"]))
        elif work.action.type == "call":
            await self.place_call.execute(PlaceCallCommand(actor, str(config["agent_id"]), config["phone"], None,
                                                           dict(config.get("custom_data") or {}),
                                                           contact_name_field="custom_data.contact_name",
                                                           agent_field=None))
        elif work.action.type == "campaign_contact":
            await self.add_contact.execute(AddContactCommand(actor, int(config["campaign_id"]), ContactDraft(
                0, config["phone"], config.get("name") or None)))
        else:
            raise ValueError(f"{work.action.type} is not performed inside Parley")
        return await self.record.execute(work, ActionOutcome(True))


def failure_of(exc: BaseException) -> ActionOutcome:
    """How a failed in-Parley attempt is recorded: a rule that refused it (DNC, opt-out, a missing agent or
    campaign, a bad number) is final; anything else (the database, a timeout) is retried."""
    if isinstance(exc, DomainError):
        final = not exc.code.endswith("unavailable")
        return ActionOutcome(False, f"{exc.code}: {exc.message}"[:ERROR_MAX], final=final)
    return ActionOutcome(False, f"{type(exc).__name__}: {exc}"[:ERROR_MAX])


class RunTriggerAction:
    """One attempt of one action (the job ``triggers.action``): prepared in a unit of work, sent outside any
    transaction (webhook, email, chat) or performed inside Parley with its record (sms, call, campaign contact), the
    outcome recorded in a unit of its own. Returns when the next attempt is due (None: done)."""

    def __init__(self, units: Units) -> None:
        self.units = units

    async def execute(self, ref: ActionRef) -> datetime | None:
        work = await self.units.execute(PrepareTriggerAction, ref)
        if work is None:
            return None
        if work.action.type in EXTERNAL_ACTIONS:
            async with self.units.begin() as unit:  # the sender only: no transaction is open while it waits
                send = await unit.get(SendTriggerAction)
            outcome = await send.execute(work)
        else:
            try:
                return await self.units.execute(PerformTriggerAction, work)
            except Exception as exc:
                outcome = failure_of(exc)

        async def record(unit: Unit) -> datetime | None:
            return await (await unit.get(RecordTriggerAction)).execute(work, outcome)

        return await self.units.run(record)


def action_job(units: Units) -> JobKind:
    """``triggers.action``: one job per action of a matched run (key ``<run id>:<index>``), due again after the
    action's backoff while it fails."""
    run = RunTriggerAction(units)

    async def act(job: ClaimedJob) -> datetime | None:
        payload = job.payload
        return await run.execute(ActionRef(int(payload["organization_id"]), int(payload["run_id"]),
                                           int(payload["index"])))

    return JobKind(ACTION_JOB, act, concurrency=8, lease=timedelta(seconds=60))


def describe(result: ActionResult) -> str:
    return f"{result.type} {result.status} after {result.attempts} attempt(s)"
