"""Lead use cases on the memory backend: the call placed through PlaceCall, the campaign contact through the
campaigns' intake, DNC kept as blocked_dnc, external_id de-duplication and the lead.created event."""

from __future__ import annotations

import pytest

from application.agents import CreateAgent, CreateAgentCommand, PublishAgent, PublishAgentCommand
from application.calls import GetCall, GetCallCommand
from application.campaigns import CreateCampaign, CreateCampaignCommand, ListContacts, ListContactsCommand
from application.context import Actor
from application.dnc import AddDncEntries, AddDncEntriesCommand, CreateDncList, CreateDncListCommand
from application.leads import CreateLead, CreateLeadCommand, GetLead, GetLeadCommand, ListLeads, ListLeadsCommand
from application.ports.campaigns import ContactFilter
from application.ports.leads import LeadFilter
from application.ports.platform import PageRequest
from domain.errors import NotFound
from tests.application.conftest import App


async def agent(app: App, actor: Actor) -> int:
    created = await app.run(CreateAgent, CreateAgentCommand(actor, name="Caller"))
    await app.run(PublishAgent, PublishAgentCommand(actor, created.id))
    return int(created.id)


async def test_a_lead_for_an_agent_is_called_at_once_and_announced(app: App) -> None:
    actor = await app.actor()
    agent_id = await agent(app, actor)
    received = await app.run(CreateLead, CreateLeadCommand(actor, "+14155550100", name="Ada", agent_id=agent_id,
                                                           custom_data={"crm_id": "A-17"}, external_id="crm-1"))
    lead = received.lead
    assert received.created and (lead.status, lead.phone, lead.external_id) == ("queued", "+14155550100", "crm-1")
    call = await app.run(GetCall, GetCallCommand(actor, lead.call_id or ""))
    assert (call.destination_phone, call.contact_name, call.custom_data) == ("+14155550100", "Ada",
                                                                             {"crm_id": "A-17"})
    again = await app.run(CreateLead, CreateLeadCommand(actor, "+14155550199", agent_id=agent_id,
                                                        external_id="crm-1"))
    assert not again.created and again.lead == lead
    events = [(kind, data["id"], data["call_id"]) for kind, data in await app.events(actor.organization_id)
              if kind.startswith("lead.")]
    assert events == [("lead.created", lead.id, call.id)]
    assert await app.run(GetLead, GetLeadCommand(actor, lead.id or 0)) == lead
    with pytest.raises(NotFound):
        await app.run(GetLead, GetLeadCommand(await app.actor(), lead.id or 0))


async def test_a_lead_for_a_campaign_becomes_its_contact_and_a_listed_number_is_kept_blocked(app: App) -> None:
    actor = await app.actor()
    campaign = await app.run(CreateCampaign, CreateCampaignCommand(actor, "Spring", await agent(app, actor)))
    joined = (await app.run(CreateLead, CreateLeadCommand(actor, "+14155550100", campaign_id=campaign.id))).lead
    assert (joined.status, joined.call_id) == ("queued", None) and joined.contact_id is not None
    dnc = await app.run(CreateDncList, CreateDncListCommand(actor, "Opt-outs"))
    await app.run(AddDncEntries, AddDncEntriesCommand(actor, dnc.id, ("+14155550101",)))
    blocked = (await app.run(CreateLead, CreateLeadCommand(actor, "+14155550101", campaign_id=campaign.id))).lead
    assert (blocked.status, blocked.reason, blocked.contact_id) == ("blocked_dnc", "dnc_blocked", None)
    contacts = await app.run(ListContacts, ListContactsCommand(actor, campaign.id, ContactFilter(), PageRequest()))
    assert [c.id for c in contacts.items] == [joined.contact_id]
    listed = await app.run(ListLeads, ListLeadsCommand(actor, LeadFilter(status="blocked_dnc"), PageRequest()))
    assert [x.id for x in listed.items] == [blocked.id]
