"""The dialer's steps on the memory backend: dial, the cap, settle with the retry policy, completion, the
round-robin between campaigns, a campaign whose agent is archived, the contacts outside their calling
window (deferred to its opening, at most SCAN looked at per step), and the depth of the trigger action that added a
contact on everything the dialer does for it later."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from adapters.memory.store import InMemoryStore
from application.agents import UpdateAgent, UpdateAgentCommand
from application.calls import CallFinisher
from application.campaigns import (
    AddContact,
    AddContactCommand,
    AddContacts,
    AddContactsCommand,
    GetCampaign,
    GetCampaignCommand,
    StartCampaign,
    StartCampaignCommand,
)
from application.context import CauseContext
from application.dialer import (
    CAMPAIGN_CALL_PRIORITY,
    SCAN,
    DialNextContact,
    DialNextContactCommand,
    SettleContact,
    SettleContactCommand,
)
from application.dnc import AddDncEntries, AddDncEntriesCommand, CreateDncList, CreateDncListCommand
from application.ports.calls import CallFilter, CallRepository
from application.ports.dialer import CampaignRef, DialerStore
from application.ports.platform import PageRequest, UnitOfWork
from domain.campaigns import ContactDraft, RetryPolicy, RetryRule
from domain.events import DomainEvent
from tests.application.conftest import App
from tests.application.test_campaigns_use_cases import agent, campaign


async def _running(app: App, actor, phones: list[str], **fields):  # type: ignore[no-untyped-def]
    created = await campaign(app, actor, timezone_mode="campaign", **fields)
    drafts = tuple(ContactDraft(n, p) for n, p in enumerate(phones))
    await app.run(AddContacts, AddContactsCommand(actor, created.id, drafts))
    await app.run(StartCampaign, StartCampaignCommand(actor, created.id))
    return created


async def _step(app: App, actor, campaign_id: int) -> str:  # type: ignore[no-untyped-def]
    return str(await app.run(DialNextContact, DialNextContactCommand(CampaignRef(actor.organization_id, campaign_id))))


async def _finish_all(app: App, actor, status: str) -> None:  # type: ignore[no-untyped-def]
    """End every unfinished call with ``status`` (as the line would report it), then settle the contacts."""
    async with app.container() as r:
        calls = await r.get(CallRepository)
        finisher = await r.get(CallFinisher)
        store = await r.get(DialerStore)
        for call in [c for c in (await calls.list(actor.organization_id, _all(), _page())).items if not c.is_final]:
            trigger = {"completed": "complete", "busy": "busy"}[status]
            ringing = call if call.status != "queued" else call.move("dial", app.clock.now())[0]
            if trigger == "complete":
                ringing = ringing.move("answer", app.clock.now())[0]
            await finisher.finish(ringing, trigger, app.clock.now(), end_reason=status)
        await (await r.get(UnitOfWork)).commit()
        refs = await store.settled_contacts(100)
    for ref in refs:
        await app.run(SettleContact, SettleContactCommand(ref))


def _all() -> CallFilter:
    return CallFilter()


def _page() -> PageRequest:
    return PageRequest(100, 0)


async def test_dial_keep_the_cap_retry_and_complete(app: App) -> None:
    actor = await app.actor()
    c = await _running(app, actor, ["+1555010000", "+1555010001", "+14155550100"], max_concurrent_calls=2,
                       retry=RetryPolicy(busy=RetryRule(2, 10)))
    assert [await _step(app, actor, c.id) for _ in range(3)] == ["dialled", "dialled", "full"]
    async with app.container() as r:
        queued = (await (await r.get(CallRepository)).list(actor.organization_id, _all(), _page())).items
    assert {call.priority for call in queued} == {CAMPAIGN_CALL_PRIORITY}
    assert {call.idempotency_key for call in queued} == {f"campaign-contact-{call.contact_id}-attempt-1"
                                                          for call in queued}
    await _finish_all(app, actor, "busy")
    assert await _step(app, actor, c.id) == "dialled"  # the third contact; the busy ones wait 10 minutes
    assert await _step(app, actor, c.id) == "idle"
    detail = await app.run(GetCampaign, GetCampaignCommand(actor, c.id))
    assert detail.stats.retry_wait == 2 and detail.campaign.status_reason == "waiting_for_retry"
    await _finish_all(app, actor, "completed")
    app.clock.advance(minutes=10)
    assert [await _step(app, actor, c.id) for _ in range(2)] == ["dialled", "dialled"]
    await _finish_all(app, actor, "busy")  # the second busy: no attempt left
    detail = await app.run(GetCampaign, GetCampaignCommand(actor, c.id))
    assert detail.campaign.status == "completed"
    assert (detail.stats.completed, detail.stats.failed) == (1, 2)
    kinds = [kind for kind, _ in await app.events(actor.organization_id)]
    assert kinds.count("contact.failed") == 2 and kinds[-1] == "campaign.completed"


async def test_campaigns_take_turns(app: App) -> None:
    actor = await app.actor()
    first = await _running(app, actor, [f"+1415555{i:04d}" for i in range(5)], max_concurrent_calls=50)
    second = await _running(app, actor, [f"+1415556{i:04d}" for i in range(5)], max_concurrent_calls=50)
    async with app.container() as r:
        order = [t.ref for t in await (await r.get(DialerStore)).campaign_turns(10)]
    assert [ref.campaign_id for ref in order] == [first.id, second.id]  # neither dialled yet: oldest first
    app.clock.advance(seconds=1)
    await _step(app, actor, first.id)
    async with app.container() as r:
        order = [t.ref for t in await (await r.get(DialerStore)).campaign_turns(10)]
    assert [ref.campaign_id for ref in order] == [second.id, first.id]  # the one dialled goes to the back
    app.clock.advance(seconds=1)
    await _step(app, actor, second.id)
    async with app.container() as r:
        order = [t.ref for t in await (await r.get(DialerStore)).campaign_turns(10)]
    assert [ref.campaign_id for ref in order] == [first.id, second.id]


async def test_a_campaign_whose_agent_is_archived_fails(app: App) -> None:
    actor = await app.actor()
    agent_id = await agent(app, actor)
    c = await _running(app, actor, ["+1555010000"], agent_id=agent_id)
    await app.run(UpdateAgent, UpdateAgentCommand(actor, agent_id, {"status": "archived"}))
    assert await _step(app, actor, c.id) == "stopped"
    detail = await app.run(GetCampaign, GetCampaignCommand(actor, c.id))
    assert (detail.campaign.status, detail.campaign.status_reason) == ("failed", "agent_archived")
    assert (await app.events(actor.organization_id))[-1][0] == "campaign.failed"
    assert app.clock.now() - detail.campaign.ended_at < timedelta(seconds=1)  # type: ignore[operator]


async def test_a_step_defers_those_outside_their_window_and_dials_the_first_inside(app: App) -> None:
    actor = await app.actor()  # 12:00 UTC: 01:00 the next day in Auckland, 13:00 in Berlin
    created = await campaign(app, actor)
    drafts = (*(ContactDraft(n, f"+1415557{n:04d}", None, "Pacific/Auckland") for n in range(3)),
              ContactDraft(3, "+14155579999", None, "Europe/Berlin"))
    await app.run(AddContacts, AddContactsCommand(actor, created.id, drafts))
    await app.run(StartCampaign, StartCampaignCommand(actor, created.id))
    assert await _step(app, actor, created.id) == "dialled"
    opening = datetime(2026, 3, 2, 19, tzinfo=UTC)  # 08:00 in Auckland
    async with app.container() as r:
        store = await r.get(DialerStore)
        assert await store.due_contacts(actor.organization_id, created.id, app.clock.now(), 10) == []
        assert await store.earliest_attempt(actor.organization_id, created.id) == (opening, "outside_calling_hours")
        assert await store.next_due(app.clock.now()) == opening
    assert await _step(app, actor, created.id) == "idle"
    detail = await app.run(GetCampaign, GetCampaignCommand(actor, created.id))
    assert (detail.campaign.status_reason, detail.campaign.next_dial_at) == ("outside_calling_hours", opening)


async def test_a_step_looks_at_most_at_scan_due_contacts(app: App) -> None:
    actor = await app.actor()
    created = await campaign(app, actor)
    drafts = tuple(ContactDraft(n, f"+1415558{n:04d}", None, "Pacific/Auckland") for n in range(SCAN + 2))
    await app.run(AddContacts, AddContactsCommand(actor, created.id, drafts))
    await app.run(StartCampaign, StartCampaignCommand(actor, created.id))

    async def due() -> int:
        async with app.container() as r:
            store = await r.get(DialerStore)
            return len(await store.due_contacts(actor.organization_id, created.id, app.clock.now(), 100))

    assert await due() == SCAN + 2
    assert await _step(app, actor, created.id) == "deferred"
    assert await due() == 2
    assert [await _step(app, actor, created.id) for _ in range(2)] == ["deferred", "idle"]


async def _added_by_an_action(app: App, actor, campaign_id: int, phone: str, depth: int) -> None:  # type: ignore[no-untyped-def]
    """``AddContact`` in a unit of work caused by a trigger's action at ``depth`` (as the action's job sets it)."""
    async with app.container() as r:
        uow = await r.get(UnitOfWork)
        (await r.get(CauseContext)).depth = depth
        await (await r.get(AddContact)).execute(AddContactCommand(actor, campaign_id, ContactDraft(0, phone)))
        await uow.commit()


async def _outbox(app: App, organization_id: int) -> list[DomainEvent]:
    store = await app.container.get(InMemoryStore)
    return [e for _, e, _ in store.outbox if e.organization_id == organization_id]


async def test_a_contact_added_by_a_trigger_action_is_dialled_and_ends_at_its_depth(app: App) -> None:
    """The dialer works later, in units of its own at depth 0: the call it places for the contact, the contact's
    events (a DNC skip too) and the campaign's completion that its outcome brings carry the action's depth."""
    actor = await app.actor()
    created = await campaign(app, actor, timezone_mode="campaign")
    await _added_by_an_action(app, actor, created.id, "+14155550100", 2)
    await _added_by_an_action(app, actor, created.id, "+14155550101", 2)
    dnc = await app.run(CreateDncList, CreateDncListCommand(actor, "Opt-outs"))
    await app.run(AddDncEntries, AddDncEntriesCommand(actor, dnc.id, ("+14155550101",)))
    await app.run(StartCampaign, StartCampaignCommand(actor, created.id))
    assert sorted([await _step(app, actor, created.id) for _ in range(2)]) == ["dialled", "skipped"]
    async with app.container() as r:
        [call] = (await (await r.get(CallRepository)).list(actor.organization_id, _all(), _page())).items
    assert (call.destination_phone, call.cause_depth) == ("+14155550100", 2)
    await _finish_all(app, actor, "completed")
    deep = [(e.type, e.data.get("phone") or e.data.get("destination_phone"), e.depth)
            for e in await _outbox(app, actor.organization_id) if e.type.startswith(("contact.", "campaign.c"))]
    assert deep == [("contact.failed", "+14155550101", 2), ("contact.completed", "+14155550100", 2),
                    ("campaign.completed", None, 2)]
    assert {e.depth for e in await _outbox(app, actor.organization_id) if e.type.startswith("call.")} == {2}
