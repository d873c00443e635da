"""Campaign use cases: campaigns (create, read, edit, delete, start, pause, cancel) and their contacts (added in
bulk or imported from CSV, read, deleted). Dialling running campaigns is not here yet."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from application.context import Actor, CauseContext
from application.dnc import DncGate
from application.phones import E164_RULE
from application.ports.agents import AgentRepository
from application.ports.campaigns import (
    CampaignFilter,
    CampaignRepository,
    CampaignSchedules,
    ContactEndings,
    ContactFilter,
    ContactRepository,
)
from application.ports.phones import PhoneNormalizer
from application.ports.platform import Clock, Page, PageRequest, UnitOfWork
from application.ports.telephony import PhoneNumberRepository
from application.ports.usage import QuotaGate
from domain.agents import AgentStatus
from domain.calling_window import OUTSIDE_CALLING_HOURS
from domain.campaigns import (
    CAMPAIGN_MACHINE,
    DEFAULT_MAX_CONCURRENT_CALLS,
    FINAL_STATUSES,
    MAX_CONTACTS_PER_CAMPAIGN,
    MAX_CONTACTS_PER_REQUEST,
    MAX_REJECTIONS_REPORTED,
    SCHEDULED_STATUSES,
    WIDGET_MAX_CONTACTS_PER_HOUR_DEFAULT,
    CallingHours,
    Campaign,
    CampaignContactLimit,
    CampaignEmpty,
    CampaignStats,
    CampaignStatus,
    CampaignStatusReason,
    Contact,
    ContactAttempt,
    ContactDraft,
    RetryPolicy,
    RowRejection,
    check_row,
    csv_contacts,
)
from domain.destinations import DialingPolicy, parse_countries, refusal_message
from domain.errors import InvalidTransition, NotFound, ValidationFailed
from domain.events import EventType
from domain.identity import persisted
from domain.patching import MergePatch, apply_patch
from domain.timezones import validate_timezone

BATCH = 500
"""Contacts inserted per statement while reading a request or a file."""

CAMPAIGN_CANCELLED = "campaign_cancelled"
"""The reason of the contacts cancelled with their campaign (and of the leads still queued on them)."""
WINDOW_FIELDS = ("calling_hours", "timezone", "timezone_mode", "schedule_id")
"""The fields a campaign's calling window is made of: changing one re-plans its waiting contacts."""
WAIT_EXPLANATIONS = (CampaignStatusReason.OUTSIDE_CALLING_HOURS, CampaignStatusReason.WAITING_FOR_RETRY)
"""The ``status_reason`` values the dialer derives from its waiting contacts (cleared when they are re-planned)."""


async def replan_waiting(campaigns: CampaignRepository, contacts: ContactRepository, uow: UnitOfWork,
                         campaign: Campaign, at: datetime) -> Campaign:
    """The campaign's window changed (it resumed, its hours, zone or schedule changed): contacts that wait only
    for the old window (``reason`` ``outside_calling_hours``, put there by the dialer) are due again at ``at``, so
    the dialer judges them under the window in force now; contacts waiting for a retry delay keep their time. The
    campaign's explanation of its wait (``status_reason``, ``next_dial_at``) is cleared for the dialer to give it
    anew, and a running campaign's dialer is woken. Returns the campaign as saved."""
    org, campaign_id = campaign.organization_id, persisted(campaign.id)
    await contacts.replan_waiting(org, campaign_id, OUTSIDE_CALLING_HOURS, at)
    if campaign.status_reason in WAIT_EXPLANATIONS or campaign.next_dial_at is not None:
        campaign = await campaigns.update(replace(campaign, status_reason=None, next_dial_at=None))
    if campaign.status == CampaignStatus.RUNNING:
        uow.created_work()
    return campaign


class CampaignScheduleUsage:
    """ScheduleUsage as campaigns see it: a running or paused campaign uses its schedule (so the schedule
    cannot be deleted meanwhile, and a change of its hours re-plans the campaign's waiting contacts)."""

    def __init__(self, campaigns: CampaignRepository, contacts: ContactRepository, uow: UnitOfWork) -> None:
        self.campaigns, self.contacts, self.uow = campaigns, contacts, uow

    async def users_of(self, organization_id: int, schedule_id: int) -> list[int]:
        return await self.campaigns.using_schedule(organization_id, schedule_id)

    async def schedule_changed(self, organization_id: int, schedule_id: int, at: datetime) -> None:
        for campaign_id in await self.campaigns.using_schedule(organization_id, schedule_id):
            campaign = await self.campaigns.get_for_update(organization_id, campaign_id)
            if campaign is not None and campaign.status in SCHEDULED_STATUSES:
                await replan_waiting(self.campaigns, self.contacts, self.uow, campaign, at)


async def _load(campaigns: CampaignRepository, actor: Actor, campaign_id: int, *, lock: bool = False) -> Campaign:
    getter = campaigns.get_for_update if lock else campaigns.get
    found = await getter(actor.organization_id, campaign_id)
    if found is None:
        raise NotFound("campaign", campaign_id)
    return found


@dataclass(frozen=True, slots=True)
class _References:
    """What a campaign points at, checked to belong to its organization (404 naming the field)."""

    agents: AgentRepository
    numbers: PhoneNumberRepository
    schedules: CampaignSchedules

    async def check(self, organization_id: int, *, agent_id: int | None = None, schedule_id: int | None = None,
                    from_phone_number_id: int | None = None) -> None:
        if agent_id is not None and await self.agents.get(organization_id, agent_id) is None:
            raise NotFound("agent", agent_id, field="agent_id")
        if schedule_id is not None and not await self.schedules.exists(organization_id, schedule_id):
            raise NotFound("schedule", schedule_id, field="schedule_id")
        if from_phone_number_id is not None:
            number = await self.numbers.get(organization_id, from_phone_number_id)
            if number is None:
                raise NotFound("phone number", from_phone_number_id, field="from_phone_number_id")
            if not number.voice:
                raise ValidationFailed.field("from_phone_number_id", "must be a voice-capable number")


# ---------------------------------------------------------------------------------------------- campaigns


@dataclass(frozen=True, slots=True)
class CreateCampaignCommand:
    """A new campaign's fields, validated at the edge (time zone, bounds); what is not sent takes the defaults."""

    actor: Actor
    name: str
    agent_id: int
    schedule_id: int | None = None
    timezone: str = "UTC"
    timezone_mode: str = "recipient"
    calling_hours: CallingHours = field(default_factory=CallingHours)
    max_concurrent_calls: int = DEFAULT_MAX_CONCURRENT_CALLS
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    from_phone_number_id: int | None = None
    completion: str = "when_empty"
    allowed_countries: tuple[str, ...] | None = None
    widget_max_contacts_per_hour: int = WIDGET_MAX_CONTACTS_PER_HOUR_DEFAULT


def _countries(phones: PhoneNormalizer, values: Sequence[str] | None) -> tuple[str, ...] | None:
    """A campaign's ``allowed_countries``: ISO 3166 alpha-2 codes (400 naming the field), None for the
    organization's."""
    return None if values is None else parse_countries(values, "allowed_countries", phones.countries())


class CreateCampaign:
    def __init__(self, campaigns: CampaignRepository, agents: AgentRepository, numbers: PhoneNumberRepository,
                 schedules: CampaignSchedules, phones: PhoneNormalizer, clock: Clock) -> None:
        self.campaigns, self.phones, self.clock = campaigns, phones, clock
        self.references = _References(agents, numbers, schedules)

    async def execute(self, command: CreateCampaignCommand) -> Campaign:
        org = command.actor.organization_id
        now = self.clock.now()
        campaign = Campaign(
            id=None, organization_id=org, name=command.name, agent_id=command.agent_id,
            schedule_id=command.schedule_id, timezone=command.timezone, timezone_mode=command.timezone_mode,
            calling_hours=command.calling_hours, max_concurrent_calls=command.max_concurrent_calls,
            retry=command.retry, from_phone_number_id=command.from_phone_number_id,
            completion=command.completion, status="draft",
            allowed_countries=_countries(self.phones, command.allowed_countries),
            widget_max_contacts_per_hour=command.widget_max_contacts_per_hour, created_at=now, updated_at=now,
        ).validate()
        await self.references.check(org, agent_id=command.agent_id, schedule_id=command.schedule_id,
                                    from_phone_number_id=command.from_phone_number_id)
        return await self.campaigns.add(campaign)


@dataclass(frozen=True, slots=True)
class CampaignDetail:
    campaign: Campaign
    stats: CampaignStats


@dataclass(frozen=True, slots=True)
class GetCampaignCommand:
    actor: Actor
    campaign_id: int


class GetCampaign:
    """The campaign with its contacts counted by status."""

    def __init__(self, campaigns: CampaignRepository) -> None:
        self.campaigns = campaigns

    async def execute(self, command: GetCampaignCommand) -> CampaignDetail:
        campaign = await _load(self.campaigns, command.actor, command.campaign_id)
        return CampaignDetail(campaign, await self.campaigns.stats(command.actor.organization_id,
                                                                   command.campaign_id))


@dataclass(frozen=True, slots=True)
class ListCampaignsCommand:
    actor: Actor
    filters: CampaignFilter
    page: PageRequest


class ListCampaigns:
    def __init__(self, campaigns: CampaignRepository) -> None:
        self.campaigns = campaigns

    async def execute(self, command: ListCampaignsCommand) -> Page[Campaign]:
        return await self.campaigns.list(command.actor.organization_id, command.filters, command.page)


@dataclass(frozen=True, slots=True)
class UpdateCampaignCommand:
    actor: Actor
    campaign_id: int
    patch: MergePatch
    """Nested objects (calling_hours, retry and its rules) as the members sent; null clears schedule_id and
    from_phone_number_id."""


class UpdateCampaign:
    """PATCH while draft or paused (else 409 invalid_transition). A change of the calling window (calling hours,
    time zone, its mode, the schedule) re-plans the contacts that waited for the old one (``replan_waiting``)."""

    def __init__(self, campaigns: CampaignRepository, contacts: ContactRepository, agents: AgentRepository,
                 numbers: PhoneNumberRepository, schedules: CampaignSchedules, phones: PhoneNormalizer, clock: Clock,
                 uow: UnitOfWork) -> None:
        self.campaigns, self.contacts, self.phones, self.clock, self.uow = campaigns, contacts, phones, clock, uow
        self.references = _References(agents, numbers, schedules)

    async def execute(self, command: UpdateCampaignCommand) -> Campaign:
        current = await _load(self.campaigns, command.actor, command.campaign_id, lock=True)
        current.ensure_editable()
        changes = dict(command.patch)
        if "allowed_countries" in changes:
            changes["allowed_countries"] = _countries(self.phones, changes["allowed_countries"])
        updated = apply_patch(current, changes)
        if updated == current:  # a PATCH that changes nothing leaves updated_at alone
            return current
        updated.validate()
        patch = command.patch
        await self.references.check(
            current.organization_id,
            agent_id=patch.get("agent_id") if patch.get("agent_id") != current.agent_id else None,
            schedule_id=patch.get("schedule_id") if patch.get("schedule_id") != current.schedule_id else None,
            from_phone_number_id=(patch.get("from_phone_number_id")
                                  if patch.get("from_phone_number_id") != current.from_phone_number_id else None),
        )
        now = self.clock.now()
        saved = await self.campaigns.update(replace(updated, updated_at=now))
        if any(getattr(updated, name) != getattr(current, name) for name in WINDOW_FIELDS):
            saved = await replan_waiting(self.campaigns, self.contacts, self.uow, saved, now)
        return saved


@dataclass(frozen=True, slots=True)
class DeleteCampaignCommand:
    actor: Actor
    campaign_id: int


class DeleteCampaign:
    """Deletes a draft or finished campaign with its contacts (else 409 invalid_transition); whatever followed
    those contacts (a lead still queued) is told they ended (``campaign_deleted``)."""

    def __init__(self, campaigns: CampaignRepository, endings: ContactEndings, clock: Clock) -> None:
        self.campaigns, self.endings, self.clock = campaigns, endings, clock

    async def execute(self, command: DeleteCampaignCommand) -> None:
        campaign = await _load(self.campaigns, command.actor, command.campaign_id, lock=True)
        campaign.ensure_deletable()
        await self.campaigns.delete(command.actor.organization_id, command.campaign_id)
        await self.endings.contacts_ended(command.actor.organization_id, command.campaign_id, None,
                                          "campaign_deleted", self.clock.now())


@dataclass(frozen=True, slots=True)
class StartCampaignCommand:
    actor: Actor
    campaign_id: int


class StartCampaign:
    """draft or paused -> running: needs the organization's billing in good standing (402 payment_required), a
    contact (422 campaign_empty) unless its completion is ``manual``, an
    active agent (409) and, when it names one, a schedule that still exists (409). Resuming re-plans the contacts
    that waited for the calling window (``replan_waiting``): they are judged under the hours in force now."""

    def __init__(self, campaigns: CampaignRepository, contacts: ContactRepository, agents: AgentRepository,
                 schedules: CampaignSchedules, clock: Clock, uow: UnitOfWork, quota: QuotaGate) -> None:
        self.campaigns, self.contacts, self.agents, self.clock, self.uow = campaigns, contacts, agents, clock, uow
        self.schedules, self.quota = schedules, quota

    async def execute(self, command: StartCampaignCommand) -> Campaign:
        org = command.actor.organization_id
        campaign = await _load(self.campaigns, command.actor, command.campaign_id, lock=True)
        CAMPAIGN_MACHINE.next(campaign.status, "start")  # 409 invalid_transition before anything else
        # the one gate's billing standing: 402 payment_required while billing holds new work
        await self.quota.ensure_standing(org, self.clock.now())
        if campaign.completion == "when_empty" and not await self.contacts.exists_in(org, command.campaign_id):
            raise CampaignEmpty(f"campaign {command.campaign_id} has no contacts: add some before starting it",
                                details={"campaign_id": command.campaign_id})
        agent = await self.agents.get(org, campaign.agent_id)
        if agent is None or agent.status != AgentStatus.ACTIVE:
            state = "deleted" if agent is None else agent.status
            raise InvalidTransition("campaign", campaign.status, "running", action="start",
                                    reason=f"its agent {campaign.agent_id} is {state}, not active (publish it)",
                                    details={"agent_id": campaign.agent_id, "agent_status": state})
        if campaign.schedule_id is not None and not await self.schedules.exists(org, campaign.schedule_id):
            raise InvalidTransition("campaign", campaign.status, "running", action="start",
                                    reason=f"its schedule {campaign.schedule_id} was deleted (set another or null)",
                                    details={"schedule_id": campaign.schedule_id})
        now = self.clock.now()
        started = await self.campaigns.update(campaign.move("start", now))
        started = await replan_waiting(self.campaigns, self.contacts, self.uow, started, now)
        self.uow.record(EventType.CAMPAIGN_STARTED(org, started.view()))
        return started


@dataclass(frozen=True, slots=True)
class PauseCampaignCommand:
    actor: Actor
    campaign_id: int


class PauseCampaign:
    """running -> paused: no new dials (calls in progress finish)."""

    def __init__(self, campaigns: CampaignRepository, clock: Clock, uow: UnitOfWork) -> None:
        self.campaigns, self.clock, self.uow = campaigns, clock, uow

    async def execute(self, command: PauseCampaignCommand) -> Campaign:
        campaign = await _load(self.campaigns, command.actor, command.campaign_id, lock=True)
        paused = await self.campaigns.update(campaign.move("pause", self.clock.now()))
        self.uow.record(EventType.CAMPAIGN_PAUSED(command.actor.organization_id, paused.view()))
        return paused


@dataclass(frozen=True, slots=True)
class CancelCampaignCommand:
    actor: Actor
    campaign_id: int


class CancelCampaign:
    """draft, running or paused -> cancelled; its pending and retry_wait contacts are cancelled with it (and
    whatever followed them told so); contacts being dialled finish with their calls."""

    def __init__(self, campaigns: CampaignRepository, contacts: ContactRepository, endings: ContactEndings,
                 clock: Clock) -> None:
        self.campaigns, self.contacts, self.endings, self.clock = campaigns, contacts, endings, clock

    async def execute(self, command: CancelCampaignCommand) -> Campaign:
        org = command.actor.organization_id
        campaign = await _load(self.campaigns, command.actor, command.campaign_id, lock=True)
        now = self.clock.now()
        cancelled = await self.campaigns.update(campaign.move("cancel", now))
        ended = await self.contacts.cancel_open(org, command.campaign_id, CAMPAIGN_CANCELLED, now)
        if ended:
            await self.endings.contacts_ended(org, command.campaign_id, ended, CAMPAIGN_CANCELLED, now)
        return cancelled


# ----------------------------------------------------------------------------------------------- contacts


@dataclass(frozen=True, slots=True)
class ContactsAdded:
    accepted: int
    duplicates: int
    rejected: list[RowRejection]
    """The first MAX_REJECTIONS_REPORTED rejected rows, in row order."""
    rejected_count: int


class _ContactIntake:
    """Turns rows into contacts batch by batch: a row with a bad field is rejected (and reported), a phone the
    campaign has (or an earlier row of the same request had) is a duplicate, the rest are inserted."""

    def __init__(self, contacts: ContactRepository, phones: PhoneNormalizer, campaign: Campaign, clock: Clock,
                 subject: str, held: int, policy: DialingPolicy, cause_depth: int = 0) -> None:
        self.contacts, self.phones, self.campaign, self.clock, self.subject = (contacts, phones, campaign, clock,
                                                                               subject)
        self.held = held
        """The contacts the campaign held before this request (its row is locked: nobody adds meanwhile)."""
        self.policy = policy
        """The destination policy the campaign dials under: a number it refuses is a rejected row."""
        self.cause_depth = cause_depth
        """The depth of the trigger action adding the contacts (0: added otherwise), kept on each new one."""
        self.accepted = self.duplicates = self.rejected_count = 0
        self.rejected: list[RowRejection] = []
        self.batch: dict[str, Contact] = {}
        self.in_batch_duplicates = 0

    def _reject(self, rejection: RowRejection) -> None:
        self.rejected_count += 1
        if len(self.rejected) < MAX_REJECTIONS_REPORTED:
            self.rejected.append(rejection)

    async def take(self, item: ContactDraft | RowRejection) -> None:
        if isinstance(item, RowRejection):
            self._reject(item)
            return
        problem = check_row(item)
        if problem is not None:
            self._reject(problem)
            return
        if not item.phone.strip():
            self._reject(RowRejection(item.row, "phone", "is required"))
            return
        phone = self.phones.normalize(item.phone)
        if phone is None:
            self._reject(RowRejection(item.row, "phone", E164_RULE))
            return
        facts = self.phones.describe(phone)
        refusal = self.policy.refusal(phone, facts)
        if refusal is not None:
            message = refusal_message(phone, refusal, facts, self.policy)
            self._reject(RowRejection(item.row, "phone", f"destination_not_allowed ({refusal}): {message}"))
            return
        if item.timezone is not None:
            try:
                validate_timezone(item.timezone)
            except ValidationFailed:
                self._reject(RowRejection(item.row, "timezone", "must be an IANA time zone name, such as "
                                                                "Europe/Berlin"))
                return
        if phone in self.batch:
            self.in_batch_duplicates += 1
            return
        now = self.clock.now()
        self.batch[phone] = Contact(None, self.campaign.organization_id, persisted(self.campaign.id), phone, item.name,
                                    item.timezone, dict(item.custom_data), next_attempt_at=now, created_at=now,
                                    updated_at=now,  # due from when it is added: the dialer reads by due time
                                    cause_depth=self.cause_depth)
        if len(self.batch) >= BATCH:
            await self.flush()

    async def flush(self) -> None:
        if self.batch:
            added = await self.contacts.add_many(self.campaign.organization_id, persisted(self.campaign.id),
                                                 list(self.batch.values()))
            self.accepted += added
            self.duplicates += len(self.batch) - added
            self.batch = {}
            self._within_ceiling()
        self.duplicates += self.in_batch_duplicates
        self.in_batch_duplicates = 0

    def _within_ceiling(self) -> None:
        limit = MAX_CONTACTS_PER_CAMPAIGN
        if self.accepted and self.held + self.accepted > limit:  # duplicates of a full campaign still answer
            raise CampaignContactLimit(
                f"{self.subject}: campaign {self.campaign.id} would hold more than {limit} contacts (it holds "
                f"{self.held}; this request adds {self.accepted} so far): nothing was added",
                details={"field": self.subject, "limit": limit, "contacts": self.held})

    async def result(self) -> ContactsAdded:
        await self.flush()
        if self.accepted + self.duplicates == 0:
            shown = [{"row": r.row, "field": r.field, "message": r.message} for r in self.rejected[:100]]
            raise ValidationFailed(
                f"{self.subject}: no row holds a valid contact ({self.rejected_count} rejected)",
                details={"validation_errors": {self.subject: "no valid contact"}, "rejected": shown,
                         "rejected_count": self.rejected_count})
        self.rejected.sort(key=lambda r: r.row)
        return ContactsAdded(self.accepted, self.duplicates, self.rejected, self.rejected_count)


async def _intake(campaigns: CampaignRepository, contacts: ContactRepository, phones: PhoneNormalizer,
                  dnc: DncGate, clock: Clock, actor: Actor, campaign_id: int, subject: str,
                  cause_depth: int = 0) -> _ContactIntake:
    """The intake of the campaign contacts are added to: not a finished one (409 invalid_transition); running is
    fine. Its row stays locked until the request commits, so a cancel (or another request's contacts, counted
    against MAX_CONTACTS_PER_CAMPAIGN) cannot slip in between the check and the inserts."""
    campaign = await _load(campaigns, actor, campaign_id, lock=True)
    if campaign.status in FINAL_STATUSES:
        raise InvalidTransition("campaign", campaign.status, campaign.status, action="add contacts",
                                allowed_from=("draft", "running", "paused"))
    held = await contacts.count(actor.organization_id, campaign_id)
    policy = await dnc.policy(campaign.organization_id, campaign.allowed_countries)
    return _ContactIntake(contacts, phones, campaign, clock, subject, held, policy, cause_depth)


@dataclass(frozen=True, slots=True)
class AddContactsCommand:
    actor: Actor
    campaign_id: int
    contacts: tuple[ContactDraft, ...]
    """``row``: the item's position in the request's ``contacts``, from 0."""


class AddContacts:
    """Up to MAX_CONTACTS_PER_REQUEST contacts: bad rows are reported and skipped, duplicates counted; 400 only
    when no row holds a valid contact."""

    def __init__(self, campaigns: CampaignRepository, contacts: ContactRepository, phones: PhoneNormalizer,
                 dnc: DncGate, clock: Clock) -> None:
        self.campaigns, self.contacts, self.phones, self.dnc, self.clock = campaigns, contacts, phones, dnc, clock

    async def execute(self, command: AddContactsCommand) -> ContactsAdded:
        if len(command.contacts) > MAX_CONTACTS_PER_REQUEST:
            raise ValidationFailed.field("contacts", f"at most {MAX_CONTACTS_PER_REQUEST} contacts per request")
        intake = await _intake(self.campaigns, self.contacts, self.phones, self.dnc, self.clock, command.actor,
                               command.campaign_id, "contacts")
        for draft in command.contacts:
            await intake.take(draft)
        return await intake.result()


@dataclass(frozen=True, slots=True)
class AddContactCommand:
    actor: Actor
    campaign_id: int
    contact: ContactDraft


@dataclass(frozen=True, slots=True)
class ContactAdded:
    contact: Contact
    created: bool
    """False: the campaign had the number already, and ``contact`` is that contact."""


class AddContact:
    """One contact (a lead handed to a campaign, a widget visitor, a trigger's ``campaign_contact`` action): the
    same intake as AddContacts, but a bad field is a 400 naming it, a number outside the campaign's dialing policy a
    422 destination_not_allowed, and a number the campaign has already gives back the existing contact (as it is).
    A new contact keeps the depth of the unit's cause (``CauseContext``): added by a trigger's action, the calls
    the dialer places for it later and its events are as deep as that action."""

    def __init__(self, campaigns: CampaignRepository, contacts: ContactRepository, phones: PhoneNormalizer,
                 dnc: DncGate, clock: Clock, cause: CauseContext) -> None:
        self.campaigns, self.contacts, self.phones, self.dnc, self.clock = campaigns, contacts, phones, dnc, clock
        self.cause = cause

    async def execute(self, command: AddContactCommand) -> ContactAdded:
        intake = await _intake(self.campaigns, self.contacts, self.phones, self.dnc, self.clock, command.actor,
                               command.campaign_id, "contact", cause_depth=self.cause.depth)
        number = self.phones.normalize(command.contact.phone)
        if number is not None:
            self.dnc.check(intake.policy, number)
        await intake.take(command.contact)
        if intake.rejected:
            rejection = intake.rejected[0]
            raise ValidationFailed.field(rejection.field, rejection.message)
        added = await intake.result()
        phone = self.phones.normalize(command.contact.phone) or command.contact.phone
        contact = await self.contacts.find_by_phone(command.actor.organization_id, command.campaign_id, phone)
        if contact is None:  # the intake added it or found it in this very transaction
            raise NotFound("contact", phone)
        return ContactAdded(contact, added.accepted == 1)


@dataclass(frozen=True, slots=True)
class ImportContactsCommand:
    actor: Actor
    campaign_id: int
    lines: Iterable[str]
    """The CSV file as decoded lines (read lazily: the file is never held as rows)."""


class ImportContacts:
    """A CSV file read row by row and inserted in batches (domain.campaigns.csv_contacts has the format)."""

    def __init__(self, campaigns: CampaignRepository, contacts: ContactRepository, phones: PhoneNormalizer,
                 dnc: DncGate, clock: Clock) -> None:
        self.campaigns, self.contacts, self.phones, self.dnc, self.clock = campaigns, contacts, phones, dnc, clock

    async def execute(self, command: ImportContactsCommand) -> ContactsAdded:
        intake = await _intake(self.campaigns, self.contacts, self.phones, self.dnc, self.clock, command.actor,
                               command.campaign_id, "file")
        for item in csv_contacts(command.lines):
            await intake.take(item)
        return await intake.result()


@dataclass(frozen=True, slots=True)
class ListContactsCommand:
    actor: Actor
    campaign_id: int
    filters: ContactFilter
    page: PageRequest


class ListContacts:
    def __init__(self, campaigns: CampaignRepository, contacts: ContactRepository) -> None:
        self.campaigns, self.contacts = campaigns, contacts

    async def execute(self, command: ListContactsCommand) -> Page[Contact]:
        await _load(self.campaigns, command.actor, command.campaign_id)
        return await self.contacts.list(command.actor.organization_id, command.campaign_id, command.filters,
                                        command.page)


@dataclass(frozen=True, slots=True)
class ContactDetail:
    contact: Contact
    attempts: list[ContactAttempt]


@dataclass(frozen=True, slots=True)
class GetContactCommand:
    actor: Actor
    campaign_id: int
    contact_id: int


async def _load_contact(campaigns: CampaignRepository, contacts: ContactRepository, actor: Actor, campaign_id: int,
                        contact_id: int) -> Contact:
    await _load(campaigns, actor, campaign_id)
    found = await contacts.get(actor.organization_id, campaign_id, contact_id)
    if found is None:
        raise NotFound("contact", contact_id)
    return found


class GetContact:
    """A contact with its attempts."""

    def __init__(self, campaigns: CampaignRepository, contacts: ContactRepository) -> None:
        self.campaigns, self.contacts = campaigns, contacts

    async def execute(self, command: GetContactCommand) -> ContactDetail:
        contact = await _load_contact(self.campaigns, self.contacts, command.actor, command.campaign_id,
                                      command.contact_id)
        return ContactDetail(contact, await self.contacts.attempts(command.actor.organization_id,
                                                                   command.contact_id))


@dataclass(frozen=True, slots=True)
class DeleteContactCommand:
    actor: Actor
    campaign_id: int
    contact_id: int


class DeleteContact:
    """Removes a pending contact (else 409 invalid_transition); whatever followed it is told it ended
    (``contact_deleted``)."""

    def __init__(self, campaigns: CampaignRepository, contacts: ContactRepository, endings: ContactEndings,
                 clock: Clock) -> None:
        self.campaigns, self.contacts, self.endings, self.clock = campaigns, contacts, endings, clock

    async def execute(self, command: DeleteContactCommand) -> None:
        contact = await _load_contact(self.campaigns, self.contacts, command.actor, command.campaign_id,
                                      command.contact_id)
        contact.ensure_deletable()
        await self.contacts.delete(command.actor.organization_id, command.campaign_id, command.contact_id)
        await self.endings.contacts_ended(command.actor.organization_id, command.campaign_id, [command.contact_id],
                                          "contact_deleted", self.clock.now())
