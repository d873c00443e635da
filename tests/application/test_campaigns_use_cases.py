"""Campaign use cases on the memory backend: references checked, the machine through start/pause/cancel, events,
contacts added with duplicates and rejections, imports read row by row."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest

from application.agents import CreateAgent, CreateAgentCommand, PublishAgent, PublishAgentCommand
from application.campaigns import (
    AddContacts,
    AddContactsCommand,
    CancelCampaign,
    CancelCampaignCommand,
    CreateCampaign,
    CreateCampaignCommand,
    DeleteCampaign,
    DeleteCampaignCommand,
    DeleteContact,
    DeleteContactCommand,
    GetCampaign,
    GetCampaignCommand,
    ImportContacts,
    ImportContactsCommand,
    ListContacts,
    ListContactsCommand,
    PauseCampaign,
    PauseCampaignCommand,
    StartCampaign,
    StartCampaignCommand,
    UpdateCampaign,
    UpdateCampaignCommand,
)
from application.context import Actor
from application.ports.campaigns import ContactFilter
from application.ports.platform import PageRequest
from domain.campaigns import Campaign, CampaignEmpty, CampaignStats, ContactDraft, RetryRule
from domain.errors import InvalidTransition, NotFound, ValidationFailed
from tests.application.conftest import App


async def agent(app: App, actor: Actor, *, publish: bool = True) -> int:
    created = await app.run(CreateAgent, CreateAgentCommand(actor, name="Caller"))
    if publish:
        await app.run(PublishAgent, PublishAgentCommand(actor, created.id))
    return int(created.id)


async def campaign(app: App, actor: Actor, **fields: object) -> Campaign:
    agent_id = fields.pop("agent_id", None) or await agent(app, actor)
    return await app.run(CreateCampaign, CreateCampaignCommand(actor, "Spring", int(agent_id), **fields))


def drafts(*phones: str) -> tuple[ContactDraft, ...]:
    return tuple(ContactDraft(n, phone) for n, phone in enumerate(phones))


async def test_a_campaign_needs_its_organizations_agent_schedule_and_number(app: App) -> None:
    actor, other = await app.actor(), await app.actor()
    foreign = await agent(app, other)
    with pytest.raises(NotFound) as refused:
        await campaign(app, actor, agent_id=foreign)
    assert refused.value.details == {"field": "agent_id"}
    with pytest.raises(NotFound) as refused:
        await campaign(app, actor, schedule_id=3)
    assert refused.value.details == {"field": "schedule_id"}
    with pytest.raises(NotFound) as refused:
        await campaign(app, actor, from_phone_number_id=9)
    assert refused.value.details == {"field": "from_phone_number_id"}
    created = await campaign(app, actor)
    assert created.status == "draft" and created.retry.busy == RetryRule(3, 10)
    assert created.created_at == app.clock.now()


async def test_start_pause_cancel_follow_the_machine_and_emit_events(app: App) -> None:
    actor = await app.actor()
    c = await campaign(app, actor)
    with pytest.raises(CampaignEmpty):
        await app.run(StartCampaign, StartCampaignCommand(actor, c.id))
    await app.run(AddContacts, AddContactsCommand(actor, c.id, drafts("+14155550100", "+14155550101")))
    started = await app.run(StartCampaign, StartCampaignCommand(actor, c.id))
    assert started.status == "running" and started.started_at == app.clock.now()
    with pytest.raises(InvalidTransition):
        await app.run(StartCampaign, StartCampaignCommand(actor, c.id))
    with pytest.raises(InvalidTransition):
        await app.run(UpdateCampaign, UpdateCampaignCommand(actor, c.id, {"name": "x"}))
    with pytest.raises(InvalidTransition):
        await app.run(DeleteCampaign, DeleteCampaignCommand(actor, c.id))
    paused = await app.run(PauseCampaign, PauseCampaignCommand(actor, c.id))
    assert paused.status == "paused"
    edited = await app.run(UpdateCampaign, UpdateCampaignCommand(actor, c.id, {"retry": {"busy": {"max_attempts": 5}}}))
    assert edited.retry.busy == RetryRule(5, 10) and edited.retry.no_answer == RetryRule(3, 60)
    cancelled = await app.run(CancelCampaign, CancelCampaignCommand(actor, c.id))
    assert cancelled.status == "cancelled" and cancelled.ended_at is not None
    detail = await app.run(GetCampaign, GetCampaignCommand(actor, c.id))
    assert detail.stats == CampaignStats(cancelled=2)
    events = await app.events(actor.organization_id)
    assert [t for t, _ in events] == ["campaign.started", "campaign.paused"]
    assert events[0][1] == {"id": c.id, "name": "Spring", "agent_id": c.agent_id, "status": "running"}
    await app.run(DeleteCampaign, DeleteCampaignCommand(actor, c.id))
    with pytest.raises(NotFound):
        await app.run(GetCampaign, GetCampaignCommand(actor, c.id))


async def test_only_an_active_agent_starts_a_campaign(app: App) -> None:
    actor = await app.actor()
    c = await campaign(app, actor, agent_id=await agent(app, actor, publish=False))
    await app.run(AddContacts, AddContactsCommand(actor, c.id, drafts("+14155550100")))
    with pytest.raises(InvalidTransition) as refused:
        await app.run(StartCampaign, StartCampaignCommand(actor, c.id))
    assert refused.value.details and refused.value.details["agent_status"] == "draft"


async def test_contacts_report_duplicates_and_rejected_rows(app: App) -> None:
    actor = await app.actor()
    c = await campaign(app, actor)
    rows = (ContactDraft(0, "+1 (415) 555-0100", "Ada", "Europe/London", {"crm": "A"}),
            ContactDraft(1, "not a phone"), ContactDraft(2, "+14155550100"),
            ContactDraft(3, "+14155550101", timezone="Mars/Olympus"), ContactDraft(4, ""),
            ContactDraft(5, "+14155550102"))
    added = await app.run(AddContacts, AddContactsCommand(actor, c.id, rows))
    assert (added.accepted, added.duplicates) == (2, 1)
    assert [(r.row, r.field) for r in added.rejected] == [(1, "phone"), (3, "timezone"), (4, "phone")]
    again = await app.run(AddContacts, AddContactsCommand(actor, c.id, drafts("+14155550102", "+14155550103")))
    assert (again.accepted, again.duplicates, again.rejected) == (1, 1, [])
    with pytest.raises(ValidationFailed) as refused:
        await app.run(AddContacts, AddContactsCommand(actor, c.id, drafts("nope")))
    assert refused.value.details and refused.value.details["rejected"] == [
        {"row": 0, "field": "phone", "message": "must be an E.164 phone number such as +14155550100"}]
    page = await app.run(ListContacts, ListContactsCommand(actor, c.id, ContactFilter(), PageRequest()))
    assert [x.phone for x in page.items] == ["+14155550100", "+14155550102", "+14155550103"]
    assert page.items[0].custom_data == {"crm": "A"} and page.items[0].timezone == "Europe/London"


def lines(count: int) -> Iterator[str]:
    yield "phone,name,segment\n"
    for n in range(count):
        yield f"+1415556{n % 1200:04d},Person {n},{'=1+1' if n == 0 else 'b'}\n"


async def test_an_import_is_read_row_by_row_in_batches(app: App) -> None:
    actor = await app.actor()
    c = await campaign(app, actor)
    added = await app.run(ImportContacts, ImportContactsCommand(actor, c.id, lines(1300)))
    assert (added.accepted, added.duplicates, added.rejected) == (1200, 100, [])
    first = (await app.run(ListContacts, ListContactsCommand(actor, c.id, ContactFilter(), PageRequest(1, 0)))).items[0]
    assert first.custom_data == {"segment": "=1+1"} and first.name == "Person 0"
    with pytest.raises(ValidationFailed) as refused:
        await app.run(ImportContacts, ImportContactsCommand(actor, c.id, io.StringIO("name\nAda\n")))
    assert list(refused.value.details["validation_errors"]) == ["file"]


async def test_finished_campaigns_take_no_contacts_and_only_pending_contacts_are_deleted(app: App) -> None:
    actor = await app.actor()
    c = await campaign(app, actor)
    await app.run(AddContacts, AddContactsCommand(actor, c.id, drafts("+14155550100")))
    contact = (await app.run(ListContacts, ListContactsCommand(actor, c.id, ContactFilter(), PageRequest()))).items[0]
    await app.run(CancelCampaign, CancelCampaignCommand(actor, c.id))
    with pytest.raises(InvalidTransition):
        await app.run(AddContacts, AddContactsCommand(actor, c.id, drafts("+14155550101")))
    with pytest.raises(InvalidTransition):
        await app.run(DeleteContact, DeleteContactCommand(actor, c.id, contact.id))
    other = await campaign(app, actor)
    await app.run(AddContacts, AddContactsCommand(actor, other.id, drafts("+14155550100")))
    listed = await app.run(ListContacts, ListContactsCommand(actor, other.id, ContactFilter(), PageRequest()))
    pending = listed.items[0]
    await app.run(DeleteContact, DeleteContactCommand(actor, other.id, pending.id))
    with pytest.raises(NotFound):
        await app.run(DeleteContact, DeleteContactCommand(actor, other.id, pending.id))


async def test_one_contact_goes_through_the_same_intake_and_a_known_number_is_the_existing_contact(app: App) -> None:
    from application.campaigns import AddContact, AddContactCommand

    actor = await app.actor()
    c = await campaign(app, actor)
    first = await app.run(AddContact, AddContactCommand(actor, c.id, ContactDraft(0, "+1 415 555 0100", "Ada",
                                                                                   None, {"plan": "gold"})))
    assert first.created and (first.contact.phone, first.contact.name, first.contact.custom_data) == (
        "+14155550100", "Ada", {"plan": "gold"})
    again = await app.run(AddContact, AddContactCommand(actor, c.id, ContactDraft(0, "+14155550100", "Other")))
    assert not again.created and again.contact == first.contact
    with pytest.raises(ValidationFailed) as bad:
        await app.run(AddContact, AddContactCommand(actor, c.id, ContactDraft(0, "+14155550101", None, "Mars/Base")))
    assert set(bad.value.details["validation_errors"]) == {"timezone"}
    with pytest.raises(ValidationFailed) as bad:
        await app.run(AddContact, AddContactCommand(actor, c.id, ContactDraft(0, "12")))
    assert set(bad.value.details["validation_errors"]) == {"phone"}
    listed = await app.run(ListContacts, ListContactsCommand(actor, c.id, ContactFilter(), PageRequest()))
    assert listed.total == 1
