"""Lead use cases: receive a lead (call it at once through an agent, or hand it to a campaign), read leads, and
the outbox consumer that moves each lead as its call or campaign contact ends."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from application.calls import AgentNotCallable, PlaceCall, PlaceCallCommand
from application.campaigns import AddContact, AddContactCommand
from application.context import Actor
from application.dnc import DncGate
from application.outbox import LEADS
from application.phones import e164
from application.ports.agents import AgentRepository
from application.ports.campaigns import CampaignRepository
from application.ports.events import OutboxReader
from application.ports.leads import LeadFilter, LeadRepository
from application.ports.phones import PhoneNormalizer
from application.ports.platform import Clock, Page, PageRequest, UnitOfWork
from application.ports.usage import QuotaGate
from domain.agents import AgentStatus
from domain.campaigns import FINAL_STATUSES as FINAL_CAMPAIGN_STATUSES
from domain.campaigns import Campaign, ContactDraft
from domain.errors import InvalidTransition, NotFound
from domain.events import EventRecord, EventType
from domain.leads import (
    CONTACT_OUTCOMES,
    DNC_REASON,
    EXTERNAL_ID_MAX_LENGTH,
    NAME_MAX_LENGTH,
    REASON_MAX_LENGTH,
    SOURCE_MAX_LENGTH,
    Lead,
    call_trigger,
    check_email,
    check_target,
    check_text,
)
from domain.metadata import check_metadata
from domain.rfc3339 import check_created_window


@dataclass(frozen=True, slots=True)
class CreateLeadCommand:
    actor: Actor
    phone: str
    name: str | None = None
    email: str | None = None
    agent_id: int | None = None
    campaign_id: int | None = None
    custom_data: dict[str, Any] = field(default_factory=dict)
    external_id: str | None = None
    source: str | None = None


@dataclass(frozen=True, slots=True)
class LeadReceived:
    lead: Lead
    created: bool
    """False: the organization had a lead with this external_id, and ``lead`` is that one (nothing was done)."""


class CreateLead:
    """POST /leads. With ``agent_id`` the call is placed at once (``PlaceCall``: the rules of POST /calls); with
    ``campaign_id`` the lead becomes a contact of that campaign (``AddContact``: the campaigns' intake, so a
    number the campaign has is that contact). A number on a Do-Not-Call list is kept as ``blocked_dnc``, with no
    call and no contact. While the organization's billing holds new work, a new lead is refused (402
    payment_required) and nothing is kept. A known ``external_id`` gives back the existing lead, also when two
    requests race (the store's unique key decides which one stored it)."""

    def __init__(self, uow: UnitOfWork, leads: LeadRepository, agents: AgentRepository,
                 campaigns: CampaignRepository, place_call: PlaceCall, add_contact: AddContact, dnc: DncGate,
                 phones: PhoneNormalizer, clock: Clock, quota: QuotaGate) -> None:
        self.uow, self.leads, self.agents, self.campaigns = uow, leads, agents, campaigns
        self.place_call, self.add_contact = place_call, add_contact
        self.dnc, self.phones, self.clock, self.quota = dnc, phones, clock, quota

    async def execute(self, command: CreateLeadCommand) -> LeadReceived:
        org = command.actor.organization_id
        phone = e164(self.phones, command.phone, "phone")
        name = check_text(command.name, "name", NAME_MAX_LENGTH)
        email = check_email(command.email)
        external_id = check_text(command.external_id, "external_id", EXTERNAL_ID_MAX_LENGTH)
        source = check_text(command.source, "source", SOURCE_MAX_LENGTH)
        check_metadata("custom_data", command.custom_data)
        check_target(command.agent_id, command.campaign_id)
        if external_id is not None:
            existing = await self.leads.find_external(org, external_id)
            if existing is not None:
                return LeadReceived(existing, False)
        # the one gate's billing standing: 402 payment_required while billing holds new work (nothing is kept)
        await self.quota.ensure_standing(org, self.clock.now())
        campaign = await self._check_target(org, command.agent_id, command.campaign_id)
        # the destination policy refuses the lead outright (422); a listed number is kept as blocked_dnc
        await self.dnc.ensure_destination(org, phone, campaign.allowed_countries if campaign else None)
        blocked = bool((await self.dnc.screen(org, [phone])).get(phone))
        now = self.clock.now()
        lead = await self.leads.add(Lead(
            id=None, organization_id=org, phone=phone, name=name, email=email, agent_id=command.agent_id,
            campaign_id=command.campaign_id, custom_data=dict(command.custom_data), external_id=external_id,
            source=source, status="blocked_dnc" if blocked else "queued", reason=DNC_REASON if blocked else None,
            created_at=now, updated_at=now,
        ))
        if lead is None:  # another request stored this external_id first: its lead is the answer
            winner = await self.leads.find_external(org, external_id or "")
            if winner is None:
                raise NotFound("lead with external_id", external_id)
            return LeadReceived(winner, False)
        if not blocked:
            lead = await self.leads.update(await self._hand_over(command, lead, phone, name))
        self.uow.record(EventType.LEAD_CREATED(org, lead.view()))
        return LeadReceived(lead, True)

    async def _check_target(self, org: int, agent_id: int | None, campaign_id: int | None) -> Campaign | None:
        """The agent or campaign exists in the organization (404 naming the field) and can take the lead now
        (409 invalid_transition), checked before screening so a blocked number is answered like any other."""
        if agent_id is not None:
            agent = await self.agents.get(org, agent_id)
            if agent is None:
                raise NotFound("agent", agent_id, field="agent_id")
            if agent.status != AgentStatus.ACTIVE:
                raise AgentNotCallable(agent_id, agent.status)
        if campaign_id is not None:
            campaign = await self.campaigns.get(org, campaign_id)
            if campaign is None:
                raise NotFound("campaign", campaign_id, field="campaign_id")
            if campaign.status in FINAL_CAMPAIGN_STATUSES:
                raise InvalidTransition("campaign", campaign.status, campaign.status, action="add leads",
                                        allowed_from=("draft", "running", "paused"))
            return campaign
        return None

    async def _hand_over(self, command: CreateLeadCommand, lead: Lead, phone: str, name: str | None) -> Lead:
        """The call queued, or the campaign contact made (or found): the lead records which."""
        if command.campaign_id is None:  # check_target: then agent_id is given
            call = await self.place_call.execute(PlaceCallCommand(
                command.actor, str(command.agent_id), phone, name, dict(command.custom_data),
                contact_name_field="name", agent_field="agent_id"))
            return replace(lead, call_id=call.id)
        added = await self.add_contact.execute(AddContactCommand(
            command.actor, command.campaign_id, ContactDraft(0, phone, name, None, dict(command.custom_data))))
        contact = added.contact
        lead = replace(lead, contact_id=contact.id, call_id=contact.last_call_id)
        trigger = CONTACT_OUTCOMES.get(contact.status)
        if trigger is not None:  # an existing contact the campaign is done with: the lead takes its outcome
            lead = lead.move(trigger, lead.updated_at or self.clock.now(),
                             reason=contact.reason if trigger == "fail" else None)
        return lead


@dataclass(frozen=True, slots=True)
class GetLeadCommand:
    actor: Actor
    lead_id: int


class GetLead:
    def __init__(self, leads: LeadRepository) -> None:
        self.leads = leads

    async def execute(self, command: GetLeadCommand) -> Lead:
        found = await self.leads.get(command.actor.organization_id, command.lead_id)
        if found is None:
            raise NotFound("lead", command.lead_id)
        return found


@dataclass(frozen=True, slots=True)
class ListLeadsCommand:
    actor: Actor
    filters: LeadFilter
    page: PageRequest


class ListLeads:
    def __init__(self, leads: LeadRepository) -> None:
        self.leads = leads

    async def execute(self, command: ListLeadsCommand) -> Page[Lead]:
        check_created_window(command.filters.created_after, command.filters.created_before)
        return await self.leads.list(command.actor.organization_id, command.filters, command.page)


# ---------------------------------------------------------------------------------------- following outcomes


def _reason(value: object) -> str | None:
    return str(value)[:REASON_MAX_LENGTH] if value else None


@dataclass(frozen=True, slots=True)
class FollowLeadOutcomesCommand:
    limit: int = 500
    """At most this many events per pass."""


class FollowLeadOutcomes:
    """The outbox's ``leads`` consumer: reads the events after its cursor and moves the queued leads they
    concern, in one transaction with the cursor. ``call.ended`` settles the lead whose call it is (called when
    the call connected, else failed with the call's end reason); ``contact.completed`` and ``contact.failed``
    settle the leads that became that campaign contact. Every other event is passed over."""

    def __init__(self, outbox: OutboxReader, leads: LeadRepository, clock: Clock) -> None:
        self.outbox, self.leads, self.clock = outbox, leads, clock

    async def execute(self, command: FollowLeadOutcomesCommand) -> int:
        """Returns how many events were read (0: nothing new)."""
        events = await self.outbox.pending(LEADS, command.limit)
        if not events:
            return 0
        now = self.clock.now()
        for event in events:
            await self._follow(event, now)
        await self.outbox.advance(LEADS, events[-1].id, now)
        return len(events)

    async def _follow(self, event: EventRecord, now: datetime) -> None:
        data, org = event.data, event.organization_id
        if event.type == EventType.CALL_ENDED and isinstance(data.get("id"), str):
            trigger = call_trigger(str(data.get("status")))
            reason = _reason(data.get("end_reason")) if trigger == "fail" else None
            for lead in await self.leads.queued_for_call(org, data["id"]):
                await self.leads.update(lead.move(trigger, now, reason=reason))
        elif event.type in (EventType.CONTACT_COMPLETED, EventType.CONTACT_FAILED) and isinstance(
                data.get("contact_id"), int):
            trigger = "reach" if event.type == EventType.CONTACT_COMPLETED else "fail"
            reason = _reason(data.get("reason")) if trigger == "fail" else None
            for lead in await self.leads.queued_for_contact(org, data["contact_id"]):
                await self.leads.update(lead.move(trigger, now, reason=reason,
                                                  call_id=data.get("last_call_id") or lead.call_id))


class LeadsOfEndedContacts:
    """ContactEndings filled by the leads feature: a campaign contact cancelled with its campaign or deleted
    (alone, or with its campaign) will have no outcome event, so the leads still queued on it fail now, in the
    same unit of work, with the ending's reason (``campaign_cancelled``, ``contact_deleted``,
    ``campaign_deleted``). A lead whose contact is being dialled stays queued and follows the call."""

    def __init__(self, leads: LeadRepository) -> None:
        self.leads = leads

    async def contacts_ended(self, organization_id: int, campaign_id: int, contact_ids: Sequence[int] | None,
                             reason: str, at: datetime) -> None:
        queued = await self.leads.queued_for_campaign(organization_id, campaign_id)
        if not queued:
            return
        ended = None if contact_ids is None else set(contact_ids)
        failing = [lead_id for lead_id, contact_id in queued if ended is None or contact_id in ended]
        if failing:
            await self.leads.fail_queued(organization_id, failing, reason, at)
