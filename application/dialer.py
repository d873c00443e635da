"""The campaign dialer: one step dials (or defers, or skips) the next due contact of a running campaign; another
applies the outcome of a contact's finished call. The dialer's pass (``application/dialer_pass.py``) runs
each step in its own unit of work, so a failing contact never holds back the others.

* **The cap.** A step holds the campaign's row lock (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite has one
  writer) while it counts the campaign's calls that are not final, from the calls table, and places at most one
  call: several worker processes never exceed ``max_concurrent_calls``. A call that ends (in any status, also by
  the sweeper after a crash) frees its slot by being final: the calls are the leases, nothing can leak.
* **Once per attempt.** The attempt row (UNIQUE contact, attempt) and the call (UNIQUE organization,
  ``campaign-contact-{id}-attempt-{n}``) are written in the step's transaction with the contact's move to
  ``dialing``: a worker that dies before the commit leaves nothing, one that dies after it leaves a ``dialing``
  contact that is never picked again.
* **The call** is an ordinary call placed by ``PlaceCall`` (the path of ``POST /calls``: placeholders, DNC, the
  agent), queued below single calls (``CAMPAIGN_CALL_PRIORITY``) and due now; the calls worker dials it.
* **The window** (``domain.calling_window``): a contact outside it gets ``next_attempt_at`` = its next opening,
  so it is not looked at again before then.
* **The pass** (``wants_turn``): one statement lists the running campaigns in round-robin order with their first
  open contact (``DialerStore.campaign_turns``); a campaign gets a step when that contact is due, or when the step
  has something else to do (its agent gone or archived, no open contact left, its explanation out of date).
  The step re-reads its due contacts under the campaign's lock: the list only spares the steps that would find
  nothing to do.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from application.business_hours import holiday_predicate
from application.calls import AgentNotCallable, PlaceCall, PlaceCallCommand
from application.campaigns import AddContact, AddContactCommand
from application.context import Actor, CauseContext
from application.dnc import DncGate
from application.ports.agents import AgentRepository
from application.ports.business_hours import HolidayCalendars, ScheduleRepository
from application.ports.calls import CallRepository
from application.ports.campaigns import CampaignRepository, ContactEndings, ContactRepository
from application.ports.dialer import CampaignRef, CampaignTurn, ContactRef, DialerStore
from application.ports.phones import PhoneNormalizer
from application.ports.platform import Clock, UnitOfWork
from domain.agents import AgentStatus
from domain.calling_window import OUTSIDE_CALLING_HOURS, SEARCH_DAYS, WindowRules, WindowVerdict, calling_window
from domain.calls import SINGLE_CALL_PRIORITY, Call, CallStatus
from domain.campaigns import (
    OPEN_CONTACT_STATUSES,
    RETRY_OUTCOMES,
    SCHEDULED_STATUSES,
    Campaign,
    CampaignContactStatus,
    CampaignStatus,
    CampaignStatusReason,
    Contact,
    ContactAttempt,
    ContactDraft,
    decide_retry,
)
from domain.destinations import DestinationNotAllowed
from domain.errors import (
    Conflict,
    DncBlocked,
    InvalidTransition,
    NotFound,
    QuotaExceeded,
    ServiceOnHold,
    ValidationFailed,
)
from domain.events import EventType
from domain.identity import persisted
from domain.rfc3339 import format_utc_or_none
from domain.sms import RecipientOptedOut

CAMPAIGN_CALL_PRIORITY = SINGLE_CALL_PRIORITY - 50
"""Campaign calls queue below single calls (``POST /calls``, leads, widget): those are never starved."""
SCAN = 50
"""Due contacts looked at per step at most (those outside their window are deferred, the first inside it
dialled)."""
FIRST_LOOK = 1
"""Due contacts a step loads first: usually the first is dialled, so the rest of ``SCAN`` is loaded only when it
was deferred (a deferred contact is due later, so the second read starts after it)."""
CAMPAIGN_FAILED = "campaign_failed"
"""The reason of the contacts cancelled when their campaign fails (and of the leads still queued on them)."""
NO_CALLING_WINDOW = "no_calling_window"
"""A contact whose zones never share an opening of the calling hours (e.g. 09:00-10:00 in Auckland and Berlin)."""
COMPLETING_STATUSES = (CallStatus.COMPLETED, CallStatus.TRANSFERRED)


def attempt_key(contact_id: int, attempt: int) -> str:
    return f"campaign-contact-{contact_id}-attempt-{attempt}"


def contact_event_data(contact: Contact) -> dict[str, Any]:
    return {"campaign_id": contact.campaign_id, "contact_id": contact.id, "phone": contact.phone,
            "attempts": contact.attempts, "last_call_id": contact.last_call_id, "reason": contact.reason}


class CallingWindows:
    """The window rules of a campaign (its schedule and holidays loaded once) and the verdict for a contact."""

    def __init__(self, schedules: ScheduleRepository, calendars: HolidayCalendars, phones: PhoneNormalizer) -> None:
        self.schedules, self.calendars, self.phones = schedules, calendars, phones

    async def rules(self, campaign: Campaign) -> WindowRules:
        schedule = None
        if campaign.schedule_id is not None:
            schedule = await self.schedules.get(campaign.organization_id, campaign.schedule_id)
        rules = WindowRules(campaign.calling_hours, campaign.timezone, campaign.timezone_mode, schedule)
        if schedule is not None:
            rules = replace(rules, is_holiday=holiday_predicate(self.calendars, schedule))
        return rules

    def verdict(self, rules: WindowRules, contact: Contact, at: datetime) -> WindowVerdict:
        zones = () if contact.timezone or rules.timezone_mode == "campaign" else self.phones.time_zones(contact.phone)
        return calling_window(at, rules, contact_zone=contact.timezone, number_zones=zones)


class _Contacts:
    """Contact moves with their events."""

    def __init__(self, contacts: ContactRepository, uow: UnitOfWork) -> None:
        self.contacts, self.uow = contacts, uow

    async def save(self, contact: Contact) -> Contact:
        await self.contacts.update(contact)
        kind = None
        if contact.status == CampaignContactStatus.COMPLETED:
            kind = EventType.CONTACT_COMPLETED
        elif contact.status in (CampaignContactStatus.FAILED, CampaignContactStatus.SKIPPED_DNC):
            kind = EventType.CONTACT_FAILED
        if kind is not None:  # as deep as the trigger action that added the contact (the loop guard's depth)
            self.uow.record(replace(kind(contact.organization_id, contact_event_data(contact)),
                                    depth=contact.cause_depth))
        return contact


async def complete_if_done(campaigns: CampaignRepository, store: DialerStore, uow: UnitOfWork, campaign: Campaign,
                           now: datetime) -> Campaign:
    """A running campaign whose every contact is final is completed (event ``campaign.completed``), unless its
    completion is ``manual`` (it runs until paused or cancelled)."""
    if campaign.status != CampaignStatus.RUNNING or campaign.id is None or campaign.completion == "manual":
        return campaign
    if await store.count_unfinished(campaign.organization_id, campaign.id) > 0:
        return campaign
    completed = await campaigns.update(campaign.move("complete", now))
    uow.record(EventType.CAMPAIGN_COMPLETED(campaign.organization_id, completed.view()))
    return completed


# ------------------------------------------------------------------------------------------------- dialling


def waiting_explanation(first_due_at: datetime, first_reason: str | None) -> tuple[CampaignStatusReason, datetime]:
    """``status_reason`` and ``next_dial_at`` of a campaign whose earliest open contact is due later."""
    waiting = (CampaignStatusReason.OUTSIDE_CALLING_HOURS if first_reason == OUTSIDE_CALLING_HOURS
               else CampaignStatusReason.WAITING_FOR_RETRY)
    return waiting, first_due_at


def wants_turn(turn: CampaignTurn, now: datetime) -> bool:
    """Whether a step of ``DialNextContact`` for this campaign would do anything: dial (or defer) its due contact,
    fail it (agent deleted or archived), complete it or clear its explanation (no open contact), or explain why it
    waits (``status_reason`` and ``next_dial_at`` not yet saying so). A campaign whose first open contact is due
    later and that already says so is left alone until then; so is a ``manual`` one that has no open contact and
    says it waits for contacts."""
    if turn.agent_live and not turn.has_open and turn.completion == "manual":
        return (turn.status_reason, turn.next_dial_at) != (CampaignStatusReason.WAITING_FOR_CONTACTS, None)
    if not turn.agent_live or not turn.has_open or turn.first_due_at is None or turn.first_due_at <= now:
        return True
    return waiting_explanation(turn.first_due_at, turn.first_reason) != (turn.status_reason, turn.next_dial_at)


async def place_attempt(place: PlaceCall, contacts: ContactRepository, store: DialerStore, campaign: Campaign,
                        contact: Contact, now: datetime) -> Call:
    """The contact's next attempt: the call (placed as ``POST /calls`` places one, keyed by the attempt, as deep
    as the trigger action that added the contact), the attempt row and the move to ``dialing``, all in the
    caller's transaction. Raises what PlaceCall raises (unresolved placeholders, DNC, the agent) before anything
    is written."""
    org, campaign_id, contact_id = campaign.organization_id, persisted(campaign.id), persisted(contact.id)
    attempt = contact.attempts + 1
    call = await place.execute(PlaceCallCommand(
        Actor.system(org), str(campaign.agent_id), contact.phone, contact.name, dict(contact.custom_data),
        priority=CAMPAIGN_CALL_PRIORITY, campaign_id=campaign_id, contact_id=contact_id,
        idempotency_key=attempt_key(contact_id, attempt), from_phone_number_id=campaign.from_phone_number_id,
        allowed_countries=campaign.allowed_countries,
        cause_depth=contact.cause_depth, contact_name_field="name", agent_field=None))
    await contacts.add_attempt(org, ContactAttempt(contact_id, attempt, call.id, call.status, started_at=now))
    await contacts.update(contact.move("dial", now, attempts=attempt, last_call_id=call.id, reason=None))
    await store.mark_dialled(org, campaign_id, now)
    return call


@dataclass(frozen=True, slots=True)
class DialNextContactCommand:
    ref: CampaignRef


class DialOutcome(StrEnum):
    """What one step of a campaign's dialling did (``DialNextContact``)."""

    DIALLED = "dialled"
    SKIPPED = "skipped"
    DEFERRED = "deferred"
    FULL = "full"
    IDLE = "idle"
    COMPLETED = "completed"
    STOPPED = "stopped"


class DialNextContact:
    """One step for one campaign. Returns what happened: ``dialled``, ``skipped`` (DNC, unresolved placeholders),
    ``deferred`` (contacts outside their window pushed to their next opening, none dialled), ``full`` (at the
    cap), ``idle`` (nothing due), ``completed`` or ``stopped`` (not running, or it just failed: its pending and
    retry_wait contacts are cancelled with reason ``campaign_failed`` and whatever followed them told so, in the
    same unit of work). Raises DncUnavailable when screening cannot be done (nothing is dialled; the contact stays
    due)."""

    def __init__(self, campaigns: CampaignRepository, contacts: ContactRepository, store: DialerStore,
                 calls: CallRepository, agents: AgentRepository, place: PlaceCall, windows: CallingWindows,
                 endings: ContactEndings, clock: Clock, uow: UnitOfWork) -> None:
        self.campaigns, self.contacts, self.store, self.calls, self.agents = campaigns, contacts, store, calls, agents
        self.place, self.windows, self.clock, self.uow = place, windows, clock, uow
        self.endings = endings
        self.moves = _Contacts(contacts, uow)

    async def execute(self, command: DialNextContactCommand) -> DialOutcome:
        org, campaign_id = command.ref.organization_id, command.ref.campaign_id
        campaign = await self.campaigns.get_for_update(org, campaign_id)
        if campaign is None or campaign.status != CampaignStatus.RUNNING:
            return DialOutcome.STOPPED
        now = self.clock.now()
        found = await self.agents.get_with_current_version(org, campaign.agent_id)  # PlaceCall's read too
        agent = found[0] if found is not None else None
        if agent is None or agent.status == AgentStatus.ARCHIVED:
            reason = CampaignStatusReason.AGENT_DELETED if agent is None else CampaignStatusReason.AGENT_ARCHIVED
            failed = await self.campaigns.update(campaign.move("fail", now, reason=reason))
            self.uow.record(EventType.CAMPAIGN_FAILED(org, {**failed.view(), "reason": reason}))
            ended = await self.contacts.cancel_open(org, campaign_id, CAMPAIGN_FAILED, now)
            if ended:
                await self.endings.contacts_ended(org, campaign_id, ended, CAMPAIGN_FAILED, now)
            return DialOutcome.STOPPED
        if await self.calls.count_unfinished_of_campaign(org, campaign_id) >= campaign.max_concurrent_calls:
            return DialOutcome.FULL
        rules = await self.windows.rules(campaign)
        deferred, limit = 0, FIRST_LOOK
        while limit > 0:
            due = await self.store.due_contacts(org, campaign_id, now, limit)
            for contact in due:
                verdict = self.windows.verdict(rules, contact, now)
                if verdict.open:
                    return await self._dial(campaign, contact, now)
                await self._defer(contact, verdict, rules, now)
                deferred += 1
            limit = SCAN - deferred if len(due) == limit and deferred == FIRST_LOOK else 0
        if deferred:
            return DialOutcome.DEFERRED
        settled = await complete_if_done(self.campaigns, self.store, self.uow, campaign, now)
        if settled.status == CampaignStatus.COMPLETED:
            return DialOutcome.COMPLETED
        await self._explain(campaign, now)
        return DialOutcome.IDLE

    async def _defer(self, contact: Contact, verdict: WindowVerdict, rules: WindowRules, now: datetime) -> None:
        if verdict.next_open_at is None and rules.schedule is None:
            # calling hours alone open every day: zones that share no opening in SEARCH_DAYS never will
            failed = contact.move("dial", now, attempts=contact.attempts).move("fail", now, reason=NO_CALLING_WINDOW)
            await self.moves.save(failed)
            return
        next_at = verdict.next_open_at or now + timedelta(days=SEARCH_DAYS)
        await self.contacts.update(replace(contact, next_attempt_at=next_at, reason=OUTSIDE_CALLING_HOURS,
                                           updated_at=now))

    async def _explain(self, campaign: Campaign, now: datetime) -> None:
        """Nothing due: say why on the campaign (``status_reason``, ``next_dial_at``)."""
        earliest = await self.store.earliest_attempt(campaign.organization_id, persisted(campaign.id))
        reason: str | None = None
        next_at: datetime | None = None
        if earliest is not None:
            reason, next_at = waiting_explanation(*earliest)
        elif campaign.completion == "manual":
            reason = CampaignStatusReason.WAITING_FOR_CONTACTS
        if (reason, next_at) != (campaign.status_reason, campaign.next_dial_at):
            await self.campaigns.update(replace(campaign, status_reason=reason, next_dial_at=next_at))

    async def _dial(self, campaign: Campaign, contact: Contact, now: datetime) -> DialOutcome:
        try:
            await place_attempt(self.place, self.contacts, self.store, campaign, contact, now)
        except (DncBlocked, RecipientOptedOut, DestinationNotAllowed) as exc:
            # listed (dnc_blocked, or recipient_opted_out: a STOP reply), or outside the dialing policy since it
            # changed: PlaceCall's gate refused it before writing anything; never dialled, ended as a skip
            await self.moves.save(contact.move("skip_dnc", now, reason=exc.code))
            return DialOutcome.SKIPPED
        except AgentNotCallable:  # paused (archived or deleted fail the campaign above)
            return await self._waits(campaign, CampaignStatusReason.AGENT_NOT_ACTIVE)
        except QuotaExceeded:  # the plan's included minutes are used up: wait, the contact is not dialled
            return await self._waits(campaign, CampaignStatusReason.QUOTA_EXCEEDED)
        except ServiceOnHold:  # billing holds new calls (unpaid past the grace, or canceled): wait until it lifts
            return await self._waits(campaign, CampaignStatusReason.PAYMENT_REQUIRED)
        except ValidationFailed as exc:
            reason = "unresolved_placeholders" if "missing_placeholders" in (exc.details or {}) else "invalid_contact"
            failed = contact.move("dial", now, attempts=contact.attempts).move("fail", now, reason=reason)
            await self.moves.save(failed)
            return DialOutcome.SKIPPED
        if campaign.status_reason is not None or campaign.next_dial_at is not None:
            await self.campaigns.update(replace(campaign, status_reason=None, next_dial_at=None))
        return DialOutcome.DIALLED

    async def _waits(self, campaign: Campaign, reason: CampaignStatusReason) -> DialOutcome:
        """The campaign cannot dial now for ``reason``: it says so (once) and waits, no time given."""
        if campaign.status_reason != reason:
            await self.campaigns.update(replace(campaign, status_reason=reason, next_dial_at=None))
        return DialOutcome.FULL


# ------------------------------------------------------------------------------------------------- outcomes


@dataclass(frozen=True, slots=True)
class SettleContactCommand:
    ref: ContactRef


class SettleContact:
    """Apply the outcome of a ``dialing`` contact's finished call: ``completed`` (the call completed or was
    transferred), ``retry_wait`` until the policy's delay after the call ended, or ``failed`` (no attempt left,
    the call was cancelled, or the campaign is over). Then a running campaign whose every contact is final
    completes. Outcomes are applied whatever the campaign's status (a paused campaign's calls finish). The events
    (the contact's, ``campaign.completed``) are as deep as the trigger action that added the contact."""

    def __init__(self, campaigns: CampaignRepository, contacts: ContactRepository, store: DialerStore,
                 calls: CallRepository, clock: Clock, uow: UnitOfWork, cause: CauseContext) -> None:
        self.campaigns, self.contacts, self.store, self.calls, self.clock, self.uow = (campaigns, contacts, store,
                                                                                      calls, clock, uow)
        self.cause = cause
        self.moves = _Contacts(contacts, uow)

    async def execute(self, command: SettleContactCommand) -> Contact | None:
        ref = command.ref
        campaign = await self.campaigns.get_for_update(ref.organization_id, ref.campaign_id)
        contact = await self.contacts.get(ref.organization_id, ref.campaign_id, ref.contact_id)
        if (campaign is None or contact is None or contact.status != CampaignContactStatus.DIALING
                or not contact.last_call_id):
            return None
        call = await self.calls.get(ref.organization_id, contact.last_call_id)
        if call is None or not call.is_final:
            return None
        if contact.cause_depth:  # what follows from its outcome is as deep as the action that added the contact
            self.cause.depth = contact.cause_depth
        now = self.clock.now()
        ended = call.ended_at or now
        await self.store.finish_attempt(ref.organization_id, persisted(contact.id), contact.attempts, call.status,
                                        ended)
        if call.status in COMPLETING_STATUSES:
            settled = contact.move("complete", now, reason=call.outcome or call.status)
        elif call.status in RETRY_OUTCOMES:
            decision = decide_retry(call.status, contact.attempts, campaign.retry, ended)
            if decision.status == CampaignContactStatus.RETRY_WAIT and campaign.status in SCHEDULED_STATUSES:
                settled = contact.move("retry", now, next_attempt_at=decision.next_attempt_at, reason=decision.reason)
            else:
                settled = contact.move("fail", now, reason=decision.reason)
        else:  # cancelled through POST /calls/{id}/cancel
            settled = contact.move("fail", now, reason=f"call_{call.status}")
        await self.moves.save(settled)
        await complete_if_done(self.campaigns, self.store, self.uow, campaign, now)
        return settled


# ------------------------------------------------------------------------------------------------- dial now


class OutsideCallingHours(Conflict):
    """``POST /campaigns/{id}/dial`` outside the contact's calling window (409, ``details.next_open_at``)."""

    code = OUTSIDE_CALLING_HOURS


class ConcurrencyLimit(Conflict):
    """``POST /campaigns/{id}/dial`` while the campaign has ``max_concurrent_calls`` calls unfinished (409)."""

    code = "concurrency_limit"


@dataclass(frozen=True, slots=True)
class DialContactNowCommand:
    """Either ``contact_id`` (a contact of the campaign) or ``phone`` (added first, or the contact that has it)."""

    actor: Actor
    campaign_id: int
    contact_id: int | None = None
    phone: str | None = None
    name: str | None = None
    custom_data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DialedNow:
    contact_id: int
    call_id: str


class DialContactNow:
    """Dial one contact now, under the same rules as the dialer: the campaign running (409 invalid_transition),
    the cap (409 concurrency_limit), the contact's window (409 outside_calling_hours with
    ``details.next_open_at``), DNC (422 dnc_blocked), placeholders (400), the agent (as ``POST /calls``). The
    contact must be ``pending`` or ``retry_wait`` (409 invalid_transition)."""

    def __init__(self, campaigns: CampaignRepository, contacts: ContactRepository, store: DialerStore,
                 calls: CallRepository, place: PlaceCall, dnc: DncGate, windows: CallingWindows,
                 add_contact: AddContact, clock: Clock) -> None:
        self.campaigns, self.contacts, self.store, self.calls = campaigns, contacts, store, calls
        self.place, self.dnc, self.windows, self.add_contact, self.clock = place, dnc, windows, add_contact, clock

    async def execute(self, command: DialContactNowCommand) -> DialedNow:
        org = command.actor.organization_id
        if (command.contact_id is None) == (command.phone is None):
            raise ValidationFailed.field("contact_id", "send either contact_id or phone")
        campaign = await self.campaigns.get_for_update(org, command.campaign_id)
        if campaign is None:
            raise NotFound("campaign", command.campaign_id)
        if campaign.status != CampaignStatus.RUNNING:
            raise InvalidTransition("campaign", campaign.status, campaign.status, action="dial",
                                    allowed_from=("running",))
        now = self.clock.now()
        contact = await self._contact(campaign, command, now)
        if contact.status not in OPEN_CONTACT_STATUSES:
            raise InvalidTransition("contact", contact.status, "dialing", action="dial",
                                    allowed_from=OPEN_CONTACT_STATUSES, details={"contact_id": contact.id})
        unfinished = await self.calls.count_unfinished_of_campaign(org, persisted(campaign.id))
        if unfinished >= campaign.max_concurrent_calls:
            raise ConcurrencyLimit(f"campaign {campaign.id} has {unfinished} calls in progress, its limit "
                                   f"(max_concurrent_calls {campaign.max_concurrent_calls})",
                                   details={"max_concurrent_calls": campaign.max_concurrent_calls,
                                            "in_progress": unfinished})
        verdict = self.windows.verdict(await self.windows.rules(campaign), contact, now)
        if not verdict.open:
            raise OutsideCallingHours(
                "it is outside the contact's calling hours (or the campaign's schedule is closed)",
                details={"contact_id": contact.id, "next_open_at": format_utc_or_none(verdict.next_open_at),
                         "timezones": list(verdict.zones)})
        await self.dnc.ensure_callable(org, contact.phone, campaign.allowed_countries)
        call = await place_attempt(self.place, self.contacts, self.store, campaign, contact, now)
        return DialedNow(persisted(contact.id), call.id)

    async def _contact(self, campaign: Campaign, command: DialContactNowCommand, now: datetime) -> Contact:
        org, campaign_id = campaign.organization_id, persisted(campaign.id)
        if command.contact_id is not None:
            found = await self.contacts.get(org, campaign_id, command.contact_id)
            if found is None:
                raise NotFound("contact", command.contact_id, field="contact_id")
            return found
        # a phone: the contact that has it, or a new one through the campaigns' one intake (a bad field is a 400)
        draft = ContactDraft(0, command.phone or "", command.name, None, dict(command.custom_data))
        return (await self.add_contact.execute(AddContactCommand(command.actor, campaign_id, draft))).contact
